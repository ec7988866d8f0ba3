import { capacityOf, amountProblem, type PlacementRequest } from '@ert/plugin-api';
import { aggregatesOf, makeAnchor, sharesWith } from './anchor.js';
import { compileRequest, isPlainRequest, type CompiledRequest, type Demand } from './compile.js';
import { AnchorSearch, anyOfMet, groupLabel, ineligibility, type Anchor } from './search.js';
import { DEFAULT_SEARCH_BUDGET, type FitAllocation, type FitProvider, type FitTree } from './types.js';

export type { FitAllocation, FitProvider, FitTree } from './types.js';

export type FitResult =
  | {
      ok: true;
      allocations: FitAllocation[];
      /**
       * With `FitOptions.withMappings`: Placement 1.34's mappings, group suffix -> uuids of the
       * providers serving it (a numbered group has one). For a plain request (the unnumbered
       * group alone, which the shortcut answers) they are absent.
       */
      mappings?: Record<string, string[]>;
    }
  | {
      ok: false;
      reason: string;
      /** True when the search gave up at its step budget rather than proving that nothing fits. */
      budgetExceeded?: boolean;
    };

export interface FitOptions {
  /**
   * Allocations already decided (by plugins' `ClaimGrant.allocations`, resolved to uuids).
   * They count as used on their providers, their classes are taken out of the unnumbered
   * group, and their providers count as "used by the unnumbered group" for its traits.
   * They are not repeated in the result.
   */
  preallocated?: readonly FitAllocation[];
  /** Step budget of the search (DEFAULT_SEARCH_BUDGET when absent). */
  budget?: number;
  /** Tuning: see SearchOptions.memoAfterSteps. */
  memoAfterSteps?: number;
  /** Also return the mappings (which provider serves which group): for claims that record them. */
  withMappings?: boolean;
  /** Always run the general search, even for a request the shortcut answers (tests compare the two). */
  noShortcut?: boolean;
}

const NO_ALLOCATIONS: readonly FitAllocation[] = [];

/**
 * The anchor of one host's tree: its providers, then the sharing providers given with it
 * that serve it (MISC_SHARES_VIA_AGGREGATE, not in the tree, sharing an aggregate with one
 * of its providers), so callers may pass a superset.
 */
export function anchorOfTree(tree: FitTree): Anchor | undefined {
  const providers = tree.providers;
  const first = providers[0];
  if (first === undefined) return undefined;
  const root = first.parentUuid === undefined ? first : (providers.find((p) => p.parentUuid === undefined) ?? first);
  const byUuid = new Map(providers.map((p) => [p.uuid, p]));
  let outside: readonly FitProvider[] = [];
  if (tree.sharingProviders !== undefined && tree.sharingProviders.length > 0) {
    const treeAggregates = aggregatesOf(providers);
    outside = tree.sharingProviders.filter((s) => !byUuid.has(s.uuid) && sharesWith(s, treeAggregates));
    for (const s of outside) byUuid.set(s.uuid, s);
  }
  // A tree member's root is the tree's; a sharing provider given here is a tree of its own.
  const outsideUuids = new Set(outside.map((s) => s.uuid));
  const rootOf = (uuid: string): string | undefined => (outsideUuids.has(uuid) ? uuid : byUuid.has(uuid) ? root.uuid : undefined);
  return makeAnchor(root, providers, outside, rootOf, (uuid) => byUuid.get(uuid));
}

/** root_required (1.35): traits the anchor's root must have and must not have; a reason or undefined. */
export function rootTraitsProblem(request: PlacementRequest, root: FitProvider): string | undefined {
  const missing = (request.rootRequiredTraits ?? []).filter((t) => !root.traits.has(t));
  if (missing.length > 0) return `root_required: root ${root.name} lacks ${missing.join(', ')}`;
  const present = (request.rootForbiddenTraits ?? []).filter((t) => root.traits.has(t));
  if (present.length > 0) return `root_required: root ${root.name} has forbidden ${present.join(', ')}`;
  return undefined;
}

/**
 * Can this host's tree (plus its sharing providers) satisfy `request`, by Placement
 * 8.0.0's allocation-candidate rules (docs/placement.md states them in full)?
 *
 * - each class of the unnumbered group takes its whole amount from one provider; classes
 *   may come from different providers; its required (and any-of) traits must be on the
 *   providers it uses, together (on the root when it places nothing), its forbidden traits
 *   on none; member_of: each of its providers, or the tree's root, is in the aggregates
 *   (an outside sharing provider itself);
 * - a numbered group puts all its classes on one provider that itself has its required
 *   traits, none of its forbidden ones, and is in its aggregates; with group_policy=isolate
 *   numbered groups use different providers;
 * - amounts of several groups on one provider add up, and the sum must fit the free
 *   capacity and max_unit; each group's own amount obeys min_unit, max_unit and step_size;
 * - in_tree, same_subtree and root_required as Placement 1.31–1.36.
 *
 * Returns the allocations of the first assignment found, trying demands in order (the
 * unnumbered group's classes first, then numbered groups) and providers root first, then
 * tree order, then sharing providers (deterministic for equal input), with one entry per
 * provider and class; or the reason naming the group and class that failed. A search
 * that needs more than `budget` steps answers not ok with `budgetExceeded` and a reason
 * naming the limit. Pure; never throws for a well-formed request.
 */
export function fitRequest(request: PlacementRequest, tree: FitTree, opts?: FitOptions): FitResult {
  const quick = opts?.noShortcut !== true && (opts?.preallocated === undefined || opts.preallocated.length === 0) ? simpleFit(request, tree) : undefined;
  if (quick !== undefined) return quick;
  const preallocated = opts?.preallocated ?? NO_ALLOCATIONS;
  const anchor = anchorOfTree(tree);
  const removed = preallocated.length > 0 ? new Set(preallocated.map((a) => a.resourceClass)) : undefined;
  const compiled = compileRequest(request, removed);
  if (anchor === undefined) return compiled.demands.length === 0 ? { ok: true, allocations: [] } : { ok: false, reason: 'the host has no providers' };

  const pre: Array<{ provider: number; resourceClass: string; amount: number }> = [];
  const preProblem = resolvePreallocated(anchor, preallocated, pre);
  if (preProblem !== undefined) return { ok: false, reason: preProblem };
  const rootProblem = rootTraitsProblem(request, anchor.root);
  if (rootProblem !== undefined) return { ok: false, reason: rootProblem };

  const budget = opts?.budget ?? DEFAULT_SEARCH_BUDGET;
  const search = new AnchorSearch(anchor, compiled, { budget, mode: 'first', preallocated: pre, ...(opts?.memoAfterSteps === undefined ? {} : { memoAfterSteps: opts.memoAfterSteps }) });
  const outcome = search.run(() => true);
  if (outcome === 'stopped') return { ok: true, allocations: search.allocations(), ...(opts?.withMappings === true ? { mappings: search.mappings() } : {}) };
  if (outcome === 'budget') {
    return {
      ok: false,
      budgetExceeded: true,
      reason: `the request's ${compiled.demands.length} demands over ${anchor.providers.length} providers need more than the search budget of ${budget} steps; refused rather than searched longer (raise scheduler.placementSearchBudget to allow it)`,
    };
  }
  return { ok: false, reason: explainFailure(search, compiled) };
}

/**
 * A plain request (`isPlainRequest`) on a tree without sharing providers, answered without
 * the search: the first provider in tree order that fits each class is exactly what the
 * search would choose, and the first class that fits nowhere is the reason the search would
 * give. Undefined when the request or the tree is not of that kind.
 */
function simpleFit(request: PlacementRequest, tree: FitTree): FitResult | undefined {
  if ((tree.sharingProviders?.length ?? 0) > 0 || !isPlainRequest(request)) return undefined;
  const group = request.groups[0]!;
  const allocations: FitAllocation[] = [];
  for (const resourceClass in group.resources) {
    const amount = group.resources[resourceClass]!;
    if (amount <= 0) continue;
    let placed = false;
    for (const provider of tree.providers) {
      const inventory = provider.inventories[resourceClass];
      if (inventory === undefined || amountProblem(inventory, provider.usages[resourceClass] ?? 0, amount) !== undefined) continue;
      allocations.push({ providerUuid: provider.uuid, resourceClass, amount });
      placed = true;
      break;
    }
    if (!placed) {
      const holders = tree.providers.filter((p) => p.inventories[resourceClass] !== undefined);
      return { ok: false, reason: unnumberedClassProblem('resources', resourceClass, amount, tree.providers, holders, (p) => p.usages[resourceClass] ?? 0) };
    }
  }
  return { ok: true, allocations };
}

/** Count preallocated amounts as used; a reason when one does not fit or names an unknown provider. */
function resolvePreallocated(anchor: Anchor, preallocated: readonly FitAllocation[], out: Array<{ provider: number; resourceClass: string; amount: number }>): string | undefined {
  const used = new Map<string, number>();
  for (const a of preallocated) {
    const p = anchor.providers.findIndex((c) => c.uuid === a.providerUuid);
    if (p < 0) return `preallocated ${a.amount} ${a.resourceClass}: provider ${a.providerUuid} is not in the tree or its sharing providers`;
    const provider = anchor.providers[p]!;
    const inventory = provider.inventories[a.resourceClass];
    if (inventory === undefined) return `preallocated ${a.amount} ${a.resourceClass}: ${provider.name} has no ${a.resourceClass} inventory`;
    const key = `${p}|${a.resourceClass}`;
    const earlier = used.get(key) ?? 0;
    const problem = amountProblem(inventory, (provider.usages[a.resourceClass] ?? 0) + earlier, a.amount);
    if (problem !== undefined) return `preallocated ${a.resourceClass} on ${provider.name}: ${problem}`;
    used.set(key, earlier + a.amount);
    out.push({ provider: p, resourceClass: a.resourceClass, amount: a.amount });
  }
  return undefined;
}

/** Why no assignment exists: the first demand that fits nowhere on its own, else the rule that fails together. */
function explainFailure(search: AnchorSearch, compiled: CompiledRequest): string {
  const anchor = search.anchor;
  const unnumbered = compiled.unnumbered;
  for (const p of search.preProviders) {
    const provider = anchor.providers[p]!;
    const forbidden = unnumbered.forbiddenTraits.filter((t) => provider.traits.has(t));
    if (forbidden.length > 0) return `resources: preallocated provider ${provider.name} has forbidden trait(s) ${forbidden.join(', ')}`;
  }
  for (let i = 0; i < compiled.demands.length; i++) {
    if (search.domains[i]!.length === 0) return demandAloneProblem(search, i);
  }
  if (compiled.unnumberedCount === 0 && !search.unnumberedRulesMet()) return `resources: ${unnumberedTraitProblem(search, [])}`;
  const label = (i: number): string => groupLabel(compiled.demands[i]!.group);
  if (compiled.unnumberedTraitRule) {
    const reachable = new Set<string>();
    for (const p of search.preProviders) for (const t of anchor.providers[p]!.traits) reachable.add(t);
    for (let i = 0; i < compiled.unnumberedCount; i++) for (const p of search.domains[i]!) for (const t of anchor.providers[p]!.traits) reachable.add(t);
    const missing = unnumbered.requiredTraits.filter((t) => !reachable.has(t));
    const anyMissing = (unnumbered.anyOfTraits ?? []).filter((l) => l.length > 0 && !l.some((t) => reachable.has(t)));
    if (missing.length > 0 || anyMissing.length > 0) {
      const what = [...missing, ...anyMissing.map((l) => `one of ${l.join('|')}`)].join(', ');
      return `resources: no provider that can supply the group has required trait(s) ${what}`;
    }
  }
  if (compiled.sameSubtree.length > 0) {
    return `the groups ${compiled.sameSubtree.map((l) => l.map(label).join('+')).join(', ')} fit one by one but no choice puts them in one subtree (same_subtree) with the other groups`;
  }
  const numbered = compiled.demands.filter((d) => d.numbered).length;
  const policy = compiled.isolate && numbered > 1 ? ' with group_policy=isolate' : '';
  if (compiled.unnumberedTraitRule && numbered === 0) {
    return `resources: no combination of providers has all of the required traits ${[...unnumbered.requiredTraits, ...(unnumbered.anyOfTraits ?? []).map((l) => `in:${l.join(',')}`)].join(', ')} together`;
  }
  const labels = [...new Set(compiled.demands.map((d) => groupLabel(d.group)))];
  return `the groups ${labels.join(', ')} fit one by one but not together${policy}: their amounts summed per provider exceed its free capacity or max_unit, or the required traits cannot be met together`;
}

/** The unnumbered group's trait or member_of rule that fails on `providers` (the root when empty). */
function unnumberedTraitProblem(search: AnchorSearch, providers: readonly FitProvider[]): string {
  const group = search.request.unnumbered;
  const used = providers.length > 0 ? providers : [search.anchor.root];
  const names = used.map((p) => p.name).join(', ');
  const has = (t: string): boolean => used.some((p) => p.traits.has(t));
  const missing = group.requiredTraits.filter((t) => !has(t));
  if (missing.length > 0) return `required trait(s) ${missing.join(', ')} not on ${names}`;
  if (!anyOfMet(group.anyOfTraits, has)) return `none of the any-of traits ${(group.anyOfTraits ?? []).map((l) => l.join('|')).join(', ')} on ${names}`;
  const forbidden = group.forbiddenTraits.filter(has);
  if (forbidden.length > 0) return `forbidden trait(s) ${forbidden.join(', ')} on ${names}`;
  const outside = group.memberOf.find((any) => !any.some((agg) => used[0]!.aggregates.has(agg)));
  if (outside !== undefined) return `${names} is not in member_of in:${outside.join(',')}`;
  return `${names} is in a forbidden aggregate`;
}

function preUsedOn(search: AnchorSearch, p: number, resourceClass: string): number {
  return (search.options.preallocated ?? []).filter((a) => a.provider === p && a.resourceClass === resourceClass).reduce((sum, a) => sum + a.amount, 0);
}

/**
 * Why `amount` of class `c` of the unnumbered group fits none of `eligible` (the providers
 * that meet the group's conditions) when each is judged alone: no inventory anywhere, only
 * on excluded providers, a unit rule (min_unit, max_unit, step_size) on a provider with
 * room, or too little room anywhere (naming the most free).
 */
function unnumberedClassProblem(label: string, c: string, amount: number, providers: readonly FitProvider[], eligible: readonly FitProvider[], used: (p: FitProvider) => number): string {
  const holders = providers.filter((p) => p.inventories[c] !== undefined);
  if (holders.length === 0) return `${label}: no provider has ${c} inventory (wanted ${amount})`;
  if (eligible.length === 0) {
    return `${label}: ${c} is only on providers excluded by the group's forbidden traits, member_of or in_tree (${holders.map((h) => h.name).join(', ')})`;
  }
  const free = (p: FitProvider): number => Math.max(capacityOf(p.inventories[c]!) - used(p), 0);
  const unitBound = eligible.find((p) => free(p) >= amount);
  if (unitBound !== undefined) return `${label}: ${c} on ${unitBound.name}: ${amountProblem(unitBound.inventories[c]!, used(unitBound), amount)!}`;
  let best = eligible[0]!;
  for (const p of eligible) if (free(p) > free(best)) best = p;
  return `${label}: no provider has ${amount} free ${c} (most free: ${free(best)} on ${best.name})`;
}

/** Why demand `i` fits no provider even alone (preallocations counted). */
function demandAloneProblem(search: AnchorSearch, i: number): string {
  const d: Demand = search.request.demands[i]!;
  const anchor = search.anchor;
  const label = groupLabel(d.group);
  const providers = anchor.providers;
  const used = (p: number, c: string): number => (providers[p]!.usages[c] ?? 0) + preUsedOn(search, p, c);
  const kinds = providers.map((_, p) => ineligibility(anchor, p, d, used));
  const fitsAlone = (p: number): string | undefined => {
    const provider = providers[p]!;
    for (let k = 0; k < d.classes.length; k++) {
      const c = d.classes[k]!;
      const problem = amountProblem(provider.inventories[c]!, used(p, c), d.amounts[k]!);
      if (problem !== undefined) return `${c} on ${provider.name}: ${problem}`;
    }
    return undefined;
  };
  // Providers that pass every rule but the amount: the group is refused for room or unit rules.
  const amountOnly = providers.flatMap((_, p) => (kinds[p] === 'amount' ? [p] : []));
  const what = d.classes.map((c, k) => `${d.amounts[k]} ${c}`).join(' and ');
  if (!d.numbered) {
    const c = d.classes[0]!;
    const eligible = amountOnly.map((p) => providers[p]!);
    return unnumberedClassProblem(label, c, d.amounts[0]!, providers, eligible, (provider) => used(providers.indexOf(provider), c));
  }
  if (amountOnly.length === 0) {
    const group = d.group;
    const wanted: string[] = [];
    if (group.requiredTraits.length > 0) wanted.push(`required traits ${group.requiredTraits.join(', ')}`);
    for (const any of group.anyOfTraits ?? []) if (any.length > 0) wanted.push(`one of ${any.join('|')}`);
    if (group.forbiddenTraits.length > 0) wanted.push(`none of ${group.forbiddenTraits.join(', ')}`);
    if (group.memberOf.length > 0) wanted.push(`member_of ${group.memberOf.map((l) => `in:${l.join(',')}`).join(' and ')}`);
    if ((group.forbiddenAggregates ?? []).length > 0) wanted.push(`none of the aggregates ${group.forbiddenAggregates!.join(', ')}`);
    if (group.inTree !== undefined) wanted.push(`in_tree ${group.inTree}`);
    const condition = wanted.length > 0 ? ` with ${wanted.join(', ')}` : '';
    return d.classes.length === 0 ? `${label}: no provider${condition}` : `${label}: no single provider has ${d.classes.join(', ')}${condition}`;
  }
  return `${label}: no single provider can supply ${what} (${fitsAlone(amountOnly[0]!)!})`;
}
