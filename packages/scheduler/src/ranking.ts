import type { FilterHooks, RequestSpec, WeigherHooks } from '@ert/plugin-api';
import type { Host } from './host-state.js';
import { messageOf } from './host-manager.js';
import type { HookCaller } from './host-manager.js';

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

/** Outcome codes of one host's evaluation (a filter's index when >= 0). */
const PASSED = -1;
/** Kept out by the host manager (a consumer's exclusion). */
export const EXCLUDED_BY_HOST_MANAGER = -2;
/** A weigher threw or returned a non-number: the host is out (fail closed). */
export const EXCLUDED_BY_WEIGHER = -3;
/** No host in this slot. */
const EMPTY_SLOT = -4;

/** The filters and weighers that apply to one request, fixed for the whole scan. */
export interface Prepared {
  spec: RequestSpec;
  filters: FilterEntry[];
  weighers: WeigherEntry[];
  /** Aggregate metadata key overriding each weigher's multiplier: `<weigher>_weight_multiplier`. */
  multiplierKeys: string[];
}

/**
 * Per-(request, host) results of filters and raw weigher scores, valid while the host's
 * `version` is unchanged. Filters and weighers are pure functions of (host, request) by
 * contract, so re-using a result for an unchanged host gives exactly what a new call would.
 */
export class Memo {
  readonly stamps: Float64Array;
  readonly outcomes: Int16Array;
  readonly reasons: Array<string | undefined>;
  readonly raw: Float64Array;
  readonly multipliers: Float64Array;

  constructor(
    readonly prepared: Prepared,
    readonly capacity: number,
  ) {
    const w = prepared.weighers.length;
    this.stamps = new Float64Array(capacity).fill(-1);
    this.outcomes = new Int16Array(capacity);
    this.reasons = new Array<string | undefined>(capacity);
    this.raw = new Float64Array(capacity * w);
    this.multipliers = new Float64Array(capacity * w);
  }
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
  constructor(
    private readonly filters: readonly FilterEntry[],
    private readonly weighers: readonly WeigherEntry[],
    private readonly callHook: HookCaller,
  ) {}

  /** The filters and weighers whose `appliesTo` accepts this request (all when absent). */
  prepare(spec: RequestSpec): Prepared {
    const applies = (entry: FilterEntry | WeigherEntry): boolean => {
      const appliesTo = entry.hooks.appliesTo;
      if (!appliesTo) return true;
      // A failing pre-check cannot tell "not for me": run the hook so its failure shows per host.
      try {
        return this.callHook(entry.name, 'appliesTo', () => appliesTo.call(entry.hooks, spec)) !== false;
      } catch {
        return true;
      }
    };
    const weighers = this.weighers.filter(applies) as WeigherEntry[];
    return {
      spec,
      filters: this.filters.filter(applies) as FilterEntry[],
      weighers,
      multiplierKeys: weighers.map((w) => `${w.name}_weight_multiplier`),
    };
  }

  /**
   * Evaluate one host into `memo` at its slot: the first filter that rejects it (with the reason),
   * or the raw scores and multipliers of every weigher. Hook errors reject the host with a reason
   * naming the plugin and hook.
   */
  evaluate(host: Host, memo: Memo): void {
    const { prepared } = memo;
    const slot = host.slot;
    memo.stamps[slot] = host.version;
    memo.reasons[slot] = undefined;
    if (host.exclusion !== undefined) {
      memo.outcomes[slot] = EXCLUDED_BY_HOST_MANAGER;
      memo.reasons[slot] = host.exclusion;
      return;
    }
    const spec = prepared.spec;
    for (let f = 0; f < prepared.filters.length; f++) {
      const entry = prepared.filters[f]!;
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
   * Bring every host's entry in `memo` up to date (re-evaluating only hosts whose version in
   * `versions` changed, all of them when `fresh`) and return the best `limit` candidates.
   */
  rank(slots: ReadonlyArray<Host | undefined>, versions: Float64Array, memo: Memo, limit: number, fresh = false): Ranking {
    const w = memo.prepared.weighers.length;
    const min = new Float64Array(w).fill(Infinity);
    const max = new Float64Array(w).fill(-Infinity);
    const { stamps, outcomes, raw } = memo;
    const count = slots.length;
    let passed = 0;
    for (let slot = 0; slot < count; slot++) {
      if (fresh || stamps[slot] !== versions[slot]) {
        const host = slots[slot];
        if (host) this.evaluate(host, memo);
        else {
          stamps[slot] = versions[slot]!;
          outcomes[slot] = EMPTY_SLOT;
        }
      }
      if (outcomes[slot] !== PASSED) continue;
      passed++;
      for (let i = 0; i < w; i++) {
        const v = raw[slot * w + i]!;
        if (v < min[i]!) min[i] = v;
        if (v > max[i]!) max[i] = v;
      }
    }
    const scale = new Float64Array(w);
    for (let i = 0; i < w; i++) scale[i] = max[i]! > min[i]! ? 1 / (max[i]! - min[i]!) : 0;
    const best: Candidate[] = [];
    if (limit <= 0) return { candidates: best, passed, min, scale };
    const { multipliers } = memo;
    for (let slot = 0; slot < count; slot++) {
      if (outcomes[slot] !== PASSED) continue;
      let weight = 0;
      for (let i = 0; i < w; i++) {
        const k = slot * w + i;
        weight += multipliers[k]! * (raw[k]! - min[i]!) * scale[i]!;
      }
      // Only a weight at least the last kept one's can enter: the host object (for its name,
      // the tie-break) is looked at only then.
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
    return { candidates: best, passed, min, scale };
  }
}

export { PASSED };
