import { capacityOf, inventoryProblem, messageOf, type Inventory, type JsonValue, type ResourceClass, type TunableInventoryField } from '@ert/plugin-api';
import type { ActiveResource } from '@ert/core';
import { TRACKER_OWNER, isStoreConflict, isStoreError, isStoreUnavailable, type HostStore } from '@ert/store';
import { codeOf, problemFrom } from './problems.js';
import { jsonEqual, type DesiredProvider } from './tree.js';
import type { Problem } from './types.js';

/*
 * The store side of a host's sync: the tracker's providers, inventories, traits, aggregates
 * and stats brought to what was discovered, and the providers nothing reports any more
 * retired; what other writers set is left alone (docs/ownership.md). The tracker (tracker.ts)
 * decides when, under its lock; this module decides what is written.
 */

const STORE_INVENTORY_IN_USE = 'ERT_STORE_INVENTORY_IN_USE';
const STORE_PROVIDER_IN_USE = 'ERT_STORE_PROVIDER_IN_USE';
const RETRIABLE = new Set(['ERT_STORE_PROVIDER_GENERATION_CONFLICT', 'ERT_STORE_CONSUMER_GENERATION_CONFLICT', 'ERT_STORE_CONFLICT']);
/** How often a write that lost a generation race is re-read and retried. */
const WRITE_ATTEMPTS = 4;
/** A provider config file's class: both fields are the file's (or Placement's defaults). */
const TUNABLE_FIELDS: ReadonlySet<TunableInventoryField> = new Set<TunableInventoryField>(['allocationRatio', 'reserved']);

/**
 * Nova's rule for allocation ratio and reserved (`initial_*_allocation_ratio` versus
 * `*_allocation_ratio`; docs/ownership.md): a class already in the store keeps its stored
 * `allocationRatio` and `reserved` unless `explicit` names the field for that class; total,
 * minUnit, maxUnit and stepSize are always `wanted`'s. A kept value that no longer fits
 * (reserved above a total that shrank) gives way to `wanted`'s; a stored ratio of 0 fits.
 */
export function keepTunedFields(
  wanted: Record<ResourceClass, Inventory>,
  stored: Record<ResourceClass, Inventory>,
  explicit: Record<ResourceClass, ReadonlySet<TunableInventoryField>>,
): Record<ResourceClass, Inventory> {
  const target: Record<ResourceClass, Inventory> = {};
  for (const [resourceClass, inventory] of Object.entries(wanted)) {
    const before = stored[resourceClass];
    const fields = explicit[resourceClass];
    if (!before) {
      target[resourceClass] = inventory;
      continue;
    }
    const merged: Inventory = { ...inventory };
    if (!fields?.has('allocationRatio')) merged.allocationRatio = before.allocationRatio;
    if (!fields?.has('reserved')) merged.reserved = before.reserved;
    // A stored ratio of 0 (capacity 0: Placement's from 1.26, the store's) is kept like any other.
    target[resourceClass] = inventoryProblem(merged, { zeroRatio: true }) === undefined ? merged : inventory;
  }
  return target;
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const sa = new Set(a);
  return sa.size === new Set(b).size && b.every((x) => sa.has(x));
}

/** What the reconciler needs of its host's tracker. */
export interface ReconcileHost {
  readonly hostName: string;
  readonly rootUuid: string;
  /** The resource plugins loaded (their `inventoryFields`). */
  resources(): readonly ActiveResource[];
  /** `plugins.<name>` as the config file has it (options as written, not defaulted). */
  readonly pluginOptions: Readonly<Record<string, unknown>>;
}

/** Writes one host's share of the provider tree and its stats (see the top of this file). */
export class StoreReconciler {
  constructor(private readonly host: ReconcileHost) {}

  /**
   * Create the provider if missing (owned by the tracker), then bring the inventories and
   * traits the tracker owns on it to what was discovered; other writers' are left alone
   * (docs/ownership.md).
   */
  async reconcileProvider(store: HostStore, provider: DesiredProvider, changes: string[], problems: Problem[]): Promise<void> {
    const existing = await store.getProvider(provider.uuid);
    if (!existing) {
      const clash = await store.getProviderByName(provider.name);
      if (clash) {
        problems.push({ code: 'ERT_STORE_CONFLICT', message: `provider name ${provider.name} is taken by ${clash.uuid} (expected ${provider.uuid}); left alone`, provider: provider.name });
        return;
      }
      await store.createProvider({ uuid: provider.uuid, name: provider.name, ...(provider.parentUuid ? { parentUuid: provider.parentUuid } : {}), owner: TRACKER_OWNER });
      changes.push(`created provider ${provider.name}`);
    }
    await this.writeInventories(store, provider.uuid, provider.name, provider.inventories, changes, problems, this.explicitFields(provider));
    await this.withRetries(async () => {
      const traits = await store.getTraits(provider.uuid, { owner: TRACKER_OWNER });
      if (sameSet(traits, provider.traits)) return;
      const record = await store.getProvider(provider.uuid);
      await store.setTraits(provider.uuid, record!.generation, provider.traits, { owner: TRACKER_OWNER });
      changes.push(`traits of ${provider.name}: ${[...provider.traits].sort().join(', ') || '(none)'}`);
    });
    // Provider config files' aggregates: the tracker owns the memberships they name, and
    // only those (an operator's or the API's stay; one a file stops naming leaves).
    await this.withRetries(async () => {
      const current = await store.getAggregates(provider.uuid, { owner: TRACKER_OWNER });
      if (sameSet(current, provider.aggregates)) return;
      const record = await store.getProvider(provider.uuid);
      await store.setAggregates(provider.uuid, record!.generation, provider.aggregates, { owner: TRACKER_OWNER });
      changes.push(`aggregates of ${provider.name}: ${[...provider.aggregates].sort().join(', ') || '(none)'}`);
    });
  }

  /**
   * The `allocationRatio` / `reserved` fields of the provider's classes that the config sets
   * explicitly (docs/ownership.md, "Allocation ratio and reserved"): for a plugin's class,
   * its `inventoryFields.fixed` ones and those of its `inventoryFields.fromOptions` keys
   * written in `plugins.<name>` as the config file has it (the config keeps options as
   * written; defaults are applied to a copy); for a provider config file's class, both
   * (Nova applies provider config files on every update). The others are kept as stored.
   */
  private explicitFields(provider: DesiredProvider): Record<ResourceClass, ReadonlySet<TunableInventoryField>> {
    const explicit: Record<ResourceClass, ReadonlySet<TunableInventoryField>> = {};
    for (const [resourceClass, owner] of Object.entries(provider.owners)) {
      const resource = this.host.resources().find((r) => r.name === owner);
      if (!resource) {
        explicit[resourceClass] = TUNABLE_FIELDS;
        continue;
      }
      const fields = new Set<TunableInventoryField>(resource.plugin.inventoryFields?.fixed?.[resourceClass] ?? []);
      const written = this.host.pluginOptions[owner];
      for (const [key, byClass] of Object.entries(resource.plugin.inventoryFields?.fromOptions ?? {})) {
        if (typeof written !== 'object' || written === null || (written as Record<string, unknown>)[key] === undefined) continue;
        for (const field of byClass[resourceClass] ?? []) fields.add(field);
      }
      explicit[resourceClass] = fields;
    }
    return explicit;
  }

  /**
   * Write `wanted` as the tracker's inventories of the provider when they differ from the
   * store's (other writers' classes are kept by the store). A class already in the store
   * keeps its stored `allocationRatio` and `reserved` (an API write persists) unless
   * `explicit` names the field for it (`keepTunedFields`). Inventory the store refuses to
   * drop or shrink because allocations use it (ERT_STORE_INVENTORY_IN_USE) is kept as it
   * was, and reported.
   */
  private async writeInventories(
    store: HostStore,
    uuid: string,
    name: string,
    wanted: Record<ResourceClass, Inventory>,
    changes: string[],
    problems: Problem[],
    explicit: Record<ResourceClass, ReadonlySet<TunableInventoryField>> = {},
  ): Promise<void> {
    const kept: Record<ResourceClass, Inventory> = {};
    for (let attempt = 1; ; attempt++) {
      // Every class of the provider (a class another writer created first is kept as it is
      // when the tracker adopts it), then the tracker's own, at the same generation.
      const stored = await store.getInventories(uuid);
      const { generation, inventories: current } = await store.getInventories(uuid, { owner: TRACKER_OWNER });
      if (generation !== stored.generation && attempt < WRITE_ATTEMPTS) continue;
      const target = { ...keepTunedFields(wanted, stored.inventories, explicit), ...kept };
      if (jsonEqual(current, target)) return;
      try {
        await store.setInventories(uuid, generation, target, { owner: TRACKER_OWNER });
        const touched = [...new Set([...Object.keys(current), ...Object.keys(target)])].filter((c) => !jsonEqual(current[c], target[c]));
        changes.push(`inventories of ${name}: ${touched.sort().join(', ')}`);
        return;
      } catch (err) {
        if (attempt >= WRITE_ATTEMPTS) throw err;
        if (codeOf(err) === STORE_INVENTORY_IN_USE) {
          const usages = await store.getUsages(uuid);
          for (const [resourceClass, inventory] of Object.entries(current)) {
            const used = usages[resourceClass] ?? 0;
            const next = target[resourceClass];
            if (used > 0 && (next === undefined || capacityOf(next) < used) && !(resourceClass in kept)) {
              kept[resourceClass] = inventory;
              problems.push({
                code: STORE_INVENTORY_IN_USE,
                message: `provider ${name}: ${resourceClass} ${next === undefined ? 'is no longer reported' : `would shrink to capacity ${capacityOf(next)}`} but ${used} is allocated; kept the old inventory`,
                provider: name,
                resourceClass,
              });
            }
          }
          continue;
        }
        if (RETRIABLE.has(codeOf(err) ?? '')) continue;
        throw err;
      }
    }
  }

  /**
   * Empty, then delete, the providers the tracker created in this host's tree that nothing
   * reports any more (children first). Providers other writers created (Neutron's bandwidth
   * providers, an operator's) are never touched, nor is a retired provider that still holds
   * another writer's inventory or children (reported).
   */
  async retireProviders(store: HostStore, desired: DesiredProvider[], changes: string[], problems: Problem[]): Promise<void> {
    const wanted = new Set(desired.map((p) => p.uuid));
    const tree = await store.listProviders({ rootUuid: this.host.rootUuid });
    const depth = (uuid: string | undefined): number => {
      let d = 0;
      for (let p = tree.find((t) => t.uuid === uuid); p?.parentUuid; p = tree.find((t) => t.uuid === p!.parentUuid)) d++;
      return d;
    };
    const retired = tree.filter((p) => !wanted.has(p.uuid) && p.owner === TRACKER_OWNER).sort((a, b) => depth(b.uuid) - depth(a.uuid));
    for (const provider of retired) {
      const before = problems.length;
      await this.writeInventories(store, provider.uuid, provider.name, {}, changes, problems);
      if (problems.length > before) continue; // allocations still use it
      const others = Object.keys((await store.getInventories(provider.uuid)).inventories);
      if (others.length > 0) {
        problems.push({
          code: STORE_PROVIDER_IN_USE,
          message: `provider ${provider.name} is no longer reported but holds inventories another writer set (${others.sort().join(', ')}); kept`,
          provider: provider.name,
        });
        continue;
      }
      try {
        await store.deleteProvider(provider.uuid);
        changes.push(`deleted provider ${provider.name}`);
      } catch (err) {
        if (codeOf(err) !== STORE_PROVIDER_IN_USE) throw err;
        problems.push(problemFrom(err, { provider: provider.name }));
      }
    }
  }

  /**
   * Write the plugins' stats that changed, and expire those this round did not renew
   * (`available`: the plugins available this round, for the reason given). A plugin's stats
   * the store refuses (a value it cannot hold, a request over the agent API's body limit) are
   * a problem naming the plugin, and expire like refused stats; the other plugins' are
   * written. An unreachable, locked store or a lost race throws (the old stats stay).
   */
  async writeStats(
    store: HostStore,
    reports: Map<string, { stats?: { schemaVersion: number; data: JsonValue }; statsProblem?: Problem }>,
    changes: string[],
    available: ReadonlySet<string>,
    problems: Problem[],
  ): Promise<void> {
    const current = await store.readStats(this.host.hostName);
    const unwritten = new Map<string, string>();
    for (const [plugin, { stats }] of reports) {
      if (!stats) continue;
      const old = current[plugin];
      if (old && old.schemaVersion === stats.schemaVersion && jsonEqual(old.data, stats.data)) continue;
      try {
        await store.writeStats(this.host.hostName, plugin, stats.schemaVersion, stats.data);
        changes.push(`stats of ${plugin}`);
      } catch (err) {
        // The store's state, not the stats': thrown for the update to be tried again, the old
        // stats kept meanwhile (a race lost, a lock held, the store unreachable).
        if (isStoreUnavailable(err) || isStoreConflict(err) || (isStoreError(err) && err.code === 'ERT_STORE_LOCKED')) throw err;
        const message = `stats of plugin ${plugin} could not be written: ${messageOf(err)}`;
        problems.push({ ...problemFrom(err, { plugin }), message });
        unwritten.set(plugin, message);
      }
    }
    // Stats this round did not renew (the plugin is unavailable, its stats failed or could not
    // be written, or it is not configured any more) expire: a scheduler must not place by what
    // the host no longer says.
    for (const plugin of Object.keys(current)) {
      if (reports.get(plugin)?.stats !== undefined && !unwritten.has(plugin)) continue;
      if (await store.deleteStats(this.host.hostName, plugin)) changes.push(`stats of ${plugin} expired (${unwritten.get(plugin) ?? this.statsGoneReason(plugin, reports, available)})`);
    }
  }

  private statsGoneReason(plugin: string, reports: Map<string, { statsProblem?: Problem }>, available: ReadonlySet<string>): string {
    const problem = reports.get(plugin)?.statsProblem;
    if (problem) return `its stats failed: ${problem.message}`;
    if (!this.host.resources().some((r) => r.name === plugin)) return 'the plugin is not configured';
    return available.has(plugin) ? 'the plugin reports no stats' : 'the plugin is unavailable';
  }

  private async withRetries(fn: () => Promise<void>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (attempt >= WRITE_ATTEMPTS || !RETRIABLE.has(codeOf(err) ?? '')) throw err;
      }
    }
  }
}
