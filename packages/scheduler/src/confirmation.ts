import type { Clock } from '@ert/plugin-api';
import type { InstanceRecord, Store } from '@ert/store';

/**
 * Reservations, the scheduler's side (ARCHITECTURE.md, "Reservations"). A claim the
 * scheduler writes is a reservation (`scheduled`); the host's tracker confirms it (`active`)
 * or refuses it (`refused`, with the plugin's reason), and one nobody confirms in time is
 * `expired`. The two sides meet only in the store, so the scheduler learns the outcome by
 * reading the instance records.
 */

/** Per-call options of `select`. */
export interface SelectOptions {
  /**
   * Wait until each instance's host has confirmed or refused it. A refused (or expired)
   * reservation is placed again on another host (the hosts tried so far excluded, up to
   * `scheduler.maxAttempts` hosts per instance), and the selections returned are `active`.
   * Default false: `select` returns the reservations as written (`scheduled`).
   */
  awaitConfirmation?: boolean;
  /**
   * How long to wait for one round of confirmations, ms (default `reservations.timeout`).
   * A reservation still `scheduled` then is expired by the scheduler itself and placed again.
   */
  confirmTimeout?: number;
}

/** One host that did not take an instance after its reservation was written. */
export interface Refusal {
  host: string;
  state: 'refused' | 'expired';
  reason: string;
}

/**
 * Read the instance records of `uuids` every `pollMs` until none is `scheduled` or the clock
 * passes `deadline`. Returns the last record read of each (undefined when it disappeared).
 */
export async function awaitOutcomes(
  store: Store,
  uuids: readonly string[],
  options: { pollMs: number; deadline: number; clock: Clock; closed?: () => boolean },
): Promise<Map<string, InstanceRecord | undefined>> {
  const outcomes = new Map<string, InstanceRecord | undefined>();
  let pending = [...uuids];
  for (;;) {
    const still: string[] = [];
    for (const uuid of pending) {
      const record = await store.getInstance(uuid);
      outcomes.set(uuid, record);
      if (record?.state === 'scheduled') still.push(uuid);
    }
    pending = still;
    if (pending.length === 0 || options.clock.now() >= options.deadline || options.closed?.()) return outcomes;
    const wait = Math.max(1, Math.min(options.pollMs, options.deadline - options.clock.now()));
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}
