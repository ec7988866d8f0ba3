import { amountProblem, capacityOf, TRAIT_SHARING_PROVIDER, type PlacementRequest, type ResourceClass } from '@ert/plugin-api';
import { aggregatesOf, makeAnchor, sharesWith } from './anchor.js';
import { compileRequest, isPlainRequest } from './compile.js';
import { SearchBudgetError } from './errors.js';
import { rootTraitsProblem } from './fit.js';
import { AnchorSearch, type Anchor } from './search.js';
import { DEFAULT_SEARCH_BUDGET, type FitProvider } from './types.js';

/** Every provider of a deployment (trees and sharing providers), as `allocationCandidates` reads them. */
export interface CandidateWorld {
  readonly providers: readonly FitProvider[];
}

/** One allocation request (Placement 1.12+ object form, plus 1.34 mappings). */
export interface CandidateAllocationRequest {
  /** provider uuid -> class -> amount (amounts of several groups on one provider summed). */
  allocations: Record<string, Record<ResourceClass, number>>;
  /** group suffix ('' for the unnumbered group) -> uuids of the providers serving it, sorted. */
  mappings: Record<string, string[]>;
}

/** Placement's provider summary: every class of the provider, its traits and place in the tree. */
export interface CandidateProviderSummary {
  resources: Record<ResourceClass, { capacity: number; used: number }>;
  traits: string[];
  parentProviderUuid: string | null;
  rootProviderUuid: string;
}

export interface CandidatesResult {
  allocationRequests: CandidateAllocationRequest[];
  /** Every provider of every tree that supplies something in `allocationRequests`. */
  providerSummaries: Record<string, CandidateProviderSummary>;
  /** True when generation stopped at `maxCandidates` (no `limit` was asked for, or a larger one): more may exist. */
  truncated: boolean;
}

export interface CandidatesOptions {
  /** At most this many allocation requests (Placement's `limit`); generation stops there. */
  limit?: number;
  /**
   * Visit trees in random order (Placement's `randomize_allocation_candidates`). With a
   * limit, the first `limit` candidates of the shuffled trees are returned, not a uniform
   * sample of all candidates as Placement draws after generating every one.
   */
  randomize?: boolean;
  /** Random source in [0, 1) for `randomize` (Math.random by default). */
  random?: () => number;
  /**
   * False below microversion 1.29: a candidate may not use two providers of one tree
   * (sharing providers, being trees of their own, still combine).
   */
  nestedAware?: boolean;
  /** Step budget per tree and answer (DEFAULT_SEARCH_BUDGET); past it SearchBudgetError. */
  budget?: number;
  /** Tuning: see SearchOptions.memoAfterSteps. */
  memoAfterSteps?: number;
  /** Global cap on the candidates generated (default 10,000), like upstream's max_allocation_candidates. */
  maxCandidates?: number;
}

export const DEFAULT_MAX_CANDIDATES = 10_000;

/** A deployment's providers indexed by tree: build once with `indexWorld` and reuse for many requests. */
export class WorldIndex implements CandidateWorld {
  readonly byUuid = new Map<string, FitProvider>();
  /** Root uuid of every provider's tree. */
  readonly rootOf = new Map<string, string>();
  /** Each tree's providers, root first, parents before children. */
  readonly trees = new Map<string, FitProvider[]>();
  readonly roots: FitProvider[] = [];
  readonly sharing: FitProvider[] = [];
  /** Union of the aggregates of each tree's providers (which sharing providers it may use). */
  readonly treeAggregates = new Map<string, Set<string>>();

  constructor(readonly providers: readonly FitProvider[]) {
    const children = new Map<string, FitProvider[]>();
    for (const p of providers) {
      this.byUuid.set(p.uuid, p);
      if (p.parentUuid === undefined) this.roots.push(p);
      else (children.get(p.parentUuid) ?? children.set(p.parentUuid, []).get(p.parentUuid)!).push(p);
      if (p.traits.has(TRAIT_SHARING_PROVIDER)) this.sharing.push(p);
    }
    for (const root of this.roots) {
      const tree: FitProvider[] = [];
      for (let queue = [root]; queue.length > 0; ) {
        const next: FitProvider[] = [];
        for (const p of queue) {
          tree.push(p);
          this.rootOf.set(p.uuid, root.uuid);
          next.push(...(children.get(p.uuid) ?? []));
        }
        queue = next;
      }
      this.trees.set(root.uuid, tree);
      this.treeAggregates.set(root.uuid, aggregatesOf(tree));
    }
  }

  /**
   * This index with some providers replaced by newer versions of themselves (usages,
   * inventories, traits or aggregates changed; same uuid, same parent, shared or not as
   * before): only their trees are re-indexed, the rest is shared with this index, which is
   * left as it was. Undefined when a replacement changes the structure (an unknown uuid, another
   * parent, a provider that starts or stops sharing): index the whole world again then.
   */
  replaced(changed: readonly FitProvider[]): WorldIndex | undefined {
    const byUuid = new Map(this.byUuid);
    const roots = new Set<string>();
    for (const p of changed) {
      const old = this.byUuid.get(p.uuid);
      if (old === undefined || old.parentUuid !== p.parentUuid || old.traits.has(TRAIT_SHARING_PROVIDER) !== p.traits.has(TRAIT_SHARING_PROVIDER)) return undefined;
      byUuid.set(p.uuid, p);
      roots.add(this.rootOf.get(p.uuid)!);
    }
    const current = (p: FitProvider): FitProvider => byUuid.get(p.uuid)!;
    const trees = new Map(this.trees);
    const treeAggregates = new Map(this.treeAggregates);
    for (const root of roots) {
      const tree = this.trees.get(root)!.map(current);
      trees.set(root, tree);
      treeAggregates.set(root, aggregatesOf(tree));
    }
    const next: WorldIndex = Object.create(WorldIndex.prototype) as WorldIndex;
    return Object.assign(next, {
      providers: this.providers.map(current),
      byUuid,
      rootOf: this.rootOf,
      trees,
      roots: this.roots.map(current),
      sharing: this.sharing.map(current),
      treeAggregates,
    });
  }

  /** The anchor of the tree rooted at `root`: its providers, then the outside sharing providers that serve it. */
  anchor(root: FitProvider): Anchor {
    const aggregates = this.treeAggregates.get(root.uuid)!;
    const outside = this.sharing.filter((s) => this.rootOf.get(s.uuid) !== root.uuid && sharesWith(s, aggregates));
    return makeAnchor(root, this.trees.get(root.uuid)!, outside, (uuid) => this.rootOf.get(uuid), (uuid) => this.byUuid.get(uuid));
  }
}

/** Index a deployment's providers once for many `allocationCandidates` calls. */
export function indexWorld(providers: readonly FitProvider[]): WorldIndex {
  return new WorldIndex(providers);
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** The candidates of a request without their provider summaries (`findCandidates`). */
export interface FoundCandidates {
  allocationRequests: CandidateAllocationRequest[];
  /** True when generation stopped at `maxCandidates` (no `limit` was asked for, or a larger one): more may exist. */
  truncated: boolean;
  /** The index the candidates were found in (to summarise them: `candidateRoots`, `providerSummary`). */
  index: WorldIndex;
}

/**
 * Placement's `GET /allocation_candidates` over a whole deployment: every distinct way
 * (allocations and group mappings) to satisfy `request`, by the rules `fitRequest` applies
 * to one host (docs/placement.md). Candidates are found tree by tree (a tree's own
 * providers plus the sharing providers in its aggregates, so a request spans several roots
 * only through sharing providers), deduplicated as Placement does (the same allocations and
 * mappings reached from two trees count once), lazily: generation stops at `limit`, so
 * `limit: 1` over 10,000 providers costs about one fit.
 *
 * Throws SearchBudgetError when one tree needs more than the step budget to find its next
 * candidate (never silently answers after seconds). Pure apart from `random`.
 */
export function allocationCandidates(request: PlacementRequest, world: CandidateWorld, opts: CandidatesOptions = {}): CandidatesResult {
  const { allocationRequests, truncated, index } = findCandidates(request, world, opts);
  const providerSummaries: Record<string, CandidateProviderSummary> = {};
  for (const root of candidateRoots(allocationRequests, index)) for (const p of index.trees.get(root)!) providerSummaries[p.uuid] = providerSummary(p, root);
  return { allocationRequests, providerSummaries, truncated };
}

/**
 * `allocationCandidates` without the provider summaries, for a caller that shapes them
 * itself (the API route keeps each provider's summary serialised between requests).
 */
export function findCandidates(request: PlacementRequest, world: CandidateWorld, opts: CandidatesOptions = {}): FoundCandidates {
  const index = world instanceof WorldIndex ? world : new WorldIndex(world.providers);
  const compiled = compileRequest(request);
  const budget = opts.budget ?? DEFAULT_SEARCH_BUDGET;
  const cap = Math.min(opts.limit ?? Infinity, opts.maxCandidates ?? DEFAULT_MAX_CANDIDATES);
  const nestedAware = opts.nestedAware ?? true;
  const roots = opts.randomize === true ? shuffled(index.roots, opts.random ?? Math.random) : index.roots;

  const found: CandidateAllocationRequest[] = [];
  // The candidates of one tree's search are distinct (distinct assignments differ in
  // allocations or mappings), and two trees' own providers are disjoint: only a candidate that
  // names no provider of its tree can be reached from two trees, one drawn wholly from sharing
  // providers or the empty one of a request with nothing to place.
  const seen = index.sharing.length > 0 || compiled.demands.length === 0 ? new Set<string>() : undefined;
  // Without sharing providers, a plain request's candidates are per tree and never repeat.
  const plainClasses = seen === undefined && isPlainRequest(request) ? plainDemands(request) : [];
  const plain = plainClasses.length > 0 ? plainClasses : undefined;
  for (const root of roots) {
    if (found.length >= cap) break;
    if (plain !== undefined) {
      plainCandidates(plain, index.trees.get(root.uuid)!, nestedAware, (candidate) => found.push(candidate) >= cap);
      continue;
    }
    if (rootTraitsProblem(request, root) !== undefined) continue;
    const anchor = index.anchor(root);
    const search = new AnchorSearch(anchor, compiled, { budget, mode: 'all', ...(opts.memoAfterSteps === undefined ? {} : { memoAfterSteps: opts.memoAfterSteps }) });
    const outcome = search.run((s) => {
      const candidate = { allocations: s.allocationsByProvider(), mappings: s.mappings() };
      if (!nestedAware && usesTwoProvidersOfOneTree(Object.keys(candidate.allocations), index)) return false;
      if (seen !== undefined) {
        const key = candidateKey(candidate);
        if (seen.has(key)) return false;
        seen.add(key);
      }
      found.push(candidate);
      return found.length >= cap;
    });
    if (outcome === 'budget') throw new SearchBudgetError(budget, root.name, compiled.demands.length, anchor.providers.length);
  }
  const maxCandidates = opts.maxCandidates ?? DEFAULT_MAX_CANDIDATES;
  const truncated = found.length >= maxCandidates && (opts.limit ?? Infinity) > maxCandidates;
  return { allocationRequests: found, truncated, index };
}

/** The classes and amounts of a plain request's unnumbered group (amounts above 0). */
function plainDemands(request: PlacementRequest): Array<[ResourceClass, number]> {
  return Object.entries(request.groups[0]!.resources).filter(([, amount]) => amount > 0);
}

/**
 * Every candidate of a plain request on one tree: each class on any provider that fits it
 * alone (the classes do not interact), all combinations, in tree order. `emit` returns true
 * to stop. Below 1.29 (`nestedAware` false) only single-provider combinations count.
 */
function plainCandidates(demands: ReadonlyArray<[ResourceClass, number]>, tree: readonly FitProvider[], nestedAware: boolean, emit: (candidate: CandidateAllocationRequest) => boolean): void {
  const options = demands.map(([resourceClass, amount]) => tree.filter((p) => p.inventories[resourceClass] !== undefined && amountProblem(p.inventories[resourceClass]!, p.usages[resourceClass] ?? 0, amount) === undefined));
  if (options.some((o) => o.length === 0)) return;
  const pick = new Array<number>(demands.length).fill(0);
  for (;;) {
    const chosen = pick.map((i, k) => options[k]![i]!);
    const distinct = [...new Set(chosen)];
    if (nestedAware || distinct.length === 1) {
      const allocations: Record<string, Record<ResourceClass, number>> = {};
      demands.forEach(([resourceClass, amount], k) => ((allocations[chosen[k]!.uuid] ??= {})[resourceClass] = amount));
      if (emit({ allocations, mappings: { '': distinct.map((p) => p.uuid).sort() } })) return;
    }
    let k = 0;
    while (k < pick.length && ++pick[k]! === options[k]!.length) pick[k++] = 0;
    if (k === pick.length) return;
  }
}

function usesTwoProvidersOfOneTree(uuids: readonly string[], index: WorldIndex): boolean {
  const roots = new Set(uuids.map((u) => index.rootOf.get(u)));
  return roots.size !== uuids.length;
}

/** Placement's AllocationRequest equality: the same (provider, class, amount) set and the same mappings. */
function candidateKey(candidate: CandidateAllocationRequest): string {
  const allocations = Object.entries(candidate.allocations)
    .flatMap(([uuid, classes]) => Object.entries(classes).map(([c, n]) => `${uuid}/${c}=${n}`))
    .sort();
  const mappings = Object.entries(candidate.mappings)
    .map(([suffix, uuids]) => `${suffix}:${uuids.join(',')}`)
    .sort();
  return `${allocations.join(' ')}|${mappings.join(' ')}`;
}

/**
 * The trees whose providers Placement summarises for these candidates: the root uuid of every
 * provider they draw on (a sharing provider's own tree), in the order first drawn on.
 */
export function candidateRoots(candidates: readonly CandidateAllocationRequest[], index: WorldIndex): string[] {
  const roots = new Set<string>();
  for (const c of candidates) for (const uuid of Object.keys(c.allocations)) roots.add(index.rootOf.get(uuid)!);
  return [...roots];
}

/** Placement's summary of provider `p` of the tree rooted at `rootUuid`: every class with capacity and usage, sorted traits, place in the tree. */
export function providerSummary(p: FitProvider, rootUuid: string): CandidateProviderSummary {
  const resources: Record<ResourceClass, { capacity: number; used: number }> = {};
  for (const [c, inventory] of Object.entries(p.inventories)) resources[c] = { capacity: capacityOf(inventory), used: p.usages[c] ?? 0 };
  return { resources, traits: [...p.traits].sort(), parentProviderUuid: p.parentUuid ?? null, rootProviderUuid: rootUuid };
}
