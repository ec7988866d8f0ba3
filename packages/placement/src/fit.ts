import {
  amountProblem,
  capacityOf,
  TRAIT_SHARING_PROVIDER,
  type Inventory,
  type RequestGroup,
  type RequestSpec,
  type ResourceClass,
} from '@ert/plugin-api';

/**
 * One provider as the fitting rules see it. The contract's `ProviderState` (and so every
 * entry of `HostState.providers`) satisfies it.
 */
export interface FitProvider {
  readonly uuid: string;
  readonly name: string;
  /** Undefined for a root provider (the host, or a sharing provider). */
  readonly parentUuid?: string | undefined;
  readonly inventories: Readonly<Record<ResourceClass, Inventory>>;
  /** Amount in use per class, every consumer included. */
  readonly usages: Readonly<Record<ResourceClass, number>>;
  readonly traits: ReadonlySet<string>;
  readonly aggregates: ReadonlySet<string>;
}

/**
 * A host's provider tree: `providers` root first, then nested ones in tree order (parents
 * before children), as `HostState.providers` lists them; `sharingProviders` are the
 * candidates from outside the tree (only those with MISC_SHARES_VIA_AGGREGATE that share
 * an aggregate with a provider of the tree are used, so callers may pass a superset).
 */
export interface FitTree {
  readonly providers: readonly FitProvider[];
  readonly sharingProviders?: readonly FitProvider[];
}

/** `amount` of `resourceClass` on provider `providerUuid` (the store's `Allocation` shape). */
export interface FitAllocation {
  providerUuid: string;
  resourceClass: ResourceClass;
  amount: number;
}

export type FitResult = { ok: true; allocations: FitAllocation[] } | { ok: false; reason: string };

export interface FitOptions {
  /**
   * Allocations already decided (by plugins' `ClaimGrant.allocations`, resolved to uuids).
   * They count as used on their providers, their classes are taken out of the unnumbered
   * group, and their providers count as "used by the unnumbered group" for its traits.
   * They are not repeated in the result.
   */
  preallocated?: readonly FitAllocation[];
}

/** What must be placed as one unit: one class of the unnumbered group, or a whole numbered group. */
interface Demand {
  readonly group: RequestGroup;
  readonly numbered: boolean;
  readonly classes: readonly ResourceClass[];
  readonly amounts: readonly number[];
}

interface CompiledRequest {
  readonly demands: readonly Demand[];
  readonly unnumbered: RequestGroup;
  readonly isolate: boolean;
}

const NO_PROVIDERS: readonly FitProvider[] = [];
const NO_ALLOCATIONS: readonly FitAllocation[] = [];
const EMPTY_GROUP: RequestGroup = { suffix: '', resources: {}, requiredTraits: [], forbiddenTraits: [], memberOf: [] };

// The scheduler fits one spec against thousands of hosts: compile it once.
const compiledSpecs = new WeakMap<RequestSpec, CompiledRequest>();

function compile(spec: RequestSpec, removed: ReadonlySet<string> | undefined): CompiledRequest {
  if (removed === undefined) {
    const cached = compiledSpecs.get(spec);
    if (cached !== undefined) return cached;
  }
  const unnumbered = spec.groups[0] ?? EMPTY_GROUP;
  const demands: Demand[] = [];
  for (const resourceClass in unnumbered.resources) {
    const amount = unnumbered.resources[resourceClass]!;
    if (amount > 0 && !removed?.has(resourceClass)) demands.push({ group: unnumbered, numbered: false, classes: [resourceClass], amounts: [amount] });
  }
  for (let g = 1; g < spec.groups.length; g++) {
    const group = spec.groups[g]!;
    const classes = Object.keys(group.resources).filter((c) => group.resources[c]! > 0);
    if (classes.length > 0) demands.push({ group, numbered: true, classes, amounts: classes.map((c) => group.resources[c]!) });
  }
  const compiled: CompiledRequest = { demands, unnumbered, isolate: spec.groupPolicy === 'isolate' };
  if (removed === undefined) compiledSpecs.set(spec, compiled);
  return compiled;
}

/** Label of a group in reasons: the extra-spec prefix that wrote it. */
function groupLabel(group: RequestGroup): string {
  return `resources${group.suffix}`;
}

/** State of one fitRequest call: the candidate providers and the search. */
class Search {
  /** Tree providers (root first) followed by the usable sharing providers. */
  readonly candidates: readonly FitProvider[];
  /** How many of `candidates` are the tree's own (the rest are sharing providers). */
  readonly treeSize: number;
  readonly root: FitProvider | undefined;
  /** Provider index per demand; -1 while unassigned. */
  readonly assignment: number[];
  /** Extra usage from preallocated amounts, by candidate index and class (allocated only when needed). */
  preUsed: Array<Record<string, number> | undefined> | undefined;
  readonly preProviders: number[] = [];

  constructor(
    readonly tree: FitTree,
    readonly request: CompiledRequest,
  ) {
    const providers = tree.providers;
    const first = providers[0];
    this.root = first === undefined || first.parentUuid === undefined ? first : (providers.find((p) => p.parentUuid === undefined) ?? first);
    const sharing = usableSharingProviders(tree);
    this.candidates = sharing.length === 0 ? providers : [...providers, ...sharing];
    this.treeSize = providers.length;
    this.assignment = new Array<number>(request.demands.length).fill(-1);
  }

  /** Root of candidate `p`: the tree's root, or a sharing provider itself. */
  rootOf(p: number): FitProvider {
    return p < this.treeSize && this.root !== undefined ? this.root : this.candidates[p]!;
  }

  /** Used amount of `resourceClass` on candidate `p`, plus what demands before `upto` and preallocations put there. */
  used(p: number, resourceClass: ResourceClass, upto: number): number {
    let used = this.candidates[p]!.usages[resourceClass] ?? 0;
    const pre = this.preUsed?.[p];
    if (pre !== undefined) used += pre[resourceClass] ?? 0;
    const demands = this.request.demands;
    for (let j = 0; j < upto; j++) {
      if (this.assignment[j] !== p) continue;
      const d = demands[j]!;
      for (let k = 0; k < d.classes.length; k++) if (d.classes[k] === resourceClass) used += d.amounts[k]!;
    }
    return used;
  }

  /** Does candidate `p` meet the group's member_of (it or its root in one aggregate of each list)? */
  memberOk(p: number, group: RequestGroup): boolean {
    const lists = group.memberOf;
    if (lists.length === 0) return true;
    const provider = this.candidates[p]!;
    const root = this.rootOf(p);
    return lists.every((any) => any.some((agg) => provider.aggregates.has(agg) || root.aggregates.has(agg)));
  }

  /** Static eligibility of candidate `p` for demand `d` (traits, member_of, inventory present). */
  eligible(p: number, d: Demand): boolean {
    const provider = this.candidates[p]!;
    for (const c of d.classes) if (provider.inventories[c] === undefined) return false;
    const group = d.group;
    for (const t of group.forbiddenTraits) if (provider.traits.has(t)) return false;
    // Required traits of a numbered group are the provider's own; the unnumbered group's are checked on the union.
    if (d.numbered) for (const t of group.requiredTraits) if (!provider.traits.has(t)) return false;
    return this.memberOk(p, group);
  }

  /** Can demand `i` go on candidate `p`, given demands 0..i-1 already placed? */
  fits(i: number, p: number): boolean {
    const d = this.request.demands[i]!;
    if (!this.eligible(p, d)) return false;
    if (d.numbered && this.request.isolate) {
      for (let j = 0; j < i; j++) if (this.assignment[j] === p && this.request.demands[j]!.numbered) return false;
    }
    const provider = this.candidates[p]!;
    for (let k = 0; k < d.classes.length; k++) {
      const c = d.classes[k]!;
      if (amountProblem(provider.inventories[c]!, this.used(p, c, i), d.amounts[k]!) !== undefined) return false;
    }
    return true;
  }

  /**
   * True when every demand, taken alone, fits some provider (a necessary condition). Call
   * before `place`: with nothing assigned yet, `fits` sees no other demand.
   */
  eachDemandFitsSomewhere(): boolean {
    for (let i = 0; i < this.assignment.length; i++) {
      let found = false;
      for (let p = 0; p < this.candidates.length && !found; p++) found = this.fits(i, p);
      if (!found) return false;
    }
    return true;
  }

  /** Depth-first over demands in order, providers in candidate order: the first full assignment wins. */
  place(i: number): boolean {
    if (i === this.assignment.length) return this.unnumberedTraitsOk();
    for (let p = 0; p < this.candidates.length; p++) {
      if (!this.fits(i, p)) continue;
      this.assignment[i] = p;
      if (this.place(i + 1)) return true;
    }
    this.assignment[i] = -1;
    return false;
  }

  /** Providers the unnumbered group uses (its demands and the preallocations). */
  unnumberedProviders(): number[] {
    const used = [...this.preProviders];
    const demands = this.request.demands;
    for (let i = 0; i < demands.length; i++) {
      if (!demands[i]!.numbered && !used.includes(this.assignment[i]!)) used.push(this.assignment[i]!);
    }
    return used;
  }

  /**
   * Required traits of the unnumbered group must be on the providers it uses, together;
   * forbidden ones on none (already pruned per provider for its demands, checked here
   * for preallocations). With nothing to place, the root stands in (for member_of too).
   */
  unnumberedTraitsOk(): boolean {
    const group = this.request.unnumbered;
    if (group.requiredTraits.length === 0 && group.forbiddenTraits.length === 0 && group.memberOf.length === 0 && this.preProviders.length === 0) return true;
    // The common case (one provider used, all traits there) without building the reason.
    if (this.preProviders.length === 0 && group.forbiddenTraits.length === 0 && group.memberOf.length === 0) {
      const demands = this.request.demands;
      let only = -1;
      for (let i = 0; i < demands.length; i++) {
        if (demands[i]!.numbered) continue;
        if (only === -1) only = this.assignment[i]!;
        else if (only !== this.assignment[i]) return this.unnumberedTraitProblem() === undefined;
      }
      const provider = only === -1 ? this.root : this.candidates[only];
      return provider !== undefined && group.requiredTraits.every((t) => provider.traits.has(t));
    }
    return this.unnumberedTraitProblem() === undefined;
  }

  unnumberedTraitProblem(): string | undefined {
    const group = this.request.unnumbered;
    const used = this.unnumberedProviders().map((p) => this.candidates[p]!);
    const providers = used.length > 0 ? used : this.root === undefined ? [] : [this.root];
    const names = providers.map((p) => p.name).join(', ') || 'no provider';
    const missing = group.requiredTraits.filter((t) => !providers.some((p) => p.traits.has(t)));
    if (missing.length > 0) return `required trait(s) ${missing.join(', ')} not on ${names}`;
    const forbidden = group.forbiddenTraits.filter((t) => providers.some((p) => p.traits.has(t)));
    if (forbidden.length > 0) return `forbidden trait(s) ${forbidden.join(', ')} on ${names}`;
    // Providers placing resources passed member_of in `eligible`; a root standing in is checked here.
    if (used.length === 0 && this.root !== undefined) {
      const root = this.root;
      const outside = group.memberOf.find((any) => !any.some((agg) => root.aggregates.has(agg)));
      if (outside !== undefined) return `${root.name} is not in member_of in:${outside.join(',')}`;
    }
    return undefined;
  }

  /** The concrete allocations of the current assignment, one entry per provider and class. */
  allocations(): FitAllocation[] {
    const out: FitAllocation[] = [];
    const demands = this.request.demands;
    for (let i = 0; i < demands.length; i++) {
      const d = demands[i]!;
      const providerUuid = this.candidates[this.assignment[i]!]!.uuid;
      for (let k = 0; k < d.classes.length; k++) {
        const resourceClass = d.classes[k]!;
        const same = out.find((a) => a.providerUuid === providerUuid && a.resourceClass === resourceClass);
        if (same !== undefined) same.amount += d.amounts[k]!;
        else out.push({ providerUuid, resourceClass, amount: d.amounts[k]! });
      }
    }
    return out;
  }
}

/**
 * Sharing providers that may serve this tree: they carry MISC_SHARES_VIA_AGGREGATE, are
 * not in the tree, and share an aggregate with a provider of the tree (Placement's anchors).
 */
function usableSharingProviders(tree: FitTree): readonly FitProvider[] {
  const sharing = tree.sharingProviders;
  if (sharing === undefined || sharing.length === 0) return NO_PROVIDERS;
  const inTree = new Set(tree.providers.map((p) => p.uuid));
  return sharing.filter(
    (s) =>
      !inTree.has(s.uuid) &&
      s.traits.has(TRAIT_SHARING_PROVIDER) &&
      [...s.aggregates].some((agg) => tree.providers.some((p) => p.aggregates.has(agg))),
  );
}

/**
 * Can this host's tree (plus its sharing providers) satisfy `spec`, by Placement's
 * allocation-candidate rules?
 *
 * - each class of the unnumbered group takes its whole amount from one provider; classes
 *   may come from different providers; its required traits must be on the providers it
 *   uses, together (on the root when it places nothing), its forbidden traits on none;
 * - a numbered group puts all its classes on one provider having its required traits and
 *   none of its forbidden ones; with group_policy=isolate numbered groups use different
 *   providers; amounts of several groups on one provider add up against its capacity;
 * - member_of: a provider matches when it or its root is in one of the aggregates;
 * - every amount obeys the inventory's min_unit, max_unit, step_size and capacity
 *   (`amountProblem`).
 *
 * Returns the allocations of the first assignment found, trying groups in spec order
 * (the unnumbered group's classes first) and providers root first, then tree order, then
 * sharing providers (deterministic for equal input), with one entry per provider and
 * class; or the reason naming the group and class that failed. Pure; never throws for
 * a well-formed spec.
 */
export function fitRequest(spec: RequestSpec, tree: FitTree, opts?: FitOptions): FitResult {
  const preallocated = opts?.preallocated ?? NO_ALLOCATIONS;
  const removed = preallocated.length > 0 ? new Set(preallocated.map((a) => a.resourceClass)) : undefined;
  const search = new Search(tree, compile(spec, removed));

  const preProblem = applyPreallocated(search, preallocated);
  if (preProblem !== undefined) return { ok: false, reason: preProblem };
  // With several providers the search can branch; a demand that fits nowhere on its own
  // (the usual "host too full") is found in linear time first.
  if (search.candidates.length > 1 && !search.eachDemandFitsSomewhere()) return { ok: false, reason: explainFailure(search) };
  if (search.place(0)) return { ok: true, allocations: search.allocations() };
  return { ok: false, reason: explainFailure(search) };
}

/** Count preallocated amounts as used; a reason when one does not fit or names an unknown provider. */
function applyPreallocated(search: Search, preallocated: readonly FitAllocation[]): string | undefined {
  for (const a of preallocated) {
    const p = search.candidates.findIndex((c) => c.uuid === a.providerUuid);
    if (p < 0) return `preallocated ${a.amount} ${a.resourceClass}: provider ${a.providerUuid} is not in the tree or its sharing providers`;
    const provider = search.candidates[p]!;
    const inventory = provider.inventories[a.resourceClass];
    if (inventory === undefined) return `preallocated ${a.amount} ${a.resourceClass}: ${provider.name} has no ${a.resourceClass} inventory`;
    const problem = amountProblem(inventory, search.used(p, a.resourceClass, 0), a.amount);
    if (problem !== undefined) return `preallocated ${a.resourceClass} on ${provider.name}: ${problem}`;
    search.preUsed ??= new Array<Record<string, number> | undefined>(search.candidates.length);
    const pre = (search.preUsed[p] ??= {});
    pre[a.resourceClass] = (pre[a.resourceClass] ?? 0) + a.amount;
    if (!search.preProviders.includes(p)) search.preProviders.push(p);
  }
  return undefined;
}

/** Why no assignment exists: the first demand that fits nowhere on its own, else the interaction that fails. */
function explainFailure(search: Search): string {
  const demands = search.request.demands;
  const unnumbered = search.request.unnumbered;
  for (const p of search.preProviders) {
    const provider = search.candidates[p]!;
    const forbidden = unnumbered.forbiddenTraits.filter((t) => provider.traits.has(t));
    if (forbidden.length > 0) return `resources: preallocated provider ${provider.name} has forbidden trait(s) ${forbidden.join(', ')}`;
  }
  for (let i = 0; i < demands.length; i++) {
    const reason = demandAloneProblem(search, demands[i]!);
    if (reason !== undefined) return reason;
  }
  if (!demands.some((d) => !d.numbered)) {
    const traits = search.unnumberedTraitProblem();
    if (traits !== undefined) return `resources: ${traits}`;
  }
  if (unnumbered.requiredTraits.length > 0) {
    const reachable = new Set<string>();
    for (const p of search.preProviders) for (const t of search.candidates[p]!.traits) reachable.add(t);
    for (const d of demands) {
      if (d.numbered) continue;
      search.candidates.forEach((c, p) => {
        if (search.eligible(p, d)) for (const t of c.traits) reachable.add(t);
      });
    }
    const missing = unnumbered.requiredTraits.filter((t) => !reachable.has(t));
    if (missing.length > 0) return `resources: no provider that can supply the group has required trait(s) ${missing.join(', ')}`;
    return `resources: no combination of providers has all of the required traits ${unnumbered.requiredTraits.join(', ')} together`;
  }
  const numbered = demands.filter((d) => d.numbered).map((d) => groupLabel(d.group));
  const policy = search.request.isolate && numbered.length > 1 ? ' with group_policy=isolate' : '';
  return `the groups ${demands.map((d) => groupLabel(d.group)).filter((l, i, all) => all.indexOf(l) === i).join(', ')} fit one by one but not together${policy}: their amounts exceed what the providers can supply at once`;
}

function freeOf(provider: FitProvider, p: number, search: Search, resourceClass: ResourceClass): number {
  return Math.max(capacityOf(provider.inventories[resourceClass]!) - search.used(p, resourceClass, 0), 0);
}

/** Why demand `d` fits no provider even alone (only preallocations counted), or undefined. */
function demandAloneProblem(search: Search, d: Demand): string | undefined {
  const label = groupLabel(d.group);
  const candidates = search.candidates;
  const fitsAlone = (p: number): string | undefined => {
    const provider = candidates[p]!;
    for (let k = 0; k < d.classes.length; k++) {
      const c = d.classes[k]!;
      const problem = amountProblem(provider.inventories[c]!, search.used(p, c, 0), d.amounts[k]!);
      if (problem !== undefined) return `${c} on ${provider.name}: ${problem}`;
    }
    return undefined;
  };
  const eligible: number[] = [];
  for (let p = 0; p < candidates.length; p++) if (search.eligible(p, d)) eligible.push(p);
  if (eligible.some((p) => fitsAlone(p) === undefined)) return undefined;

  const what = d.classes.map((c, k) => `${d.amounts[k]} ${c}`).join(' and ');
  if (!d.numbered) {
    const c = d.classes[0]!;
    const amount = d.amounts[0]!;
    const holders = candidates.filter((p) => p.inventories[c] !== undefined);
    if (holders.length === 0) return `${label}: no provider has ${c} inventory (wanted ${amount})`;
    if (eligible.length === 0) {
      return `${label}: ${c} is only on providers excluded by the group's forbidden traits or member_of (${holders.map((h) => h.name).join(', ')})`;
    }
    // A provider with room that still refuses breaks a unit rule: say which; otherwise report the best free amount.
    const unitBound = eligible.find((p) => freeOf(candidates[p]!, p, search, c) >= amount);
    if (unitBound !== undefined) return `${label}: ${fitsAlone(unitBound)!}`;
    let best = eligible[0]!;
    for (const p of eligible) if (freeOf(candidates[p]!, p, search, c) > freeOf(candidates[best]!, best, search, c)) best = p;
    return `${label}: no provider has ${amount} free ${c} (most free: ${freeOf(candidates[best]!, best, search, c)} on ${candidates[best]!.name})`;
  }
  if (eligible.length === 0) {
    const wanted: string[] = [];
    if (d.group.requiredTraits.length > 0) wanted.push(`required traits ${d.group.requiredTraits.join(', ')}`);
    if (d.group.forbiddenTraits.length > 0) wanted.push(`none of ${d.group.forbiddenTraits.join(', ')}`);
    if (d.group.memberOf.length > 0) wanted.push(`member_of ${d.group.memberOf.map((l) => `in:${l.join(',')}`).join(' and ')}`);
    const condition = wanted.length > 0 ? ` with ${wanted.join(', ')}` : '';
    return `${label}: no single provider has ${d.classes.join(', ')}${condition}`;
  }
  return `${label}: no single provider can supply ${what} (${fitsAlone(eligible[0]!)!})`;
}
