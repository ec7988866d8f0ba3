import type { InstanceRecord, Store } from './api.js';

/** The calls the reservation helpers make (a host agent's `HostStore` has them). */
type ReservationStore = Pick<Store, 'writeAllocations' | 'getInstance' | 'listInstances' | 'getAllocations'>;
import { isStoreError } from './errors.js';

/** What `endReservation` did. */
export type ReservationEnd = { ended: true; record: InstanceRecord } | { ended: false; current: InstanceRecord | undefined };

/**
 * End one reservation (`scheduled` instance) as `refused` or `expired`, with `reason`: its
 * allocations are released and its record rewritten in one `writeAllocations` call,
 * checked against the consumer generation `generation` read with the reservation. When the
 * reservation changed meanwhile (its tracker confirmed it, another reaper or the tracker
 * ended it, it was scheduled again) nothing is written and the current record is returned.
 */
export async function endReservation(
  store: ReservationStore,
  reservation: InstanceRecord,
  generation: number | null,
  state: 'refused' | 'expired',
  reason: string,
): Promise<ReservationEnd> {
  const ended: InstanceRecord = { ...reservation, state, reason, assignments: {} };
  delete ended.cpus;
  try {
    await store.writeAllocations([
      { consumer: { uuid: reservation.uuid, projectId: reservation.projectId, userId: reservation.userId, generation }, allocations: [], instance: ended },
    ]);
  } catch (err) {
    if (!isStoreError(err) || !/CONFLICT/.test(err.code)) throw err;
    return { ended: false, current: await store.getInstance(reservation.uuid) };
  }
  return { ended: true, record: ended };
}

/**
 * The reaper: every `scheduled` instance (of `host`, or of any host) recorded more than
 * `timeoutMs` before `now` is ended as `expired`, its allocations released. Any tracker or
 * scheduler may run it; each reservation is ended at most once (generation-checked), and one
 * its tracker confirms meanwhile is left alone. `uuids` limits it to those instances; `reason`
 * replaces the recorded reason. Returns the records it expired.
 */
export async function expireReservations(
  store: ReservationStore,
  options: { now: number; timeoutMs: number; host?: string; uuids?: readonly string[]; reason?: string },
): Promise<InstanceRecord[]> {
  // Only the candidates are read: the named instances, or the reservations old enough (an index on state and time).
  const scheduled = options.uuids
    ? (await Promise.all(options.uuids.map((uuid) => store.getInstance(uuid)))).filter((r): r is InstanceRecord => r?.state === 'scheduled' && (options.host === undefined || r.host === options.host))
    : await store.listInstances({ state: 'scheduled', updatedBefore: options.now - options.timeoutMs + 1, ...(options.host !== undefined ? { host: options.host } : {}) });
  const expired: InstanceRecord[] = [];
  for (const record of scheduled) {
    const since = record.updatedAt ?? record.createdAt ?? 0;
    if (options.now - since < options.timeoutMs) continue;
    const { generation } = await store.getAllocations(record.uuid);
    // Re-read after the generation: a confirmation between the list and here is seen.
    const current = await store.getInstance(record.uuid);
    if (current?.state !== 'scheduled' || current.host !== record.host) continue;
    const reason = options.reason ?? `reservation on host ${record.host} not confirmed by its tracker within ${options.timeoutMs} ms (reserved at ${new Date(since).toISOString()})`;
    const outcome = await endReservation(store, current, generation, 'expired', reason);
    if (outcome.ended) expired.push(outcome.record);
  }
  return expired;
}

/** What `withdrawInstance` did. */
export type Withdrawal = { outcome: 'removed' } | { outcome: 'unknown' } | { outcome: 'held'; record: InstanceRecord };

/**
 * Remove an instance that holds nothing its host's tracker must let go of: a reservation
 * (`scheduled`: its allocations released) or an ended one (`refused`, `expired`). Its record
 * and allocations go in one write, checked against the consumer generation read before the
 * record, so a tracker confirming it meanwhile makes the write fail and nothing is removed.
 * Returns `removed`; `unknown` (no such instance, or removed by someone else meanwhile); or
 * `held` with the record when it is (or became) `active`, `resizing` or `error`: only its
 * host's tracker releases those (`ert release`).
 */
export async function withdrawInstance(store: Store, uuid: string): Promise<Withdrawal> {
  const { generation } = await store.getAllocations(uuid);
  const record = await store.getInstance(uuid);
  if (!record) return { outcome: 'unknown' };
  if (!WITHDRAWABLE.has(record.state)) return { outcome: 'held', record };
  try {
    await store.writeAllocations([{ consumer: { uuid, projectId: record.projectId, userId: record.userId, generation }, allocations: [], removeInstance: true }]);
  } catch (err) {
    if (!isStoreError(err) || !/CONFLICT/.test(err.code)) throw err;
    const now = await store.getInstance(uuid);
    if (!now) return { outcome: 'unknown' };
    if (!WITHDRAWABLE.has(now.state)) return { outcome: 'held', record: now };
    throw err;
  }
  return { outcome: 'removed' };
}

const WITHDRAWABLE: ReadonlySet<string> = new Set(['scheduled', 'refused', 'expired']);
