import { capacityOf } from '@ert/plugin-api';
import type { HostState, HostStatus, Inventory, ProviderState, ResourceClass } from '@ert/plugin-api';
import type { ProviderSnapshot } from '@ert/store';

/*
 * Compact host states. A fleet of 100,000 hosts is held in memory, so everything that is the
 * same on many hosts (inventory records, trait and aggregate sets, aggregate metadata, the
 * empty usage record, capability strings) is interned and shared, and per-host objects hold
 * only references. Shared values are frozen, so a shared record can never be changed through
 * one host: a placement replaces a provider's `usages` record (copy on write).
 */

const EMPTY_USAGES: Readonly<Record<string, number>> = Object.freeze({});
const EMPTY_SET: ReadonlySet<string> = Object.freeze(new Set<string>()) as ReadonlySet<string>;
/** Consumer data of hosts when no consumer is configured. */
const NO_DATA: unknown[] = Object.freeze([]) as unknown as unknown[];
/** One copy of each status string (the store returns a new string per row). */
const STATUSES: Readonly<Record<string, HostStatus>> = Object.freeze({ up: 'up', stale: 'stale', disabled: 'disabled' });

/** The shared copy of a status string. */
export function internStatus(status: HostStatus): HostStatus {
  return STATUSES[status] ?? status;
}

/** The sharing providers of the many hosts that reach none. */
export const NO_PROVIDERS: readonly Provider[] = Object.freeze([]);

/** A provider's traits and aggregates, held as one interned pair (most providers share one). */
export interface ProviderTags {
  readonly traits: ReadonlySet<string>;
  readonly aggregates: ReadonlySet<string>;
}

/** Interns values by a string key so equal values share one frozen object. */
export class Interner {
  private readonly inventories = new Map<string, Readonly<Record<ResourceClass, Inventory>>>();
  private readonly sets = new Map<string, ReadonlySet<string>>();
  private readonly records = new Map<string, Readonly<Record<string, string>>>();
  private readonly strings = new Map<string, string>();
  private readonly capabilityRecords = new Map<string, Readonly<Record<string, string | number>>>();
  private readonly tagPairs = new Map<ReadonlySet<string>, Map<ReadonlySet<string>, ProviderTags>>();

  /** The shared pair of interned trait and aggregate sets. */
  tags(traits: readonly string[], aggregates: readonly string[]): ProviderTags {
    const traitSet = this.set(traits);
    const aggregateSet = this.set(aggregates);
    let byAggregates = this.tagPairs.get(traitSet);
    if (!byAggregates) {
      byAggregates = new Map();
      this.tagPairs.set(traitSet, byAggregates);
    }
    let pair = byAggregates.get(aggregateSet);
    if (!pair) {
      pair = Object.freeze({ traits: traitSet, aggregates: aggregateSet });
      byAggregates.set(aggregateSet, pair);
    }
    return pair;
  }

  /** A frozen shared copy of a flat capability record (equal records share one object). */
  capabilities(values: Record<string, string | number>): Readonly<Record<string, string | number>> {
    const key = JSON.stringify(values);
    let shared = this.capabilityRecords.get(key);
    if (!shared) {
      shared = Object.freeze({ ...values });
      this.capabilityRecords.set(key, shared);
    }
    return shared;
  }

  inventoryRecord(inventories: Record<ResourceClass, Inventory>): Readonly<Record<ResourceClass, Inventory>> {
    const classes = Object.keys(inventories).sort();
    let key = '';
    for (const rc of classes) {
      const i = inventories[rc]!;
      key += `${rc}:${i.total},${i.reserved},${i.minUnit},${i.maxUnit},${i.stepSize},${i.allocationRatio};`;
    }
    let shared = this.inventories.get(key);
    if (!shared) {
      const record: Record<ResourceClass, Inventory> = {};
      for (const rc of classes) record[rc] = Object.freeze({ ...inventories[rc]! });
      shared = Object.freeze(record);
      this.inventories.set(key, shared);
    }
    return shared;
  }

  set(values: readonly string[]): ReadonlySet<string> {
    if (values.length === 0) return EMPTY_SET;
    const key = [...values].sort().join('\n');
    let shared = this.sets.get(key);
    if (!shared) {
      shared = new Set(values.map((v) => this.string(v)));
      this.sets.set(key, shared);
    }
    return shared;
  }

  record(values: Record<string, string>): Readonly<Record<string, string>> {
    const keys = Object.keys(values).sort();
    const key = keys.map((k) => `${k}=${values[k]}`).join('\n');
    let shared = this.records.get(key);
    if (!shared) {
      const record: Record<string, string> = {};
      for (const k of keys) record[k] = values[k]!;
      shared = Object.freeze(record);
      this.records.set(key, shared);
    }
    return shared;
  }

  /** Entries held across all tables. */
  get size(): number {
    return this.inventories.size + this.sets.size + this.records.size + this.strings.size + this.capabilityRecords.size + this.tagPairs.size;
  }

  /**
   * Forget every interned value (values in use stay valid; only future sharing restarts).
   * Called when the tables outgrow the fleet, so values no host uses any more are not kept.
   */
  clear(): void {
    this.inventories.clear();
    this.sets.clear();
    this.records.clear();
    this.strings.clear();
    this.capabilityRecords.clear();
    this.tagPairs.clear();
  }

  string(value: string): string {
    const shared = this.strings.get(value);
    if (shared !== undefined) return shared;
    this.strings.set(value, value);
    return value;
  }
}

/** One provider as the scheduler holds it. `usages` is replaced (never mutated) on change. */
export class Provider implements ProviderState {
  usages: Readonly<Record<ResourceClass, number>>;
  /**
   * The provider's name, or — once `adopt`ed by the host it belongs to — only what follows
   * `<host>_` ('' for the root), so the many `<host>_llc_0` names are not each held as a string.
   */
  private label: string;
  private owner: { readonly name: string } | undefined;

  constructor(
    readonly uuid: string,
    name: string,
    readonly parentUuid: string | undefined,
    public generation: number,
    public inventories: Readonly<Record<ResourceClass, Inventory>>,
    usages: Record<ResourceClass, number>,
    private tags: ProviderTags,
  ) {
    this.label = name;
    this.owner = undefined;
    this.usages = hasUsage(usages) ? usages : EMPTY_USAGES;
  }

  get traits(): ReadonlySet<string> {
    return this.tags.traits;
  }

  get aggregates(): ReadonlySet<string> {
    return this.tags.aggregates;
  }

  get name(): string {
    const owner = this.owner;
    if (owner === undefined) return this.label;
    return this.label === '' ? owner.name : `${owner.name}_${this.label}`;
  }

  /** Derive the name from the host's when it is the host's or `<host>_<key>` (the tracker's naming). */
  adopt(host: { readonly name: string }, interner: Interner): void {
    const name = this.name;
    if (name === host.name) this.label = '';
    else if (name.startsWith(`${host.name}_`)) this.label = interner.string(name.slice(host.name.length + 1));
    else return;
    this.owner = host;
  }

  /** `parentUuid` may be passed to share the parent's uuid string instead of holding a copy. */
  static fromSnapshot(snapshot: ProviderSnapshot, interner: Interner, parentUuid = snapshot.parentUuid ?? undefined): Provider {
    return new Provider(
      snapshot.uuid,
      snapshot.name,
      parentUuid,
      snapshot.generation,
      interner.inventoryRecord(snapshot.inventories),
      snapshot.usages,
      interner.tags(snapshot.traits, snapshot.aggregates),
    );
  }

  /** Replace inventories, usages, traits and aggregates with a newer snapshot's. */
  update(snapshot: ProviderSnapshot, interner: Interner): void {
    this.generation = snapshot.generation;
    this.inventories = interner.inventoryRecord(snapshot.inventories);
    this.usages = hasUsage(snapshot.usages) ? snapshot.usages : EMPTY_USAGES;
    this.tags = interner.tags(snapshot.traits, snapshot.aggregates);
  }

  /** Count `amount` more of `resourceClass` as used (copy on write of `usages`). */
  addUsage(resourceClass: ResourceClass, amount: number): void {
    this.usages = { ...this.usages, [resourceClass]: (this.usages[resourceClass] ?? 0) + amount };
  }

  /** Capacity minus usage of one class, 0 when the provider has no such inventory. */
  free(resourceClass: ResourceClass): number {
    const inventory = this.inventories[resourceClass];
    if (!inventory) return 0;
    return Math.max(capacityOf(inventory) - (this.usages[resourceClass] ?? 0), 0);
  }
}

function hasUsage(usages: Record<string, number>): boolean {
  for (const rc in usages) if (usages[rc] !== 0) return true;
  return false;
}

/** What every host of one scheduler shares: which slot of `data` belongs to which consumer. */
export interface HostShape {
  readonly consumerIndex: ReadonlyMap<string, number>;
}

/**
 * The scheduler's HostState. Its version (`HostManager.versions[slot]`) is a scheduler-wide stamp
 * that changes whenever anything a filter or weigher can see changes (placement, reload, status,
 * a shared provider's usage), so results memoised per (request, host) stay exact. `exclusion` is
 * set when a consumer plugin kept the host out of every decision.
 */
export class Host implements HostState {
  name: string;
  rootUuid: string;
  status: HostStatus;
  /** The store's generation of the host (what `hostGenerations` reports). */
  generation: number;
  /** Epoch ms of the tracker's last update (for staleness). */
  /** Status as recorded in the store; `status` may say `stale` on top of it. */
  storedStatus: HostStatus;
  providers: readonly Provider[];
  sharingProviders: readonly Provider[];
  aggregateMetadata: Readonly<Record<string, string>>;
  /** The plugins' stats fields part of `capabilities`, interned (see HostManager). */
  statsCapabilities: Readonly<Record<string, string | number>>;
  instances: ReadonlySet<string>;
  /** Consumer data by consumer index (see HostShape). */
  data: unknown[];
  exclusion: string | undefined;
  /** Index in the scheduler's host table; stable while the host exists. */
  slot: number;

  constructor(
    readonly shape: HostShape,
    init: {
      name: string;
      rootUuid: string;
      status: HostStatus;
      storedStatus: HostStatus;
      generation: number;
      providers: Provider[];
      sharingProviders: Provider[];
      aggregateMetadata: Readonly<Record<string, string>>;
      statsCapabilities: Readonly<Record<string, string | number>>;
      instances: ReadonlySet<string>;
      slot: number;
    },
  ) {
    this.name = init.name;
    this.rootUuid = init.rootUuid;
    this.status = init.status;
    this.storedStatus = init.storedStatus;
    this.generation = init.generation;
    this.providers = init.providers;
    this.sharingProviders = init.sharingProviders;
    this.aggregateMetadata = init.aggregateMetadata;
    this.statsCapabilities = init.statsCapabilities;
    this.instances = init.instances;
    this.data = shape.consumerIndex.size === 0 ? NO_DATA : new Array<unknown>(shape.consumerIndex.size);
    this.exclusion = undefined;
    this.slot = init.slot;
  }

  /**
   * `name` and `status` of the host on top of its stats fields (the prototype). Made on each
   * read, which only the `capabilities` filter does, rather than held for every host.
   */
  get capabilities(): Readonly<Record<string, string | number>> {
    const capabilities = Object.create(this.statsCapabilities) as Record<string, string | number>;
    capabilities.name = this.name;
    capabilities.status = this.status;
    return capabilities;
  }

  free(resourceClass: ResourceClass): number {
    let free = 0;
    for (const provider of this.providers) free += provider.free(resourceClass);
    return free;
  }

  pluginData<T>(plugin: string): T | undefined {
    const index = this.shape.consumerIndex.get(plugin);
    return index === undefined ? undefined : (this.data[index] as T | undefined);
  }

  /** The provider of this host's tree or its sharing providers with that uuid. */
  provider(uuid: string): Provider | undefined {
    for (const p of this.providers) if (p.uuid === uuid) return p;
    for (const p of this.sharingProviders) if (p.uuid === uuid) return p;
    return undefined;
  }

  /** Record an instance on the host (copy on write: the empty set is shared). */
  addInstance(uuid: string): void {
    const next = new Set(this.instances);
    next.add(uuid);
    this.instances = next;
  }
}

/** A frozen set of instance uuids, shared when empty. */
export function instanceSet(uuids: readonly string[]): ReadonlySet<string> {
  return uuids.length === 0 ? EMPTY_SET : new Set(uuids);
}
