import os from 'node:os';
import { performance } from 'node:perf_hooks';
import {
  isErtError,
  messageOf,
  type ClaimGrant,
  type ClaimRequest,
  type ClaimedInstance,
  type Clock,
  type Flavor,
  type InstanceEvent,
  type InstanceEventType,
  type InstanceRequest,
  type JsonValue,
  type Logger,
  type RequestSpec,
  type ResourceRequestGroup,
} from '@ert/plugin-api';
import { Backoff, createLogger, createPluginRuntime, systemClock, validateStats, type ActiveResource, type DispatcherOptions, type ErtConfig, type PluginRuntime } from '@ert/core';
import { STORE_ERROR_CODES, createStore, isStoreUnavailable, type Allocation, type AllocationWrite, type InstanceRecord, type ProviderSnapshot, type HostStore } from '@ert/store';
import { fitRequest, parseFlavor, withGroupProviders, type FitProvider, type FitTree } from '@ert/placement';
import { formatCpuList } from '@ert/sysfs';
import { machineIdentity, onlineCpus } from './machine.js';
import { TrackerError, TrackerErrorCodes } from './errors.js';
import { childProviderName, migrationUuid, providerUuid } from './ids.js';
import { Mutex } from './mutex.js';
import { FailureLog } from './failure-log.js';
import { PluginAvailability } from './availability.js';
import { ReservationWatch, confirmReservations, type ConfirmReport } from './reservations.js';
import { loadProviderConfigs, type ProviderConfigEntry } from './provider-config.js';
import { buildTree, jsonEqual, normalizeDiscovery, type DesiredProvider, type NormalizedDiscovery } from './tree.js';
import { problemFrom } from './problems.js';
import { StoreReconciler } from './reconcile.js';
import type { ClaimResult, DiscoveryReport, PluginDiscoveryReport, Problem, ReleaseResult, SyncReport, TrackerListener } from './types.js';

export interface TrackerOptions {
  config: ErtConfig;
  /** The store to write to. When omitted the tracker opens `config.store` on first write and closes it in `stop()`; `discover()` never opens it. */
  store?: HostStore;
  logger?: Logger;
  /** Default: `config.tracker.hostName`, then `os.hostname()`. */
  hostName?: string;
  /** Directory standing for `/` (default `config.tracker.root`). */
  root?: string;
  clock?: Clock;
  /** Observers for metrics (the tracker depends on no metrics library). A throw from one is logged and ignored. */
  observer?: TrackerObserver;
}

/** One claim through the tracker's claim path (`claim`, or a reservation being confirmed), answered. */
export interface ClaimObservation {
  /**
   * `claimed`; `refused` (a plugin or placement said no); `conflict` (the store refused the
   * write: a lost race, a generation conflict, capacity taken meanwhile); `error` (threw).
   */
  outcome: 'claimed' | 'refused' | 'conflict' | 'error';
  seconds: number;
  /** Writes tried again after the store refused a unit another process took (ERT_STORE_ASSIGNMENT_TAKEN). */
  retries: number;
}

/** What a metrics module can subscribe to. */
export interface TrackerObserver {
  /** Every plugin hook call through the dispatcher (`DispatcherOptions.onCall`). */
  onHookCall?: DispatcherOptions['onCall'];
  onClaim?(claim: ClaimObservation): void;
  /** Every reservation pass (after start, each periodic update, the watch, `confirmScheduled`). */
  onConfirm?(report: ConfirmReport): void;
}

/**
 * The compute-host tracker: discovers the host through its resource plugins, keeps the
 * host's providers, inventories, traits and stats in the store, and claims instances.
 * Every operation that calls plugins or writes runs one at a time (a mutex), so plugins
 * are never called concurrently by two operations and claims on the host are serialized.
 */
export interface Tracker {
  readonly hostName: string;
  /** Uuid of the host's root provider (derived from the host name; stable across restarts). */
  readonly rootUuid: string;
  /** The latest sync report (start, sync or periodic update). */
  readonly lastSync: SyncReport | undefined;
  /** Run every plugin's `discover` and `stats` and merge provider configs. Writes nothing. Throws on conflicting inventory. */
  discover(): Promise<DiscoveryReport>;
  /**
   * Reconcile the host into the store: discover, `reset` each plugin and re-add every live
   * instance, then write only what differs (providers, inventories, traits, stats), touch
   * the host row (`up`, lastUpdate) and mark other hosts stale. Idempotent.
   */
  sync(): Promise<SyncReport>;
  /**
   * `sync()`, emitting `updated` for each live instance (so enforcement is re-applied after a
   * restart), then a periodic `sync()` every `config.tracker.interval`, which re-adds the live
   * instances to the plugins' views but emits no events. Throws on start-up errors.
   *
   * A periodic update (or a reservation pass) that fails is retried with capped exponential
   * backoff and jitter (from 1 s up to `tracker.interval`), and the failure is logged once when
   * it starts and once when it ends. With `waitForStore`, a store that cannot be reached at
   * start (ERT_STORE_UNAVAILABLE: PostgreSQL or the `--server` down) is retried the same way
   * until it answers; `stop()` meanwhile makes `start` reject with ERT_TRACKER_STATE.
   */
  start(options?: { waitForStore?: boolean }): Promise<SyncReport>;
  /** Stop the timer, wait for operations in flight (the reservation watch's look included: no store call follows the returned promise), call every plugin's `close`, close the store if the tracker opened it. Idempotent: a second call waits for the same shutdown. */
  stop(): Promise<void>;
  /**
   * Claim an instance on this host; all-or-nothing. Adopts allocations the scheduler already
   * wrote for it. A refusal (plugin reasons, placement, a lost store race) is `{ ok: false }`;
   * it throws ERT_TRACKER_HOST_NOT_SYNCED before the first `sync()` / `start()` and
   * ERT_TRACKER_STATE after `stop()`.
   */
  claim(request: InstanceRequest): Promise<ClaimResult>;
  /** Release an instance (and a pending resize's old allocations). Unknown instances: `{ released: false }`. */
  release(uuid: string): Promise<ReleaseResult>;
  /**
   * Resize an active instance of this host (Nova's same-host resize, docs/lifecycle.md): the
   * new flavor's allocations go to the instance and the old ones stay held by its migration
   * consumer (`migrationUuid`) until `confirmResize` or `revertResize`, in the store and in
   * every plugin's view alike. The new flavor must therefore fit beside the old one; when it
   * does not, the result is `{ ok: false }` with the refusing plugin's reason (which names
   * the class, pages, ways or CPUs missing), and nothing changes. The instance keeps its
   * image and its request groups (`flavor.image`, `flavor.requestGroups` of its record): a
   * new flavor without them is merged with the instance's.
   */
  resize(uuid: string, flavor: Flavor): Promise<ClaimResult>;
  /**
   * Extend a live instance's allocation in place with one more request group (a
   * hot-attached port's or device's resource request, docs/request-groups.md; Nova's
   * interface attach). Only the addition is tested and fitted: every plugin's `test` sees
   * kind `extend` with a spec of that group alone (a grant refuses it), and Placement's
   * rules put it on one provider of the host's tree beside what the instance holds. One
   * transaction, checked against the consumer generation read first, writes the grown
   * allocation and the record (its `flavor.requestGroups` with the group and the provider
   * serving it); plugins then re-add the instance and `resized` is emitted. A refusal (a
   * plugin, placement, capacity, a concurrent writer, an instance that is not active here or
   * is mid-resize or move, a requester it already has) changes nothing.
   */
  attach(uuid: string, group: ResourceRequestGroup): Promise<ClaimResult>;
  /**
   * Shrink a live instance's allocation in place: its request group of `requester` (e.g. a
   * detached port) and that group's amounts on the provider serving it go, in one
   * transaction checked against the consumer generation; plugins re-add the instance and
   * `resized` is emitted. An unknown requester changes nothing.
   */
  detach(uuid: string, requester: string): Promise<ClaimResult>;
  /** Finish a resize: the migration consumer's old allocations, pages, ways and CPUs are released; the instance keeps the new ones. */
  confirmResize(uuid: string): Promise<ClaimResult>;
  /** Undo a resize or a cold migration: the new allocations are released and the instance gets the old host, flavor, allocations, assignments and CPUs back. */
  revertResize(uuid: string): Promise<ClaimResult>;
  /**
   * Cold-migrate an active instance of another host to this one; called on the destination
   * host's tracker (Nova's semantics, docs/lifecycle.md). This host's plugins test the
   * instance's flavor as a claim; then one transaction gives the instance this host's
   * allocations (record on this host, state `resizing`) and moves its allocations on the
   * source host to its migration consumer (a `resizing` record on the source host), where
   * they stay held until `confirmResize` (released) or `revertResize` (the instance goes
   * back) on this tracker. The source host's plugins see the move at their next update
   * (`sync`, periodic, or a restart); until then they count the same amounts under the
   * instance's uuid. A refusal (this host's plugins, placement, the store) changes nothing.
   */
  migrate(uuid: string): Promise<ClaimResult>;
  /**
   * Evacuate an active instance from a host that is down (status `stale` or `disabled`) to
   * this one; called on the destination's tracker. Like `migrate`, but the instance is
   * `active` here at once: its allocations on the source host stay held on its migration
   * consumer until the source host's tracker starts again and releases them (Nova's
   * evacuation). Refused while the source host is `up`.
   */
  evacuate(uuid: string): Promise<ClaimResult>;
  /** Listen to instance events; returns a function that removes the listener. */
  on(type: InstanceEventType, listener: TrackerListener): () => void;
  /**
   * Confirm the reservations schedulers made on this host (instances in state `scheduled`,
   * docs/lifecycle.md): each goes through the claim path, adopting the reservation's
   * allocations, and turns `active` with its plugins' assignments; a refusal releases it and
   * records `refused` with the reason, naming the plugin. Reservations of any host older than
   * `reservations.timeout` are expired first. Also runs after start, after every periodic
   * update, and whenever the watch (every `reservations.pollInterval` while started) sees one.
   */
  confirmScheduled(): Promise<ConfirmReport>;
}

/**
 * Create a tracker: resolve the host name, load provider config files (validated now:
 * a bad file stops start-up) and instantiate the resource plugins named in
 * `config.tracker.resources`. Nothing is discovered or written until `discover`, `sync`
 * or `start` is called.
 */
export async function createTracker(options: TrackerOptions): Promise<Tracker> {
  const { config } = options;
  const hostName = options.hostName ?? config.tracker.hostName ?? os.hostname();
  const root = options.root ?? config.tracker.root;
  const logger = options.logger ?? (createLogger({ level: config.log.level }) as unknown as Logger);
  const entries = config.tracker.providerConfigs ? await loadProviderConfigs(config.tracker.providerConfigs) : [];
  const clock = options.clock ?? systemClock;
  const onHookCall = options.observer?.onHookCall;
  const runtime = await createPluginRuntime({ config, logger, side: 'compute', hostName, root, clock, ...(onHookCall ? { onHookCall } : {}) });
  const machine = await machineIdentity(root);
  return new HostTracker({ config, hostName, machine, root, logger: logger.child({ host: hostName }), runtime, entries, store: options.store, clock, observer: options.observer ?? {} });
}

interface Discovered {
  report: DiscoveryReport;
  providers: DesiredProvider[];
  available: Set<string>;
}

/** An instance of this host as the store has it, with its allocations. */
interface LiveInstance {
  record: InstanceRecord;
  allocations: Allocation[];
  generation: number | null;
}

class HostTracker implements Tracker {
  readonly hostName: string;
  readonly rootUuid: string;
  lastSync: SyncReport | undefined;

  private readonly config: ErtConfig;
  private readonly logger: Logger;
  private readonly runtime: PluginRuntime;
  private readonly entries: ProviderConfigEntry[];
  private readonly clock: Clock;
  private readonly mutex = new Mutex();
  private readonly listeners = new Map<InstanceEventType, Set<TrackerListener>>();
  private store: HostStore | undefined;
  private readonly ownsStore: boolean;
  private storeOpening: Promise<HostStore> | undefined;
  private available = new Set<string>();
  /** Which plugins are unavailable and the classes they own: claims of those classes are refused (availability.ts). */
  private readonly availability = new PluginAvailability();
  private timer: NodeJS.Timeout | undefined;
  private state: 'created' | 'started' | 'stopped' = 'created';
  /** Set by the first `stop()`: later calls wait for the same shutdown. */
  private stopping: Promise<void> | undefined;
  /** Looks for reservations on this host between periodic updates (reservations.ts); set by start(). */
  private watch: ReservationWatch | undefined;
  /** Failures of the periodic update, the reservation passes and the start, logged once per change. */
  private readonly failures: FailureLog;
  /** The wait before retrying a failed periodic update or start (reset by a success). */
  private readonly backoff: Backoff;
  /** Wakes a start waiting for the store when `stop()` is called. */
  private wakeStart: (() => void) | undefined;

  /** The machine this tracker reads (machine.ts); the host records it at its first sync. */
  private readonly machine: string;
  /** The directory standing for `/`. */
  private readonly root: string;
  /** The CPUs online at the last discovery (undefined: unknown); a grant pinning another is refused. */
  private online: ReadonlySet<number> | undefined;
  /** Uuids the plugins' views hold (added and not removed since their last reset). */
  private readonly inViews = new Set<string>();

  private readonly observer: TrackerObserver;
  /** Writes this host's share of the provider tree and its stats (reconcile.ts). */
  private readonly reconciler: StoreReconciler;

  constructor(init: { config: ErtConfig; hostName: string; machine: string; root: string; logger: Logger; runtime: PluginRuntime; entries: ProviderConfigEntry[]; store: HostStore | undefined; clock: Clock; observer: TrackerObserver }) {
    this.config = init.config;
    this.hostName = init.hostName;
    this.machine = init.machine;
    this.root = init.root;
    this.rootUuid = providerUuid(init.hostName);
    this.logger = init.logger;
    this.runtime = init.runtime;
    this.entries = init.entries;
    this.store = init.store;
    this.ownsStore = init.store === undefined;
    this.clock = init.clock;
    this.observer = init.observer;
    this.failures = new FailureLog(this.logger, () => this.clock.now());
    this.backoff = new Backoff({ baseMs: Math.min(1000, this.config.tracker.interval), capMs: this.config.tracker.interval });
    this.reconciler = new StoreReconciler({ hostName: this.hostName, rootUuid: this.rootUuid, resources: () => this.resources, pluginOptions: this.config.plugins });
  }

  /** Tell an observer; its failure is logged, never the tracker's. */
  private notify(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.warn({ err }, `tracker observer ${what} threw`);
    }
  }

  /* ------------------------------------------------------------------ plumbing */

  private get resources(): ActiveResource[] {
    return this.runtime.resources;
  }

  /** Call a hook through the dispatcher (tagged errors, `config.tracker.hookTimeout`, timings). */
  private call<T>(resource: ActiveResource, hook: string, fn: () => T | Promise<T>, validate?: (result: Awaited<T>) => string | undefined): Promise<Awaited<T>> {
    return this.runtime.dispatcher.call(resource.name, hook, fn, { timeoutMs: this.config.tracker.hookTimeout, ...(validate ? { validate } : {}) });
  }

  private async openStore(): Promise<HostStore> {
    if (this.store) return this.store;
    this.storeOpening ??= (async () => {
      const store = await createStore(this.config.store);
      await store.migrate();
      this.store = store;
      return store;
    })();
    return this.storeOpening;
  }

  private assertRunning(): void {
    if (this.state === 'stopped') throw new TrackerError(TrackerErrorCodes.STATE, `tracker of host ${this.hostName} is stopped`, { state: this.state });
  }

  on(type: InstanceEventType, listener: TrackerListener): () => void {
    let set = this.listeners.get(type);
    if (!set) this.listeners.set(type, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /**
   * Tell listeners (their event carries every plugin's assignment, by plugin name, in
   * `assignment`), then the plugins whose enforcement is enabled (each sees its own
   * assignment). Returns the enforcement failures.
   */
  private async emit(
    type: InstanceEventType,
    instance: ClaimedInstance,
    assignments: Record<string, JsonValue>,
    previous?: { instance: ClaimedInstance; assignments: Record<string, JsonValue> },
  ): Promise<Problem[]> {
    const eventFor = (plugin?: string): InstanceEvent => {
      const pick = (i: ClaimedInstance, a: Record<string, JsonValue>): ClaimedInstance => {
        const assignment = plugin === undefined ? (Object.keys(a).length > 0 ? a : undefined) : a[plugin];
        const { assignment: _drop, ...rest } = i;
        return assignment === undefined ? rest : { ...rest, assignment };
      };
      return { type, host: this.hostName, instance: pick(instance, assignments), ...(previous ? { previous: pick(previous.instance, previous.assignments) } : {}) };
    };
    const shared = eventFor();
    for (const listener of this.listeners.get(type) ?? []) {
      try {
        listener(shared);
      } catch (err) {
        this.logger.error({ err, event: type, instance: instance.uuid }, 'instance event listener threw');
      }
    }
    const problems: Problem[] = [];
    for (const resource of this.resources) {
      const enforce = resource.hooks.enforce;
      if (!resource.enforce || !enforce) continue;
      const event = eventFor(resource.name);
      try {
        await this.call(resource, 'enforce', () => enforce.call(resource.hooks, event));
      } catch (err) {
        const problem = problemFrom(err, { plugin: resource.name, hook: 'enforce', instance: instance.uuid });
        this.logger.error({ err, plugin: resource.name, instance: instance.uuid, event: type }, 'enforcement failed');
        problems.push(problem);
      }
    }
    return problems;
  }

  /* ------------------------------------------------------------------ discovery */

  discover(): Promise<DiscoveryReport> {
    this.assertRunning();
    return this.mutex.run(async () => {
      const discovered = await this.discoverLocked();
      const { reports, problems } = await this.collectStats(discovered.available);
      this.attachStats(discovered.report, reports);
      discovered.report.problems.push(...problems);
      return discovered.report;
    });
  }

  private async discoverLocked(): Promise<Discovered> {
    this.online = await onlineCpus(this.root);
    const plugins: PluginDiscoveryReport[] = [];
    const discoveries: Array<{ plugin: string; discovery: NormalizedDiscovery }> = [];
    const problems: Problem[] = [];
    for (const resource of this.resources) {
      const started = performance.now();
      let discovery: NormalizedDiscovery;
      try {
        const raw = await this.call(resource, 'discover', () => resource.hooks.discover());
        discovery = normalizeDiscovery(resource.name, raw);
      } catch (err) {
        const problem = problemFrom(err, { plugin: resource.name, hook: 'discover' });
        this.logger.error({ err, plugin: resource.name }, 'discover failed; the plugin publishes no capacity');
        problems.push(problem);
        discovery = { available: false, reason: problem.message, host: { inventories: {}, traits: [] }, children: [] };
      }
      discoveries.push({ plugin: resource.name, discovery });
      const providers: PluginDiscoveryReport['providers'] = [];
      if (discovery.available) {
        const hostPart = discovery.host;
        if (Object.keys(hostPart.inventories).length > 0 || hostPart.traits.length > 0) {
          providers.push({ name: this.hostName, uuid: this.rootUuid, ...hostPart });
        }
        for (const child of discovery.children) {
          const name = childProviderName(this.hostName, child.key);
          const parentName = child.parent === undefined ? this.hostName : childProviderName(this.hostName, child.parent);
          providers.push({ name, uuid: providerUuid(name), parentName, inventories: child.inventories, traits: child.traits });
        }
      }
      plugins.push({
        plugin: resource.name,
        available: discovery.available,
        ...(discovery.reason !== undefined ? { reason: discovery.reason } : {}),
        providers,
        timingMs: performance.now() - started,
      });
    }
    const { providers, unmatched } = buildTree(this.hostName, discoveries, this.entries);
    this.availability.update(plugins, providers, new Set(problems.flatMap((p) => (p.hook === 'discover' && p.plugin !== undefined ? [p.plugin] : []))));
    for (const entry of unmatched) {
      problems.push({
        code: TrackerErrorCodes.PROVIDER_CONFIG_UNMATCHED,
        message: `${entry.file} providers[${entry.index}] matches no provider of host ${this.hostName}; it was skipped`,
        file: entry.file,
      });
    }
    const available = new Set(plugins.filter((p) => p.available).map((p) => p.plugin));
    this.available = available;
    return {
      providers,
      available,
      report: {
        host: this.hostName,
        rootUuid: this.rootUuid,
        plugins,
        providers,
        providerConfigs: { entries: this.entries.length, unmatched: unmatched.map(({ file, index, identification }) => ({ file, index, identification })) },
        problems,
      },
    };
  }

  /** Call `stats` of every available plugin that has it and validate the data; refused stats become problems. */
  private async collectStats(available: ReadonlySet<string>): Promise<{ reports: Map<string, { stats?: { schemaVersion: number; data: JsonValue }; statsProblem?: Problem; ms: number }>; problems: Problem[] }> {
    const reports = new Map<string, { stats?: { schemaVersion: number; data: JsonValue }; statsProblem?: Problem; ms: number }>();
    const problems: Problem[] = [];
    for (const resource of this.resources) {
      const statsHook = resource.hooks.stats;
      if (!statsHook || !available.has(resource.name)) continue;
      const started = performance.now();
      try {
        const data = await this.call(resource, 'stats', () => statsHook.call(resource.hooks));
        validateStats(resource.plugin, data);
        reports.set(resource.name, { stats: { schemaVersion: resource.plugin.stats!.version, data: data as JsonValue }, ms: performance.now() - started });
      } catch (err) {
        const problem = problemFrom(err, { plugin: resource.name, hook: 'stats' });
        this.logger.error({ err, plugin: resource.name }, 'stats refused');
        problems.push(problem);
        reports.set(resource.name, { statsProblem: problem, ms: performance.now() - started });
      }
    }
    return { reports, problems };
  }

  private attachStats(report: DiscoveryReport, stats: Awaited<ReturnType<HostTracker['collectStats']>>['reports']): void {
    for (const plugin of report.plugins) {
      const s = stats.get(plugin.plugin);
      if (!s) continue;
      if (s.stats) plugin.stats = s.stats;
      if (s.statsProblem) plugin.statsProblem = s.statsProblem;
      plugin.timingMs += s.ms;
    }
  }

  /* ------------------------------------------------------------------ sync */

  sync(): Promise<SyncReport> {
    this.assertRunning();
    return this.mutex.run(() => this.syncLocked(false));
  }

  async start(options: { waitForStore?: boolean } = {}): Promise<SyncReport> {
    if (this.state !== 'created') throw new TrackerError(TrackerErrorCodes.STATE, `tracker of host ${this.hostName} was already started`, { state: this.state });
    this.state = 'started';
    const firstSync = () =>
      this.mutex.run(async () => {
        const synced = await this.syncLocked(true);
        await this.confirmQuietly(true);
        return synced;
      });
    let report: SyncReport;
    for (;;) {
      try {
        report = await firstSync();
        this.failures.succeeded('start');
        this.backoff.reset();
        break;
      } catch (err) {
        if (!options.waitForStore || !isStoreUnavailable(err) || this.state !== 'started') throw err;
        const wait = this.backoff.next();
        this.failures.failed('start', err, wait);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, wait);
          this.wakeStart = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wakeStart = undefined;
        if (this.state !== 'started') throw new TrackerError(TrackerErrorCodes.STATE, `tracker of host ${this.hostName} was stopped before it could reach the store`, { state: this.state });
      }
    }
    // stop() while the first sync ran: it has already stopped what exists; start nothing more
    // (a watch started now would keep the process alive).
    if (this.state !== 'started') throw new TrackerError(TrackerErrorCodes.STATE, `tracker of host ${this.hostName} was stopped while starting`, { state: this.state });
    this.scheduleUpdate();
    this.watch = new ReservationWatch(() => this.store, this.hostName, this.config.reservations.pollInterval, () => this.mutex.run(() => (this.state === 'started' ? this.confirmQuietly(false) : Promise.resolve())), this.failures);
    this.watch.start();
    return report;
  }

  /** The periodic update: every `tracker.interval`, sooner (with backoff) after a failure. */
  private scheduleUpdate(delay = this.config.tracker.interval): void {
    if (this.state !== 'started') return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.mutex
        .run(async () => {
          await this.syncLocked(false);
          await this.confirmQuietly(true);
        })
        .then(
          () => {
            this.failures.succeeded('periodic update');
            this.backoff.reset();
            this.scheduleUpdate();
          },
          (err: unknown) => {
            const wait = this.backoff.next();
            this.failures.failed('periodic update', err, wait);
            this.scheduleUpdate(wait);
          },
        );
    }, delay);
  }

  stop(): Promise<void> {
    this.stopping ??= this.stopOnce();
    return this.stopping;
  }

  private async stopOnce(): Promise<void> {
    this.state = 'stopped';
    this.wakeStart?.();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.watch?.stop();
    await this.mutex.idle();
    for (const resource of this.resources) {
      const close = resource.hooks.close;
      if (!close) continue;
      try {
        await this.call(resource, 'close', () => close.call(resource.hooks));
      } catch (err) {
        this.logger.error({ err, plugin: resource.name }, 'close failed');
      }
    }
    if (this.ownsStore && this.store) await this.store.close();
  }

  private async syncLocked(announce: boolean): Promise<SyncReport> {
    const store = await this.openStore();
    // Before anything is written: a host registered from another machine (or another --root)
    // is not this tracker's to rewrite.
    const registered = await store.getHost(this.hostName);
    if (registered?.machine !== undefined && registered.machine !== this.machine) {
      throw new TrackerError(
        TrackerErrorCodes.HOST_MACHINE_MISMATCH,
        `host "${this.hostName}" was registered from ${registered.machine}, but this tracker reads ${this.machine}: refusing to write its inventory (run on that machine, give the --root it was synced with, or use another host name)`,
        { host: this.hostName, registered: registered.machine, machine: this.machine },
      );
    }
    const discovered = await this.discoverLocked();
    const changes: string[] = [];
    const problems: Problem[] = [...discovered.report.problems];

    await store.ensureResourceClasses([...new Set(discovered.providers.flatMap((p) => Object.keys(p.inventories)))]);
    for (const provider of discovered.providers) await this.reconciler.reconcileProvider(store, provider, changes, problems);
    await this.reconciler.retireProviders(store, discovered.providers, changes, problems);
    // The host row comes before stats and instances, which the store keys by host.
    const existing = await store.getHost(this.hostName);
    const now = this.clock.now();
    await store.upsertHost({
      name: this.hostName,
      rootProviderUuid: this.rootUuid,
      // An operator's `disabled` stays; anything else is up again now that the host reported.
      ...(existing?.status === 'disabled' ? {} : { status: 'up' as const }),
      lastUpdate: now,
      machine: this.machine,
    });

    const live = await this.rebuildViews(store, problems, changes);
    const { reports, problems: statsProblems } = await this.collectStats(discovered.available);
    this.attachStats(discovered.report, reports);
    discovered.report.problems.push(...statsProblems);
    problems.push(...statsProblems);
    await this.reconciler.writeStats(store, reports, changes, this.available);

    const staleHosts = (await store.markStaleHosts(now - this.config.tracker.staleAfter)).filter((name) => name !== this.hostName);
    if (staleHosts.length > 0) this.logger.warn({ hosts: staleHosts }, 'marked hosts stale');

    if (announce) {
      for (const { instance, assignments } of live) problems.push(...(await this.emit('updated', instance, assignments)));
    }
    const report: SyncReport = { host: this.hostName, rootUuid: this.rootUuid, discovery: discovered.report, changes, problems, instances: live.length, staleHosts };
    this.lastSync = report;
    if (changes.length > 0) this.logger.info({ changes }, 'host updated in the store');
    return report;
  }

  /* ------------------------------------------------------------------ instances and views */

  private async liveInstances(store: HostStore): Promise<LiveInstance[]> {
    // Reservations not confirmed yet (`scheduled`) and ended ones (`refused`, `expired`) are not in the plugins' views.
    const records = (await store.listInstances({ host: this.hostName })).filter((r) => r.state !== 'scheduled' && r.state !== 'refused' && r.state !== 'expired');
    const result: LiveInstance[] = [];
    for (const record of records) {
      const { generation, allocations } = await store.getAllocations(record.uuid);
      result.push({ record, allocations, generation });
    }
    return result;
  }

  private async providerNames(store: HostStore, allocations: Allocation[]): Promise<Map<string, string>> {
    const names = new Map<string, string>();
    for (const p of await store.listProviders({ rootUuid: this.rootUuid })) names.set(p.uuid, p.name);
    for (const a of allocations) {
      if (names.has(a.providerUuid)) continue;
      const p = await store.getProvider(a.providerUuid);
      names.set(a.providerUuid, p?.name ?? a.providerUuid);
    }
    return names;
  }

  private toClaimed(record: InstanceRecord, spec: RequestSpec, allocations: Allocation[], names: Map<string, string>): ClaimedInstance {
    return {
      uuid: record.uuid,
      request: { uuid: record.uuid, projectId: record.projectId, userId: record.userId, flavor: record.flavor },
      spec,
      allocations: allocations.map((a) => ({ providerName: names.get(a.providerUuid) ?? a.providerUuid, resourceClass: a.resourceClass, amount: a.amount })),
      ...(record.cpus ? { cpus: [...record.cpus] } : {}),
    };
  }

  /** Give each plugin the instance, with its own assignment. Failures are problems (the store is already written). */
  private async addToPlugins(instance: ClaimedInstance, assignments: Record<string, JsonValue>, problems: Problem[]): Promise<void> {
    this.inViews.add(instance.uuid);
    for (const resource of this.resources) {
      const addInstance = resource.hooks.addInstance;
      if (!addInstance) continue;
      const own: ClaimedInstance = resource.name in assignments ? { ...instance, assignment: assignments[resource.name]! } : instance;
      try {
        await this.call(resource, 'addInstance', () => addInstance.call(resource.hooks, own));
      } catch (err) {
        this.logger.error({ err, plugin: resource.name, instance: instance.uuid }, 'addInstance failed');
        problems.push(problemFrom(err, { plugin: resource.name, hook: 'addInstance', instance: instance.uuid }));
      }
    }
  }

  private async removeFromPlugins(uuid: string, problems: Problem[]): Promise<void> {
    this.inViews.delete(uuid);
    for (const resource of this.resources) {
      const removeInstance = resource.hooks.removeInstance;
      if (!removeInstance) continue;
      try {
        await this.call(resource, 'removeInstance', () => removeInstance.call(resource.hooks, uuid));
      } catch (err) {
        this.logger.error({ err, plugin: resource.name, instance: uuid }, 'removeInstance failed');
        problems.push(problemFrom(err, { plugin: resource.name, hook: 'removeInstance', instance: uuid }));
      }
    }
  }

  /**
   * `reset` every plugin, then re-add every instance the store records on this host
   * (including a pending resize's migration record) with its stored allocations and
   * assignment. Returns the instances re-added. A migration record of this host whose
   * instance, on any host, no longer refers to it (left by an earlier tracker whose confirm and
   * revert were two writes, killed between them, or by a writer other than the tracker) is
   * deleted with its allocations, in one write (a problem); one whose instance was
   * evacuated to another host (active there, still referring to it) is released now that this
   * host is back, and the instance's reference cleared, in one write (a change). A pending
   * migration's record stays held.
   */
  private async rebuildViews(store: HostStore, problems: Problem[], changes: string[] = []): Promise<Array<{ instance: ClaimedInstance; assignments: Record<string, JsonValue> }>> {
    this.inViews.clear();
    for (const resource of this.resources) {
      const reset = resource.hooks.reset;
      if (!reset) continue;
      try {
        await this.call(resource, 'reset', () => reset.call(resource.hooks));
      } catch (err) {
        this.logger.error({ err, plugin: resource.name }, 'reset failed');
        problems.push(problemFrom(err, { plugin: resource.name, hook: 'reset' }));
      }
    }
    const live = await this.liveInstances(store);
    const migrations = new Set(live.filter((l) => l.record.state === 'resizing' && l.record.migrationUuid).map((l) => l.record.migrationUuid!));
    const names = await this.providerNames(store, live.flatMap((l) => l.allocations));
    const added: Array<{ instance: ClaimedInstance; assignments: Record<string, JsonValue> }> = [];
    let everyInstance: InstanceRecord[] | undefined;
    for (const { record, allocations } of live) {
      if (record.state === 'resizing' && !record.migrationUuid && !migrations.has(record.uuid)) {
        // The migration record of an instance that is (or was) on another host, or of none.
        everyInstance ??= await store.listInstances();
        const owner = everyInstance.find((i) => i.migrationUuid === record.uuid);
        if (owner?.state === 'active') {
          const cleared: InstanceRecord = { ...owner, updatedAt: this.clock.now() };
          delete cleared.migrationUuid;
          // One transaction: the held allocations and record go as the instance stops referring
          // to them (its own allocations rewritten unchanged, checked against its generation).
          const kept = await store.getAllocations(owner.uuid);
          await store.writeAllocations([
            { consumer: { uuid: record.uuid, projectId: record.projectId, userId: record.userId }, allocations: [], removeInstance: true },
            { consumer: { uuid: owner.uuid, projectId: owner.projectId, userId: owner.userId, generation: kept.generation }, allocations: kept.allocations, instance: cleared },
          ]);
          changes.push(`released what instance ${owner.uuid} held here before it was evacuated to host ${owner.host}`);
          continue;
        }
        if (owner?.state !== 'resizing') {
          await store.writeAllocations([{ consumer: { uuid: record.uuid, projectId: record.projectId, userId: record.userId }, allocations: [], removeInstance: true }]);
          problems.push({ code: TrackerErrorCodes.INSTANCE, message: `deleted orphaned migration record ${record.uuid}`, instance: record.uuid });
          continue;
        }
      }
      let spec: RequestSpec;
      try {
        spec = this.parse(record.flavor);
      } catch (err) {
        problems.push(problemFrom(err, { instance: record.uuid }));
        continue;
      }
      const instance = this.toClaimed(record, spec, allocations, names);
      await this.addToPlugins(instance, record.assignments, problems);
      added.push({ instance, assignments: record.assignments });
    }
    return added;
  }

  private parse(flavor: Flavor): RequestSpec {
    return parseFlavor(flavor, { keys: this.runtime.extraSpecKeys });
  }

  /** Rewrite the stats of available plugins after a change of instances; refused stats are problems. */
  private async refreshStats(store: HostStore, problems: Problem[]): Promise<void> {
    const { reports, problems: statsProblems } = await this.collectStats(this.available);
    problems.push(...statsProblems);
    await this.reconciler.writeStats(store, reports, [], this.available);
  }

  /* ------------------------------------------------------------------ claims */

  /* ------------------------------------------------------------------ reservations (reservations.ts) */

  confirmScheduled(): Promise<ConfirmReport> {
    this.assertRunning();
    return this.mutex.run(() => this.confirmLocked(true));
  }

  private async confirmLocked(reapEverywhere: boolean): Promise<ConfirmReport> {
    const store = await this.openStore();
    const context = { hostName: this.hostName, store, clock: this.clock, logger: this.logger, timeoutMs: this.config.reservations.timeout, claim: (request: InstanceRequest) => this.claimLocked(request) };
    const report = await confirmReservations(context, { reapEverywhere });
    const onConfirm = this.observer.onConfirm;
    if (onConfirm) this.notify('onConfirm', () => onConfirm.call(this.observer, report));
    return report;
  }

  /**
   * After start or a periodic update: a failure is logged, not thrown, except the store being
   * unreachable, which is the caller's failure too (start waits it out, the periodic update
   * backs off); otherwise the update would count as a success and log a recovery in the middle
   * of an outage.
   */
  private async confirmQuietly(reapEverywhere: boolean): Promise<void> {
    try {
      await this.confirmLocked(reapEverywhere);
    } catch (err) {
      if (isStoreUnavailable(err)) throw err;
      // The next pass is the retry (the watch's poll or the periodic update).
      this.failures.failed('confirming reservations', err, this.config.reservations.pollInterval);
    }
  }

  claim(request: InstanceRequest): Promise<ClaimResult> {
    this.assertRunning();
    return this.mutex.run(() => this.claimLocked(request));
  }

  /**
   * Call every plugin's `test` (concurrently: they are different plugins) and collect every
   * refusal, or the grants. A throw, a timeout or a result that is neither nothing, a
   * string nor a ClaimGrant refuses the claim (fail closed), naming the plugin.
   */
  private async testAll(request: ClaimRequest): Promise<{ reasons: Array<{ plugin?: string; reason: string }>; grants: Map<string, ClaimGrant> }> {
    const validate = (result: unknown): string | undefined =>
      result === undefined || result === null || typeof result === 'string' ? undefined : grantProblem(result);
    const outcomes = await Promise.all(
      this.resources.map(async (resource) => {
        const test = resource.hooks.test;
        // A plugin whose discovery failed is not asked (what it owns is refused before: availability.ts).
        if (!test || this.availability.skipsTest(resource.name)) return { plugin: resource.name, result: undefined as unknown };
        try {
          const result: unknown = await this.call(resource, 'test', () => test.call(resource.hooks, request), validate);
          return { plugin: resource.name, result };
        } catch (err) {
          return { plugin: resource.name, error: err };
        }
      }),
    );
    const reasons: Array<{ plugin?: string; reason: string }> = [];
    const grants = new Map<string, ClaimGrant>();
    for (const outcome of outcomes) {
      const { plugin } = outcome;
      if ('error' in outcome) reasons.push({ plugin, reason: messageOf(outcome.error) });
      else if (typeof outcome.result === 'string') reasons.push({ plugin, reason: outcome.result === '' ? `plugin ${plugin} refused without a reason` : outcome.result });
      else if (outcome.result !== undefined && outcome.result !== null) grants.set(plugin, outcome.result as ClaimGrant);
    }
    return { reasons, grants };
  }

  /**
   * Turn plugins' grants into allocations on provider uuids, take the pinned CPUs (sorted)
   * from the one plugin that granted them, and the units and pools every plugin took. Returns a reason when a grant names a provider
   * key the host does not have, a class the granting plugin does not report (a plugin cannot
   * decide another plugin's resources: a CPU plugin setting memory), or when two plugins
   * grant the same class or both grant CPUs.
   */
  private resolveGrants(
    grants: Map<string, ClaimGrant>,
    tree: ProviderSnapshot[],
  ): { allocations: Allocation[]; holds: Holds; reasons: Array<{ plugin: string; reason: string }> } {
    const allocations: Allocation[] = [];
    // Units and pools are named per plugin (`<plugin>/<unit>`): plugins cannot collide.
    const units = [...grants].flatMap(([plugin, grant]) => (grant.units ?? []).map((unit) => `${plugin}/${unit}`));
    const pools = Object.fromEntries([...grants].flatMap(([plugin, grant]) => Object.entries(grant.pools ?? {}).map(([pool, p]) => [`${plugin}/${pool}`, { ...p }])));
    const reasons: Array<{ plugin: string; reason: string }> = [];
    const grantedBy = new Map<string, string>();
    let pinnedBy: string | undefined;
    let cpus: number[] | undefined;
    for (const [plugin, grant] of grants) {
      const absent = grant.cpus?.filter((cpu) => this.online !== undefined && !this.online.has(cpu)) ?? [];
      if (absent.length > 0) {
        reasons.push({ plugin, reason: `plugin ${plugin} hook test granted cpus ${formatCpuList(absent)}, which host ${this.hostName} does not have online (${formatCpuList(this.online!)})` });
      } else if (grant.cpus !== undefined) {
        if (pinnedBy !== undefined) reasons.push({ plugin, reason: `plugins ${pinnedBy} and ${plugin} both granted cpus` });
        else {
          pinnedBy = plugin;
          cpus = [...grant.cpus].sort((a, b) => a - b);
        }
      }
      const owned = this.availability.ownedBy(plugin);
      for (const a of grant.allocations ?? []) {
        if (owned !== undefined && !owned.has(a.resourceClass)) {
          reasons.push({ plugin, reason: `plugin ${plugin} granted ${a.resourceClass}, a class it does not report (it reports ${[...owned].sort().join(', ') || 'none'})` });
          continue;
        }
        const name = a.provider === undefined ? this.hostName : childProviderName(this.hostName, a.provider);
        const provider = tree.find((p) => p.name === name);
        if (!provider) {
          reasons.push({ plugin, reason: `plugin ${plugin} granted ${a.resourceClass} on provider ${name}, which this host does not have` });
          continue;
        }
        const other = grantedBy.get(a.resourceClass);
        if (other !== undefined && other !== plugin) {
          reasons.push({ plugin, reason: `plugins ${other} and ${plugin} both granted ${a.resourceClass}` });
          continue;
        }
        grantedBy.set(a.resourceClass, plugin);
        allocations.push({ providerUuid: provider.uuid, resourceClass: a.resourceClass, amount: a.amount });
      }
    }
    return { allocations, holds: { ...(cpus ? { cpus } : {}), ...(units.length > 0 ? { units } : {}), ...(Object.keys(pools).length > 0 ? { pools } : {}) }, reasons };
  }

  /** The host's tree as placement fits it, with usages minus the allocations of `exclude` (an adopted consumer). */
  private async fitTree(store: HostStore, exclude: Allocation[]): Promise<{ tree: FitTree; providers: ProviderSnapshot[] }> {
    const [snapshot] = await store.loadHosts([this.hostName]);
    if (!snapshot) throw new TrackerError(TrackerErrorCodes.HOST_NOT_SYNCED, `host ${this.hostName} is not in the store yet; run sync() or start() first`, { host: this.hostName });
    const toFit = (p: ProviderSnapshot): FitProvider => {
      const usages = { ...p.usages };
      for (const a of exclude) if (a.providerUuid === p.uuid) usages[a.resourceClass] = Math.max((usages[a.resourceClass] ?? 0) - a.amount, 0);
      return {
        uuid: p.uuid,
        name: p.name,
        ...(p.parentUuid ? { parentUuid: p.parentUuid } : {}),
        inventories: p.inventories,
        usages,
        traits: new Set(p.traits),
        aggregates: new Set(p.aggregates),
      };
    };
    return { tree: { providers: snapshot.providers.map(toFit), sharingProviders: snapshot.sharingProviders.map(toFit) }, providers: [...snapshot.providers, ...snapshot.sharingProviders] };
  }

  /**
   * Parse, test and place `request` on this host; writes nothing. `adopt` are allocations
   * of this consumer that the new ones replace (not counted as used while fitting); on a
   * resize it is empty, so the old allocations stay counted (they move to the migration
   * consumer). Returns the allocations (grants first), the plugins' assignments, the
   * holds (CPUs a plugin pinned the instance to, units and pools) and the flavor to record
   * (its request groups' `provider` set from the fit), or every reason.
   */
  private async place(
    store: HostStore,
    request: InstanceRequest,
    kind: 'claim' | 'resize',
    adopt: Allocation[],
  ): Promise<{ ok: true; spec: RequestSpec; flavor: Flavor; allocations: Allocation[]; assignments: Record<string, JsonValue>; holds: Holds } | { ok: false; reasons: Array<{ plugin?: string; reason: string }> }> {
    let spec: RequestSpec;
    try {
      spec = this.parse(request.flavor);
    } catch (err) {
      return { ok: false, reasons: [{ reason: `flavor ${request.flavor.name}: ${(err as Error).message}` }] };
    }
    const unavailable = await this.unavailableFor(store, spec);
    if (unavailable.length > 0) return { ok: false, reasons: unavailable };
    const { reasons, grants } = await this.testAll({ instance: request, spec, kind });
    if (reasons.length > 0) return { ok: false, reasons };
    const { tree, providers } = await this.fitTree(store, adopt);
    const granted = this.resolveGrants(grants, providers);
    if (granted.reasons.length > 0) return { ok: false, reasons: granted.reasons };
    const hasGroups = (request.flavor.requestGroups?.length ?? 0) > 0;
    const fit = fitRequest(spec, tree, { preallocated: granted.allocations, withMappings: hasGroups });
    if (!fit.ok) return { ok: false, reasons: [{ reason: fit.reason }] };
    const allocations = mergeAllocations(granted.allocations, fit.allocations);
    const assignments: Record<string, JsonValue> = {};
    for (const [plugin, grant] of grants) if (grant.assignment !== undefined) assignments[plugin] = grant.assignment;
    const flavor = hasGroups ? withGroupProviders(request.flavor, fit.mappings) : request.flavor;
    return { ok: true, spec, flavor, allocations, assignments, holds: granted.holds };
  }

  /** A class an unavailable plugin owns is not claimed against its last known inventory (fail closed): the refusals, or []. */
  private unavailableFor(store: HostStore, spec: RequestSpec): Promise<Array<{ plugin?: string; reason: string }>> {
    return this.availability.refusals(
      spec,
      async () => {
        const [snapshot] = await store.loadHosts([this.hostName]);
        return new Set(snapshot?.providers.flatMap((p) => Object.keys(p.inventories)) ?? []);
      },
      (plugin) => this.resources.find((r) => r.name === plugin)?.plugin.extraSpecs?.map((k) => k.key) ?? [],
    );
  }

  /** `claimAttempts`, timed and told to the observer (`onClaim`). */
  private async claimLocked(request: InstanceRequest): Promise<ClaimResult> {
    const onClaim = this.observer.onClaim;
    if (!onClaim) return this.claimAttempts(request, { retries: 0, conflict: false });
    const tally = { retries: 0, conflict: false };
    const started = performance.now();
    let outcome: ClaimObservation['outcome'] = 'error';
    try {
      const result = await this.claimAttempts(request, tally);
      outcome = result.ok ? 'claimed' : tally.conflict ? 'conflict' : 'refused';
      return result;
    } finally {
      const seconds = (performance.now() - started) / 1000;
      this.notify('onClaim', () => onClaim.call(this.observer, { outcome, seconds, retries: tally.retries }));
    }
  }

  private async claimAttempts(request: InstanceRequest, tally: { retries: number; conflict: boolean }): Promise<ClaimResult> {
    const store = await this.openStore();
    const existing = await store.getInstance(request.uuid);
    if (existing && (existing.host !== this.hostName || existing.state !== 'scheduled')) {
      return { ok: false, reasons: [{ reason: `instance ${request.uuid} is already ${existing.state} on host ${existing.host}` }] };
    }
    const problems: Problem[] = [];
    let placed: Awaited<ReturnType<typeof this.place>>;
    let record: InstanceRecord;
    for (let attempt = 1; ; attempt++) {
      // Allocations the scheduler wrote for this consumer are adopted: replaced, not added to.
      const own = await store.getAllocations(request.uuid);
      placed = await this.place(store, request, 'claim', own.allocations);
      if (!placed.ok) return placed;
      const now = this.clock.now();
      record = {
        uuid: request.uuid,
        host: this.hostName,
        projectId: request.projectId,
        userId: request.userId,
        flavor: placed.flavor,
        state: 'active',
        assignments: placed.assignments,
        ...placed.holds,
        createdAt: existing?.createdAt ?? now,
        updatedAt: now,
      };
      try {
        await store.writeAllocations([{ consumer: { uuid: request.uuid, projectId: request.projectId, userId: request.userId, generation: own.generation }, allocations: placed.allocations, instance: record }]);
        break;
      } catch (err) {
        // Another process claimed on this host since the views were built (a second tracker, `ert
        // claim` beside `host run`): the store refused a unit it took. Rebuild the views from the
        // store and choose once more; a second refusal is the answer.
        if (attempt === 1 && isErtError(err) && err.code === STORE_ERROR_CODES.assignmentTaken) {
          this.logger.warn({ instance: request.uuid, reason: err.message }, 'claim: the store holds units this view did not know; re-reading the instances and trying again');
          await this.rebuildViews(store, problems);
          tally.retries += 1;
          continue;
        }
        tally.conflict = true;
        return { ok: false, reasons: [{ reason: `store refused the allocations: ${(err as Error).message}` }] };
      }
    }
    const names = await this.providerNames(store, placed.allocations);
    const instance = this.toClaimed(record, placed.spec, placed.allocations, names);
    await this.addToPlugins(instance, record.assignments, problems);
    await this.refreshStats(store, problems);
    const enforcement = await this.emit('claimed', instance, record.assignments);
    const undone = await this.applyEnforcementPolicy(store, request.uuid, enforcement, problems);
    if (undone) return undone;
    return { ok: true, instance, allocations: placed.allocations, record, problems };
  }

  /**
   * Under `enforcementFailure: undo`, release the instance and turn the failures into a
   * rejection. The release is announced (a `released` event, and `enforce` again) so that
   * plugins whose enforcement did succeed take it back.
   */
  private async applyEnforcementPolicy(store: HostStore, uuid: string, enforcement: Problem[], problems: Problem[]): Promise<ClaimResult | undefined> {
    problems.push(...enforcement);
    if (enforcement.length === 0 || this.config.tracker.enforcementFailure !== 'undo') return undefined;
    await this.releaseLocked(store, uuid, true);
    return { ok: false, reasons: enforcement.map((p) => ({ ...(p.plugin ? { plugin: p.plugin } : {}), reason: `enforcement by plugin ${p.plugin} failed, claim undone: ${p.message}` })) };
  }

  release(uuid: string): Promise<ReleaseResult> {
    this.assertRunning();
    return this.mutex.run(async () => this.releaseLocked(await this.openStore(), uuid, true));
  }

  private async releaseLocked(store: HostStore, uuid: string, announce: boolean): Promise<ReleaseResult> {
    const record = await store.getInstance(uuid);
    if (!record || record.host !== this.hostName) return { released: false, problems: [] };
    const { allocations } = await store.getAllocations(uuid);
    const names = await this.providerNames(store, allocations);
    const problems: Problem[] = [];
    // One transaction: the instance's record and allocations and its migration record and
    // allocations all go, or (a crash, a store error) none does.
    const writes: AllocationWrite[] = [{ consumer: { uuid, projectId: record.projectId, userId: record.userId }, allocations: [], removeInstance: true }];
    if (record.migrationUuid) writes.push({ consumer: { uuid: record.migrationUuid, projectId: record.projectId, userId: record.userId }, allocations: [], removeInstance: true });
    await store.writeAllocations(writes);
    await this.removeFromPlugins(uuid, problems);
    // Also the migration uuid, when the record names one or the views hold it: after a move
    // was reverted, this (source) host's plugins may hold the old allocation under it until
    // their next update.
    const held = record.migrationUuid ?? migrationUuid(uuid);
    if (record.migrationUuid !== undefined || this.inViews.has(held)) await this.removeFromPlugins(held, problems);
    await this.refreshStats(store, problems);
    if (announce) {
      const spec = this.parseOr(record.flavor);
      problems.push(...(await this.emit('released', this.toClaimed(record, spec, allocations, names), record.assignments)));
    }
    return { released: true, problems };
  }

  /** The parsed flavor of a recorded instance, or an empty spec when its keys are no longer owned (events only). */
  private parseOr(flavor: Flavor): RequestSpec {
    try {
      return this.parse(flavor);
    } catch {
      return { flavor, groups: [{ suffix: '', resources: {}, requiredTraits: [], forbiddenTraits: [], memberOf: [] }], groupPolicy: 'none', aggregateExtraSpecs: {}, capabilities: [], pluginSpecs: {}, hints: {} };
    }
  }

  /* ------------------------------------------------------------------ resize */

  resize(uuid: string, newFlavor: Flavor): Promise<ClaimResult> {
    this.assertRunning();
    return this.mutex.run(async () => {
      const store = await this.openStore();
      const record = await store.getInstance(uuid);
      if (!record || record.host !== this.hostName || record.state !== 'active') {
        return { ok: false, reasons: [{ reason: `instance ${uuid} is ${record ? `${record.state} on host ${record.host}` : 'unknown'}; only an active instance of host ${this.hostName} can be resized` }] };
      }
      // Nova's rule: a resize changes the flavor, not the image nor the ports; the new flavor is
      // merged with the instance's image properties (docs/images.md) and request groups
      // (docs/request-groups.md) unless it names its own.
      const flavor: Flavor = { ...newFlavor };
      if (newFlavor.image === undefined && record.flavor.image !== undefined) flavor.image = record.flavor.image;
      if (newFlavor.requestGroups === undefined && record.flavor.requestGroups !== undefined) flavor.requestGroups = record.flavor.requestGroups;
      const evacuated = await this.evacuationHeld(store, record);
      if (evacuated) return evacuated;
      const old = await store.getAllocations(uuid);
      const request: InstanceRequest = { uuid, projectId: record.projectId, userId: record.userId, flavor };
      const migration = migrationUuid(uuid);
      const now = this.clock.now();
      const migrationRecord: InstanceRecord = { ...record, uuid: migration, state: 'resizing', updatedAt: now };
      delete migrationRecord.migrationUuid;
      delete migrationRecord.previousFlavor;
      const problems: Problem[] = [];
      const oldNames = await this.providerNames(store, old.allocations);
      const previous = this.toClaimed(record, this.parseOr(record.flavor), old.allocations, oldNames);
      const held = this.toClaimed(migrationRecord, previous.spec, old.allocations, oldNames);
      // Nova's semantics: the old allocation stays held, by the migration consumer, until the
      // resize is confirmed or reverted, so the new flavor must fit beside it. The plugins'
      // views take that shape before they test (the old amounts, pages, ways and CPUs under
      // the migration uuid, nothing under the instance's), as the store will hold it: then
      // every plugin counts the old allocation, whatever it does with `kind`, and a resize
      // that does not fit is refused by the plugin that counts what is missing.
      await this.removeFromPlugins(uuid, problems);
      await this.addToPlugins(held, record.assignments, problems);
      const restore = async (): Promise<void> => {
        await this.removeFromPlugins(migration, problems);
        await this.addToPlugins(previous, record.assignments, problems);
        if (problems.length > 0) this.logger.error({ instance: uuid, problems }, 'restoring the views after a refused resize');
      };
      // The old allocations stay counted in the store too (they move to the migration consumer).
      // The views were rearranged above: a refusal or a throw (a store read) puts them back.
      let placed: Awaited<ReturnType<typeof this.place>>;
      try {
        placed = await this.place(store, request, 'resize', []);
      } catch (err) {
        await restore();
        throw err;
      }
      if (!placed.ok) {
        await restore();
        return placed;
      }
      const resized: InstanceRecord = { ...record, flavor: placed.flavor, state: 'resizing', previousFlavor: record.flavor, migrationUuid: migration, assignments: placed.assignments, updatedAt: now };
      // The new flavor's holds (or none); the migration record keeps the old ones until confirmed.
      setHolds(resized, placed.holds);
      // One transaction whose writes the store checks in order: the instance's new allocations
      // replace its old ones before the migration consumer takes the old ones, so no write
      // counts the old allocation twice (which would refuse a resize that fits).
      try {
        await store.writeAllocations([
          { consumer: { uuid, projectId: record.projectId, userId: record.userId, generation: old.generation }, allocations: placed.allocations, instance: resized },
          { consumer: { uuid: migration, projectId: record.projectId, userId: record.userId, generation: null }, allocations: old.allocations, instance: migrationRecord },
        ]);
      } catch (err) {
        await restore();
        return { ok: false, reasons: [{ reason: `store refused the allocations: ${(err as Error).message}` }] };
      }
      const names = await this.providerNames(store, placed.allocations);
      const instance = this.toClaimed(resized, placed.spec, placed.allocations, names);
      await this.addToPlugins(instance, resized.assignments, problems);
      await this.refreshStats(store, problems);
      const enforcement = await this.emit('resized', instance, resized.assignments, { instance: previous, assignments: record.assignments });
      problems.push(...enforcement);
      if (enforcement.length > 0 && this.config.tracker.enforcementFailure === 'undo') {
        // Announced (a `resized` event back to the old flavor) so that plugins whose enforcement succeeded re-apply the old one.
        await this.revertLocked(store, uuid, true);
        return { ok: false, reasons: enforcement.map((p) => ({ ...(p.plugin ? { plugin: p.plugin } : {}), reason: `enforcement by plugin ${p.plugin} failed, resize reverted: ${p.message}` })) };
      }
      return { ok: true, instance, allocations: placed.allocations, record: resized, problems };
    });
  }

  migrate(uuid: string): Promise<ClaimResult> {
    this.assertRunning();
    return this.mutex.run(async () => this.moveInLocked(await this.openStore(), uuid, 'migrate'));
  }

  evacuate(uuid: string): Promise<ClaimResult> {
    this.assertRunning();
    return this.mutex.run(async () => this.moveInLocked(await this.openStore(), uuid, 'evacuate'));
  }

  /**
   * Move an active instance of another host here (`migrate`, `evacuate`): this host's
   * plugins test its flavor; one transaction gives the instance this host's allocations and
   * moves its source allocations to its migration consumer (written in that order, so no
   * write counts anything twice).
   */
  private async moveInLocked(store: HostStore, uuid: string, kind: 'migrate' | 'evacuate'): Promise<ClaimResult> {
    const record = await store.getInstance(uuid);
    const verb = kind === 'migrate' ? 'migrated' : 'evacuated';
    if (!record || record.state !== 'active' || record.host === this.hostName) {
      return { ok: false, reasons: [{ reason: `instance ${uuid} is ${record ? `${record.state} on host ${record.host}` : 'unknown'}; only an active instance of another host can be ${verb} to host ${this.hostName}` }] };
    }
    const evacuated = await this.evacuationHeld(store, record);
    if (evacuated) return evacuated;
    if (kind === 'evacuate') {
      const source = await store.getHost(record.host);
      if (source?.status === 'up') {
        return { ok: false, reasons: [{ reason: `host ${record.host} is up: only an instance of a host that is down (stale or disabled) can be evacuated; migrate it instead` }] };
      }
    }
    const old = await store.getAllocations(uuid);
    const placed = await this.place(store, { uuid, projectId: record.projectId, userId: record.userId, flavor: record.flavor }, 'claim', []);
    if (!placed.ok) return placed;
    const migration = migrationUuid(uuid);
    const now = this.clock.now();
    const migrationRecord: InstanceRecord = { ...record, uuid: migration, state: 'resizing', updatedAt: now };
    delete migrationRecord.migrationUuid;
    delete migrationRecord.previousFlavor;
    const moved: InstanceRecord = { ...record, host: this.hostName, flavor: placed.flavor, state: kind === 'migrate' ? 'resizing' : 'active', migrationUuid: migration, assignments: placed.assignments, updatedAt: now };
    if (kind === 'migrate') moved.previousFlavor = record.flavor;
    setHolds(moved, placed.holds);
    try {
      await store.writeAllocations([
        { consumer: { uuid, projectId: record.projectId, userId: record.userId, generation: old.generation }, allocations: placed.allocations, instance: moved },
        { consumer: { uuid: migration, projectId: record.projectId, userId: record.userId, generation: null }, allocations: old.allocations, instance: migrationRecord },
      ]);
    } catch (err) {
      return { ok: false, reasons: [{ reason: `store refused the allocations: ${(err as Error).message}` }] };
    }
    const problems: Problem[] = [];
    const names = await this.providerNames(store, placed.allocations);
    const instance = this.toClaimed(moved, placed.spec, placed.allocations, names);
    await this.addToPlugins(instance, moved.assignments, problems);
    await this.refreshStats(store, problems);
    // The instance arrives on this host: its plugins program it as a claim.
    const enforcement = await this.emit('claimed', instance, moved.assignments);
    problems.push(...enforcement);
    if (enforcement.length > 0 && kind === 'migrate' && this.config.tracker.enforcementFailure === 'undo') {
      await this.revertLocked(store, uuid, true);
      return { ok: false, reasons: enforcement.map((p) => ({ ...(p.plugin ? { plugin: p.plugin } : {}), reason: `enforcement by plugin ${p.plugin} failed, migration reverted: ${p.message}` })) };
    }
    return { ok: true, instance, allocations: placed.allocations, record: moved, problems };
  }

  /* ------------------------------------------------------- request groups of a live instance */

  attach(uuid: string, group: ResourceRequestGroup): Promise<ClaimResult> {
    return this.withLiveInstance(uuid, 'extended', async (store, record, old) => {
      const { provider: _given, ...asked } = group;
      const flavor: Flavor = { ...record.flavor, requestGroups: [...(record.flavor.requestGroups ?? []), asked] };
      let spec: RequestSpec;
      try {
        spec = this.parse(flavor);
      } catch (err) {
        return { ok: false, reasons: [{ reason: `instance ${uuid} with request group ${String(asked.requester)}: ${(err as Error).message}` }] };
      }
      // What is tested and fitted is the addition alone (Nova's interface attach): the
      // instance's allocation stays counted, in the store and in every plugin's view.
      const added = spec.groups.find((g) => g.suffix === asked.requester)!;
      const addition: RequestSpec = { ...spec, groups: [{ suffix: '', resources: {}, requiredTraits: [], forbiddenTraits: [], memberOf: [] }, added], groupPolicy: 'none', pluginSpecs: {}, aggregateExtraSpecs: {}, capabilities: [] };
      const unavailable = await this.unavailableFor(store, addition);
      if (unavailable.length > 0) return { ok: false, reasons: unavailable };
      const request: InstanceRequest = { uuid, projectId: record.projectId, userId: record.userId, flavor };
      const { reasons, grants } = await this.testAll({ instance: request, spec: addition, kind: 'extend' });
      for (const plugin of grants.keys()) reasons.push({ plugin, reason: `plugin ${plugin} hook test answered an extend with a grant; an extension is placed by Placement's rules and the instance keeps what its claim assigned` });
      if (reasons.length > 0) return { ok: false, reasons };
      const { tree } = await this.fitTree(store, []);
      const fit = fitRequest(addition, tree, { withMappings: true });
      if (!fit.ok) return { ok: false, reasons: [{ reason: fit.reason }] };
      const extended: InstanceRecord = { ...record, flavor: withGroupProviders(flavor, fit.mappings), updatedAt: this.clock.now() };
      return this.rewriteLocked(store, record, old, mergeAllocations(old.allocations, fit.allocations), extended, spec);
    });
  }

  detach(uuid: string, requester: string): Promise<ClaimResult> {
    return this.withLiveInstance(uuid, 'shrunk', async (store, record, old) => {
      const groups = record.flavor.requestGroups ?? [];
      const group = groups.find((g) => g.requester === requester);
      if (!group) {
        return { ok: false, reasons: [{ reason: `instance ${uuid} has no request group of requester ${requester} (it has ${groups.map((g) => g.requester).join(', ') || 'none'})` }] };
      }
      const allocations = withoutGroup(old.allocations, group);
      if (typeof allocations === 'string') return { ok: false, reasons: [{ reason: `instance ${uuid}, request group ${requester}: ${allocations}` }] };
      const flavor: Flavor = { ...record.flavor, requestGroups: groups.filter((g) => g !== group) };
      if (flavor.requestGroups!.length === 0) delete flavor.requestGroups;
      const shrunk: InstanceRecord = { ...record, flavor, updatedAt: this.clock.now() };
      return this.rewriteLocked(store, record, old, allocations, shrunk, this.parseOr(flavor));
    });
  }

  /**
   * Under the host lock: `fn` with the record of `uuid` and its allocations (whose consumer
   * generation the write is checked against), read together; a refusal, without calling it,
   * unless the record is an active instance of this host with no resize or move pending.
   */
  private withLiveInstance(
    uuid: string,
    verb: string,
    fn: (store: HostStore, record: InstanceRecord, old: { allocations: Allocation[]; generation: number | null }) => Promise<ClaimResult>,
  ): Promise<ClaimResult> {
    this.assertRunning();
    return this.mutex.run(async () => {
      const store = await this.openStore();
      const record = await store.getInstance(uuid);
      if (!record || record.host !== this.hostName || record.state !== 'active' || record.migrationUuid !== undefined) {
        const where = record ? `${record.state}${record.migrationUuid !== undefined ? ' with a resize or move pending' : ''} on host ${record.host}` : 'unknown';
        return { ok: false, reasons: [{ reason: `instance ${uuid} is ${where}; only an active instance of host ${this.hostName} with no resize or move pending can be ${verb}` }] };
      }
      return fn(store, record, await store.getAllocations(uuid));
    });
  }

  /**
   * Write an active instance's changed allocations and record in one transaction, checked
   * against the consumer generation read with `old` (another writer's change since is a
   * refusal and nothing is written), then give the plugins its new shape, refresh stats and
   * announce `resized` (with the instance as it was).
   */
  private async rewriteLocked(store: HostStore, record: InstanceRecord, old: { allocations: Allocation[]; generation: number | null }, allocations: Allocation[], updated: InstanceRecord, spec: RequestSpec): Promise<ClaimResult> {
    try {
      await store.writeAllocations([{ consumer: { uuid: record.uuid, projectId: record.projectId, userId: record.userId, generation: old.generation }, allocations, instance: updated }]);
    } catch (err) {
      return { ok: false, reasons: [{ reason: `store refused the allocations: ${(err as Error).message}` }] };
    }
    const problems: Problem[] = [];
    const previous = this.toClaimed(record, this.parseOr(record.flavor), old.allocations, await this.providerNames(store, old.allocations));
    const instance = this.toClaimed(updated, spec, allocations, await this.providerNames(store, allocations));
    await this.removeFromPlugins(record.uuid, problems);
    await this.addToPlugins(instance, updated.assignments, problems);
    await this.refreshStats(store, problems);
    problems.push(...(await this.emit('resized', instance, updated.assignments, { instance: previous, assignments: record.assignments })));
    return { ok: true, instance, allocations, record: updated, problems };
  }

  /** A refusal while an evacuated instance's allocations are still held on the host it left (until that host's tracker starts again). */
  private async evacuationHeld(store: HostStore, record: InstanceRecord): Promise<ClaimResult | undefined> {
    if (record.state !== 'active' || !record.migrationUuid) return undefined;
    const held = await store.getInstance(record.migrationUuid);
    return { ok: false, reasons: [{ reason: `instance ${record.uuid} was evacuated from host ${held?.host ?? '(unknown)'}, which still holds its old allocations until its tracker starts again` }] };
  }

  private async resizing(store: HostStore, uuid: string): Promise<{ record: InstanceRecord; migration: string } | { ok: false; reasons: Array<{ reason: string }> }> {
    const record = await store.getInstance(uuid);
    if (!record || record.host !== this.hostName || record.state !== 'resizing' || !record.migrationUuid) {
      return { ok: false, reasons: [{ reason: `instance ${uuid} has no resize pending on host ${this.hostName}` }] };
    }
    return { record, migration: record.migrationUuid };
  }

  confirmResize(uuid: string): Promise<ClaimResult> {
    this.assertRunning();
    return this.mutex.run(async () => {
      const store = await this.openStore();
      const pending = await this.resizing(store, uuid);
      if ('ok' in pending) return pending;
      const { record, migration } = pending;
      const current = await store.getAllocations(uuid);
      const confirmed: InstanceRecord = { ...record, state: 'active', updatedAt: this.clock.now() };
      delete confirmed.previousFlavor;
      delete confirmed.migrationUuid;
      // One transaction: the migration record goes with its allocations as the instance turns active.
      await store.writeAllocations([
        { consumer: { uuid: migration, projectId: record.projectId, userId: record.userId }, allocations: [], removeInstance: true },
        { consumer: { uuid, projectId: record.projectId, userId: record.userId, generation: current.generation }, allocations: current.allocations, instance: confirmed },
      ]);
      const problems: Problem[] = [];
      await this.removeFromPlugins(migration, problems);
      await this.refreshStats(store, problems);
      const names = await this.providerNames(store, current.allocations);
      const instance = this.toClaimed(confirmed, this.parseOr(confirmed.flavor), current.allocations, names);
      problems.push(...(await this.emit('updated', instance, confirmed.assignments)));
      return { ok: true, instance, allocations: current.allocations, record: confirmed, problems };
    });
  }

  revertResize(uuid: string): Promise<ClaimResult> {
    this.assertRunning();
    return this.mutex.run(async () => this.revertLocked(await this.openStore(), uuid, true));
  }

  private async revertLocked(store: HostStore, uuid: string, announce: boolean): Promise<ClaimResult> {
    const pending = await this.resizing(store, uuid);
    if ('ok' in pending) return pending;
    const { record, migration } = pending;
    const held = await store.getAllocations(migration);
    const heldRecord = await store.getInstance(migration);
    const current = await store.getAllocations(uuid);
    // A cold migration's instance goes back to the source host, where its migration record is.
    const reverted: InstanceRecord = { ...record, host: heldRecord?.host ?? record.host, flavor: record.previousFlavor ?? record.flavor, state: 'active', assignments: heldRecord?.assignments ?? {}, updatedAt: this.clock.now() };
    setHolds(reverted, heldRecord ?? {});
    delete reverted.previousFlavor;
    delete reverted.migrationUuid;
    // The migration consumer lets go first, so that no write in the transaction counts the old
    // allocation twice; its record goes in the same transaction.
    await store.writeAllocations([
      { consumer: { uuid: migration, projectId: record.projectId, userId: record.userId }, allocations: [], removeInstance: true },
      { consumer: { uuid, projectId: record.projectId, userId: record.userId, generation: current.generation }, allocations: held.allocations, instance: reverted },
    ]);
    const problems: Problem[] = [];
    const names = await this.providerNames(store, [...held.allocations, ...current.allocations]);
    const instance = this.toClaimed(reverted, this.parseOr(reverted.flavor), held.allocations, names);
    const previous = this.toClaimed(record, this.parseOr(record.flavor), current.allocations, names);
    const here = reverted.host === this.hostName;
    await this.removeFromPlugins(uuid, problems);
    await this.removeFromPlugins(migration, problems);
    // Back to another host (a reverted migration): that host's plugins count it again at their next update.
    if (here) await this.addToPlugins(instance, reverted.assignments, problems);
    await this.refreshStats(store, problems);
    if (announce) {
      if (here) problems.push(...(await this.emit('resized', instance, reverted.assignments, { instance: previous, assignments: record.assignments })));
      else problems.push(...(await this.emit('released', previous, record.assignments)));
    }
    return { ok: true, instance, allocations: held.allocations, record: reverted, problems };
  }
}

/** What an instance holds of its host beyond amounts (see InstanceRecord). */
type Holds = Pick<InstanceRecord, 'cpus' | 'units' | 'pools'>;

/** `record` holds exactly `holds` (fields absent from `holds` are removed). */
function setHolds(record: InstanceRecord, holds: Holds): void {
  delete record.cpus;
  delete record.units;
  delete record.pools;
  if (holds.cpus !== undefined) record.cpus = holds.cpus;
  if (holds.units !== undefined) record.units = holds.units;
  if (holds.pools !== undefined) record.pools = holds.pools;
}


/** Grants first, then what placement placed; one entry per provider and class (amounts summed). */
function mergeAllocations(granted: Allocation[], fitted: Allocation[]): Allocation[] {
  const out: Allocation[] = [];
  for (const a of [...granted, ...fitted]) {
    const same = out.find((o) => o.providerUuid === a.providerUuid && o.resourceClass === a.resourceClass);
    if (same) same.amount += a.amount;
    else out.push({ ...a });
  }
  return out;
}

/**
 * `allocations` less a request group's amounts on the provider that serves it (its recorded
 * `provider`); entries that reach 0 go. A reason when the group has no provider recorded or
 * the allocations do not hold its amounts there.
 */
function withoutGroup(allocations: readonly Allocation[], group: ResourceRequestGroup): Allocation[] | string {
  if (group.provider === undefined) return 'the record does not say which provider serves it';
  const out = allocations.map((a) => ({ ...a }));
  for (const [resourceClass, amount] of Object.entries(group.resources)) {
    const held = out.find((a) => a.providerUuid === group.provider && a.resourceClass === resourceClass);
    if (!held || held.amount < amount) return `its ${amount} ${resourceClass} are not allocated on provider ${group.provider} (${held?.amount ?? 0} are)`;
    held.amount -= amount;
  }
  return out.filter((a) => a.amount > 0);
}

const GRANT_FIELDS: ReadonlySet<string> = new Set(['allocations', 'assignment', 'cpus', 'units', 'pools']);

/** Why a `test` result is not a ClaimGrant, or undefined when it is one. */
function grantProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return `expected nothing, a reason string or a ClaimGrant, got ${describe(value)}`;
  const grant = value as Record<string, unknown>;
  const extra = Object.keys(grant).filter((k) => !GRANT_FIELDS.has(k));
  if (extra.length > 0) return `unknown field(s) ${extra.join(', ')} in the grant`;
  if (grant['allocations'] !== undefined) {
    if (!Array.isArray(grant['allocations'])) return 'allocations must be a list';
    for (const [i, a] of (grant['allocations'] as unknown[]).entries()) {
      const alloc = a as Record<string, unknown>;
      if (typeof a !== 'object' || a === null) return `allocations[${i}] must be an object`;
      if (alloc['provider'] !== undefined && typeof alloc['provider'] !== 'string') return `allocations[${i}].provider must be a child key`;
      if (typeof alloc['resourceClass'] !== 'string') return `allocations[${i}].resourceClass must be a string`;
      if (!Number.isSafeInteger(alloc['amount']) || (alloc['amount'] as number) < 1) return `allocations[${i}].amount must be a positive integer`;
    }
  }
  if (grant['cpus'] !== undefined) {
    const cpus = grant['cpus'];
    if (!Array.isArray(cpus) || !cpus.every((cpu) => Number.isSafeInteger(cpu) && (cpu as number) >= 0)) return 'cpus must be a list of CPU numbers (non-negative integers)';
    if (new Set(cpus).size !== cpus.length) return 'cpus must not repeat a CPU';
    if (cpus.length === 0) return 'cpus must not be empty (leave it out for an instance that is not pinned)';
  }
  if (grant['units'] !== undefined) {
    const units = grant['units'];
    if (!Array.isArray(units) || !units.every((u) => typeof u === 'string' && u.length > 0 && u.length <= 200)) return 'units must be a list of non-empty strings of at most 200 characters';
    if (new Set(units).size !== units.length) return 'units must not repeat a unit';
  }
  if (grant['pools'] !== undefined) {
    const pools = grant['pools'];
    if (typeof pools !== 'object' || pools === null || Array.isArray(pools)) return 'pools must be an object of pool name to { amount, capacity }';
    for (const [pool, p] of Object.entries(pools as Record<string, unknown>)) {
      const { amount, capacity } = (typeof p === 'object' && p !== null ? p : {}) as Record<string, unknown>;
      if (pool.length === 0 || pool.length > 200) return `pool name ${JSON.stringify(pool)} must have 1 to 200 characters`;
      if (!Number.isSafeInteger(amount) || (amount as number) < 1) return `pools.${pool}.amount must be a positive integer`;
      if (!Number.isSafeInteger(capacity) || (capacity as number) < (amount as number)) return `pools.${pool}.capacity must be an integer of at least the amount`;
    }
  }
  if (grant['assignment'] !== undefined) {
    try {
      if (!jsonEqual(JSON.parse(JSON.stringify(grant['assignment'])), grant['assignment'])) return 'assignment is not plain JSON';
    } catch {
      return 'assignment is not JSON-serialisable';
    }
  }
  return undefined;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}
