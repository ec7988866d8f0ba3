import { messageOf, type Clock, type InstanceRequest, type Logger } from '@ert/plugin-api';
import { endReservation, expireReservations, isStoreUnavailable, type InstanceRecord, type HostStore } from '@ert/store';
import type { ClaimResult } from './types.js';
import type { FailureLog } from './failure-log.js';

/**
 * Reservations, the compute side (ARCHITECTURE.md, "Reservations"). A scheduler's claim is a
 * reservation: allocations and an instance record in state `scheduled` on a host. The host's
 * tracker confirms it through the normal claim path (its plugins test it and assign CPUs,
 * cache ways, pages; the scheduler's allocations are adopted, not counted twice), which turns
 * it `active`; or, when a plugin (or placement, or the store) refuses, it releases the
 * reservation and records `refused` with the reason, naming the plugin. The scheduler reads
 * the outcome from the store. A reservation that nobody confirms within
 * `reservations.timeout` is expired (released) by whichever tracker or scheduler sees it.
 */

/** What one `confirmScheduled` pass did. */
export interface ConfirmReport {
  /** Reservations of this host turned `active`. */
  confirmed: string[];
  /** Reservations of this host refused, with the reasons recorded. */
  refused: Array<{ uuid: string; reason: string }>;
  /** Reservations (of any host when `reapEverywhere`) this pass expired. */
  expired: string[];
  /**
   * Reservations of this host whose confirmation failed with an error (not a refusal): they
   * stay `scheduled`, tried again at the next pass or expired. The pass goes on past them.
   */
  failed: Array<{ uuid: string; error: string }>;
}

/** What the tracker lends the confirmation: its identity, store, clock and claim path. */
export interface ReservationContext {
  hostName: string;
  store: HostStore;
  clock: Clock;
  logger: Logger;
  timeoutMs: number;
  /** The tracker's claim path, called while holding the host's mutex (adopts the reservation's allocations). */
  claim(request: InstanceRequest): Promise<ClaimResult>;
}

/** The recorded reason of a refusal: every reason, each naming its plugin when a plugin gave it. */
export function refusalReason(reasons: ReadonlyArray<{ plugin?: string; reason: string }>): string {
  return reasons.map((r) => (r.plugin !== undefined ? `plugin ${r.plugin}: ${r.reason}` : r.reason)).join('; ');
}

/**
 * Confirm or refuse every reservation of this host, oldest first, after expiring those past
 * their time (this host's, or every host's with `reapEverywhere`). Called holding the
 * tracker's mutex (periodic update, the reservation watch, `confirmScheduled()`).
 */
export async function confirmReservations(ctx: ReservationContext, options: { reapEverywhere: boolean }): Promise<ConfirmReport> {
  const { store, hostName } = ctx;
  const report: ConfirmReport = { confirmed: [], refused: [], expired: [], failed: [] };
  const expired = await expireReservations(store, { now: ctx.clock.now(), timeoutMs: ctx.timeoutMs, ...(options.reapEverywhere ? {} : { host: hostName }) });
  report.expired.push(...expired.map((r) => r.uuid));
  if (expired.length > 0) ctx.logger.warn({ instances: report.expired }, 'expired reservations nobody confirmed in time');
  const pending = (await store.listInstances({ host: hostName, state: 'scheduled' })).sort((a, b) => (a.createdAt ?? 0) - (b.createdAt ?? 0) || a.uuid.localeCompare(b.uuid));
  for (const reservation of pending) {
    let outcome: Awaited<ReturnType<typeof confirmOne>>;
    try {
      outcome = await confirmOne(ctx, reservation);
    } catch (err) {
      // An unreachable store fails every reservation after it too: the caller backs off.
      if (isStoreUnavailable(err)) throw err;
      // One reservation's failure must not leave the newer ones unconfirmed.
      const error = messageOf(err);
      ctx.logger.error({ instance: reservation.uuid, err }, `confirming reservation ${reservation.uuid} failed; it stays scheduled: ${error}`);
      report.failed.push({ uuid: reservation.uuid, error });
      continue;
    }
    if (outcome === undefined) continue;
    if (outcome.ok) report.confirmed.push(reservation.uuid);
    else report.refused.push({ uuid: reservation.uuid, reason: outcome.reason });
  }
  return report;
}

async function confirmOne(ctx: ReservationContext, reservation: InstanceRecord): Promise<{ ok: true } | { ok: false; reason: string } | undefined> {
  const { store, hostName } = ctx;
  // The generation the refusal is checked against: read before the plugins are asked, so a
  // reservation expired or changed meanwhile is never overwritten by a stale refusal.
  const { generation } = await store.getAllocations(reservation.uuid);
  const request: InstanceRequest = { uuid: reservation.uuid, projectId: reservation.projectId, userId: reservation.userId, flavor: reservation.flavor };
  const result = await ctx.claim(request);
  if (result.ok) {
    ctx.logger.info({ instance: reservation.uuid }, 'reservation confirmed');
    return { ok: true };
  }
  const reason = refusalReason(result.reasons);
  let current: InstanceRecord | undefined = reservation;
  let read = generation;
  for (let attempt = 0; attempt < 4; attempt++) {
    const ended = await endReservation(store, current, read, 'refused', reason);
    if (ended.ended) {
      ctx.logger.warn({ instance: reservation.uuid, reason }, 'reservation refused');
      return { ok: false, reason };
    }
    current = ended.current;
    if (current === undefined) {
      // The claim path took the instance back itself (enforcement failed under `undo`): nothing
      // is held; record why, unless it has been scheduled again meanwhile (then a consumer exists).
      const gone = await endReservation(store, reservation, null, 'refused', reason);
      if (!gone.ended) return undefined;
      ctx.logger.warn({ instance: reservation.uuid, reason }, 'reservation refused');
      return { ok: false, reason };
    }
    // Confirmed, expired or moved by someone else: not ours to refuse any more.
    if (current?.state !== 'scheduled' || current.host !== hostName) return undefined;
    read = (await store.getAllocations(reservation.uuid)).generation;
  }
  ctx.logger.error({ instance: reservation.uuid, reason }, 'could not record the refusal of a reservation (lost every race); it stays scheduled until it expires');
  return undefined;
}

/**
 * Watches the store for reservations on this host between periodic updates: every
 * `pollInterval` it reads the host's generation (one row; the store bumps it whenever an
 * instance of the host is written) and, when it moved, whether a reservation is pending;
 * then `confirm` runs (the tracker takes its mutex).
 */
export class ReservationWatch {
  private timer: NodeJS.Timeout | undefined;
  /** The look in progress: `stop()` waits for it, so no store call outlives the watch. */
  private running: Promise<void> | undefined;
  private seen: number | undefined;
  private stopped = false;

  constructor(
    private readonly store: () => HostStore | undefined,
    private readonly hostName: string,
    private readonly pollMs: number,
    private readonly confirm: () => Promise<unknown>,
    private readonly failures: FailureLog,
  ) {}

  start(): void {
    this.stopped = false;
    this.arm();
  }

  /** No look starts after this; resolves once the one in progress (if any) has finished. */
  stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    return this.running ?? Promise.resolve();
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.look()
        .then(
          () => this.failures.succeeded('reservation watch'),
          (err: unknown) => this.failures.failed('reservation watch', err, this.pollMs),
        )
        .finally(() => {
          this.running = undefined;
          this.arm();
        });
    }, this.pollMs);
  }

  private async look(): Promise<void> {
    const store = this.store();
    if (!store) return;
    const host = await store.getHost(this.hostName);
    if (!host || host.generation === this.seen || this.stopped) return;
    this.seen = host.generation;
    const pending = await store.listInstances({ host: this.hostName, state: 'scheduled' });
    if (pending.length > 0 && !this.stopped) await this.confirm();
  }
}
