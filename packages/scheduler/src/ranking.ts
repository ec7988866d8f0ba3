/**
 * The ranker: runs a request's filters and weighers over the hosts (`Ranker.evaluate`) and
 * ranks them, keeping per-request results in a memo (memo.ts) updated for the hosts changed
 * since (`Ranker.rank`, the complete ranking). A request whose memo is not filled yet ranks
 * bounded first (bounded-ranking.ts), evaluating only the hosts that decide it.
 */
import type { RequestSpec, SummaryBound } from '@ert/plugin-api';
import { messageOf } from '@ert/plugin-api';
import { KEPT_ORDER, NameOrder, rankBounded } from './bounded-ranking.js';
import type { Host } from './host-state.js';
import type { HookCaller } from './host-manager.js';
import {
  better,
  aggregatesOf,
  EMPTY_SLOT,
  EXCLUDED_BY_HOST_MANAGER,
  EXCLUDED_BY_WEIGHER,
  multiplierOf,
  PASSED,
  REQUEST_FILTER_BASE,
  scaleOf,
  type Candidate,
  type FilterEntry,
  type HostIndex,
  type Memo,
  type Prepared,
  type PreparedFilter,
  type Ranking,
  type WeigherEntry,
} from './memo.js';
import type { HostNarrowing } from './request-filters.js';

/**
 * Entries a memo keeps in its ordered list of best candidates (default). Each decision usually
 * changes one host (the one placed on), which leaves the list or moves in it; the list is rebuilt
 * from all hosts only when it runs out or when the normalisation (a weigher's min or max) moves.
 */
export const TOP_KEPT = 256;

/** Per filter index, its summary bounds as columns to read (`Ranker.evaluate`). */
type FilterBounds = Array<Array<{ column: Float64Array; atLeast: number }> | undefined>;

/** True when the host at `slot` is below one of the bounds (NaN, unknown, is never below). */
function belowBound(bounds: ReadonlyArray<{ column: Float64Array; atLeast: number }>, slot: number): boolean {
  for (const { column, atLeast } of bounds) if (column[slot]! < atLeast) return true;
  return false;
}

/** A filter hook that failed (threw, or returned neither nothing nor a string), with the message that says so. */
class FilterFailure {
  constructor(readonly message: string) {}
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
    readonly keptOrder = KEPT_ORDER,
  ) {}

  /** The hosts' name order, for the bounded ranking's ties. */
  readonly nameOrder = new NameOrder();

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
   * Evaluate one host into `memo` at its slot: the first filter that rejects it, or the raw
   * scores and multipliers of every weigher. Hook errors reject the host, their message (naming
   * the plugin and hook) kept in `memo.failures`; other reasons are worked out when an
   * explanation shows the host (`reasonOf`). With `bounds` (the indexed strategy's complete
   * rankings), a filter whose summary bound the host is below rejects it without a hook call:
   * a request no host can take, at 100,000 hosts, no longer calls every host's filters.
   */
  evaluate(host: Host, memo: Memo, version: number, bounds?: FilterBounds): void {
    const { prepared } = memo;
    const slot = host.slot;
    memo.stamps[slot] = version;
    memo.boundRejected[slot] = 0;
    if (memo.failures.size > 0) memo.failures.delete(slot);
    // The request filters' narrowing: a host outside it is out before anything looks at it.
    const narrowed = prepared.narrowing?.judge(aggregatesOf(host));
    if (narrowed !== undefined) {
      memo.outcomes[slot] = REQUEST_FILTER_BASE - narrowed.step;
      return;
    }
    if (host.exclusion !== undefined) {
      memo.outcomes[slot] = EXCLUDED_BY_HOST_MANAGER;
      return;
    }
    const spec = prepared.spec;
    for (let f = 0; f < prepared.filters.length; f++) {
      const entry = prepared.filters[f]!;
      if (entry.broken !== undefined) {
        memo.outcomes[slot] = f;
        return;
      }
      const stated = bounds?.[f];
      if (stated !== undefined && belowBound(stated, slot)) {
        memo.outcomes[slot] = f;
        memo.boundRejected[slot] = 1;
        return;
      }
      const said = this.askFilter(entry, host, spec);
      if (said === undefined) continue;
      memo.outcomes[slot] = f;
      if (said instanceof FilterFailure) memo.failures.set(slot, said.message);
      return;
    }
    const w = prepared.weighers.length;
    for (let i = 0; i < w; i++) {
      const entry = prepared.weighers[i]!;
      if (entry.broken !== undefined) {
        memo.outcomes[slot] = EXCLUDED_BY_WEIGHER;
        return;
      }
      let score: unknown;
      try {
        score = this.callHook(entry.name, 'weigh', () => entry.hooks.weigh(host, spec));
      } catch (error) {
        memo.outcomes[slot] = EXCLUDED_BY_WEIGHER;
        memo.failures.set(slot, `weigher "${entry.name}" hook weigh failed: ${messageOf(error)}`);
        return;
      }
      if (typeof score !== 'number' || !Number.isFinite(score)) {
        memo.outcomes[slot] = EXCLUDED_BY_WEIGHER;
        memo.failures.set(slot, `weigher "${entry.name}" hook weigh returned ${String(score)}, not a finite number`);
        return;
      }
      memo.raw[slot * w + i] = score;
      memo.multipliers[slot * w + i] = multiplierOf(host, prepared, i);
    }
    memo.outcomes[slot] = PASSED;
  }

  /** What filter `entry` says of the host: undefined (passes), the reason it rejects it, or its hook's failure. */
  private askFilter(entry: PreparedFilter, host: Host, spec: RequestSpec): string | FilterFailure | undefined {
    let said: unknown;
    try {
      said = this.callHook(entry.name, 'filter', () => entry.hooks.filter(host, spec));
    } catch (error) {
      return new FilterFailure(`filter "${entry.name}" hook filter failed: ${messageOf(error)}`);
    }
    if (said === undefined || said === null) return undefined;
    return typeof said === 'string' ? said : new FilterFailure(`filter "${entry.name}" returned ${String(said)}`);
  }

  /**
   * Why the host at `slot` was rejected for `memo`'s request, as evaluated (empty when it was
   * not); call it before the host changes. A memo keeps only hook failures' messages: the
   * other reasons are worked out again from the outcome (the narrowing step, the host's
   * exclusion, a plugin's `broken` reason), and a filter's own reason is asked of it again
   * (filters are pure functions of the host and request, and the host is the one evaluated).
   * Kept for every rejected host, the reasons were an array of 8 bytes per slot in every memo
   * and a string stored for every rejection. A filter that passes the host now contradicts
   * its earlier answer or its plugin's summary bound: the reason says so, naming the filter.
   */
  reasonOf(slots: ReadonlyArray<Host | undefined>, memo: Memo, slot: number): string {
    const host = slots[slot];
    const outcome = memo.outcomes[slot]!;
    if (host === undefined || outcome === PASSED || outcome === EMPTY_SLOT) return '';
    const failure = memo.failures.get(slot);
    if (failure !== undefined) return failure;
    const { prepared } = memo;
    if (outcome <= REQUEST_FILTER_BASE) return prepared.narrowing?.judge(aggregatesOf(host))?.reason ?? '';
    if (outcome === EXCLUDED_BY_HOST_MANAGER) return host.exclusion ?? '';
    if (outcome === EXCLUDED_BY_WEIGHER) return prepared.weighers.find((w) => w.broken !== undefined)?.broken ?? '';
    const entry = prepared.filters[outcome]!;
    if (entry.broken !== undefined) return entry.broken;
    const said = this.askFilter(entry, host, prepared.spec);
    if (said !== undefined) return said instanceof FilterFailure ? said.message : said;
    return memo.boundRejected[slot] === 1
      ? `filter "${entry.name}": the host is below one of its summary bounds, though its filter hook passes it`
      : `filter "${entry.name}" rejected the host when it was evaluated, and passes it when asked why`;
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
   * The bounded ranking of `memo`'s request (`rankBounded` in bounded-ranking.ts): the best
   * `limit` candidates from the hosts that decide them, equal to the complete ranking's, or
   * undefined when it cannot answer.
   */
  rankBounded(index: HostIndex, memo: Memo, limit: number): Ranking | undefined {
    return rankBounded(this, index, memo, limit);
  }

  /**
   * The only hosts the filters can accept now (`FilterHooks.candidateHosts`, intersected), or
   * undefined: any. Asked at each ranking, not kept with the memo: where the named instances
   * are may change while the request stays the same.
   */
  candidateHosts(prepared: Prepared): Set<string> | undefined {
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
