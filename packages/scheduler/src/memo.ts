/**
 * What a ranking works on and gives back, shared by the complete ranking (ranking.ts) and the
 * bounded one (bounded-ranking.ts): the host table as a ranking reads it (`HostIndex`), the
 * filters and weighers that apply to one request (`Prepared`), the per-request memo of their
 * results (`Memo`), and the result (`Ranking`).
 */
import type { FilterHooks, RequestSpec, SummaryBound, WeigherHooks } from '@ert/plugin-api';
import type { BoundedKept } from './bounded-ranking.js';
import type { Host } from './host-state.js';
import type { ChangeJournal } from './host-manager.js';
import type { HostNarrowing } from './request-filters.js';

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

/** No aggregates: what a host without a root provider belongs to. */
export const NO_AGGREGATES: ReadonlySet<string> = new Set();

/** The aggregates of a host's root provider (what the request filters' narrowing judges). */
export function aggregatesOf(host: Host): ReadonlySet<string> {
  return host.providers[0]?.aggregates ?? NO_AGGREGATES;
}

/** Outcome codes of one host's evaluation (a filter's index when >= 0). */
export const PASSED = -1;
/** Kept out by the host manager (a consumer's exclusion). */
export const EXCLUDED_BY_HOST_MANAGER = -2;
/** A weigher threw or returned a non-number: the host is out (fail closed). */
export const EXCLUDED_BY_WEIGHER = -3;
/** No host in this slot. */
export const EMPTY_SLOT = -4;
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
 * A memo's fleet-sized arrays, one entry per host slot up to `capacity` (`raw` and
 * `multipliers`: one per slot and weigher, for up to `raw.length / capacity` weighers). A new
 * memo takes them over from a memo nobody will read again, or from the spares allocated when
 * the hosts were loaded (`SpareMemoArrays`, memo-cache.ts); the Memo fields of the same names
 * are these arrays.
 */
export interface MemoArrays {
  readonly capacity: number;
  /** True until a memo takes them: as allocated, nothing to reset. */
  clean: boolean;
  readonly stamps: Float64Array;
  readonly outcomes: Int16Array;
  readonly boundRejected: Uint8Array;
  readonly raw: Float64Array;
  readonly multipliers: Float64Array;
  readonly weights: Float64Array;
  readonly pruneStamps: Float64Array;
  readonly pruneStates: Uint8Array;
  readonly boundedStates: Uint8Array;
}

/** New arrays for a memo of `capacity` slots and up to `weigherSlots` weighers, as a new memo starts, every page written once. */
export function allocateMemoArrays(capacity: number, weigherSlots: number): MemoArrays {
  return {
    capacity,
    clean: true,
    stamps: new Float64Array(capacity).fill(-1),
    outcomes: new Int16Array(capacity).fill(EMPTY_SLOT),
    boundRejected: new Uint8Array(capacity).fill(0),
    raw: new Float64Array(capacity * weigherSlots).fill(0),
    multipliers: new Float64Array(capacity * weigherSlots).fill(0),
    weights: new Float64Array(capacity).fill(0),
    pruneStamps: new Float64Array(capacity).fill(-1),
    pruneStates: new Uint8Array(capacity).fill(0),
    boundedStates: new Uint8Array(capacity).fill(0),
  };
}

/**
 * Reset arrays a memo used as a new memo's for a request of `w` weighers (entries past
 * capacity * w are never read by it). `boundedStates` is left: every bounded ranking that does
 * not start from what its memo kept clears what it uses.
 */
function resetMemoArrays(arrays: MemoArrays, w: number): void {
  arrays.stamps.fill(-1);
  arrays.outcomes.fill(EMPTY_SLOT);
  arrays.boundRejected.fill(0);
  arrays.raw.fill(0, 0, arrays.capacity * w);
  arrays.multipliers.fill(0, 0, arrays.capacity * w);
  arrays.weights.fill(0);
  arrays.pruneStamps.fill(-1);
  arrays.pruneStates.fill(0);
}

/**
 * Per-(request, host) results of filters and raw weigher scores, valid while the host's
 * `version` is unchanged. Filters and weighers are pure functions of (host, request) by
 * contract, so re-using a result for an unchanged host gives exactly what a new call would.
 * The memo also keeps, over the hosts that passed, each weigher's min and max (with how many
 * hosts hold them) and every host's total weight, updated for the hosts that changed.
 */
export class Memo {
  /** The arrays below, as one set (given to a new memo when this one is evicted). */
  readonly arrays: MemoArrays;
  readonly stamps: Float64Array;
  readonly outcomes: Int16Array;
  /**
   * The messages of hook failures that rejected a host (a filter or weigher that threw or
   * returned what it may not), by slot. Other reasons are worked out again when an
   * explanation shows the host (`Ranker.reasonOf`).
   */
  readonly failures = new Map<number, string>();
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
   * For bounded rankings (`rankBounded`, bounded-ranking.ts): whether each host was a potential candidate
   * (1) or out (0) without a hook call, valid while its version is `pruneStamps[slot]`.
   */
  readonly pruneStamps: Float64Array;
  readonly pruneStates: Uint8Array;
  /** What the last bounded ranking kept for the next one (`rankBounded`, bounded-ranking.ts). */
  kept: BoundedKept | undefined = undefined;
  /**
   * The bounded rankings' per-host states (`BoundedKept.state` is a view of it), one buffer
   * for the memo's life: a new one per ranking, kept until the next, was promoted out of the
   * young generation at 100,000 hosts and brought major collections.
   */
  readonly boundedStates: Uint8Array;

  /**
   * `reuse`: arrays nobody will read again (an evicted memo's, or spares), which this memo
   * takes over, reset, when their capacity is the same and their per-weigher arrays are large
   * enough. A memo's arrays are about 85 bytes per host; a workload of many shapes created
   * hundreds of memos a second, and collecting them was most of the decisions' tail.
   * `weigherSlots` (at least this request's weigher count; the scheduler gives every
   * configured weigher) sizes new per-weigher arrays, so that they can be taken over by a
   * request with more weighers: at 100,000 hosts, new arrays cost 50-80 ms of first touches.
   */
  constructor(
    readonly prepared: Prepared,
    readonly capacity: number,
    reuse?: MemoArrays,
    weigherSlots = prepared.weighers.length,
  ) {
    const w = prepared.weighers.length;
    const take = reuse !== undefined && reuse.capacity === capacity && reuse.raw.length >= capacity * w ? reuse : undefined;
    const arrays = take ?? allocateMemoArrays(capacity, Math.max(w, weigherSlots));
    if (!arrays.clean) resetMemoArrays(arrays, w);
    arrays.clean = false;
    this.arrays = arrays;
    this.stamps = arrays.stamps;
    this.outcomes = arrays.outcomes;
    this.boundRejected = arrays.boundRejected;
    this.raw = arrays.raw;
    this.multipliers = arrays.multipliers;
    this.weights = arrays.weights;
    this.pruneStamps = arrays.pruneStamps;
    this.pruneStates = arrays.pruneStates;
    this.boundedStates = arrays.boundedStates;
    this.min = new Float64Array(w);
    this.max = new Float64Array(w);
    this.minCount = new Int32Array(w);
    this.maxCount = new Int32Array(w);
  }
}

/** An entry of `Memo.top`. */
export interface TopEntry {
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
   * True for a bounded ranking (`rankBounded`, bounded-ranking.ts): only the hosts that decide the result
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

/** Per weigher: 1 / (max - min) over the candidates, 0 when they all score the same. */
export function scaleOf(min: Float64Array, max: Float64Array): Float64Array {
  const scale = new Float64Array(min.length);
  for (let i = 0; i < min.length; i++) scale[i] = max[i]! > min[i]! ? 1 / (max[i]! - min[i]!) : 0;
  return scale;
}

/** Weigher `i`'s multiplier on `host`: its aggregates' override (`<weigher>_weight_multiplier`, a finite number) or the configured one. */
export function multiplierOf(host: Host, prepared: Prepared, i: number): number {
  const override = host.aggregateMetadata[prepared.multiplierKeys[i]!];
  const overridden = override === undefined ? NaN : Number(override);
  return Number.isFinite(overridden) ? overridden : prepared.weighers[i]!.multiplier;
}
