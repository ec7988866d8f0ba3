import { amountProblem, capacityOf, type RequestGroup } from '@ert/plugin-api';
import type { CompiledRequest, Demand } from './compile.js';
import type { FitAllocation, FitProvider } from './types.js';

/**
 * The providers one candidate may draw on, by Placement's rules: the anchor's tree (root
 * first, parents before children) and, after it, the sharing providers from outside the
 * tree that share an aggregate with one of its providers.
 */
export interface Anchor {
  readonly root: FitProvider;
  readonly providers: readonly FitProvider[];
  /** How many of `providers` are the tree's own; the rest are outside sharing providers. */
  readonly treeSize: number;
  /** The root uuid of each provider's own tree (the anchor's root for tree members). */
  readonly rootUuids: readonly string[];
  /** The provider itself and its ancestors' uuids, for same_subtree. */
  ancestors(index: number): ReadonlySet<string>;
  /** Root uuid of the tree that holds the provider with this uuid, for in_tree; undefined if unknown. */
  rootOfUuid(uuid: string): string | undefined;
}

export type SearchOutcome = 'exhausted' | 'stopped' | 'budget';

/** Do the aggregates of `provider` meet every any-of list of `memberOf`? */
function inAllLists(provider: FitProvider, memberOf: readonly (readonly string[])[]): boolean {
  return memberOf.every((any) => any.some((agg) => provider.aggregates.has(agg)));
}

function inAny(provider: FitProvider, aggregates: readonly string[] | undefined): boolean {
  return aggregates !== undefined && aggregates.some((agg) => provider.aggregates.has(agg));
}

/** Does `traits` meet every any-of list (1.39 `required=in:A,B`)? */
export function anyOfMet(lists: readonly (readonly string[])[] | undefined, has: (trait: string) => boolean): boolean {
  return lists === undefined || lists.every((any) => any.length === 0 || any.some(has));
}

/**
 * Static eligibility of provider `p` of `anchor` for demand `d`, the amounts taken alone:
 * inventory and unit rules (`amountProblem`), traits, aggregates and in_tree, as Placement
 * judges them per group kind. Returns undefined when eligible, else a short reason kind.
 */
export function ineligibility(anchor: Anchor, p: number, d: Demand, used: (p: number, c: string) => number): 'inventory' | 'amount' | 'traits' | 'aggregates' | 'tree' | undefined {
  const provider = anchor.providers[p]!;
  const group = d.group;
  for (const c of d.classes) if (provider.inventories[c] === undefined) return 'inventory';
  for (const t of group.forbiddenTraits) if (provider.traits.has(t)) return 'traits';
  const inTree = p < anchor.treeSize;
  if (d.numbered) {
    // One provider serves the whole group: it alone must have the traits and be in the aggregates.
    for (const t of group.requiredTraits) if (!provider.traits.has(t)) return 'traits';
    if (!anyOfMet(group.anyOfTraits, (t) => provider.traits.has(t))) return 'traits';
    if (!inAllLists(provider, group.memberOf)) return 'aggregates';
    if (inAny(provider, group.forbiddenAggregates)) return 'aggregates';
    if (group.inTree !== undefined && anchor.rootUuids[p] !== anchor.rootOfUuid(group.inTree)) return 'tree';
  } else {
    // Unnumbered: a tree member matches member_of when it or the tree's root is in every list
    // (root aggregates span the tree); an outside sharing provider must be in them itself.
    if (group.memberOf.length > 0 && !inAllLists(provider, group.memberOf) && !(inTree && inAllLists(anchor.root, group.memberOf))) return 'aggregates';
    if (inAny(provider, group.forbiddenAggregates) || inAny(anchor.root, group.forbiddenAggregates)) return 'aggregates';
    if (group.inTree !== undefined && !(inTree && anchor.root.uuid === anchor.rootOfUuid(group.inTree))) return 'tree';
  }
  for (let k = 0; k < d.classes.length; k++) {
    const c = d.classes[k]!;
    if (amountProblem(provider.inventories[c]!, used(p, c), d.amounts[k]!) !== undefined) return 'amount';
  }
  return undefined;
}

/** Options of one search. */
export interface SearchOptions {
  /**
   * Step budget (one step = one provider tried for one demand), counted since the last
   * full assignment: it bounds the search for the next answer, not how many answers 'all'
   * may visit (callers cap those).
   */
  budget: number;
  /**
   * 'first' answers "is there an assignment?" and may skip assignments that are symmetric
   * to ones already tried (interchangeable providers, twin groups); 'all' visits every
   * distinct assignment.
   */
  mode: 'first' | 'all';
  /**
   * Remember failed sub-searches once the search has taken this many steps (default 200;
   * small searches finish faster without the bookkeeping). Tests pass 0 to exercise the
   * memo on small inputs.
   */
  memoAfterSteps?: number;
  /** Amounts already placed (plugins' grants), by provider index and class. */
  preallocated?: ReadonlyArray<{ provider: number; resourceClass: string; amount: number }>;
}

const MEMO_AFTER_STEPS = 200;
/** Steps the 'first' search spends in request order before it re-orders most constrained first. */
const FIRST_PASS_STEPS = 256;

/**
 * A depth-first search for assignments of a compiled request's demands to an anchor's
 * providers, obeying every rule of Placement's allocation candidates:
 * - each demand on a provider that is statically eligible (`ineligibility`);
 * - amounts of several demands on one provider and class summed within its free capacity
 *   and its max_unit;
 * - group_policy=isolate: numbered demands on distinct providers;
 * - the unnumbered group's required and any-of traits on its providers together;
 * - same_subtree: the providers of the listed groups all descend from one of them.
 *
 * It never explodes on the shapes that made naive searches take seconds: after each
 * step it checks that every remaining demand still has a provider (forward checking) and,
 * under isolate, that the remaining numbered groups can still be matched to distinct
 * providers (bipartite matching); failed sub-searches are remembered by their state
 * (loads, providers taken), so equivalent branches are not searched twice; in 'first' mode
 * interchangeable providers and twin groups are tried in one order only. A search that
 * still needs more than `budget` steps stops with 'budget'.
 */
export class AnchorSearch {
  readonly demands: readonly Demand[];
  /** Provider index per demand; -1 while unassigned. */
  readonly assignment: Int32Array;
  /** Eligible provider indexes per demand (static). */
  readonly domains: number[][];
  steps = 0;
  /** Steps since the last full assignment: what the budget bounds (dead-end search, not output). */
  private stepsSinceSolution = 0;
  /** Full assignments handed to `onSolution` so far. */
  solutions = 0;
  private readonly nClasses: number;
  /** free[p * nClasses + c]: capacity minus usage minus preallocations (may be negative). */
  private readonly free: Float64Array;
  private readonly maxUnit: Float64Array;
  /** This request's own load per provider and class. */
  private readonly load: Float64Array;
  /** How many demands sit on each provider (numbered ones counted in `numberedOn`). */
  private readonly assignedCount: Int32Array;
  private readonly numberedOn: Int32Array;
  readonly preProviders: number[] = [];
  private memo: Set<string> | undefined;
  /** The step budget of the current attempt (see run). */
  private budgetLimit = 0;
  private signatures: string[] | undefined;
  private readonly providerSymmetry: boolean;
  private traitUnionOfDomain: Array<Set<string>> | undefined;
  /** The demand placed at each depth, and the depth of each demand. */
  private order: Int32Array;
  private depthOf: Int32Array;
  /** Depth at which the last unnumbered demand is placed (-1 when there is none). */
  private lastUnnumberedDepth = -1;
  /** same_subtree lists (demand indexes) to check once the search has placed depth d. */
  private subtreeChecksAt: number[][][] = [];
  /** Scratch for forward checking: loads that demands with one provider left must add. */
  private readonly forced: Float64Array;
  private onSolution: (search: AnchorSearch) => boolean = () => true;

  constructor(
    readonly anchor: Anchor,
    readonly request: CompiledRequest,
    readonly options: SearchOptions,
  ) {
    const providers = anchor.providers;
    const n = providers.length;
    this.demands = request.demands;
    this.assignment = new Int32Array(this.demands.length).fill(-1);
    const nClasses = (this.nClasses = request.classes.length);
    this.free = new Float64Array(n * nClasses);
    this.maxUnit = new Float64Array(n * nClasses);
    this.load = new Float64Array(n * nClasses);
    this.assignedCount = new Int32Array(n);
    this.numberedOn = new Int32Array(n);
    for (let p = 0; p < n; p++) {
      const provider = providers[p]!;
      for (let c = 0; c < nClasses; c++) {
        const inventory = provider.inventories[request.classes[c]!];
        if (inventory === undefined) continue;
        this.free[p * nClasses + c] = capacityOf(inventory) - (provider.usages[request.classes[c]!] ?? 0);
        this.maxUnit[p * nClasses + c] = inventory.maxUnit;
      }
    }
    const preUsed = new Map<string, number>();
    for (const pre of options.preallocated ?? []) {
      const c = request.classes.indexOf(pre.resourceClass);
      if (c >= 0) this.free[pre.provider * nClasses + c]! -= pre.amount;
      const key = `${pre.provider}|${pre.resourceClass}`;
      preUsed.set(key, (preUsed.get(key) ?? 0) + pre.amount);
      if (!this.preProviders.includes(pre.provider)) this.preProviders.push(pre.provider);
      this.assignedCount[pre.provider]!++;
    }
    const used =
      preUsed.size === 0 ? (p: number, c: string): number => providers[p]!.usages[c] ?? 0 : (p: number, c: string): number => (providers[p]!.usages[c] ?? 0) + (preUsed.get(`${p}|${c}`) ?? 0);
    this.domains = this.demands.map((d) => {
      const domain: number[] = [];
      for (let p = 0; p < n; p++) if (ineligibility(anchor, p, d, used) === undefined) domain.push(p);
      return domain;
    });
    this.providerSymmetry = options.mode === 'first' && request.sameSubtree.length === 0;
    this.forced = new Float64Array(n * nClasses);
    this.order = new Int32Array(0);
    this.depthOf = new Int32Array(0);
    this.setOrder(this.demands.map((_, i) => i));
  }

  /** Place demands in this order (a permutation of demand indexes; twins must stay adjacent and in order). */
  private setOrder(order: readonly number[]): void {
    this.order = Int32Array.from(order);
    this.depthOf = new Int32Array(order.length);
    order.forEach((demand, depth) => (this.depthOf[demand] = depth));
    this.lastUnnumberedDepth = -1;
    for (let i = 0; i < this.request.unnumberedCount; i++) this.lastUnnumberedDepth = Math.max(this.lastUnnumberedDepth, this.depthOf[i]!);
    this.subtreeChecksAt = order.map(() => []);
    for (const list of this.request.sameSubtree) this.subtreeChecksAt[Math.max(...list.map((j) => this.depthOf[j]!))]!.push([...list]);
  }

  /**
   * Most constrained first: demands by how many providers they may use (fewest first),
   * stable, so twins stay adjacent and in order. Conflicts between demands that have
   * few choices show at once instead of under every combination of the others.
   */
  private failFirstOrder(): number[] {
    return this.demands.map((_, i) => i).sort((a, b) => this.domains[a]!.length - this.domains[b]!.length || a - b);
  }

  /** Forget a stopped search's placements (the budget unwinds without undoing them). */
  private reset(): void {
    this.assignment.fill(-1);
    this.load.fill(0);
    this.numberedOn.fill(0);
    this.assignedCount.fill(0);
    for (const pre of this.options.preallocated ?? []) this.assignedCount[pre.provider]!++;
    this.memo = undefined;
    this.stepsSinceSolution = 0;
  }

  /**
   * Run the search; `onSolution` sees each full assignment and returns true to stop.
   * 'first' tries demands in request order (so the answer prefers the root, then tree
   * order, for the first demands) for a few steps, then, if still undecided, starts again
   * most constrained first with what is left of the budget; 'all' goes most constrained
   * first from the start (the order of candidates is unspecified).
   */
  run(onSolution: (search: AnchorSearch) => boolean): SearchOutcome {
    this.onSolution = onSolution;
    if (!this.staticChecksPass()) return 'exhausted';
    const budget = this.options.budget;
    const attempt = (limit: number): SearchOutcome => {
      this.budgetLimit = limit;
      try {
        return this.place(0) ? 'stopped' : 'exhausted';
      } catch (e) {
        if (e === BUDGET) return 'budget';
        throw e;
      }
    };
    if (this.options.mode === 'all' || this.demands.length < 3) {
      if (this.options.mode === 'all') this.setOrder(this.failFirstOrder());
      return attempt(budget);
    }
    const quick = attempt(Math.min(budget, FIRST_PASS_STEPS));
    if (quick !== 'budget' || budget <= FIRST_PASS_STEPS) return quick;
    this.reset();
    this.setOrder(this.failFirstOrder());
    return attempt(budget - FIRST_PASS_STEPS);
  }

  /** Checks that need no assignment: every demand has a provider; preallocations and the root meet the unnumbered group's rules. */
  private staticChecksPass(): boolean {
    if (this.domains.some((d) => d.length === 0)) return false;
    const group = this.request.unnumbered;
    for (const p of this.preProviders) {
      const provider = this.anchor.providers[p]!;
      if (group.forbiddenTraits.some((t) => provider.traits.has(t))) return false;
    }
    if (this.request.unnumberedCount === 0 && !this.unnumberedRulesMet()) return false;
    return true;
  }

  /** Providers the unnumbered group uses: its placed demands and the preallocations. */
  unnumberedProviders(): number[] {
    const out = [...this.preProviders];
    for (let i = 0; i < this.request.unnumberedCount; i++) {
      const p = this.assignment[i]!;
      if (p >= 0 && !out.includes(p)) out.push(p);
    }
    return out;
  }

  /**
   * The unnumbered group's required and any-of traits on its providers together. With
   * nothing placed for it (a flavor whose classes all went to numbered groups or plugins),
   * the root stands in, for member_of and forbidden traits too.
   */
  unnumberedRulesMet(): boolean {
    const group = this.request.unnumbered;
    const used = this.unnumberedProviders().map((p) => this.anchor.providers[p]!);
    if (used.length === 0) {
      if (!this.request.unnumberedTraitRule && group.forbiddenTraits.length === 0 && group.memberOf.length === 0 && (group.forbiddenAggregates ?? []).length === 0) return true;
      const root = this.anchor.root;
      if (group.forbiddenTraits.some((t) => root.traits.has(t))) return false;
      if (!inAllLists(root, group.memberOf) || inAny(root, group.forbiddenAggregates)) return false;
      used.push(root);
    }
    const has = (t: string): boolean => used.some((p) => p.traits.has(t));
    return group.requiredTraits.every(has) && anyOfMet(group.anyOfTraits, has);
  }

  /** Can demand `i` go on provider `p` now (capacity with this request's load, isolate)? */
  private fitsNow(i: number, p: number): boolean {
    const d = this.demands[i]!;
    if (d.numbered && this.request.isolate && this.numberedOn[p]! > 0) return false;
    const nClasses = this.nClasses;
    const classIndex = this.request.classIndex[i]!;
    for (let k = 0; k < classIndex.length; k++) {
      const slot = p * nClasses + classIndex[k]!;
      const total = this.load[slot]! + d.amounts[k]!;
      if (total > this.free[slot]! || total > this.maxUnit[slot]!) return false;
    }
    return true;
  }

  private assign(i: number, p: number): void {
    this.assignment[i] = p;
    const d = this.demands[i]!;
    const classIndex = this.request.classIndex[i]!;
    for (let k = 0; k < classIndex.length; k++) this.load[p * this.nClasses + classIndex[k]!]! += d.amounts[k]!;
    this.assignedCount[p]!++;
    if (d.numbered) this.numberedOn[p]!++;
  }

  private unassign(i: number): void {
    const p = this.assignment[i]!;
    const d = this.demands[i]!;
    const classIndex = this.request.classIndex[i]!;
    for (let k = 0; k < classIndex.length; k++) this.load[p * this.nClasses + classIndex[k]!]! -= d.amounts[k]!;
    this.assignedCount[p]!--;
    if (d.numbered) this.numberedOn[p]!--;
    this.assignment[i] = -1;
  }

  /** Place the demand at `depth` and everything after it. */
  private place(depth: number): boolean {
    if (depth === this.demands.length) {
      this.solutions++;
      this.stepsSinceSolution = 0;
      return this.onSolution(this);
    }
    if (this.memo !== undefined && this.memo.has(this.stateKey(depth))) return false;
    const solutionsBefore = this.solutions;
    const i = this.order[depth]!;
    const domain = this.domains[i]!;
    const d = this.demands[i]!;
    // Twin groups in non-decreasing provider order (strictly increasing under isolate).
    let low = -1;
    if (this.options.mode === 'first' && d.twinOfPrevious) low = this.assignment[i - 1]! + (this.request.isolate ? 1 : 0);
    const triedFresh = this.providerSymmetry && this.signatures !== undefined ? new Set<string>() : undefined;
    for (const p of domain) {
      if (p < low) continue;
      this.steps++;
      if (++this.stepsSinceSolution > this.budgetLimit) throw BUDGET;
      if (!this.fitsNow(i, p)) continue;
      if (triedFresh !== undefined && this.assignedCount[p] === 0) {
        const signature = this.signatures![p]!;
        if (triedFresh.has(signature)) continue;
        triedFresh.add(signature);
      }
      this.assign(i, p);
      // Stopping keeps the assignment in place for allocations() and mappings().
      if (this.consistent(depth) && this.place(depth + 1)) return true;
      this.unassign(i);
    }
    // Only a sub-search that found nothing is remembered: the same state fails again.
    if (this.steps > (this.options.memoAfterSteps ?? MEMO_AFTER_STEPS) && this.solutions === solutionsBefore) this.enableMemo().add(this.stateKey(depth));
    return false;
  }

  /** After the demand at `depth` was placed: the rules that can be decided now, and look-ahead. */
  private consistent(depth: number): boolean {
    if (depth === this.lastUnnumberedDepth && !this.unnumberedRulesMet()) return false;
    if (depth < this.lastUnnumberedDepth && this.request.unnumberedTraitRule && !this.unnumberedTraitsReachable()) return false;
    for (const list of this.subtreeChecksAt[depth]!) if (!this.sameSubtreeMet(list)) return false;
    if (depth + 1 >= this.demands.length) return true;
    // Forward checking: every later demand still has somewhere to go, and the demands left
    // with one provider fit there together (their loads are forced).
    const nClasses = this.nClasses;
    const forced = this.forced;
    const touched: number[] = [];
    let ok = true;
    for (let at = depth + 1; at < this.demands.length && ok; at++) {
      const j = this.order[at]!;
      let only = -1;
      let count = 0;
      for (const p of this.domains[j]!) {
        if (this.fitsNow(j, p)) {
          only = p;
          if (++count > 1) break;
        }
      }
      if (count === 0) ok = false;
      else if (count === 1) {
        const d = this.demands[j]!;
        const classIndex = this.request.classIndex[j]!;
        for (let k = 0; k < classIndex.length; k++) {
          const slot = only * nClasses + classIndex[k]!;
          if (forced[slot] === 0) touched.push(slot);
          forced[slot]! += d.amounts[k]!;
          const total = this.load[slot]! + forced[slot]!;
          if (total > this.free[slot]! || total > this.maxUnit[slot]!) ok = false;
        }
      }
    }
    for (const slot of touched) forced[slot] = 0;
    return ok && (!this.request.isolate || this.numberedMatchable(depth + 1));
  }

  /** Could the unnumbered traits still be met by the providers placed so far plus those the unplaced unnumbered demands may use? */
  private unnumberedTraitsReachable(): boolean {
    this.traitUnionOfDomain ??= this.domains.map((domain) => {
      const union = new Set<string>();
      for (const p of domain) for (const t of this.anchor.providers[p]!.traits) union.add(t);
      return union;
    });
    const group = this.request.unnumbered;
    const has = (t: string): boolean => {
      for (let j = 0; j < this.request.unnumberedCount; j++) {
        const p = this.assignment[j]!;
        if (p >= 0 ? this.anchor.providers[p]!.traits.has(t) : this.traitUnionOfDomain![j]!.has(t)) return true;
      }
      for (const p of this.preProviders) if (this.anchor.providers[p]!.traits.has(t)) return true;
      return false;
    };
    return group.requiredTraits.every(has) && anyOfMet(group.anyOfTraits, has);
  }

  /** same_subtree: one of the listed demands' providers is an ancestor-or-self of all of them. */
  private sameSubtreeMet(list: readonly number[]): boolean {
    const chosen = [...new Set(list.map((j) => this.assignment[j]!))];
    if (chosen.length === 1) return true;
    return chosen.some((top) => {
      const uuid = this.anchor.providers[top]!.uuid;
      return chosen.every((p) => this.anchor.ancestors(p).has(uuid));
    });
  }

  /** Under isolate: can the numbered demands placed at depth `from` or later still go on distinct free providers (Kuhn's matching)? */
  private numberedMatchable(from: number): boolean {
    const owner = new Map<number, number>();
    const tryDemand = (j: number, seen: Set<number>): boolean => {
      for (const p of this.domains[j]!) {
        if (seen.has(p) || !this.fitsNow(j, p)) continue;
        seen.add(p);
        const holder = owner.get(p);
        if (holder === undefined || tryDemand(holder, seen)) {
          owner.set(p, j);
          return true;
        }
      }
      return false;
    };
    for (let at = from; at < this.demands.length; at++) {
      const j = this.order[at]!;
      if (this.demands[j]!.numbered && !tryDemand(j, new Set())) return false;
    }
    return true;
  }

  private enableMemo(): Set<string> {
    if (this.memo === undefined) {
      this.memo = new Set();
      if (this.providerSymmetry) this.signatures = this.anchor.providers.map((p, i) => providerSignature(p, i < this.anchor.treeSize ? '' : this.anchor.rootUuids[i]!));
    }
    return this.memo;
  }

  /**
   * Everything the rest of the search (depth..) depends on: this request's loads, which
   * providers numbered groups hold, the twin bound, and the placements that rules still to
   * be checked read (unnumbered traits, same_subtree lists not yet complete).
   */
  private stateKey(depth: number): string {
    let key = `${depth}|${Array.prototype.join.call(this.load, ',')}|${Array.prototype.join.call(this.numberedOn, ',')}`;
    const i = this.order[depth]!;
    if (this.options.mode === 'first' && this.demands[i]!.twinOfPrevious) key += `|t${this.assignment[i - 1]}`;
    if (depth <= this.lastUnnumberedDepth) key += `|u${Array.prototype.slice.call(this.assignment, 0, this.request.unnumberedCount).join(',')}`;
    for (const list of this.request.sameSubtree) {
      if (list.some((j) => this.depthOf[j]! >= depth)) key += `|s${list.map((j) => this.assignment[j]).join(',')}`;
    }
    return key;
  }

  /** The allocations of the current assignment, one entry per provider and class (amounts of several groups summed). */
  allocations(): FitAllocation[] {
    const out: FitAllocation[] = [];
    for (let i = 0; i < this.demands.length; i++) {
      const d = this.demands[i]!;
      const providerUuid = this.anchor.providers[this.assignment[i]!]!.uuid;
      for (let k = 0; k < d.classes.length; k++) {
        const resourceClass = d.classes[k]!;
        const same = out.find((a) => a.providerUuid === providerUuid && a.resourceClass === resourceClass);
        if (same !== undefined) same.amount += d.amounts[k]!;
        else out.push({ providerUuid, resourceClass, amount: d.amounts[k]! });
      }
    }
    return out;
  }

  /** The same allocations by provider uuid, then class (insertion order: first placed first). */
  allocationsByProvider(): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (let i = 0; i < this.demands.length; i++) {
      const d = this.demands[i]!;
      if (d.classes.length === 0) continue; // a resourceless group: in the mappings only
      const classes = (out[this.anchor.providers[this.assignment[i]!]!.uuid] ??= {});
      for (let k = 0; k < d.classes.length; k++) classes[d.classes[k]!] = (classes[d.classes[k]!] ?? 0) + d.amounts[k]!;
    }
    return out;
  }

  /** Placement 1.34's mappings: group suffix -> uuids of the providers serving it (sorted). */
  mappings(): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (let i = 0; i < this.demands.length; i++) {
      const suffix = this.demands[i]!.group.suffix;
      const uuid = this.anchor.providers[this.assignment[i]!]!.uuid;
      const list = out[suffix];
      if (list === undefined) out[suffix] = [uuid];
      else if (!list.includes(uuid)) list.push(uuid);
    }
    for (const suffix in out) if (out[suffix]!.length > 1) out[suffix]!.sort();
    return out;
  }
}

const BUDGET = Symbol('search budget exceeded');

/** What makes two untouched providers interchangeable for a yes/no answer. */
function providerSignature(provider: FitProvider, outsideRoot: string): string {
  const inventories = Object.entries(provider.inventories)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([c, inv]) => [c, inv.total, inv.reserved, inv.minUnit, inv.maxUnit, inv.stepSize, inv.allocationRatio, provider.usages[c] ?? 0]);
  return JSON.stringify([outsideRoot, inventories, [...provider.traits].sort(), [...provider.aggregates].sort()]);
}

/** A group's label in reasons: the query parameter / extra-spec prefix that wrote it. */
export function groupLabel(group: RequestGroup): string {
  return `resources${group.suffix}`;
}
