import { effectiveStatus, exclusionReason, messageOf } from '@ert/plugin-api';
import type { Clock, ConsumerHooks, InstanceRequest, JsonValue, Logger, Placement, RequestSpec } from '@ert/plugin-api';
import { changedHosts, type Allocation, type AllocationWriteResult, type HostSnapshot, type ProviderSnapshot, type Store } from '@ert/store';
import { Host, Interner, NO_PROVIDERS, Provider, instanceSet, internStatus } from './host-state.js';
import type { HostShape } from './host-state.js';
import type { AggregateInfo } from './request-filters.js';
import { SummaryTable } from './summaries.js';

/** A consumer plugin as the host manager calls it. */
export interface ConsumerEntry {
  name: string;
  hooks: ConsumerHooks;
}

/**
 * Calls a plugin hook synchronously: errors come back tagged with plugin and hook (core's
 * `Dispatcher.callSync`), so every reason names both.
 */
export type HookCaller = <T>(plugin: string, hook: string, fn: () => T) => T;

/** What `HostManager.fetch` read: snapshots of changed hosts, and names of removed ones. */
export interface HostChanges {
  snapshots: HostSnapshot[];
  /** Names whose snapshots were asked for (one missing from `snapshots` was removed meanwhile). */
  requested: string[];
  removed: string[];
  /** The aggregates with their metadata, when they were read again (see `HostManager.aggregates`). */
  aggregates?: AggregateInfo[];
  /** The store's `hostChanges` token as of this read: the next fetch asks what changed after it. */
  token: string;
  /** `HostManager`'s count of fetches when this one began: `apply` ignores a fetch older than one it applied. */
  fetch: number;
  /** `HostManager`'s count of local changes when this fetch began (see `apply`). */
  localChangesBefore: number;
}

/** A placement `HostManager.applyPlacement` counted in memory, to `settle` once its claim is written or undone. */
export interface CountedPlacement {
  /** Why a consumer's `placed` failed (the host is then excluded: do not claim it), or undefined. */
  problem: string | undefined;
  /** The host, and the hosts sharing a provider it allocated from. */
  hosts: Host[];
}

/** The aggregates are read again at least this often (ms) while hosts change, whatever changed. */
const AGGREGATES_MAX_AGE = 60_000;

/** Changed slots (see `HostManager.changes`) kept at least, whatever the fleet's size. */
const MIN_JOURNAL = 4096;

/** Slots whose version changed: `slots[i]` is change number `base + i`. */
export interface ChangeJournal {
  slots: number[];
  base: number;
}

/** Hosts loaded per `loadHosts` call, so one refresh of a big fleet is not one huge query. */
const LOAD_BATCH = 1000;

/**
 * Host states in memory. Loads every host from the store once, then refreshes incrementally:
 * `hostChanges(token)` names the hosts whose generation moved since the last read (read in
 * proportion to what changed, not to the fleet), only those are reloaded, removed hosts are
 * dropped. Consumer plugins turn each host's stats into their data when it is (re)loaded and
 * update it when the scheduler places an instance. A consumer that cannot read a host's stats
 * (unknown schema version, a throw, `exclude(...)`) excludes that host with the reason; it never
 * stops the scheduler.
 */
export class HostManager {
  /** Hosts by slot; holes are reused. */
  readonly slots: Array<Host | undefined> = [];
  private readonly byName = new Map<string, Host>();
  private readonly freeSlots: number[] = [];
  /** Sharing providers are one object per uuid, shared by every host that reaches them. */
  private readonly sharing = new Map<string, { provider: Provider; hosts: Set<Host> }>();
  /**
   * The hosts whose `instances` list each known instance, the one that took it last at the end
   * (for affinity and same-host). Usually one; two while a host that gave an instance up (a
   * migration) has not been reloaded yet: the host itself then, not a list (no array per
   * instance in the common case).
   */
  private readonly holders = new Map<string, Host | Host[]>();
  private readonly interner = new Interner();
  private readonly shape: HostShape;
  private stamp = 0;
  private loaded = false;
  /**
   * What a fetch in flight may not have seen. A placement counted in memory (`applyPlacement`)
   * is unsettled on its host and the hosts sharing its providers (`unsettled[slot]`) until its
   * claim is written or undone (`settle`); each settle and each `reload` is a local change,
   * moving the count, and `changedAt[slot]` holds the slot's latest. `apply` does not replace
   * an unsettled host, nor one changed here since the fetch began, with the fetch's snapshot
   * (it could lack the placement: a decision then put two members of an anti-affinity group on
   * one host); the host is read again at the next fetch (`recheck`). Per slot, in typed arrays:
   * maps keyed by name or instance cost a decision about a tenth of the scheduler's part.
   */
  private localChanges = 0;
  private unsettled = new Int32Array(1024);
  private changedAt = new Float64Array(1024);
  private readonly recheck = new Set<string>();
  private fetches = 0;
  private appliedFetch = 0;
  /** Where the next `fetch` reads the store's host changes from (`Store.hostChanges`). */
  private changeToken: string | undefined;
  /**
   * Every aggregate with its metadata, for the request filters. Read with the first load and
   * again by `fetch` when a changed host's root aggregates or aggregate metadata differ from
   * the ones held (a change of an aggregate's metadata or members bumps its hosts'
   * generations), or when the last read is older than AGGREGATES_MAX_AGE.
   */
  aggregates: readonly AggregateInfo[] = [];
  private aggregatesReadAt = -Infinity;

  constructor(
    private readonly store: Store,
    private readonly consumers: readonly ConsumerEntry[],
    private readonly callHook: HookCaller,
    private readonly clock: Clock,
    private readonly staleAfterMs: number,
    private readonly logger?: Logger,
  ) {
    this.shape = { consumerIndex: new Map(consumers.map((c, i) => [c.name, i])) };
  }

  /** Number of hosts held. */
  get size(): number {
    return this.byName.size;
  }

  host(name: string): Host | undefined {
    return this.byName.get(name);
  }

  /** Every host, in slot order. */
  *hosts(): IterableIterator<Host> {
    for (const host of this.slots) if (host) yield host;
  }

  /** The host an instance is on (the last that took it), if the scheduler knows it. */
  hostOfInstance(uuid: string): Host | undefined {
    const held = this.holders.get(uuid);
    return Array.isArray(held) ? held.at(-1) : held;
  }

  /** Names of every host whose `instances` holds the instance ([] when none does): the same-host filter's candidate hosts. */
  holdersOf(uuid: string): string[] {
    const held = this.holders.get(uuid);
    if (held === undefined) return [];
    return Array.isArray(held) ? held.map((host) => host.name) : [held.name];
  }

  /** Record that `host` holds the instance, last (another host that did may still list it). */
  private holds(uuid: string, host: Host): void {
    const held = this.holders.get(uuid);
    const others = held === undefined ? [] : (Array.isArray(held) ? held : [held]).filter((h) => h.name !== host.name);
    this.holders.set(uuid, others.length === 0 ? host : [...others, host]);
  }

  /**
   * `versions[slot]` is the version of the host in that slot (-1 for an empty slot): ranking
   * compares it with its memo without touching the host objects.
   */
  versions = new Float64Array(1024).fill(-1);

  /** Give the host a new version (anything a filter or weigher can see changed). */
  private touch(host: Host): void {
    this.setVersion(host.slot, ++this.stamp);
  }

  /** Epoch ms of each slot's host's last tracker update (for staleness). */
  private lastUpdates = new Float64Array(1024);

  /**
   * The slots whose version changed, in order of change (a slot may appear several times):
   * `changes.slots[i]` is change number `changes.base + i`. A ranking remembers the number it
   * has read up to and looks only at the slots changed since, instead of comparing all
   * versions. The journal is cut when it outgrows the fleet; a ranking that had not read the
   * cut part compares every version instead (see `Ranker.rank`).
   */
  readonly changes: ChangeJournal = { slots: [], base: 0 };

  /**
   * The hosts' summaries in typed arrays (summaries.ts): the built-in ones recomputed with
   * every version change, the consumers' after their `consume` and `placed`.
   */
  readonly summaries = new SummaryTable();

  /** Changes whenever a slot gets a host of another name or none (see `HostIndex.layout`). */
  layout = 0;

  /** The column of a summary by name (see `HostIndex.summary`). */
  summary(name: string): Float64Array | undefined {
    return this.summaries.column(name, this.slots);
  }

  private setVersion(slot: number, version: number): void {
    const journal = this.changes;
    if (journal.slots.length >= Math.max(MIN_JOURNAL, 2 * this.slots.length)) {
      journal.base += journal.slots.length;
      journal.slots = [];
    }
    journal.slots.push(slot);
    if (slot >= this.versions.length) {
      const size = Math.max(slot + 1, this.versions.length * 2);
      const grown = new Float64Array(size).fill(-1);
      grown.set(this.versions);
      this.versions = grown;
      const updates = new Float64Array(size);
      updates.set(this.lastUpdates);
      this.lastUpdates = updates;
      const unsettled = new Int32Array(size);
      unsettled.set(this.unsettled);
      this.unsettled = unsettled;
      const changedAt = new Float64Array(size);
      changedAt.set(this.changedAt);
      this.changedAt = changedAt;
    }
    this.versions[slot] = version;
    this.summaries.refreshBuiltins(slot, version < 0 ? undefined : this.slots[slot]);
  }

  /**
   * Bring the hosts up to date with the store: a full load the first time, then only hosts
   * whose generation changed, plus dropping removed ones. Also re-derives staleness from the
   * clock. Returns what changed. Safe to call at any time between decisions.
   */
  async refresh(): Promise<{ loaded: number; removed: number }> {
    return this.apply(await this.fetch());
  }

  /**
   * Read what changed in the store since the hosts were loaded, without touching them: all
   * hosts the first time, then `hostChanges(token)` and the snapshots of the changed hosts.
   * Pass the result to `apply` (possibly later: snapshots that are no newer than what is held
   * are skipped there).
   */
  async fetch(): Promise<HostChanges> {
    const began = { fetch: ++this.fetches, localChangesBefore: this.localChanges };
    if (!this.loaded) {
      // The token first: whatever changes after it is listed next time. Hosts before the
      // aggregates: aggregates read after them are never older than what the hosts show.
      const { token } = await this.store.hostChanges();
      const snapshots = await this.store.loadHosts();
      return { snapshots, requested: [], removed: [], aggregates: await this.readAggregates(), token, ...began };
    }
    const again = [...this.recheck].filter((name) => this.byName.has(name));
    this.recheck.clear();
    const listed = await changedHosts(this.store, this.byName, (host) => host.generation, this.changeToken);
    const changed = again.length === 0 ? listed.changed : [...new Set([...listed.changed, ...again])];
    const snapshots = await this.loadBatches(changed);
    const stale = changed.length > 0 && this.clock.now() - this.aggregatesReadAt > AGGREGATES_MAX_AGE;
    const aggregates = stale || snapshots.some((s) => this.aggregatesMoved(s)) ? await this.readAggregates() : undefined;
    return { snapshots, requested: changed, removed: listed.removed, ...(aggregates ? { aggregates } : {}), token: listed.token, ...began };
  }

  private async readAggregates(): Promise<AggregateInfo[]> {
    const read = this.clock.now();
    const aggregates = (await this.store.listAggregates()).map((a) => ({ uuid: a.uuid, ...(a.name !== undefined ? { name: a.name } : {}), metadata: a.metadata }));
    this.aggregatesReadAt = read;
    return aggregates;
  }

  /** Does the snapshot show other root aggregates or aggregate metadata than the host held? */
  private aggregatesMoved(snapshot: HostSnapshot): boolean {
    const held = this.byName.get(snapshot.host.name);
    const now = snapshot.providers[0]?.aggregates ?? [];
    if (!held) return now.length > 0;
    const before = held.providers[0]?.aggregates ?? new Set<string>();
    if (before.size !== now.length || now.some((a) => !before.has(a))) return true;
    const keys = Object.keys(snapshot.aggregateMetadata);
    if (keys.length !== Object.keys(held.aggregateMetadata).length) return true;
    return keys.some((k) => held.aggregateMetadata[k] !== snapshot.aggregateMetadata[k]);
  }

  /**
   * Apply what `fetch` read. Returns how many hosts were (re)loaded and removed. A fetch begun
   * before one already applied is dropped whole (the later one read every host it lists, or
   * newer); a host changed here since the fetch began (`localChanges`) keeps what it holds and
   * is read again at the next fetch.
   */
  apply(changes: HostChanges): { loaded: number; removed: number } {
    let loaded = 0;
    let removed = 0;
    if (changes.fetch < this.appliedFetch) return { loaded, removed };
    this.appliedFetch = changes.fetch;
    if (changes.aggregates) this.aggregates = changes.aggregates;
    const seen = new Set<string>();
    for (const snapshot of changes.snapshots) {
      seen.add(snapshot.host.name);
      const held = this.byName.get(snapshot.host.name);
      // Same generation: nothing changed in the store; reloading would only drop placements
      // this scheduler counted since (claims still being written).
      if (held && held.generation === snapshot.host.generation && this.loaded) continue;
      if (held && (this.unsettled[held.slot]! > 0 || this.changedAt[held.slot]! > changes.localChangesBefore)) {
        this.recheck.add(held.name);
        continue;
      }
      this.put(snapshot);
      loaded++;
    }
    for (const name of [...changes.removed, ...changes.requested.filter((n) => !seen.has(n))]) {
      const gone = this.byName.get(name);
      if (gone) {
        this.remove(gone);
        removed++;
      }
    }
    this.loaded = true;
    this.changeToken = changes.token;
    this.updateStaleness();
    // Interned values of hosts reloaded many times pile up: start over when they outgrow the fleet.
    if (this.interner.size > 8 * this.byName.size + 10_000) this.interner.clear();
    return { loaded, removed };
  }

  /**
   * Reload the named hosts from the store now, whatever their generation (after a lost claim
   * race, a failed claim, or a rollback: the store is the truth).
   */
  async reload(names: readonly string[]): Promise<void> {
    const snapshots = await this.loadBatches(names);
    const seen = new Set<string>();
    for (const snapshot of snapshots) {
      seen.add(snapshot.host.name);
      this.put(snapshot);
      // Newer than what a fetch in flight read (see `localChanges`).
      this.changedAt[this.byName.get(snapshot.host.name)!.slot] = ++this.localChanges;
    }
    for (const name of names) {
      const gone = this.byName.get(name);
      if (gone && !seen.has(name)) this.remove(gone);
    }
  }

  private async loadBatches(names: readonly string[]): Promise<HostSnapshot[]> {
    const snapshots: HostSnapshot[] = [];
    for (let i = 0; i < names.length; i += LOAD_BATCH) snapshots.push(...(await this.store.loadHosts(names.slice(i, i + LOAD_BATCH))));
    return snapshots;
  }

  /**
   * The scheduler decided to place an instance on `host` (its claim is written next): count the
   * allocations in the providers' usages, record the instance, and let every consumer update its
   * data, so the next decision sees the placement. Returns the placement counted, to `settle`
   * once its claim is written or undone, with `problem` set when a consumer's `placed` threw (or
   * returned a promise), the reason naming the plugin and hook: that consumer no longer knows
   * the host, so the host is excluded and the caller must not claim it (fail closed) but undo
   * the placement by reloading the host.
   */
  applyPlacement(host: Host, instance: InstanceRequest, spec: RequestSpec, allocations: readonly Allocation[]): CountedPlacement {
    const hosts = [host];
    for (const allocation of allocations) {
      const provider = host.provider(allocation.providerUuid);
      if (!provider) continue;
      provider.addUsage(allocation.resourceClass, allocation.amount);
      const shared = this.sharing.get(provider.uuid);
      if (shared) {
        for (const other of shared.hosts) {
          this.touch(other);
          if (!hosts.includes(other)) hosts.push(other);
        }
      }
    }
    for (const touched of hosts) this.unsettled[touched.slot]!++;
    host.addInstance(instance.uuid);
    this.holds(instance.uuid, host);
    const placement: Placement = { host: host.name, instance, spec, allocations: allocations.map((a) => ({ ...a })) };
    let problem: string | undefined;
    this.consumers.forEach((consumer, index) => {
      const placed = consumer.hooks.placed;
      if (!placed || host.exclusion !== undefined) return;
      try {
        host.data[index] = this.callHook(consumer.name, 'placed', () => placed.call(consumer.hooks, host.data[index], placement, host));
      } catch (error) {
        // A consumer that cannot follow a placement no longer knows the host: keep it out of
        // every decision rather than decide on wrong data, until the caller reloads it.
        problem = `consumer "${consumer.name}" hook placed failed: ${messageOf(error)}`;
        host.exclusion = problem;
        this.logger?.warn({ host: host.name, plugin: consumer.name, err: error }, 'consumer placed hook failed; the host is not claimed');
      }
      this.summarize(host, consumer, index);
    });
    this.touch(host);
    return { problem, hosts };
  }

  /**
   * The claim of a placement `applyPlacement` counted is settled: written (after `acknowledge`)
   * or undone (after `reload`). Until then a refresh leaves its hosts as they are held (see
   * `localChanges`). Call it once per `applyPlacement`, whatever happened. A host reloaded
   * meanwhile keeps its slot (another object, the same name); one removed is skipped (its slot
   * may hold another host).
   */
  settle(counted: CountedPlacement): void {
    const stamp = ++this.localChanges;
    for (const host of counted.hosts) {
      if (this.slots[host.slot]?.name !== host.name) continue;
      this.unsettled[host.slot] = Math.max(0, this.unsettled[host.slot]! - 1);
      this.changedAt[host.slot] = stamp;
    }
  }

  /**
   * This scheduler's own claim was committed (`writeAllocations`' result), and its placement is
   * counted in memory already: a host whose generation the store moved from the one held, by
   * that claim alone, takes the new generation, so the next refresh does not reload it (which
   * would cost a read and drop what consumers' `placed` added). A host that another writer
   * changed too — its generation before the claim is not the one held, or the bump was shared
   * with other calls — keeps the old one, so the refresh reloads it from the store.
   */
  acknowledge(hosts: AllocationWriteResult['hosts']): void {
    for (const written of hosts) {
      const held = this.byName.get(written.name);
      if (held && !written.shared && held.generation === written.generationBefore) held.generation = written.generation;
    }
  }

  /** Hosts whose tracker stopped updating are `stale` (unless the store says disabled). */
  updateStaleness(): void {
    const now = this.clock.now();
    for (const host of this.slots) {
      if (!host) continue;
      const status = effectiveStatus(host.storedStatus, this.lastUpdates[host.slot]!, now, this.staleAfterMs);
      if (status !== host.status) {
        host.status = status;
        this.touch(host);
      }
    }
  }

  private put(snapshot: HostSnapshot): void {
    const existing = this.byName.get(snapshot.host.name);
    if (existing) this.forgetInstances(existing);
    const slot = existing ? existing.slot : (this.freeSlots.pop() ?? this.slots.length);
    // Strings equal to one already held (the root's name and uuid, parents' uuids) are shared.
    const providers: Provider[] = [];
    for (const p of snapshot.providers) {
      const parent = p.parentUuid === undefined ? undefined : providers.find((q) => q.uuid === p.parentUuid);
      providers.push(Provider.fromSnapshot(p, this.interner, parent?.uuid ?? p.parentUuid ?? undefined));
    }
    const root = providers[0];
    const name = root?.name === snapshot.host.name ? root.name : snapshot.host.name;
    const host = new Host(this.shape, {
      name,
      rootUuid: root?.uuid === snapshot.host.rootProviderUuid ? root.uuid : snapshot.host.rootProviderUuid,
      storedStatus: internStatus(snapshot.host.status),
      status: effectiveStatus(internStatus(snapshot.host.status), snapshot.host.lastUpdate, this.clock.now(), this.staleAfterMs),
      generation: snapshot.host.generation,
      providers,
      sharingProviders: NO_PROVIDERS as Provider[],
      aggregateMetadata: this.interner.record(snapshot.aggregateMetadata),
      statsCapabilities: this.statsCapabilities(snapshot),
      instances: instanceSet(snapshot.instances),
      slot,
    });
    for (const provider of providers) provider.adopt(host, this.interner);
    if (existing) this.detachSharing(existing);
    if (snapshot.sharingProviders.length > 0) host.sharingProviders = snapshot.sharingProviders.map((p) => this.attachSharing(p, host));
    if (existing === undefined) this.layout++;
    this.slots[slot] = host;
    this.setVersion(slot, ++this.stamp);
    this.lastUpdates[slot] = snapshot.host.lastUpdate;
    this.byName.set(host.name, host);
    for (const uuid of snapshot.instances) this.holds(uuid, host);
    this.consume(host, snapshot);
  }

  private consume(host: Host, snapshot: HostSnapshot): void {
    this.consumers.forEach((consumer, index) => {
      if (host.exclusion !== undefined) return;
      const stats = snapshot.stats[consumer.name];
      if (stats && !consumer.hooks.reads.includes(stats.schemaVersion)) {
        host.exclusion =
          `stats of plugin "${consumer.name}" have schema version ${stats.schemaVersion}; ` +
          `its consumer reads version(s) ${consumer.hooks.reads.join(', ') || '(none)'}`;
        return;
      }
      try {
        const data = this.callHook(consumer.name, 'consume', () => consumer.hooks.consume(stats?.data, host));
        const reason = exclusionReason(data);
        if (reason !== undefined) host.exclusion = `consumer "${consumer.name}" excluded the host: ${reason}`;
        else host.data[index] = data;
      } catch (error) {
        host.exclusion = `consumer "${consumer.name}" hook consume failed: ${messageOf(error)}`;
      }
    });
    this.consumers.forEach((consumer, index) => this.summarize(host, consumer, index));
  }

  /**
   * Publish what a consumer's `summarize` says of its data for the host (nothing known when it
   * has no such hook, the host is excluded, or the hook throws: the host is then evaluated one
   * hook call at a time).
   */
  private summarize(host: Host, consumer: ConsumerEntry, index: number): void {
    const summarize = consumer.hooks.summarize;
    if (summarize === undefined) return;
    let values: Readonly<Record<string, number>> | undefined;
    if (host.exclusion === undefined) {
      try {
        values = this.callHook(consumer.name, 'summarize', () => summarize.call(consumer.hooks, host.data[index], host));
      } catch (error) {
        this.logger?.debug({ host: host.name, plugin: consumer.name, err: error }, 'consumer summarize hook failed; the host has no summaries of it');
      }
    }
    this.summaries.publish(consumer.name, host.slot, typeof values === 'object' && values !== null ? values : undefined);
  }

  private attachSharing(snapshot: ProviderSnapshot, host: Host): Provider {
    const entry = this.sharing.get(snapshot.uuid);
    if (!entry) {
      const provider = Provider.fromSnapshot(snapshot, this.interner);
      this.sharing.set(snapshot.uuid, { provider, hosts: new Set([host]) });
      return provider;
    }
    if (snapshot.generation !== entry.provider.generation) {
      entry.provider.update(snapshot, this.interner);
      for (const other of entry.hosts) this.touch(other);
    }
    entry.hosts.add(host);
    return entry.provider;
  }

  private detachSharing(host: Host): void {
    for (const provider of host.sharingProviders) {
      const entry = this.sharing.get(provider.uuid);
      if (!entry) continue;
      entry.hosts.delete(host);
      if (entry.hosts.size === 0) this.sharing.delete(provider.uuid);
    }
  }

  private remove(host: Host): void {
    this.forgetInstances(host);
    this.detachSharing(host);
    this.byName.delete(host.name);
    this.layout++;
    this.slots[host.slot] = undefined;
    this.setVersion(host.slot, -1);
    // A claim still in flight on it settles into nothing (`settle` checks the name).
    this.unsettled[host.slot] = 0;
    this.freeSlots.push(host.slot);
  }

  private forgetInstances(host: Host): void {
    for (const uuid of host.instances) {
      const held = this.holders.get(uuid);
      if (held === host) this.holders.delete(uuid);
      else if (Array.isArray(held)) {
        const rest = held.filter((h) => h !== host);
        this.holders.set(uuid, rest.length === 1 ? rest[0]! : rest);
      }
    }
  }

  /**
   * The stats part of HostState.capabilities (see `Host.capabilities`, which adds `name` and
   * `status` on top): every plugin's stats scalar fields flattened as `<plugin>.<field>` (nested
   * objects as `<plugin>.<a>.<b>`; booleans as the strings `true`/`false`; arrays are skipped),
   * interned so hosts with the same stats share one record.
   */
  private statsCapabilities(snapshot: HostSnapshot): Readonly<Record<string, string | number>> {
    const flat: Record<string, string | number> = {};
    for (const plugin of Object.keys(snapshot.stats).sort()) {
      this.flatten(plugin, snapshot.stats[plugin]!.data, flat, 0);
    }
    return this.interner.capabilities(flat);
  }

  private flatten(prefix: string, value: JsonValue, into: Record<string, string | number>, depth: number): void {
    if (value === null || Array.isArray(value)) return;
    if (typeof value === 'object') {
      if (depth >= 4) return;
      for (const key of Object.keys(value)) this.flatten(`${prefix}.${key}`, value[key]!, into, depth + 1);
      return;
    }
    const key = this.interner.string(prefix);
    if (typeof value === 'number') into[key] = value;
    else into[key] = this.interner.string(String(value));
  }
}
