import type { FilterHooks, RequestSpec, WeigherHooks } from '@ert/plugin-api';
import type { Host } from './host-state.js';
import { messageOf } from '@ert/plugin-api';
import type { ChangeJournal, HookCaller } from './host-manager.js';
import type { HostNarrowing } from './request-filters.js';

/** What a ranking reads of the host table (the HostManager). */
export interface HostIndex {
  readonly slots: ReadonlyArray<Host | undefined>;
  /** Version of each slot's host (-1: empty). */
  readonly versions: Float64Array;
  /** Slots whose version changed, in order. */
  readonly changes: ChangeJournal;
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
}

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

  constructor(
    readonly prepared: Prepared,
    readonly capacity: number,
  ) {
    const w = prepared.weighers.length;
    this.stamps = new Float64Array(capacity).fill(-1);
    this.outcomes = new Int16Array(capacity).fill(EMPTY_SLOT);
    this.reasons = new Array<string | undefined>(capacity);
    this.raw = new Float64Array(capacity * w);
    this.multipliers = new Float64Array(capacity * w);
    this.weights = new Float64Array(capacity);
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
  passed: number;
  /** Per weigher: the lowest raw score among the candidates, and 1 / (max - min) (0 when all equal). */
  min: Float64Array;
  scale: Float64Array;
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
   * TOP_KEPT); rankings asking for more select from every host.
   */
  constructor(
    private readonly filters: readonly FilterEntry[],
    private readonly weighers: readonly WeigherEntry[],
    private readonly callHook: HookCaller,
    private readonly topKept = TOP_KEPT,
  ) {}

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
    return {
      spec,
      filters: this.filters.flatMap((f) => prepared('filter', f)),
      weighers,
      multiplierKeys: weighers.map((w) => `${w.name}_weight_multiplier`),
      ...(narrowing !== undefined && narrowing.steps.length > 0 ? { narrowing } : {}),
    };
  }

  /**
   * Evaluate one host into `memo` at its slot: the first filter that rejects it (with the reason),
   * or the raw scores and multipliers of every weigher. Hook errors reject the host with a reason
   * naming the plugin and hook.
   */
  evaluate(host: Host, memo: Memo, version: number): void {
    const { prepared } = memo;
    const slot = host.slot;
    memo.stamps[slot] = version;
    memo.reasons[slot] = undefined;
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
      let reason: string | undefined | void;
      try {
        reason = this.callHook(entry.name, 'filter', () => entry.hooks.filter(host, spec));
      } catch (error) {
        reason = `filter "${entry.name}" hook filter failed: ${messageOf(error)}`;
      }
      if (reason !== undefined && reason !== null) {
        memo.outcomes[slot] = f;
        memo.reasons[slot] = typeof reason === 'string' ? reason : `filter "${entry.name}" returned ${String(reason)}`;
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
      const override = host.aggregateMetadata[prepared.multiplierKeys[i]!];
      const overridden = override === undefined ? NaN : Number(override);
      memo.multipliers[slot * w + i] = Number.isFinite(overridden) ? overridden : entry.multiplier;
    }
    memo.outcomes[slot] = PASSED;
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
    const { slots, versions, changes } = index;
    const w = memo.prepared.weighers.length;
    const { stamps, outcomes, raw, min, max, minCount, maxCount } = memo;
    const count = slots.length;
    const changesNow = changes.base + changes.slots.length;
    if (fresh || !memo.ready) {
      for (let slot = 0; slot < count; slot++) {
        if (fresh || stamps[slot] !== versions[slot]) this.refreshSlot(slots, versions, memo, slot);
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
        this.refreshSlot(slots, versions, memo, slot);
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
    const scale = scaleOf(memo);
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

  /** Re-evaluate one slot (a host, or nothing) into the memo. */
  private refreshSlot(slots: ReadonlyArray<Host | undefined>, versions: Float64Array, memo: Memo, slot: number): void {
    const host = slots[slot];
    if (host) this.evaluate(host, memo, versions[slot]!);
    else {
      memo.stamps[slot] = versions[slot]!;
      memo.outcomes[slot] = EMPTY_SLOT;
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
    const scale = scaleOf(memo);
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
function scaleOf(memo: Memo): Float64Array {
  const w = memo.prepared.weighers.length;
  const scale = new Float64Array(w);
  for (let i = 0; i < w; i++) scale[i] = memo.max[i]! > memo.min[i]! ? 1 / (memo.max[i]! - memo.min[i]!) : 0;
  return scale;
}

export { PASSED };
