/**
 * The host's instance events for outside agents (docs/operations.md, "Events for outside
 * agents"): what an out-of-band enforcer (Intel RMD, a cgroup manager) needs to act on this
 * host without talking to the tracker. They are read from the store, not only from the
 * tracker's own listeners, because instances of a host change through other processes too
 * (`ert claim` and `ert release` run a tracker of their own; a migration or an operator's
 * `ert instance delete` writes the store): the watch keeps the host's live instances as last
 * seen and turns each difference into an event. The tracker's listeners make it look at once;
 * between them it reads the host's generation (one row) every `pollMs`, and the host's
 * instances only when that moved (the store bumps it with every instance written there).
 */
import type { Clock, JsonValue, Logger } from '@ert/plugin-api';
import type { Allocation, HostStore, InstanceRecord, InstanceState } from '@ert/store';

/**
 * `claimed`: an instance now holds resources here (a claim, a confirmed reservation, a
 * migration in); `released`: it no longer does (release, migration away, deletion), with what
 * it held; `resized`: its flavor changed (a resize, or a revert back); `updated`: the same
 * instance with other assignments, allocations or state (a confirmed resize), and every live
 * instance once when the watch starts.
 */
export type HostEventType = 'claimed' | 'released' | 'resized' | 'updated';

/** One allocation of an instance, with its provider's name (`xeon-1_llc_0`). */
export interface HostEventAllocation {
  provider: string;
  providerUuid: string;
  resourceClass: string;
  amount: number;
}

/** One event as published (the event log adds `seq`). */
export interface HostEvent {
  type: HostEventType;
  /** ISO 8601, when the watch saw the change. */
  time: string;
  host: string;
  /** The instance's uuid. */
  instance: string;
  /** Its state in the store (`active`, `resizing`, `error`; for `released`, the last one seen). */
  state: InstanceState;
  /** Name of its flavor (during a resize: the new one). */
  flavor: string;
  /** For `resized`: the flavor it had before. */
  previousFlavor?: string;
  /** The allocations of the instance's consumer. */
  allocations: HostEventAllocation[];
  /** What each plugin assigned (CPUs, cache ways and class of service, huge pages), by plugin name: the record's `assignments`. */
  assignments: Record<string, JsonValue>;
  /** Host CPUs it is pinned to; absent when it floats. */
  cpus?: number[];
  /**
   * During a resize: what the old flavor still holds, by the instance's migration consumer
   * (`uuid`), until the resize is confirmed (then released) or reverted (then the instance's
   * again). Not announced as an instance of its own.
   */
  held?: HeldResources;
}

/** The old flavor's resources a resize keeps (`HostEvent.held`). */
export interface HeldResources {
  /** The migration consumer holding them. */
  uuid: string;
  flavor: string;
  allocations: HostEventAllocation[];
  assignments: Record<string, JsonValue>;
  cpus?: number[];
}

/** An instance as the watch last saw it: the fields of its events. */
export type InstanceView = Omit<HostEvent, 'type' | 'time' | 'previousFlavor'>;

/** States in which an instance holds resources on its host. */
const LIVE: ReadonlySet<InstanceState> = new Set<InstanceState>(['active', 'resizing', 'error']);

export interface HostEventWatchOptions {
  store: HostStore;
  hostName: string;
  publish(event: HostEvent): void;
  /** How often the host's generation is read (`reservations.pollInterval`). */
  pollMs: number;
  logger: Logger;
  clock?: Clock;
}

/** JSON with object keys sorted: equal values, equal strings, whatever order the store returned keys in. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v));
}

/**
 * Watches one host's instances in the store and publishes a `HostEvent` for each change
 * (the module comment). `start` publishes `updated` for each live instance, then watches;
 * `poke` makes it look now (the tracker's listeners call it).
 */
export class HostEventWatch {
  private readonly known = new Map<string, InstanceView>();
  private readonly names = new Map<string, string>();
  private seen: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The poll in progress: `stop()` waits for it, so no store call outlives the watch. */
  private ticking: Promise<void> | undefined;
  private stopped = false;
  private started = false;
  /** Set by the first look that succeeded: until then a look publishes `updated`, not `claimed`. */
  private initialDone = false;
  /** Looks run one after the other; a poke during a look asks for one more. */
  private running: Promise<void> | undefined;
  private again = false;
  private failing = false;

  constructor(private readonly options: HostEventWatchOptions) {}

  /** The live instances as of the last event published (kept in step while a look publishes), by uuid order. */
  state(): InstanceView[] {
    return [...this.known.values()].sort((a, b) => (a.instance < b.instance ? -1 : 1));
  }

  /**
   * Read the host's instances, publish `updated` for each live one, then watch. A store that
   * does not answer is logged and tried again at each poll (the first look that succeeds
   * publishes the `updated` events).
   */
  async start(): Promise<void> {
    try {
      for (let torn = 0; (await this.look()) && torn < TORN_RETRIES && !this.stopped; torn++);
    } catch (err) {
      this.failed(err);
    }
    this.started = true;
    this.arm();
  }

  /** No look starts after this; resolves once the poll and the look in progress (if any) have finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.ticking;
    await this.running;
  }

  /** Look at the store now (after the tracker's own events); resolves when the look is done. Ignored before `start` is done. */
  poke(): Promise<void> {
    if (this.stopped || !this.started) return Promise.resolve();
    this.seen = undefined;
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        let torn = 0;
        do {
          this.again = false;
          // A torn read is looked at again at once, a few times (then the next poll or poke does).
          if ((await this.look()) && torn++ < TORN_RETRIES) this.again = true;
        } while (this.again && !this.stopped);
      } catch (err) {
        this.failed(err);
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.ticking = this.tick().finally(() => {
        this.ticking = undefined;
        this.arm();
      });
    }, this.options.pollMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      const host = await this.options.store.getHost(this.options.hostName);
      if (host?.generation === this.seen) return;
      await this.poke();
      this.seen = host?.generation;
    } catch (err) {
      this.failed(err);
    }
  }

  private failed(err: unknown): void {
    if (this.failing) return;
    this.failing = true;
    this.options.logger.warn({ err }, 'host events: could not read the host\'s instances; retrying');
  }

  private now(): string {
    return new Date(this.options.clock?.now() ?? Date.now()).toISOString();
  }

  private async providerName(uuid: string): Promise<string> {
    let name = this.names.get(uuid);
    if (name === undefined) {
      name = (await this.options.store.getProvider(uuid))?.name ?? uuid;
      this.names.set(uuid, name);
    }
    return name;
  }

  private async allocationsOf(uuid: string): Promise<HostEventAllocation[]> {
    const { allocations } = await this.options.store.getAllocations(uuid);
    const named: HostEventAllocation[] = [];
    for (const a of [...allocations].sort(byProviderAndClass)) named.push({ provider: await this.providerName(a.providerUuid), providerUuid: a.providerUuid, resourceClass: a.resourceClass, amount: a.amount });
    return named;
  }

  private async viewOf(record: InstanceRecord, migration: InstanceRecord | undefined): Promise<InstanceView> {
    return {
      host: this.options.hostName,
      instance: record.uuid,
      state: record.state,
      flavor: record.flavor.name,
      allocations: await this.allocationsOf(record.uuid),
      assignments: record.assignments,
      ...(record.cpus !== undefined ? { cpus: record.cpus } : {}),
      ...(migration
        ? {
            held: {
              uuid: migration.uuid,
              flavor: migration.flavor.name,
              allocations: await this.allocationsOf(migration.uuid),
              assignments: migration.assignments,
              ...(migration.cpus !== undefined ? { cpus: migration.cpus } : {}),
            },
          }
        : {}),
    };
  }

  /**
   * One look: the host's live instances against the ones known; releases first, then resizes
   * and updates, then claims. True when an instance changed while it was being read (its
   * record and allocations are separate reads): that instance is left as it was known, and
   * the caller looks again.
   */
  private async look(): Promise<boolean> {
    const initial = !this.initialDone;
    const live = (await this.options.store.listInstances({ host: this.options.hostName })).filter((r) => LIVE.has(r.state));
    this.failing = false;
    // A resize's migration record (`resizing`, naming no migration of its own) is shown in its
    // instance's `held`; when the instance is on another host (a cold migration from here), not at all.
    const migrations = new Map(live.filter(isMigrationRecord).map((r) => [r.uuid, r]));
    const records = live.filter((r) => !isMigrationRecord(r));
    const views: Array<{ record: InstanceRecord; migration: InstanceRecord | undefined; view: InstanceView }> = [];
    for (const record of records.sort((a, b) => (a.updatedAt ?? 0) - (b.updatedAt ?? 0) || (a.uuid < b.uuid ? -1 : 1))) {
      const migration = record.migrationUuid !== undefined ? migrations.get(record.migrationUuid) : undefined;
      views.push({ record, migration, view: await this.viewOf(record, migration) });
    }
    // Another process wrote an instance between the list and its allocations' read (a release:
    // its allocations read as none): not a change to publish but a torn read. One list again
    // tells, for all of them (every write of a record sets its updatedAt).
    const again = views.length > 0 ? new Map((await this.options.store.listInstances({ host: this.options.hostName })).map((r) => [r.uuid, JSON.stringify(r)])) : new Map<string, string>();
    const unchanged = (record: InstanceRecord) => again.get(record.uuid) === JSON.stringify(record);
    const now = new Map<string, InstanceView>();
    let torn = false;
    for (const { record, migration, view } of views) {
      if (!unchanged(record) || (migration !== undefined && !unchanged(migration))) {
        torn = true;
        const known = this.known.get(record.uuid);
        if (known) now.set(record.uuid, known);
        continue;
      }
      now.set(record.uuid, view);
    }
    if (this.stopped) return false;
    const time = this.now();
    const events: HostEvent[] = [];
    for (const [uuid, before] of this.known) if (!now.has(uuid)) events.push({ type: 'released', time, ...before });
    for (const [uuid, view] of now) {
      const before = this.known.get(uuid);
      if (initial) events.push({ type: 'updated', time, ...view });
      else if (!before) continue;
      else if (before.flavor !== view.flavor) events.push({ type: 'resized', time, ...view, previousFlavor: before.flavor });
      else if (canonical(before) !== canonical(view)) events.push({ type: 'updated', time, ...view });
    }
    for (const [uuid, view] of now) if (!initial && !this.known.has(uuid)) events.push({ type: 'claimed', time, ...view });
    // `known` moves with each event, so that `state()` is always as of the last one published.
    this.initialDone = true;
    for (const event of events) {
      if (event.type === 'released') this.known.delete(event.instance);
      else this.known.set(event.instance, now.get(event.instance)!);
      this.options.publish(event);
    }
    this.known.clear();
    for (const [uuid, view] of now) this.known.set(uuid, view);
    return torn;
  }
}

/** How many times in a row a look that read an instance mid-write is repeated at once. */
const TORN_RETRIES = 3;

/** The record a resize or cold migration writes for the old allocations (tracker.ts, `resize`). */
function isMigrationRecord(record: InstanceRecord): boolean {
  return record.state === 'resizing' && record.migrationUuid === undefined;
}

function byProviderAndClass(a: Allocation, b: Allocation): number {
  return a.providerUuid < b.providerUuid ? -1 : a.providerUuid > b.providerUuid ? 1 : a.resourceClass < b.resourceClass ? -1 : a.resourceClass > b.resourceClass ? 1 : 0;
}
