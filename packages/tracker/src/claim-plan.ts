/**
 * A claim's plan on this host, the heart of the claim path (docs/lifecycle.md): the flavor
 * parsed with the plugins' extra-spec keys; refused when it needs what an unavailable plugin
 * owns (availability.ts); every plugin's `test` (a refusal, a grant, or nothing); the grants
 * checked and turned into allocations; the rest placed on the host's tree by Placement's rules
 * (`fitRequest`). Writes nothing: tracker.ts writes the plan in one store transaction, and the
 * store checks capacity and exclusive holds again there.
 */
import type { ClaimGrant, ClaimRequest, Flavor, InstanceRequest, JsonValue, RequestSpec, ResourceRequestGroup } from '@ert/plugin-api';
import { messageOf } from '@ert/plugin-api';
import type { Allocation, HostStore, InstanceRecord, ProviderSnapshot } from '@ert/store';
import type { ActiveResource } from '@ert/core';
import { fitRequest, withGroupProviders, type FitProvider, type FitTree } from '@ert/placement';
import { formatCpuList } from '@ert/sysfs';
import type { HostDiscovery } from './discovery.js';
import { TrackerError, TrackerErrorCodes } from './errors.js';
import { dataCopy, type HostPlugins } from './host-plugins.js';
import type { PluginViews } from './plugin-views.js';
import { childProviderName } from './ids.js';
import { jsonEqual } from './tree.js';

/** A plan: what to write for the instance, or every reason it does not fit (naming plugins where one refused). */
export type ClaimPlan =
  | { ok: true; spec: RequestSpec; flavor: Flavor; allocations: Allocation[]; assignments: Record<string, JsonValue>; holds: Holds }
  | { ok: false; reasons: Array<{ plugin?: string; reason: string }> };

/** Plans claims (and resizes, moves, extensions) on this host; holds no state of its own. */
export class ClaimPlanner {
  constructor(
    private readonly plugins: HostPlugins,
    private readonly discovery: HostDiscovery,
    private readonly views: PluginViews,
  ) {}

  private get hostName(): string {
    return this.plugins.hostName;
  }

  /** Whether a claim asks `resource`'s `test`: it has one, and its discovery did not fail (what it owns is refused before: availability.ts). */
  asks(resource: ActiveResource): boolean {
    return resource.hooks.test !== undefined && !this.discovery.availability.skipsTest(resource.name);
  }

  /**
   * Call every plugin's `test` (concurrently: they are different plugins) and collect every
   * refusal, or the grants. A throw, a timeout or a result that is neither nothing, a
   * string nor a ClaimGrant refuses the claim (fail closed), naming the plugin; so does a
   * plugin whose view is unreliable (its rebuild failed: the caller rebuilds it first), which
   * is not asked.
   */
  async testAll(request: ClaimRequest): Promise<{ reasons: Array<{ plugin?: string; reason: string }>; grants: Map<string, ClaimGrant> }> {
    const validate = (result: unknown): string | undefined =>
      result === undefined || result === null || typeof result === 'string' ? undefined : grantProblem(result);
    // The grant is checked and used as one copy, taken inside the dispatched call: a getter is
    // read once, so it cannot pass the check and then answer (or throw) otherwise.
    const outcomes = await Promise.all(
      this.plugins.resources.map(async (resource) => {
        const test = resource.hooks.test;
        if (!test || !this.asks(resource)) return { plugin: resource.name, result: undefined as unknown };
        // Its answer would be about a view missing (or holding) what the store says.
        const distrust = this.views.unreliable(resource.name);
        if (distrust !== undefined) return { plugin: resource.name, error: new Error(`plugin ${resource.name} is not asked to test: its view of the instances on host ${this.hostName} could not be rebuilt from the store: ${distrust}`) };
        try {
          const result: unknown = await this.plugins.call(resource, 'test', () => test.call(resource.hooks, request), { copy: dataCopy, validate });
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
      const absent = grant.cpus?.filter((cpu) => this.discovery.online !== undefined && !this.discovery.online.has(cpu)) ?? [];
      if (absent.length > 0) {
        reasons.push({ plugin, reason: `plugin ${plugin} hook test granted cpus ${formatCpuList(absent)}, which host ${this.hostName} does not have online (${formatCpuList(this.discovery.online!)})` });
      } else if (grant.cpus !== undefined) {
        if (pinnedBy !== undefined) reasons.push({ plugin, reason: `plugins ${pinnedBy} and ${plugin} both granted cpus` });
        else {
          pinnedBy = plugin;
          cpus = [...grant.cpus].sort((a, b) => a - b);
        }
      }
      const owned = this.discovery.availability.ownedBy(plugin);
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
  async fitTree(store: HostStore, exclude: Allocation[]): Promise<{ tree: FitTree; providers: ProviderSnapshot[] }> {
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
  async place(store: HostStore, request: InstanceRequest, kind: 'claim' | 'resize', adopt: Allocation[]): Promise<ClaimPlan> {
    let spec: RequestSpec;
    try {
      spec = this.plugins.parse(request.flavor);
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
  unavailableFor(store: HostStore, spec: RequestSpec): Promise<Array<{ plugin?: string; reason: string }>> {
    return this.discovery.availability.refusals(
      spec,
      async () => {
        const [snapshot] = await store.loadHosts([this.hostName]);
        return new Set(snapshot?.providers.flatMap((p) => Object.keys(p.inventories)) ?? []);
      },
      (plugin) => this.plugins.extraSpecKeysOf(plugin),
    );
  }
}

/** What an instance holds of its host beyond amounts (see InstanceRecord). */
export type Holds = Pick<InstanceRecord, 'cpus' | 'units' | 'pools'>;

/** `record` holds exactly `holds` (fields absent from `holds` are removed). */
export function setHolds(record: InstanceRecord, holds: Holds): void {
  delete record.cpus;
  delete record.units;
  delete record.pools;
  if (holds.cpus !== undefined) record.cpus = holds.cpus;
  if (holds.units !== undefined) record.units = holds.units;
  if (holds.pools !== undefined) record.pools = holds.pools;
}

/** Grants first, then what placement placed; one entry per provider and class (amounts summed). */
export function mergeAllocations(granted: Allocation[], fitted: Allocation[]): Allocation[] {
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
export function withoutGroup(allocations: readonly Allocation[], group: ResourceRequestGroup): Allocation[] | string {
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
