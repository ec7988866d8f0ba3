/**
 * The compute-host tracker (its contract: tracker-api.ts). This file holds its lifecycle
 * (start, the periodic sync, stop), the claim path's writes and the instance operations
 * (release, resize, migrate, evacuate, attach, detach, confirm, revert), each run under the
 * host's mutex. Its parts: host-plugins.ts (hook calls through the dispatcher), discovery.ts
 * (what the host has), claim-plan.ts (plugins' tests and grants, then Placement's rules: what
 * a claim would write), plugin-views.ts (the plugins' views of the instances, events,
 * enforcement), reconcile.ts (the host's providers and stats in the store) and
 * reservations.ts (confirming what schedulers reserved).
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { isErtError, messageOf, type ClaimedInstance, type Clock, type Flavor, type InstanceEventType, type InstanceRequest, type JsonValue, type Logger, type RequestSpec, type ResourceRequestGroup } from '@ert/plugin-api';
import { Backoff, createLogger, createPluginRuntime, systemClock, type ActiveResource, type ErtConfig, type PluginRuntime } from '@ert/core';
import { STORE_ERROR_CODES, createStore, isStoreUnavailable, type Allocation, type AllocationWrite, type InstanceRecord, type HostStore } from '@ert/store';
import { fitRequest, withGroupProviders } from '@ert/placement';
import { machineIdentity } from './machine.js';
import { TrackerError, TrackerErrorCodes } from './errors.js';
import { migrationUuid, providerUuid } from './ids.js';
import { Mutex } from './mutex.js';
import { FailureLog } from './failure-log.js';
import { ReservationWatch, confirmReservations, type ConfirmReport } from './reservations.js';
import { loadProviderConfigs, type ProviderConfigEntry } from './provider-config.js';
import { problemFrom } from './problems.js';
import { StoreReconciler } from './reconcile.js';
import { HostPlugins } from './host-plugins.js';
import { HostDiscovery } from './discovery.js';
import { PluginViews } from './plugin-views.js';
import { ClaimPlanner, mergeAllocations, setHolds, withoutGroup, type ClaimPlan } from './claim-plan.js';
import { jsonEqual } from './tree.js';
import type { ClaimObservation, Tracker, TrackerObserver, TrackerOptions } from './tracker-api.js';
import type { ClaimResult, DiscoveryReport, Problem, ReleaseResult, SyncReport, TrackerListener } from './types.js';

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
  private readonly clock: Clock;
  private readonly mutex = new Mutex();
  private store: HostStore | undefined;
  private readonly ownsStore: boolean;
  /** The caller's opener of the store (`TrackerOptions.store` given as a function). */
  private readonly storeOpener: (() => Promise<HostStore>) | undefined;
  private storeOpening: Promise<HostStore> | undefined;
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
  private readonly observer: TrackerObserver;

  /** The host's resource plugins, called through the dispatcher (host-plugins.ts). */
  private readonly plugins: HostPlugins;
  /** The last discovery: CPUs online, plugins available and what they vouch for (discovery.ts). */
  private readonly discovery: HostDiscovery;
  /** The plugins' views of the instances, the instance events and enforcement (plugin-views.ts). */
  private readonly views: PluginViews;
  /** Plans a claim on this host: plugins' tests and grants, then Placement's rules (claim-plan.ts). */
  private readonly planner: ClaimPlanner;
  /** Writes this host's share of the provider tree and its stats (reconcile.ts). */
  private readonly reconciler: StoreReconciler;

  constructor(init: { config: ErtConfig; hostName: string; machine: string; root: string; logger: Logger; runtime: PluginRuntime; entries: ProviderConfigEntry[]; store: TrackerOptions['store']; clock: Clock; observer: TrackerObserver }) {
    this.config = init.config;
    this.hostName = init.hostName;
    this.machine = init.machine;
    this.rootUuid = providerUuid(init.hostName);
    this.logger = init.logger;
    this.store = typeof init.store === 'function' ? undefined : init.store;
    this.storeOpener = typeof init.store === 'function' ? init.store : undefined;
    this.ownsStore = init.store === undefined;
    this.clock = init.clock;
    this.observer = init.observer;
    this.failures = new FailureLog(this.logger, () => this.clock.now());
    this.backoff = new Backoff({ baseMs: Math.min(1000, this.config.tracker.interval), capMs: this.config.tracker.interval });
    this.plugins = new HostPlugins(init.runtime, this.config.tracker.hookTimeout, this.hostName, this.logger);
    this.discovery = new HostDiscovery(this.plugins, this.rootUuid, init.root, init.entries);
    this.views = new PluginViews(this.plugins, (plugin) => this.discovery.availability.skipsTest(plugin));
    this.planner = new ClaimPlanner(this.plugins, this.discovery, this.views);
    this.reconciler = new StoreReconciler({ hostName: this.hostName, rootUuid: this.rootUuid, resources: () => this.plugins.resources, pluginOptions: this.config.plugins });
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

  private async openStore(): Promise<HostStore> {
    if (this.store) return this.store;
    const opener = this.storeOpener;
    if (opener) {
      // The caller's store: asked again after a failure (a database that does not answer yet).
      this.storeOpening ??= opener().then(
        (store) => (this.store = store),
        (err: unknown) => {
          this.storeOpening = undefined;
          throw err;
        },
      );
      return this.storeOpening;
    }
    this.storeOpening ??= (async () => {
      const store = await createStore(this.config.store);
      await store.migrate();
      this.store = store;
      return store;
    })();
    return this.storeOpening;
  }

  /**
   * Run `fn` under the host lock. A step that throws may have written the store without
   * telling the views (a read after its write failed): every view is rebuilt before its
   * plugin's next `test`.
   */
  private locked<T>(fn: () => Promise<T>): Promise<T> {
    return this.mutex.run(() => this.distrustOnThrow(fn));
  }

  private async distrustOnThrow<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      this.views.distrustAll(`a step failed, perhaps after a write the views were not told of: ${messageOf(err)}`);
      throw err;
    }
  }

  private assertRunning(): void {
    if (this.state === 'stopped') throw new TrackerError(TrackerErrorCodes.STATE, `tracker of host ${this.hostName} is stopped`, { state: this.state });
  }

  on(type: InstanceEventType, listener: TrackerListener): () => void {
    return this.views.on(type, listener);
  }

  /* ------------------------------------------------------------------ discovery */

  discover(): Promise<DiscoveryReport> {
    this.assertRunning();
    return this.mutex.run(async () => {
      const { report } = await this.discovery.discover();
      await this.discovery.collectStatsInto(report);
      return report;
    });
  }

  /* ------------------------------------------------------------------ sync */

  sync(): Promise<SyncReport> {
    this.assertRunning();
    return this.locked(() => this.syncLocked(false));
  }

  async start(options: { waitForStore?: boolean } = {}): Promise<SyncReport> {
    if (this.state !== 'created') throw new TrackerError(TrackerErrorCodes.STATE, `tracker of host ${this.hostName} was already started`, { state: this.state });
    this.state = 'started';
    const firstSync = () =>
      this.locked(async () => {
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
    this.watch = new ReservationWatch(() => this.store, this.hostName, this.config.reservations.pollInterval, () => this.locked(() => (this.state === 'started' ? this.confirmQuietly(false) : Promise.resolve())), this.failures);
    this.watch.start();
    return report;
  }

  /** The periodic update: every `tracker.interval`, sooner (with backoff) after a failure. */
  private scheduleUpdate(delay = this.config.tracker.interval): void {
    if (this.state !== 'started') return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.locked(async () => {
        await this.syncLocked(false);
        await this.confirmQuietly(true);
      }).then(
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
    for (const resource of this.plugins.resources) {
      const close = resource.hooks.close;
      if (!close) continue;
      try {
        await this.plugins.call(resource, 'close', () => close.call(resource.hooks));
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
    const discovered = await this.discovery.discover();
    const changes: string[] = [];
    const problems: Problem[] = [...discovered.report.problems];

    await store.ensureResourceClasses([...new Set(discovered.providers.flatMap((p) => Object.keys(p.inventories)))]);
    for (const provider of discovered.providers) await this.reconciler.reconcileProvider(store, provider, changes, problems);
    await this.reconciler.retireProviders(store, discovered.providers, changes, problems);
    // The host row comes before stats and instances, which the store keys by host.
    const now = this.clock.now();
    await store.upsertHost({
      name: this.hostName,
      rootProviderUuid: this.rootUuid,
      // Up again now that the host reported, but an operator's `disabled` stays: decided by the
      // store in its update, so a disable committed during this sync is not overwritten. Not
      // sent at all for a host read as disabled: an older server (`--server`) ignores
      // `keepDisabled`.
      ...(registered?.status === 'disabled' ? {} : { status: 'up' as const, keepDisabled: true }),
      lastUpdate: now,
      machine: this.machine,
    });

    const live = await this.rebuildViews(store, problems, changes);
    const { reports, problems: statsProblems } = await this.discovery.collectStatsInto(discovered.report);
    problems.push(...statsProblems);
    await this.reconciler.writeStats(store, reports, changes, this.discovery.available, problems);

    const staleHosts = (await store.markStaleHosts(now - this.config.tracker.staleAfter)).filter((name) => name !== this.hostName);
    if (staleHosts.length > 0) this.logger.warn({ hosts: staleHosts }, 'marked hosts stale');

    if (announce) {
      for (const { instance, assignments } of live) problems.push(...(await this.views.emit('updated', instance, assignments)));
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

  /**
   * `reset` every plugin, then re-add every instance the store records on this host
   * (including a pending resize's migration record) with its stored allocations and
   * assignment. Returns the instances re-added. A migration record of this host whose
   * instance, on any host, no longer refers to it (left by an earlier tracker whose confirm and
   * revert were two writes, killed between them, or by a writer other than the tracker) is
   * deleted with its allocations, in one write (a problem); one whose instance was
   * evacuated to another host (active there, still referring to it) is released now that this
   * host is back, and the instance's reference cleared, in one write (a change). A pending
   * migration's record stays held. `only`: the plugins whose views are rebuilt (default every
   * one). A plugin whose reset or addInstance fails is told nothing more: its view is distrusted
   * and rebuilt again before its next test, and a plugin whose call hangs does not cost a
   * timeout per instance.
   */
  private async rebuildViews(
    store: HostStore,
    problems: Problem[],
    changes: string[] = [],
    only: readonly ActiveResource[] = this.plugins.resources,
  ): Promise<Array<{ instance: ClaimedInstance; assignments: Record<string, JsonValue> }>> {
    let told = await this.views.reset(problems, only);
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
        spec = this.plugins.parseRecorded(record.flavor);
      } catch (err) {
        problems.push(problemFrom(err, { instance: record.uuid }));
        continue;
      }
      const instance = this.toClaimed(record, spec, allocations, names);
      told = await this.views.add(instance, record.assignments, problems, told);
      added.push({ instance, assignments: record.assignments });
    }
    return added;
  }

  /**
   * Before plugins' `test`: rebuild from the store, as `rebuildViews` does, the views of the
   * plugins a claim asks that a failed view hook (or step) left unreliable (plugin-views.ts).
   * Reads nothing when every view is reliable. A plugin whose rebuild fails stays unreliable,
   * and `testAll` refuses the claim naming it and the hook that failed.
   */
  private async repairViews(store: HostStore, problems: Problem[]): Promise<void> {
    const distrusted = this.plugins.resources.filter((r) => this.planner.asks(r) && this.views.unreliable(r.name) !== undefined);
    if (distrusted.length === 0) return;
    this.logger.warn({ plugins: distrusted.map((r) => r.name) }, 'rebuilding the views a failed hook left unreliable before their plugins test');
    // What the rebuild wrote (orphaned migration records removed, evacuated holds released) is
    // logged as a sync logs its changes.
    const changes: string[] = [];
    await this.rebuildViews(store, problems, changes, distrusted);
    if (changes.length > 0) this.logger.info({ changes }, 'host updated in the store while rebuilding views');
  }

  /**
   * Rewrite the stats of available plugins after a change of instances; refused stats are
   * problems. Never throws: the change is committed by then, and a failure here (the store
   * down, a write refused) must not skip what follows (events, enforcement, the answer); it is
   * a problem, and the next update rewrites the stats.
   */
  private async refreshStats(store: HostStore, problems: Problem[]): Promise<void> {
    try {
      const { reports, problems: statsProblems } = await this.discovery.collectStats();
      problems.push(...statsProblems);
      await this.reconciler.writeStats(store, reports, [], this.discovery.available, problems);
    } catch (err) {
      const message = `stats not rewritten after the change (the next update rewrites them): ${messageOf(err)}`;
      this.logger.error({ err }, message);
      problems.push({ ...problemFrom(err), message });
    }
  }

  /* ------------------------------------------------------------------ reservations (reservations.ts) */

  confirmScheduled(): Promise<ConfirmReport> {
    this.assertRunning();
    return this.locked(() => this.confirmLocked(true));
  }

  private async confirmLocked(reapEverywhere: boolean): Promise<ConfirmReport> {
    const store = await this.openStore();
    const context = { hostName: this.hostName, store, clock: this.clock, logger: this.logger, timeoutMs: this.config.reservations.timeout, claim: (request: InstanceRequest) => this.distrustOnThrow(() => this.claimLocked(request)) };
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

  /* ------------------------------------------------------------------ claims (planned in claim-plan.ts) */

  claim(request: InstanceRequest): Promise<ClaimResult> {
    this.assertRunning();
    return this.locked(() => this.claimLocked(request));
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
    let placed: ClaimPlan;
    let record: InstanceRecord;
    for (let attempt = 1; ; attempt++) {
      // Allocations the scheduler wrote for this consumer are adopted: replaced, not added to.
      const own = await store.getAllocations(request.uuid);
      await this.repairViews(store, problems);
      placed = await this.planner.place(store, request, 'claim', own.allocations);
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
        const refused = await this.refusalUnlessWritten(store, err, [record], placed.allocations);
        if (!refused) break;
        tally.conflict = true;
        return refused;
      }
    }
    const names = await this.providerNames(store, placed.allocations);
    const instance = this.toClaimed(record, placed.spec, placed.allocations, names);
    await this.views.add(instance, record.assignments, problems);
    await this.refreshStats(store, problems);
    const enforcement = await this.views.emit('claimed', instance, record.assignments);
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
    return this.locked(async () => this.releaseLocked(await this.openStore(), uuid, true));
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
    await this.views.remove(uuid, problems);
    // Also the migration uuid, when the record names one or the views hold it: after a move
    // was reverted, this (source) host's plugins may hold the old allocation under it until
    // their next update.
    const held = record.migrationUuid ?? migrationUuid(uuid);
    if (record.migrationUuid !== undefined || this.views.holds(held)) await this.views.remove(held, problems);
    await this.refreshStats(store, problems);
    if (announce) {
      const spec = this.plugins.parseOr(record.flavor);
      problems.push(...(await this.views.emit('released', this.toClaimed(record, spec, allocations, names), record.assignments)));
    }
    return { released: true, problems };
  }

  /* ------------------------------------------------------------------ resize */

  resize(uuid: string, newFlavor: Flavor): Promise<ClaimResult> {
    this.assertRunning();
    return this.locked(async () => {
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
      // Before the views take the resize's shape below, which a rebuild from the store would undo.
      await this.repairViews(store, problems);
      const oldNames = await this.providerNames(store, old.allocations);
      const previous = this.toClaimed(record, this.plugins.parseOr(record.flavor), old.allocations, oldNames);
      const held = this.toClaimed(migrationRecord, previous.spec, old.allocations, oldNames);
      // Nova's semantics: the old allocation stays held, by the migration consumer, until the
      // resize is confirmed or reverted, so the new flavor must fit beside it. The plugins'
      // views take that shape before they test (the old amounts, pages, ways and CPUs under
      // the migration uuid, nothing under the instance's), as the store will hold it: then
      // every plugin counts the old allocation, whatever it does with `kind`, and a resize
      // that does not fit is refused by the plugin that counts what is missing.
      await this.views.remove(uuid, problems);
      await this.views.add(held, record.assignments, problems);
      const restore = async (): Promise<void> => {
        await this.views.remove(migration, problems);
        await this.views.add(previous, record.assignments, problems);
        if (problems.length > 0) this.logger.error({ instance: uuid, problems }, 'restoring the views after a refused resize');
      };
      // The old allocations stay counted in the store too (they move to the migration consumer).
      // The views were rearranged above: a refusal or a throw (a store read) puts them back.
      let placed: ClaimPlan;
      try {
        placed = await this.planner.place(store, request, 'resize', []);
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
        const refused = await this.refusalUnlessWritten(store, err, [resized, migrationRecord], placed.allocations);
        if (refused) {
          await restore();
          return refused;
        }
      }
      const names = await this.providerNames(store, placed.allocations);
      const instance = this.toClaimed(resized, placed.spec, placed.allocations, names);
      await this.views.add(instance, resized.assignments, problems);
      await this.refreshStats(store, problems);
      const enforcement = await this.views.emit('resized', instance, resized.assignments, { instance: previous, assignments: record.assignments });
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
    return this.locked(async () => this.moveInLocked(await this.openStore(), uuid, 'migrate'));
  }

  evacuate(uuid: string): Promise<ClaimResult> {
    this.assertRunning();
    return this.locked(async () => this.moveInLocked(await this.openStore(), uuid, 'evacuate'));
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
    const problems: Problem[] = [];
    await this.repairViews(store, problems);
    const placed = await this.planner.place(store, { uuid, projectId: record.projectId, userId: record.userId, flavor: record.flavor }, 'claim', []);
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
      const refused = await this.refusalUnlessWritten(store, err, [moved, migrationRecord], placed.allocations);
      if (refused) return refused;
    }
    const names = await this.providerNames(store, placed.allocations);
    const instance = this.toClaimed(moved, placed.spec, placed.allocations, names);
    await this.views.add(instance, moved.assignments, problems);
    await this.refreshStats(store, problems);
    // The instance arrives on this host: its plugins program it as a claim.
    const enforcement = await this.views.emit('claimed', instance, moved.assignments);
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
        spec = this.plugins.parse(flavor);
      } catch (err) {
        return { ok: false, reasons: [{ reason: `instance ${uuid} with request group ${String(asked.requester)}: ${(err as Error).message}` }] };
      }
      // What is tested and fitted is the addition alone (Nova's interface attach): the
      // instance's allocation stays counted, in the store and in every plugin's view.
      const added = spec.groups.find((g) => g.suffix === asked.requester)!;
      const addition: RequestSpec = { ...spec, groups: [{ suffix: '', resources: {}, requiredTraits: [], forbiddenTraits: [], memberOf: [] }, added], groupPolicy: 'none', pluginSpecs: {}, aggregateExtraSpecs: {}, capabilities: [] };
      const unavailable = await this.planner.unavailableFor(store, addition);
      if (unavailable.length > 0) return { ok: false, reasons: unavailable };
      await this.repairViews(store, []);
      const request: InstanceRequest = { uuid, projectId: record.projectId, userId: record.userId, flavor };
      const { reasons, grants } = await this.planner.testAll({ instance: request, spec: addition, kind: 'extend' });
      for (const plugin of grants.keys()) reasons.push({ plugin, reason: `plugin ${plugin} hook test answered an extend with a grant; an extension is placed by Placement's rules and the instance keeps what its claim assigned` });
      if (reasons.length > 0) return { ok: false, reasons };
      const { tree } = await this.planner.fitTree(store, []);
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
      return this.rewriteLocked(store, record, old, allocations, shrunk, this.plugins.parseOr(flavor));
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
    return this.locked(async () => {
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
   * What to answer when the write of `records` (one transaction) threw: the refusal, or
   * undefined when the write was made after all. A store that did not answer
   * (ERT_STORE_UNAVAILABLE: the agent API's answer late or lost, a connection lost at the
   * COMMIT and not settled) may have committed it: the records and the first one's allocations
   * are read back, and when they are as written (each record's host, state, pending move,
   * flavor and assignments: every step this tracker writes changes one of them, under its lock)
   * the step goes on as written (views, stats, events). When they cannot be read either, the
   * refusal says the outcome is unknown, and so does one whose records are not found written
   * (the write may still be running on the server): every view is rebuilt from the store before
   * its plugin's next test.
   */
  private async refusalUnlessWritten(store: HostStore, err: unknown, records: InstanceRecord[], allocations: Allocation[]): Promise<ClaimResult | undefined> {
    const message = messageOf(err);
    if (!isStoreUnavailable(err)) return { ok: false, reasons: [{ reason: `store refused the allocations: ${message}` }] };
    let stored: Array<InstanceRecord | undefined>;
    let held: Allocation[];
    try {
      stored = await Promise.all(records.map((r) => store.getInstance(r.uuid)));
      held = (await store.getAllocations(records[0]!.uuid)).allocations;
    } catch {
      // Written or not, the views were not told: each is rebuilt from the store before its plugin's next test.
      this.views.distrustAll(`the store did not answer whether a step's write was made (${message})`);
      return { ok: false, reasons: [{ reason: `the store did not answer whether the allocations were written (${message}); the next update reads what it holds` }] };
    }
    // As the store holds them: JSON (no undefined fields), amounts summed by provider and class.
    const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value ?? {}));
    const same = (a: InstanceRecord | undefined, b: InstanceRecord) =>
      a !== undefined && a.host === b.host && a.state === b.state && a.migrationUuid === b.migrationUuid && jsonEqual(plain(a.flavor), plain(b.flavor)) && jsonEqual(plain(a.assignments), plain(b.assignments));
    const amounts = (list: Allocation[]) => Object.fromEntries(mergeAllocations(list, []).map((a) => [`${a.providerUuid} ${a.resourceClass}`, a.amount]));
    const written = stored.every((s, i) => same(s, records[i]!)) && jsonEqual(amounts(held), amounts(allocations));
    if (written) {
      this.logger.warn({ instances: records.map((r) => r.uuid), err: message }, 'the store did not answer a write it had made: going on as written');
      return undefined;
    }
    // Not written yet is not refused: a write still running behind the unanswered call (a lock
    // wait on the server) may commit after this read. The views are rebuilt before the next test.
    this.views.distrustAll(`the store did not answer a step's write (${message}), which was not found written but may still land`);
    return { ok: false, reasons: [{ reason: `the store did not answer (${message}) and the allocations were not found written; a write still running on the server may land later, which the next update reads` }] };
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
      const refused = await this.refusalUnlessWritten(store, err, [updated], allocations);
      if (refused) return refused;
    }
    const problems: Problem[] = [];
    const previous = this.toClaimed(record, this.plugins.parseOr(record.flavor), old.allocations, await this.providerNames(store, old.allocations));
    const instance = this.toClaimed(updated, spec, allocations, await this.providerNames(store, allocations));
    await this.views.remove(record.uuid, problems);
    await this.views.add(instance, updated.assignments, problems);
    await this.refreshStats(store, problems);
    problems.push(...(await this.views.emit('resized', instance, updated.assignments, { instance: previous, assignments: record.assignments })));
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
    return this.locked(async () => {
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
      await this.views.remove(migration, problems);
      await this.refreshStats(store, problems);
      const names = await this.providerNames(store, current.allocations);
      const instance = this.toClaimed(confirmed, this.plugins.parseOr(confirmed.flavor), current.allocations, names);
      problems.push(...(await this.views.emit('updated', instance, confirmed.assignments)));
      return { ok: true, instance, allocations: current.allocations, record: confirmed, problems };
    });
  }

  revertResize(uuid: string): Promise<ClaimResult> {
    this.assertRunning();
    return this.locked(async () => this.revertLocked(await this.openStore(), uuid, true));
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
    const instance = this.toClaimed(reverted, this.plugins.parseOr(reverted.flavor), held.allocations, names);
    const previous = this.toClaimed(record, this.plugins.parseOr(record.flavor), current.allocations, names);
    const here = reverted.host === this.hostName;
    await this.views.remove(uuid, problems);
    await this.views.remove(migration, problems);
    // Back to another host (a reverted migration): that host's plugins count it again at their next update.
    if (here) await this.views.add(instance, reverted.assignments, problems);
    await this.refreshStats(store, problems);
    if (announce) {
      if (here) problems.push(...(await this.views.emit('resized', instance, reverted.assignments, { instance: previous, assignments: record.assignments })));
      else problems.push(...(await this.views.emit('released', previous, record.assignments)));
    }
    return { ok: true, instance, allocations: held.allocations, record: reverted, problems };
  }
}
