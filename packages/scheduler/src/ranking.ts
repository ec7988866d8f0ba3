import type { FilterHooks, RequestSpec, SummaryBound, WeigherHooks } from '@ert/plugin-api';
import type { Host } from './host-state.js';
import { messageOf } from '@ert/plugin-api';
import type { ChangeJournal, HookCaller } from './host-manager.js';
import type { HostNarrowing } from './request-filters.js';
import { EXCLUDED_SUMMARY, METADATA_SUMMARY } from './summaries.js';

/** What a ranking reads of the host table (the HostManager). */
export interface HostIndex {
  readonly slots: ReadonlyArray<Host | undefined>;
  /** Version of each slot's host (-1: empty). */
  readonly versions: Float64Array;
  /** Slots whose version changed, in order. */
  readonly changes: ChangeJournal;
  /** The host of that name (for `FilterHooks.candidateHosts`); without it every slot is looked at. */
  host?(name: string): Host | undefined;
  /** Changes whenever a slot gets a host of another name or none (without it, names are compared). */
  readonly layout?: number;
  /**
   * The column of a host summary by name (summaries.ts; NaN: unknown). Without it, or without
   * the columns a request needs, every ranking evaluates every host.
   */
  summary?(name: string): Float64Array | undefined;
}

/**
 * Entries a memo keeps in its ordered list of best candidates (default). Each decision usually
 * changes one host (the one placed on), which leaves the list or moves in it; the list is rebuilt
 * from all hosts only when it runs out or when the normalisation (a weigher's min or max) moves.
 */
export const TOP_KEPT = 256;

/** A filter as the ranking calls it (built-in or plugin), in configured order. */
export interface FilterEntry {
  name: string;
  hooks: FilterHooks;
}

/** A weigher with its configured multiplier. */
export interface WeigherEntry {
  name: string;
  hooks: WeigherHooks;
  multiplier: number;
}

const NO_AGGREGATES: ReadonlySet<string> = new Set();

/** Per filter index, its summary bounds as columns to read (`Ranker.evaluate`). */
type FilterBounds = Array<Array<{ column: Float64Array; atLeast: number }> | undefined>;

/** True when the host at `slot` is below one of the bounds (NaN, unknown, is never below). */
function belowBound(bounds: ReadonlyArray<{ column: Float64Array; atLeast: number }>, slot: number): boolean {
  for (const { column, atLeast } of bounds) if (column[slot]! < atLeast) return true;
  return false;
}

/** Outcome codes of one host's evaluation (a filter's index when >= 0). */
const PASSED = -1;
/** Kept out by the host manager (a consumer's exclusion). */
export const EXCLUDED_BY_HOST_MANAGER = -2;
/** A weigher threw or returned a non-number: the host is out (fail closed). */
export const EXCLUDED_BY_WEIGHER = -3;
/** No host in this slot. */
const EMPTY_SLOT = -4;
/** Removed by request filter `i` (request-filters.ts): outcome `REQUEST_FILTER_BASE - i`. */
export const REQUEST_FILTER_BASE = -16;

/**
 * A filter or weigher as one request uses it. `broken`: its `appliesTo` threw (or returned a
 * promise) for this request, so it cannot say whether it applies: every host it would look at
 * fails with this reason (fail closed), naming the plugin and hook.
 */
export type PreparedFilter = FilterEntry & { broken?: string };
export type PreparedWeigher = WeigherEntry & { broken?: string };

/** The filters and weighers that apply to one request, fixed for the whole scan. */
export interface Prepared {
  spec: RequestSpec;
  filters: PreparedFilter[];
  weighers: PreparedWeigher[];
  /** Aggregate metadata key overriding each weigher's multiplier: `<weigher>_weight_multiplier`. */
  multiplierKeys: string[];
  /** The request filters' narrowing by aggregate membership, judged before anything else. */
  narrowing?: HostNarrowing;
  /**
   * The filters' necessary conditions on host summaries (`FilterHooks.summaryBounds`), all
   * filters together, each with the index of the filter that stated it.
   */
  bounds: Array<SummaryBound & { filter: number }>;
  /**
   * Per weigher, the summary equal to its raw score (`WeigherHooks.summaryScore`), or
   * undefined; a bounded ranking needs one for every weigher.
   */
  scores: Array<string | undefined>;
  /** The filters that may name their candidate hosts (`FilterHooks.candidateHosts`), asked at each bounded ranking. */
  naming: PreparedFilter[];
}

/**
 * Hooks a bounded ranking may call before it gives up and evaluates every host: at least this
 * many, plus one per BOUNDED_EVALUATIONS_PER hosts (a request most hosts fail is cheaper to
 * rank by evaluating everything once, which the memo then keeps).
 */
const BOUNDED_EVALUATIONS = 64;
const BOUNDED_EVALUATIONS_PER = 16;

/**
 * Per-(request, host) results of filters and raw weigher scores, valid while the host's
 * `version` is unchanged. Filters and weighers are pure functions of (host, request) by
 * contract, so re-using a result for an unchanged host gives exactly what a new call would.
 * The memo also keeps, over the hosts that passed, each weigher's min and max (with how many
 * hosts hold them) and every host's total weight, updated for the hosts that changed.
 */
export class Memo {
  readonly stamps: Float64Array;
  readonly outcomes: Int16Array;
  readonly reasons: Array<string | undefined>;
  /**
   * 1 where a filter's summary bound rejected the host without its hook being called (the
   * outcome names the filter); its reason is asked for when wanted (`Ranker.reasonOf`).
   */
  readonly boundRejected: Uint8Array;
  readonly raw: Float64Array;
  readonly multipliers: Float64Array;
  /** Total weight of each host that passed (valid when `ready`). */
  readonly weights: Float64Array;
  readonly min: Float64Array;
  readonly max: Float64Array;
  readonly minCount: Int32Array;
  readonly maxCount: Int32Array;
  passed = 0;
  /** False until the first complete ranking filled the aggregates. */
  ready = false;
  /** Number of host changes (see `HostIndex.changes`) this memo has taken into account. */
  changesSeen = 0;
  /**
   * The best candidates in order (best first): exactly the best `top.length` of all hosts that
   * passed, each with the weight it was inserted with; every other candidate is worse than the
   * last. `undefined` when it must be rebuilt. `topComplete`: it holds every candidate.
   */
  top: TopEntry[] | undefined = undefined;
  topComplete = false;
  /**
   * For bounded rankings (`Ranker.rankBounded`): whether each host was a potential candidate
   * (1) or out (0) without a hook call, valid while its version is `pruneStamps[slot]`.
   */
  pruneStamps: Float64Array | undefined = undefined;
  pruneStates: Uint8Array | undefined = undefined;
  /** What the last bounded ranking kept for the next one (`Ranker.rankBounded`). */
  kept: BoundedKept | undefined = undefined;
  /**
   * The bounded rankings' per-host states (`BoundedKept.state` is a view of it), one buffer
   * for the memo's life: a new one per ranking, kept until the next, was promoted out of the
   * young generation at 100,000 hosts and brought major collections.
   */
  boundedStates: Uint8Array | undefined;

  /**
   * `reuse`: a memo nobody will read again (evicted), whose fleet-sized arrays this one takes
   * over, reset as new ones, when its capacity is the same and its per-weigher arrays are
   * large enough. A memo's arrays are about 80 bytes per host; a workload of many shapes
   * created hundreds of memos a second, and collecting them was most of the decisions' tail.
   * `weigherSlots` (at least this request's weigher count; the scheduler gives every
   * configured weigher) sizes the per-weigher arrays, so that a memo can be taken over by a
   * request with more weighers: at 100,000 hosts, new arrays cost 50-80 ms of first touches.
   */
  constructor(
    readonly prepared: Prepared,
    readonly capacity: number,
    reuse?: Memo,
    weigherSlots = prepared.weighers.length,
  ) {
    const w = prepared.weighers.length;
    const take = reuse !== undefined && reuse.capacity === capacity && reuse.raw.length >= capacity * w ? reuse : undefined;
    this.stamps = (take?.stamps ?? new Float64Array(capacity)).fill(-1);
    this.outcomes = (take?.outcomes ?? new Int16Array(capacity)).fill(EMPTY_SLOT);
    this.reasons = take?.reasons.fill(undefined) ?? new Array<string | undefined>(capacity);
    this.boundRejected = (take?.boundRejected ?? new Uint8Array(capacity)).fill(0);
    // Entries past capacity * w (a larger request's) are never read by this memo.
    this.raw = take?.raw.fill(0, 0, capacity * w) ?? new Float64Array(capacity * Math.max(w, weigherSlots));
    this.multipliers = take?.multipliers.fill(0, 0, capacity * w) ?? new Float64Array(capacity * Math.max(w, weigherSlots));
    this.weights = take?.weights.fill(0) ?? new Float64Array(capacity);
    if (take?.pruneStamps !== undefined) {
      this.pruneStamps = take.pruneStamps.fill(-1);
      this.pruneStates = take.pruneStates!.fill(0);
    }
    // Every bounded ranking that does not start from `kept` clears what it uses.
    this.boundedStates = take?.boundedStates;
    this.min = new Float64Array(w);
    this.max = new Float64Array(w);
    this.minCount = new Int32Array(w);
    this.maxCount = new Int32Array(w);
  }
}

/** An entry of `Memo.top`. */
interface TopEntry {
  slot: number;
  host: Host;
  weight: number;
}

/** One candidate of a ranking: a host that passed every filter, with its total weight. */
export interface Candidate {
  host: Host;
  weight: number;
}

/** A ranking's result: the best `limit` candidates, best first, and how many passed. */
export interface Ranking {
  candidates: Candidate[];
  /** How many hosts passed every filter (of a bounded ranking: see `bounded`). */
  passed: number;
  /** Per weigher: the lowest raw score among the candidates, and 1 / (max - min) (0 when all equal). */
  min: Float64Array;
  scale: Float64Array;
  /**
   * True for a bounded ranking (`Ranker.rankBounded`): only the hosts that decide the result
   * were evaluated (by this ranking or, when it starts from what the memo kept, by that memo's
   * earlier ones), so `passed` counts those only (a complete ranking, which explanations use,
   * counts all).
   */
  bounded?: boolean;
}

/** Order of candidates: higher weight first, then host name (deterministic ties). */
export function better(aWeight: number, aName: string, bWeight: number, bName: string): boolean {
  return aWeight > bWeight || (aWeight === bWeight && aName < bName);
}

/**
 * Runs filters and weighers over hosts. Weighers' raw scores are min-max normalised over the
 * candidates (all equal: 0), multiplied by the multiplier (the configured one, or the host's
 * aggregate metadata `<weigher>_weight_multiplier` when it is a number) and summed.
 */
export class Ranker {
  /**
   * `topKept`: how many best candidates each memo keeps in order between decisions (default
   * TOP_KEPT); rankings asking for more select from every host. `keptOrder`: how many a bounded
   * ranking keeps for the next one (`BoundedKept`, default KEPT_ORDER).
   */
  constructor(
    private readonly filters: readonly FilterEntry[],
    private readonly weighers: readonly WeigherEntry[],
    private readonly callHook: HookCaller,
    private readonly topKept = TOP_KEPT,
    private readonly keptOrder = KEPT_ORDER,
  ) {}

  /** The hosts' name order, for the bounded ranking's ties. */
  private readonly nameOrder = new NameOrder();

  /** How many weighers are configured: the most any request uses (`Memo`'s `weigherSlots`). */
  get weigherCount(): number {
    return this.weighers.length;
  }

  /**
   * The filters and weighers whose `appliesTo` accepts this request (all when absent). An
   * `appliesTo` that throws cannot tell "not for me": the entry is kept, marked `broken`, and
   * rejects every host it is asked about with a reason naming the plugin and hook (fail
   * closed), without its `filter` or `weigh` being called.
   */
  prepare(spec: RequestSpec, narrowing?: HostNarrowing): Prepared {
    const prepared = <E extends FilterEntry | WeigherEntry>(kind: 'filter' | 'weigher', entry: E): Array<E & { broken?: string }> => {
      const appliesTo = entry.hooks.appliesTo;
      if (!appliesTo) return [entry];
      try {
        return this.callHook(entry.name, 'appliesTo', () => appliesTo.call(entry.hooks, spec)) === false ? [] : [entry];
      } catch (error) {
        return [{ ...entry, broken: `${kind} "${entry.name}" hook appliesTo failed: ${messageOf(error)}` }];
      }
    };
    const weighers = this.weighers.flatMap((w) => prepared('weigher', w));
    const filters = this.filters.flatMap((f) => prepared('filter', f));
    // What the filters and weighers say of the host summaries for this request; a throw, or
    // anything malformed, says nothing (fewer hosts pruned, or no bounded ranking).
    const bounds: Prepared['bounds'] = [];
    for (let f = 0; f < filters.length; f++) {
      const entry = filters[f]!;
      const summaryBounds = entry.hooks.summaryBounds;
      if (entry.broken !== undefined || summaryBounds === undefined) continue;
      try {
        const stated = this.callHook(entry.name, 'summaryBounds', () => summaryBounds.call(entry.hooks, spec));
        if (!Array.isArray(stated)) continue;
        for (const b of stated as unknown[]) {
          const bound = b as Partial<SummaryBound> | null;
          if (typeof bound === 'object' && bound !== null && typeof bound.summary === 'string' && typeof bound.atLeast === 'number' && !Number.isNaN(bound.atLeast)) {
            bounds.push({ summary: bound.summary, atLeast: bound.atLeast, filter: f });
          }
        }
      } catch {
        // No bounds from this filter.
      }
    }
    const scores = weighers.map((entry) => {
      const summaryScore = entry.hooks.summaryScore;
      if (entry.broken !== undefined || summaryScore === undefined) return undefined;
      try {
        const name: unknown = this.callHook(entry.name, 'summaryScore', () => summaryScore.call(entry.hooks, spec));
        return typeof name === 'string' ? name : undefined;
      } catch {
        return undefined;
      }
    });
    return {
      spec,
      filters,
      weighers,
      multiplierKeys: weighers.map((w) => `${w.name}_weight_multiplier`),
      ...(narrowing !== undefined && narrowing.steps.length > 0 ? { narrowing } : {}),
      bounds,
      scores,
      naming: filters.filter((f) => f.broken === undefined && f.hooks.candidateHosts !== undefined),
    };
  }

  /**
   * Evaluate one host into `memo` at its slot: the first filter that rejects it (with the reason),
   * or the raw scores and multipliers of every weigher. Hook errors reject the host with a reason
   * naming the plugin and hook. With `bounds` (the indexed strategy's complete rankings), a
   * filter whose summary bound the host is below rejects it without a hook call, and its reason
   * is asked for only when an explanation shows it (`reasonOf`): a request no host can take,
   * at 100,000 hosts, no longer has every host's reason written.
   */
  evaluate(host: Host, memo: Memo, version: number, bounds?: FilterBounds): void {
    const { prepared } = memo;
    const slot = host.slot;
    memo.stamps[slot] = version;
    memo.reasons[slot] = undefined;
    memo.boundRejected[slot] = 0;
    // The request filters' narrowing: a host outside it is out before anything looks at it.
    const narrowed = prepared.narrowing?.judge(host.providers[0]?.aggregates ?? NO_AGGREGATES);
    if (narrowed !== undefined) {
      memo.outcomes[slot] = REQUEST_FILTER_BASE - narrowed.step;
      memo.reasons[slot] = narrowed.reason;
      return;
    }
    if (host.exclusion !== undefined) {
      memo.outcomes[slot] = EXCLUDED_BY_HOST_MANAGER;
      memo.reasons[slot] = host.exclusion;
      return;
    }
    const spec = prepared.spec;
    for (let f = 0; f < prepared.filters.length; f++) {
      const entry = prepared.filters[f]!;
      if (entry.broken !== undefined) {
        memo.outcomes[slot] = f;
        memo.reasons[slot] = entry.broken;
        return;
      }
      const stated = bounds?.[f];
      if (stated !== undefined && belowBound(stated, slot)) {
        memo.outcomes[slot] = f;
        memo.boundRejected[slot] = 1;
        return;
      }
      const reason = this.filterReason(entry, host, spec);
      if (reason !== undefined) {
        memo.outcomes[slot] = f;
        memo.reasons[slot] = reason;
        return;
      }
    }
    const w = prepared.weighers.length;
    for (let i = 0; i < w; i++) {
      const entry = prepared.weighers[i]!;
      if (entry.broken !== undefined) {
        memo.outcomes[slot] = EXCLUDED_BY_WEIGHER;
        memo.reasons[slot] = entry.broken;
        return;
      }
      let score: unknown;
      try {
        score = this.callHook(entry.name, 'weigh', () => entry.hooks.weigh(host, spec));
      } catch (error) {
        memo.outcomes[slot] = EXCLUDED_BY_WEIGHER;
        memo.reasons[slot] = `weigher "${entry.name}" hook weigh failed: ${messageOf(error)}`;
        return;
      }
      if (typeof score !== 'number' || !Number.isFinite(score)) {
        memo.outcomes[slot] = EXCLUDED_BY_WEIGHER;
        memo.reasons[slot] = `weigher "${entry.name}" hook weigh returned ${String(score)}, not a finite number`;
        return;
      }
      memo.raw[slot * w + i] = score;
      memo.multipliers[slot * w + i] = multiplierOf(host, prepared, i);
    }
    memo.outcomes[slot] = PASSED;
  }

  /** What filter `entry` says of the host: undefined (passes) or the reason it rejects it. */
  private filterReason(entry: PreparedFilter, host: Host, spec: RequestSpec): string | undefined {
    let reason: string | undefined | void;
    try {
      reason = this.callHook(entry.name, 'filter', () => entry.hooks.filter(host, spec));
    } catch (error) {
      reason = `filter "${entry.name}" hook filter failed: ${messageOf(error)}`;
    }
    if (reason === undefined || reason === null) return undefined;
    return typeof reason === 'string' ? reason : `filter "${entry.name}" returned ${String(reason)}`;
  }

  /**
   * Why the host at `slot` was rejected for `memo`'s request, as evaluated (empty when it was
   * not). For a host a filter's summary bound rejected, that filter's hook is asked now, once
   * (the reason is kept in the memo); call it before the host changes. A hook that passes the
   * host contradicts its plugin's bound: the reason says so, naming the filter.
   */
  reasonOf(slots: ReadonlyArray<Host | undefined>, memo: Memo, slot: number): string {
    const host = slots[slot];
    if (memo.boundRejected[slot] === 1 && host !== undefined) {
      const entry = memo.prepared.filters[memo.outcomes[slot]!]!;
      memo.reasons[slot] =
        this.filterReason(entry, host, memo.prepared.spec) ?? `filter "${entry.name}": the host is below one of its summary bounds, though its filter hook passes it`;
      memo.boundRejected[slot] = 0;
    }
    return memo.reasons[slot] ?? '';
  }

  /** Per filter, the summary columns and least values of its bounds (none without summaries). */
  private filterBounds(index: HostIndex, prepared: Prepared): FilterBounds | undefined {
    if (index.summary === undefined || prepared.bounds.length === 0) return undefined;
    const bounds: FilterBounds = [];
    for (const bound of prepared.bounds) {
      // A summary nobody published rejects nothing.
      const column = index.summary(bound.summary);
      if (column !== undefined) (bounds[bound.filter] ??= []).push({ column, atLeast: bound.atLeast });
    }
    return bounds;
  }

  /**
   * Bring every host's entry in `memo` up to date (re-evaluating only hosts whose version
   * changed, all of them when `fresh`) and return the best `limit` candidates. The changed hosts
   * are found in the host index's change journal (only those changed since this memo was last
   * ranked), not by comparing every version. Min, max and weights are updated for the changed
   * hosts only, unless a weigher's min or max moved, which re-weighs every candidate; the best
   * candidates are kept in order (`Memo.top`) and updated for the changed hosts. The result is
   * the same as recomputing everything (`fresh`, which selects from every host).
   */
  rank(index: HostIndex, memo: Memo, limit: number, fresh = false): Ranking {
    if (!fresh && !memo.ready && limit > 0 && limit < index.slots.length && limit <= this.topKept) {
      // A request's first rankings (its memo not filled yet): from the host summaries.
      const bounded = this.rankBounded(index, memo, limit);
      if (bounded !== undefined) return bounded;
    }
    const { slots, versions, changes } = index;
    const w = memo.prepared.weighers.length;
    const { stamps, outcomes, raw, min, max, minCount, maxCount } = memo;
    const count = slots.length;
    const changesNow = changes.base + changes.slots.length;
    // The full-scan strategy calls every hook: it is what the indexed one is checked against.
    const bounds = fresh ? undefined : this.filterBounds(index, memo.prepared);
    if (fresh || !memo.ready) {
      for (let slot = 0; slot < count; slot++) {
        if (fresh || stamps[slot] !== versions[slot]) this.refreshSlot(slots, versions, memo, slot, bounds);
      }
      this.rescan(memo, count, -1);
      this.reweigh(memo, count, -1);
      memo.ready = true;
      memo.top = undefined;
    } else {
      const changed: number[] = [];
      // The min and max the current weights were computed with.
      const before = Float64Array.from([...min, ...max]);
      const old = new Float64Array(w);
      const rescan = new Uint8Array(w);
      const update = (slot: number): void => {
        if (stamps[slot] === versions[slot]) return;
        const wasPassed = outcomes[slot] === PASSED;
        if (wasPassed) for (let i = 0; i < w; i++) old[i] = raw[slot * w + i]!;
        this.refreshSlot(slots, versions, memo, slot, bounds);
        const isPassed = outcomes[slot] === PASSED;
        if (wasPassed) {
          memo.passed--;
          for (let i = 0; i < w; i++) {
            const v = old[i]!;
            if (v === min[i] && --minCount[i]! === 0) rescan[i] = 1;
            if (v === max[i] && --maxCount[i]! === 0) rescan[i] = 1;
          }
        }
        if (isPassed) {
          memo.passed++;
          for (let i = 0; i < w; i++) {
            const v = raw[slot * w + i]!;
            if (v < min[i]! || minCount[i] === 0) {
              if (minCount[i] === 0 && memo.passed > 1) rescan[i] = 1;
              min[i] = v;
              minCount[i] = 1;
            } else if (v === min[i]) minCount[i]!++;
            if (v > max[i]! || maxCount[i] === 0) {
              if (maxCount[i] === 0 && memo.passed > 1) rescan[i] = 1;
              max[i] = v;
              maxCount[i] = 1;
            } else if (v === max[i]) maxCount[i]!++;
          }
        }
        changed.push(slot);
      };
      if (memo.changesSeen >= changes.base) {
        // A slot listed twice is refreshed once: afterwards its stamp matches its version.
        for (let i = memo.changesSeen - changes.base; i < changes.slots.length; i++) {
          const slot = changes.slots[i]!;
          if (slot < count) update(slot);
        }
      } else {
        // The journal was cut before this memo read it all: compare every version.
        for (let slot = 0; slot < count; slot++) update(slot);
      }
      if (changed.length > 0) {
        for (let i = 0; i < w; i++) if (rescan[i]) this.rescan(memo, count, i);
        let moved = false;
        for (let i = 0; i < w; i++) if (min[i] !== before[i] || max[i] !== before[w + i]) moved = true;
        if (moved) {
          this.reweigh(memo, count, -1);
          memo.top = undefined;
        } else {
          for (const slot of changed) {
            this.reweigh(memo, count, slot);
            if (memo.top) updateTop(memo, slot, slots[slot], this.topKept);
          }
        }
      }
    }
    memo.changesSeen = changesNow;
    const scale = scaleOf(memo.min, memo.max);
    const passed = memo.passed;
    const result = (candidates: Candidate[]): Ranking => ({ candidates, passed, min: Float64Array.from(min), scale });
    if (limit <= 0) return result([]);
    if (fresh || limit > this.topKept) return result(selectBest(slots, memo, limit));
    if (!memo.top || (memo.top.length < limit && !memo.topComplete)) {
      memo.top = selectBest(slots, memo, this.topKept).map((c) => ({ slot: c.host.slot, host: c.host, weight: c.weight }));
      memo.topComplete = memo.top.length < this.topKept;
    }
    return result(memo.top.slice(0, limit).map((e) => ({ host: e.host, weight: e.weight })));
  }

  /**
   * A ranking that evaluates only the hosts that decide it, for a request whose memo has not
   * been filled yet (a first-seen shape), read from the host summaries (summaries.ts):
   *
   * 1. every host is judged without a hook call: out when excluded, outside the request
   *    filters' narrowing, or below one of the filters' `summaryBounds` (which are necessary
   *    conditions: such a host is one the filters reject); the others are potential
   *    candidates, scored by each weigher's `summaryScore` column (equal to `weigh` for every
   *    host that passes). A host already evaluated at its current version keeps its outcome;
   *    a potential candidate without a known score is evaluated now;
   * 2. each weigher's min and max over the hosts that pass: potential candidates are
   *    evaluated from the lowest (highest) score up (down) until one passes, whose score is
   *    then exactly the min (max) over every host that passes;
   * 3. weights from those, with the same float operations as a complete ranking, and the best
   *    `limit` candidates: potential candidates are evaluated best first, until `limit` pass.
   *
   * Every host not evaluated either cannot pass, or is no better than the ones returned and
   * does not hold a min or max, so the result equals the complete ranking's (the equivalence
   * and ranking tests compare them). What it found is kept in the memo (`BoundedKept`), and
   * the same memo's next bounded ranking starts from it, judging only the hosts changed since
   * (step 0 below), when it can. Undefined when it cannot answer: a weigher without a
   * summary (or its column), a summary differing from `weigh` on an evaluated host, more than
   * BOUNDED_EVALUATIONS (+ 1 per BOUNDED_EVALUATIONS_PER hosts) evaluations, or no host
   * passing (the complete ranking then explains why). What was evaluated stays in the memo,
   * at its host's version, for the complete ranking to reuse. The memo holds outcomes of the
   * evaluated hosts only: an explanation needs a complete ranking (`rank` with limit 0).
   */
  rankBounded(index: HostIndex, memo: Memo, limit: number): Ranking | undefined {
    const { prepared } = memo;
    if (index.summary === undefined) return giveUp('no summaries');
    if (prepared.filters.some((f) => f.broken !== undefined) || prepared.weighers.some((x) => x.broken !== undefined)) return giveUp('broken');
    const w = prepared.weighers.length;
    const scoreColumns: Float64Array[] = [];
    for (const name of prepared.scores) {
      const column = name === undefined ? undefined : index.summary(name);
      if (column === undefined) return giveUp('no score');
      scoreColumns.push(column);
    }
    const boundColumns: Float64Array[] = [];
    const boundAt: number[] = [];
    for (const bound of prepared.bounds) {
      // A summary nobody published prunes nothing.
      const column = index.summary(bound.summary);
      if (column === undefined) continue;
      boundColumns.push(column);
      boundAt.push(bound.atLeast);
    }
    const { slots, versions } = index;
    const n = slots.length;
    const { stamps, outcomes, raw, multipliers, weights } = memo;
    /** 0: out (or already returned), 1: potential candidate, 2: evaluated and passed. */
    let state = (memo.boundedStates ??= new Uint8Array(memo.capacity)).subarray(0, n);
    /** Slots in state 2. */
    let passing = 0;
    let budget = BOUNDED_EVALUATIONS + Math.floor(n / BOUNDED_EVALUATIONS_PER);
    let mismatch = false;
    const evaluate = (slot: number): boolean => {
      budget--;
      this.evaluate(slots[slot]!, memo, versions[slot]!);
      if (outcomes[slot] !== PASSED) {
        state[slot] = 0;
        return false;
      }
      state[slot] = 2;
      passing++;
      for (let i = 0; i < w; i++) {
        const published = scoreColumns[i]![slot]!;
        if (!Number.isNaN(published) && published !== raw[slot * w + i]) mismatch = true;
      }
      return true;
    };

    // 1. Potential candidates, without a hook call.
    const narrowing = prepared.narrowing;
    if (memo.pruneStamps === undefined) {
      memo.pruneStamps = new Float64Array(memo.capacity).fill(-1);
      memo.pruneStates = new Uint8Array(memo.capacity);
    }
    const pruneStamps = memo.pruneStamps;
    const pruneStates = memo.pruneStates!;
    // Read from the summaries rather than the host objects when the index has them (see summaries.ts).
    const excludedColumn = index.summary(EXCLUDED_SUMMARY);
    const metadataColumn = index.summary(METADATA_SUMMARY);
    /**
     * Out (0) or a potential candidate (1) without a hook call; kept per host version. For a
     * potential candidate, its weighers' multipliers are set as `evaluate` sets them.
     */
    const prune = (slot: number, host: Host): number => {
      // 0: not excluded when last summarised (evaluation checks the host before it is returned).
      if (excludedColumn?.[slot] !== 0 && host.exclusion !== undefined) return 0;
      if (narrowing !== undefined && narrowing.judge(host.providers[0]?.aggregates ?? NO_AGGREGATES) !== undefined) return 0;
      for (let b = 0; b < boundColumns.length; b++) {
        // NaN (unknown) is never below a bound.
        if (boundColumns[b]![slot]! < boundAt[b]!) return 0;
      }
      if (metadataColumn?.[slot] === 0) for (let i = 0; i < w; i++) multipliers[slot * w + i] = prepared.weighers[i]!.multiplier;
      else for (let i = 0; i < w; i++) multipliers[slot * w + i] = multiplierOf(host, prepared, i);
      return 1;
    };
    const consider = (slot: number): void => {
      const version = versions[slot]!;
      // An empty slot's version is -1.
      if (version < 0) return;
      if (stamps[slot] === version) {
        if (outcomes[slot] === PASSED) {
          state[slot] = 2;
          passing++;
        }
        return;
      }
      if (pruneStamps[slot] !== version) {
        const host = slots[slot];
        if (host === undefined) return;
        pruneStates[slot] = prune(slot, host);
        pruneStamps[slot] = version;
      }
      if (pruneStates[slot] === 0) return;
      for (let i = 0; i < w; i++) {
        if (Number.isNaN(scoreColumns[i]![slot]!)) {
          evaluate(slot);
          return;
        }
      }
      state[slot] = 1;
    };
    const nameRank = this.nameOrder.of(slots, index.layout);
    const changesNow = index.changes.base + index.changes.slots.length;
    const keptOrder = this.keptOrder;

    // 0. A repeated shape: from what the memo's last bounded ranking kept, judging only the
    // hosts changed since (`BoundedKept`); anything it cannot settle ranks anew.
    const kept = memo.kept;
    memo.kept = undefined;
    if (kept !== undefined && prepared.naming.length === 0 && kept.state.length === n && kept.nameRank === nameRank && kept.changesSeen >= index.changes.base) {
      state = kept.state;
      passing = kept.passing;
      const ranking = fromKept(kept);
      if (ranking !== undefined) return ranking;
      passing = 0;
      budget = BOUNDED_EVALUATIONS + Math.floor(n / BOUNDED_EVALUATIONS_PER);
      mismatch = false;
    }
    function fromKept(from: BoundedKept): Ranking | undefined {
      const { order, min, max, scale } = from;
      /** Weighs `slot` with the kept min and scale: from its raw scores when evaluated. */
      const weighKept = (slot: number): void => {
        weights[slot] = weightOf(slot, state[slot] === 2, w, raw, multipliers, scoreColumns, min, scale);
      };
      const journal = index.changes;
      const changed = new Set<number>();
      for (let j = from.changesSeen - journal.base; j < journal.slots.length; j++) if (journal.slots[j]! < n) changed.add(journal.slots[j]!);
      for (const slot of changed) {
        passing -= state[slot] === 2 ? 1 : 0;
        state[slot] = 0;
        consider(slot);
        if (budget < 0 || mismatch) return giveUp('kept: evaluation');
        if (state[slot] === 0) continue;
        for (let i = 0; i < w; i++) {
          const v = state[slot] === 2 ? raw[slot * w + i]! : scoreColumns[i]![slot]!;
          // Outside the kept min and max, it could move them.
          if (v < min[i]! || v > max[i]!) return giveUp('kept: outside the min or max');
        }
        weighKept(slot);
      }
      // A host that held a min or max changed: another host that passes must hold that value,
      // or the normalisation may move. Hosts of one profile share their extremes: the first
      // potential candidate with the value is usually it.
      const holders = from.holders.slice();
      for (let k = 0; k < holders.length; k++) {
        if (!changed.has(holders[k]!)) continue;
        const i = k >> 1;
        const value = k % 2 === 0 ? min[i]! : max[i]!;
        const holder = holderOf(i, value);
        if (holder < 0) return giveUp('kept: no other host holds a min or max');
        holders[k] = holder;
      }
      /** A host that passes with score `value` for weigher `i` (evaluating at most HOLDER_EVALUATIONS), or -1. */
      function holderOf(i: number, value: number): number {
        const column = scoreColumns[i]!;
        let evaluations = 0;
        for (let slot = 0; slot < n; slot++) {
          const st = state[slot];
          if (st === 0 || (st === 2 ? raw[slot * w + i] : column[slot]) !== value) continue;
          if (st === 2) return slot;
          if (evaluations++ === HOLDER_EVALUATIONS) return -1;
          if (evaluate(slot)) {
            if (mismatch) return -1;
            weighKept(slot);
            return slot;
          }
          if (budget < 0) return -1;
        }
        return -1;
      }
      // The kept order without the changed hosts, then each changed one where it now belongs
      // when it is better than the last kept (every host outside the order is worse than that).
      const next = order.filter((slot) => !changed.has(slot));
      const before = (a: number, b: number): boolean => ranksBefore(weights, nameRank, a, b);
      for (const slot of changed) {
        if (state[slot] === 0) continue;
        const last = next[next.length - 1];
        if (!from.complete && (last === undefined || !before(slot, last))) continue;
        let at = next.length;
        while (at > 0 && before(slot, next[at - 1]!)) at--;
        next.splice(at, 0, slot);
      }
      const candidates: Candidate[] = [];
      const order2: number[] = [];
      for (const slot of next) {
        // Evaluated and failed while looking for a holder.
        if (state[slot] === 0) continue;
        if (candidates.length === limit) {
          order2.push(slot);
          continue;
        }
        if (state[slot] === 1) {
          if (!evaluate(slot)) {
            if (budget < 0) return giveUp('kept: budget');
            continue;
          }
          if (mismatch) return giveUp('kept: mismatch');
          weighKept(slot);
        }
        order2.push(slot);
        candidates.push({ host: slots[slot]!, weight: weights[slot]! });
      }
      // The order ran short: only a complete one says no other host passes.
      if (candidates.length < limit && !from.complete) return giveUp('kept: the order ran short');
      if (candidates.length === 0) return giveUp('nothing passes');
      // Changed hosts inserted may have grown the order: its tail goes (all worse than what stays).
      const room = Math.max(keptOrder, limit + EXTRA_PICKED);
      const trimmed = order2.length > room;
      if (trimmed) order2.length = room;
      memo.kept = { ...from, order: order2, complete: from.complete && !trimmed, passing, holders, changesSeen: changesNow };
      return { candidates, passed: candidates.length < limit ? candidates.length : passing, min: Float64Array.from(min), scale: Float64Array.from(scale), bounded: true };
    }

    state.fill(0);
    const named = this.candidateHosts(prepared);
    if (named !== undefined && index.host !== undefined) {
      for (const name of named) {
        const host = index.host(name);
        if (host !== undefined && slots[host.slot] === host) consider(host.slot);
      }
    } else if (named !== undefined) {
      for (let slot = 0; slot < n; slot++) if (named.has(slots[slot]?.name ?? '')) consider(slot);
    } else {
      forEverySlot(n, consider);
    }
    if (budget < 0) return giveUp('budget (unknown scores)');
    if (mismatch) return giveUp('mismatch');

    // 2. Each weigher's min and max over the hosts that pass. One pass finds every weigher's
    // most extreme potential candidates (an evaluated one first among equals); only when one
    // of them fails its filters is that weigher's list looked for again.
    const min = new Float64Array(w);
    const max = new Float64Array(w);
    const { lowSlot, highSlot } = extremesOf(state, raw, w, scoreColumns);
    /** The evaluated hosts whose raw scores are the min and max (see `BoundedKept.holders`). */
    const holders: number[] = [];
    for (let i = 0; i < w; i++) {
      const column = scoreColumns[i]!;
      for (let pass = 0; pass < 2; pass++) {
        const lowest = pass === 0;
        let found = false;
        const first = lowest ? lowSlot[i]! : highSlot[i]!;
        if (first < 0) return giveUp('nothing passes'); // the complete ranking explains why
        // The first pass's extreme, unless another weigher's evaluation found it failing.
        if (state[first] === 2 || (state[first] === 1 && evaluate(first))) {
          (lowest ? min : max)[i] = raw[first * w + i]!;
          holders.push(first);
          found = true;
        }
        if (mismatch) return giveUp('mismatch');
        if (budget < 0) return giveUp('budget (extremes)');
        for (let picked = 1; !found; picked *= 4) {
          // The `picked` most extreme potential candidates, most extreme first.
          const extremes = mostExtreme(state, raw, w, i, column, lowest, picked);
          if (extremes.length === 0) return giveUp('nothing passes'); // the complete ranking explains why
          for (let e = 0; e < extremes.length && !found; e++) {
            const slot = extremes[e]!;
            if (state[slot] === 2 || evaluate(slot)) {
              (lowest ? min : max)[i] = raw[slot * w + i]!;
              holders.push(slot);
              found = true;
            }
            if (mismatch) return giveUp('mismatch');
            if (budget < 0) return giveUp('budget (extremes)');
          }
        }
      }
    }

    // 3. Weights, as `reweigh` computes them, and the best `limit`.
    const scale = scaleOf(min, max);
    weighPotential(state, raw, multipliers, scoreColumns, min, scale, weights);
    // A host evaluated in step 3 (its state now 2) is weighed again, from its raw scores.
    const weigh = (slot: number): void => {
      weights[slot] = weightOf(slot, true, w, raw, multipliers, scoreColumns, min, scale);
    };
    const candidates: Candidate[] = [];
    /**
     * Keeps this ranking for the memo's next one (`BoundedKept`), from its first list of the
     * best potential candidates: the returned ones are potential candidates again.
     */
    const keep = (best: number[], complete: boolean): void => {
      // Where named instances are changes between rankings: such a request always ranks anew.
      if (prepared.naming.length > 0) return;
      for (const c of candidates) state[c.host.slot] = 2;
      memo.kept = {
        state,
        passing: passing + candidates.length,
        min,
        max,
        scale,
        holders,
        order: best.filter((slot) => state[slot] !== 0),
        complete,
        changesSeen: changesNow,
        nameRank,
      };
    };
    for (let extra = EXTRA_PICKED, round = 0; ; extra *= 4, round++) {
      // The first list is long enough to be kept.
      const wanted = Math.max(limit - candidates.length + extra, round === 0 ? this.keptOrder : 0);
      const best = selectPotential(state, weights, nameRank, wanted);
      for (const slot of best) {
        if (state[slot] === 1) {
          if (!evaluate(slot)) {
            if (budget < 0) return giveUp('budget (best)');
            continue;
          }
          if (mismatch) return giveUp('mismatch');
          weigh(slot);
        }
        state[slot] = 0;
        passing--;
        candidates.push({ host: slots[slot]!, weight: weights[slot]! });
        if (candidates.length === limit) {
          const passed = candidates.length + passing;
          if (round === 0) keep(best, best.length < wanted);
          // Copies: the kept ones must not change with what a caller does to its ranking.
          return { candidates, passed, min: Float64Array.from(min), scale: Float64Array.from(scale), bounded: true };
        }
      }
      // Every potential candidate was looked at: these are all the hosts that pass (none: the
      // complete ranking explains why).
      if (best.length < wanted) {
        if (candidates.length === 0) return giveUp('nothing passes');
        if (round === 0) keep(best, true);
        return { candidates, passed: candidates.length, min: Float64Array.from(min), scale: Float64Array.from(scale), bounded: true };
      }
      if (budget < 0) return giveUp('budget (best)');
    }
  }

  /**
   * The only hosts the filters can accept now (`FilterHooks.candidateHosts`, intersected), or
   * undefined: any. Asked at each ranking, not kept with the memo: where the named instances
   * are may change while the request stays the same.
   */
  private candidateHosts(prepared: Prepared): Set<string> | undefined {
    let names: Set<string> | undefined;
    for (const entry of prepared.naming) {
      const candidateHosts = entry.hooks.candidateHosts!;
      try {
        const named: unknown = this.callHook(entry.name, 'candidateHosts', () => candidateHosts.call(entry.hooks, prepared.spec));
        if (!Array.isArray(named) || named.some((n) => typeof n !== 'string')) continue;
        names = names === undefined ? new Set(named as string[]) : new Set((named as string[]).filter((n) => names!.has(n)));
      } catch {
        // Any host, as far as this filter says.
      }
    }
    return names;
  }

  /** Re-evaluate one slot (a host, or nothing) into the memo. */
  private refreshSlot(slots: ReadonlyArray<Host | undefined>, versions: Float64Array, memo: Memo, slot: number, bounds?: FilterBounds): void {
    const host = slots[slot];
    if (host) this.evaluate(host, memo, versions[slot]!, bounds);
    else {
      memo.stamps[slot] = versions[slot]!;
      memo.outcomes[slot] = EMPTY_SLOT;
      memo.boundRejected[slot] = 0;
    }
  }

  /** Recompute min, max and their counts (of weigher `only`, or all when -1) and `passed`. */
  private rescan(memo: Memo, count: number, only: number): void {
    const w = memo.prepared.weighers.length;
    const { outcomes, raw, min, max, minCount, maxCount } = memo;
    const from = only < 0 ? 0 : only;
    const to = only < 0 ? w : only + 1;
    for (let i = from; i < to; i++) {
      min[i] = Infinity;
      max[i] = -Infinity;
      minCount[i] = 0;
      maxCount[i] = 0;
    }
    let passed = 0;
    for (let slot = 0; slot < count; slot++) {
      if (outcomes[slot] !== PASSED) continue;
      passed++;
      for (let i = from; i < to; i++) {
        const v = raw[slot * w + i]!;
        if (v < min[i]!) {
          min[i] = v;
          minCount[i] = 1;
        } else if (v === min[i]) minCount[i]!++;
        if (v > max[i]!) {
          max[i] = v;
          maxCount[i] = 1;
        } else if (v === max[i]) maxCount[i]!++;
      }
    }
    memo.passed = passed;
  }

  /** Recompute the total weight of one slot, or of every slot when `only` is -1. */
  private reweigh(memo: Memo, count: number, only: number): void {
    const w = memo.prepared.weighers.length;
    const { outcomes, raw, multipliers, weights, min } = memo;
    const scale = scaleOf(memo.min, memo.max);
    const from = only < 0 ? 0 : only;
    const to = only < 0 ? count : only + 1;
    for (let slot = from; slot < to; slot++) {
      if (outcomes[slot] !== PASSED) continue;
      let weight = 0;
      for (let i = 0; i < w; i++) {
        const k = slot * w + i;
        weight += multipliers[k]! * (raw[k]! - min[i]!) * scale[i]!;
      }
      weights[slot] = weight;
    }
  }
}

/**
 * The best `limit` hosts that passed, best first, looking at every slot. A host object (for its
 * name, the tie-break) is looked at only when its weight can enter the best `limit`.
 */
function selectBest(slots: ReadonlyArray<Host | undefined>, memo: Memo, limit: number): Candidate[] {
  const { outcomes, weights } = memo;
  const best: Candidate[] = [];
  if (limit >= memo.passed) {
    // Everything that passed (explanations): sort once rather than insert one by one.
    for (let slot = 0; slot < slots.length; slot++) if (outcomes[slot] === PASSED) best.push({ host: slots[slot]!, weight: weights[slot]! });
    return best.sort((a, b) => (better(a.weight, a.host.name, b.weight, b.host.name) ? -1 : 1));
  }
  for (let slot = 0; slot < slots.length; slot++) {
    if (outcomes[slot] !== PASSED) continue;
    const weight = weights[slot]!;
    if (best.length === limit && weight < best[limit - 1]!.weight) continue;
    const host = slots[slot]!;
    if (best.length === limit) {
      const last = best[limit - 1]!;
      if (!better(weight, host.name, last.weight, last.host.name)) continue;
      best.pop();
    }
    let at = best.length;
    while (at > 0 && better(weight, host.name, best[at - 1]!.weight, best[at - 1]!.host.name)) at--;
    best.splice(at, 0, { host, weight });
  }
  return best;
}

/** Hosts examined at once beyond `limit` when looking for the best (times 4 each time they all fail). */
const EXTRA_PICKED = 4;

/** Potential candidates a bounded ranking keeps in order for the memo's next ranking (`BoundedKept`). */
const KEPT_ORDER = 32;

/** Hosts evaluated, at most, when looking for another holder of a kept min or max. */
const HOLDER_EVALUATIONS = 4;

/**
 * What a bounded ranking keeps for the next ranking of the same memo (a repeated shape), so
 * that ranking judges only the hosts changed since (through the index's change journal)
 * instead of passing over every slot. It holds while no changed host scores outside a min or
 * max, every min and max is still held by a host that passes (when its holder changed,
 * another host with that score: found in slot order, at most HOLDER_EVALUATIONS evaluated),
 * and the kept order does not run short of the hosts asked for; otherwise the ranking starts
 * anew. Weights of the unchanged hosts stay in the memo (`Memo.weights`), computed with these
 * min and max. At 10,000 hosts of the mixed workload, 1,039 of 1,127 repeated rankings
 * answered from it (docs/benchmarks.md).
 */
export interface BoundedKept {
  /** Every slot's state as the ranking left it (its candidates potential again): 0 out, 1 potential, 2 evaluated and passed. */
  state: Uint8Array;
  /** Slots in state 2. */
  passing: number;
  min: Float64Array;
  max: Float64Array;
  scale: Float64Array;
  /** The evaluated hosts whose raw scores are the min and max: weigher i's at 2i (min) and 2i + 1 (max). */
  holders: number[];
  /** The best potential candidates, best first; every other potential candidate is worse than the last. */
  order: number[];
  /** True when `order` holds every potential candidate. */
  complete: boolean;
  /** The change journal's position (`HostIndex.changes`) when it was kept. */
  changesSeen: number;
  /** The name order it was kept with (`NameOrder.of`): another one ranks anew. */
  nameRank: Int32Array;
}

/** A bounded ranking that cannot answer (`why` names the case where it is called). */
function giveUp(_why: string): undefined {
  return undefined;
}

/*
 * The passes of a bounded ranking over every slot live in functions of their own, and those
 * that read scores (`extremesOf`, `weighPotential`) load an evaluated host's raw score and its
 * summary on every slot, a ternary picking one. This is for V8: a long loop is compiled while
 * it runs (on-stack replacement) and that compiled code is kept for the loop's later runs;
 * code it reaches that had never run when it was compiled (a branch taken only when an
 * evaluated host ties, or what follows the loop in the same function) has no type feedback,
 * and leaving the compiled code there each time ("deoptimizing") finished that ranking in the
 * interpreter. With the passes inline in `rankBounded` that happened 186 times in the first
 * 1,500 decisions of the mixed workload at 10,000 hosts and about 370 times in 2,000 at
 * 100,000; now a handful, none repeated (docs/benchmarks.md, "Rankings that stay compiled").
 */

/** Calls `fn` for every slot below `n`, in order. */
function forEverySlot(n: number, fn: (slot: number) => void): void {
  for (let slot = 0; slot < n; slot++) fn(slot);
}

/**
 * Per weigher, the potential candidate (`state` not 0) with the lowest score and the one with
 * the highest, and their scores: an evaluated host's (`state` 2) raw score, else its summary
 * (`columns`). Among equal scores an evaluated host comes first (it needs no hook call), then
 * the first in slot order. -1 where no slot is a potential candidate.
 */
function extremesOf(state: Uint8Array, raw: Float64Array, w: number, columns: readonly Float64Array[]): { lowSlot: Int32Array; highSlot: Int32Array } {
  const lowSlot = new Int32Array(w).fill(-1);
  const highSlot = new Int32Array(w).fill(-1);
  const lowValue = new Float64Array(w);
  const highValue = new Float64Array(w);
  /** Whether the host holding `lowSlot` (`highSlot`) was evaluated. */
  const lowEvaluated = new Uint8Array(w);
  const highEvaluated = new Uint8Array(w);
  for (let slot = 0; slot < state.length; slot++) {
    const st = state[slot]!;
    if (st === 0) continue;
    const evaluated = st === 2;
    for (let i = 0; i < w; i++) {
      const evaluatedScore = raw[slot * w + i]!;
      const summaryScore = columns[i]![slot]!;
      const v = evaluated ? evaluatedScore : summaryScore;
      const lowest = lowValue[i]!;
      const lowTieWon = evaluated && lowEvaluated[i] === 0;
      if (lowSlot[i]! < 0 || v < lowest || (v === lowest && lowTieWon)) {
        lowSlot[i] = slot;
        lowValue[i] = v;
        lowEvaluated[i] = evaluated ? 1 : 0;
      }
      const highest = highValue[i]!;
      const highTieWon = evaluated && highEvaluated[i] === 0;
      if (highSlot[i]! < 0 || v > highest || (v === highest && highTieWon)) {
        highSlot[i] = slot;
        highValue[i] = v;
        highEvaluated[i] = evaluated ? 1 : 0;
      }
    }
  }
  return { lowSlot, highSlot };
}

/**
 * The total weight of `slot` (as `Ranker.reweigh` computes it): from its raw scores when
 * `evaluated`, else from its summaries, with the multipliers `prune` or `evaluate` set.
 */
function weightOf(slot: number, evaluated: boolean, w: number, raw: Float64Array, multipliers: Float64Array, columns: readonly Float64Array[], min: Float64Array, scale: Float64Array): number {
  let weight = 0;
  for (let i = 0; i < w; i++) {
    const k = slot * w + i;
    const evaluatedScore = raw[k]!;
    const summaryScore = columns[i]![slot]!;
    weight += multipliers[k]! * ((evaluated ? evaluatedScore : summaryScore) - min[i]!) * scale[i]!;
  }
  return weight;
}

/** `weights` of every potential candidate (`state` not 0), by `weightOf`. */
function weighPotential(state: Uint8Array, raw: Float64Array, multipliers: Float64Array, columns: readonly Float64Array[], min: Float64Array, scale: Float64Array, weights: Float64Array): void {
  const w = min.length;
  for (let slot = 0; slot < state.length; slot++) {
    const st = state[slot]!;
    if (st !== 0) weights[slot] = weightOf(slot, st === 2, w, raw, multipliers, columns, min, scale);
  }
}

/**
 * The `count` potential candidates (`state` not 0) with the lowest (`lowest`) or highest
 * score of weigher `i`, most extreme first: an evaluated host's raw score, else the summary.
 * Among equal scores an evaluated host comes first (it needs no hook call).
 */
function mostExtreme(state: Uint8Array, raw: Float64Array, w: number, i: number, column: Float64Array, lowest: boolean, count: number): number[] {
  if (count === 1) {
    // The usual case, without the list (the loop body as in `extremesOf`).
    let best = -1;
    let bestValue = 0;
    let bestEvaluated = false;
    for (let slot = 0; slot < state.length; slot++) {
      const st = state[slot]!;
      if (st === 0) continue;
      const evaluated = st === 2;
      const evaluatedScore = raw[slot * w + i]!;
      const summaryScore = column[slot]!;
      const v = evaluated ? evaluatedScore : summaryScore;
      const tieWon = evaluated && !bestEvaluated;
      const more = lowest ? v < bestValue : v > bestValue;
      if (best < 0 || more || (v === bestValue && tieWon)) {
        best = slot;
        bestValue = v;
        bestEvaluated = evaluated;
      }
    }
    return best < 0 ? [] : [best];
  }
  const slots: number[] = [];
  const values: number[] = [];
  for (let slot = 0; slot < state.length; slot++) {
    const st = state[slot];
    if (st === 0) continue;
    const v = st === 2 ? raw[slot * w + i]! : column[slot]!;
    let at = values.length;
    while (at > 0) {
      const u = values[at - 1]!;
      if (!(lowest ? v < u : v > u) && !(v === u && st === 2 && state[slots[at - 1]!] === 1)) break;
      at--;
    }
    if (at >= count) continue;
    values.splice(at, 0, v);
    slots.splice(at, 0, slot);
    if (values.length > count) {
      values.pop();
      slots.pop();
    }
  }
  return slots;
}

/** Whether slot `a` ranks before slot `b`: a higher weight, then a lower name (`nameRank`), as `better`. */
function ranksBefore(weights: Float64Array, nameRank: Int32Array, a: number, b: number): boolean {
  return weights[a]! > weights[b]! || (weights[a] === weights[b] && nameRank[a]! < nameRank[b]!);
}

/**
 * The best `limit` slots whose `state` is not 0, by weight then name (as `better`; `nameRank`
 * orders the slots' hosts by name), best first.
 */
function selectPotential(state: Uint8Array, weights: Float64Array, nameRank: Int32Array, limit: number): number[] {
  const best: number[] = [];
  const before = (a: number, b: number): boolean => ranksBefore(weights, nameRank, a, b);
  for (let slot = 0; slot < state.length; slot++) {
    if (state[slot] === 0) continue;
    if (best.length === limit) {
      if (!before(slot, best[limit - 1]!)) continue;
      best.pop();
    }
    let at = best.length;
    while (at > 0 && before(slot, best[at - 1]!)) at--;
    best.splice(at, 0, slot);
  }
  return best;
}

/**
 * Each slot's place in the name order of the hosts (for ties of weight), kept between
 * rankings and rebuilt only when a slot's host has another name than when it was built.
 */
class NameOrder {
  private names: Array<string | undefined> = [];
  private rank = new Int32Array(0);
  private layout: number | undefined = undefined;

  of(slots: ReadonlyArray<Host | undefined>, layout: number | undefined): Int32Array {
    if (layout !== undefined && layout === this.layout && this.names.length === slots.length) return this.rank;
    let same = this.names.length === slots.length;
    for (let slot = 0; same && slot < slots.length; slot++) if (this.names[slot] !== slots[slot]?.name) same = false;
    this.layout = layout;
    if (same) return this.rank;
    this.names = slots.map((h) => h?.name);
    const order = [...slots.keys()].filter((slot) => slots[slot] !== undefined);
    order.sort((a, b) => (slots[a]!.name < slots[b]!.name ? -1 : slots[a]!.name > slots[b]!.name ? 1 : 0));
    this.rank = new Int32Array(slots.length).fill(-1);
    order.forEach((slot, i) => (this.rank[slot] = i));
    return this.rank;
  }
}

/**
 * Keep `memo.top` the best candidates in order after `slot` changed (its weight, or whether it
 * passed). Every host outside the list is worse than its last entry, so: the changed host leaves
 * the list, and comes back where it now belongs if it is better than the (new) last entry, or
 * when the list holds every candidate. The list may shrink; `rank` rebuilds it when it is too
 * short for a request.
 */
function updateTop(memo: Memo, slot: number, host: Host | undefined, kept: number): void {
  const top = memo.top!;
  const at = top.findIndex((e) => e.slot === slot);
  if (at >= 0) top.splice(at, 1);
  if (!host || memo.outcomes[slot] !== PASSED) return;
  const weight = memo.weights[slot]!;
  const last = top[top.length - 1];
  const enters = memo.topComplete || (last !== undefined && better(weight, host.name, last.weight, last.host.name));
  if (!enters) {
    // Worse than every listed entry, but maybe better than hosts outside it: the list now only
    // knows its own entries are the best, which still holds.
    return;
  }
  let i = top.length;
  while (i > 0 && better(weight, host.name, top[i - 1]!.weight, top[i - 1]!.host.name)) i--;
  top.splice(i, 0, { slot, host, weight });
  if (top.length > kept) {
    top.pop();
    memo.topComplete = false;
  }
}

/** Per weigher: 1 / (max - min) over the candidates, 0 when they all score the same. */
function scaleOf(min: Float64Array, max: Float64Array): Float64Array {
  const scale = new Float64Array(min.length);
  for (let i = 0; i < min.length; i++) scale[i] = max[i]! > min[i]! ? 1 / (max[i]! - min[i]!) : 0;
  return scale;
}

/** Weigher `i`'s multiplier on `host`: its aggregates' override (`<weigher>_weight_multiplier`, a finite number) or the configured one. */
function multiplierOf(host: Host, prepared: Prepared, i: number): number {
  const override = host.aggregateMetadata[prepared.multiplierKeys[i]!];
  const overridden = override === undefined ? NaN : Number(override);
  return Number.isFinite(overridden) ? overridden : prepared.weighers[i]!.multiplier;
}

export { PASSED };
