/**
 * The bounded ranking (`rankBounded`): for a request whose memo is not filled yet (a first-seen
 * shape, or a repeated one that ranked bounded before), evaluates only the hosts that decide the
 * result, read from the host summaries (summaries.ts), and keeps what it found for the same
 * memo's next ranking (`BoundedKept`). The complete ranking it must equal is `Ranker.rank`
 * (ranking.ts); the ranking and equivalence tests compare them.
 */
import type { Host } from './host-state.js';
import { aggregatesOf, multiplierOf, PASSED, scaleOf, type Candidate, type HostIndex, type Memo, type Prepared, type Ranking } from './memo.js';
import { EXCLUDED_SUMMARY, METADATA_SUMMARY } from './summaries.js';

/** What a bounded ranking needs of its ranker (`Ranker`). */
export interface BoundedRanker {
  /** Evaluates `host` for the memo's request into the memo, at `version` (`Ranker.evaluate`). */
  evaluate(host: Host, memo: Memo, version: number): void;
  /** The only hosts the filters can accept now, or undefined: any (`Ranker.candidateHosts`). */
  candidateHosts(prepared: Prepared): Set<string> | undefined;
  /** The hosts' name order, for ties, kept between rankings. */
  readonly nameOrder: NameOrder;
  /** How many potential candidates a ranking keeps in order for the next (`BoundedKept.order`). */
  readonly keptOrder: number;
}

/**
 * Hooks a bounded ranking may call before it gives up and evaluates every host: at least this
 * many, plus one per BOUNDED_EVALUATIONS_PER hosts (a request most hosts fail is cheaper to
 * rank by evaluating everything once, which the memo then keeps).
 */
const BOUNDED_EVALUATIONS = 64;
const BOUNDED_EVALUATIONS_PER = 16;

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
export function rankBounded(ranker: BoundedRanker, index: HostIndex, memo: Memo, limit: number): Ranking | undefined {
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
  let state = memo.boundedStates.subarray(0, n);
  /** Slots in state 2. */
  let passing = 0;
  let budget = BOUNDED_EVALUATIONS + Math.floor(n / BOUNDED_EVALUATIONS_PER);
  let mismatch = false;
  const evaluate = (slot: number): boolean => {
    budget--;
    ranker.evaluate(slots[slot]!, memo, versions[slot]!);
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
  const { pruneStamps, pruneStates } = memo;
  // Read from the summaries rather than the host objects when the index has them (see summaries.ts).
  const excludedColumn = index.summary(EXCLUDED_SUMMARY);
  const metadataColumn = index.summary(METADATA_SUMMARY);
  const multiplierOfSlot: SlotMultipliers = { memo: multipliers, configured: Float64Array.from(prepared.weighers, (x) => x.multiplier), metadata: metadataColumn };
  /**
   * Out (0) or a potential candidate (1) without a hook call; kept per host version. For a
   * potential candidate whose host has aggregate metadata (or may have), its weighers'
   * multipliers are set as `evaluate` sets them; the others' are the configured ones
   * (`SlotMultipliers`).
   */
  const prune = (slot: number, host: Host): number => {
    // 0: not excluded when last summarised (evaluation checks the host before it is returned).
    if (excludedColumn?.[slot] !== 0 && host.exclusion !== undefined) return 0;
    if (narrowing !== undefined && narrowing.judge(aggregatesOf(host)) !== undefined) return 0;
    for (let b = 0; b < boundColumns.length; b++) {
      // NaN (unknown) is never below a bound.
      if (boundColumns[b]![slot]! < boundAt[b]!) return 0;
    }
    if (metadataColumn?.[slot] !== 0) for (let i = 0; i < w; i++) multipliers[slot * w + i] = multiplierOf(host, prepared, i);
    return 1;
  };
  /**
   * Sets the slot's state (evaluating it when its outcome at its version is not known). A
   * potential candidate with an unknown score is evaluated now, or with `unknownLater` left
   * potential (step 2 finds and evaluates it).
   */
  const consider = (slot: number, unknownLater = false): void => {
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
    if (!unknownLater && unknownScore(slot)) {
      evaluate(slot);
      return;
    }
    state[slot] = 1;
  };
  const unknownScore = (slot: number): boolean => {
    for (let i = 0; i < w; i++) if (Number.isNaN(scoreColumns[i]![slot]!)) return true;
    return false;
  };
  const nameRank = ranker.nameOrder.of(slots, index.layout);
  const changesNow = index.changes.base + index.changes.slots.length;
  const keptOrder = ranker.keptOrder;

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
      weights[slot] = weightOf(slot, state[slot] === 2, w, raw, multiplierOfSlot, scoreColumns, min, scale);
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
    // A host that held a min or max changed: a host that passes (itself again, or another)
    // must hold that value, or the normalisation may move. Hosts of one profile share their
    // extremes: the first potential candidate with the value is usually it.
    const holders = from.holders.slice();
    for (let k = 0; k < holders.length; k++) {
      if (!changed.has(holders[k]!)) continue;
      const i = k >> 1;
      const value = k % 2 === 0 ? min[i]! : max[i]!;
      const holder = holderOf(i, value, holders[k]!);
      if (holder < 0) return giveUp('kept: no other host holds a min or max');
      holders[k] = holder;
    }
    /**
     * A host that passes with score `value` for weigher `i` (evaluating at most
     * HOLDER_EVALUATIONS), or -1: `previous` (the holder that changed) when it passed again
     * with that score, else looked for from the slot after it, round to it. Hosts that shared
     * its score are usually the next ones, while a scan from slot 0 passed every host claimed
     * before it (a third of a decision at 100,000 hosts).
     */
    function holderOf(i: number, value: number, previous: number): number {
      if (state[previous] === 2 && raw[previous * w + i] === value) return previous;
      const column = scoreColumns[i]!;
      let evaluations = 0;
      for (let step = 1, slot = previous; step <= n; step++) {
        slot = slot + 1 === n ? 0 : slot + 1;
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
    /**
     * The best `limit` candidates along `list` (potential candidates evaluated as reached),
     * and `list` without those that failed; undefined when it gives up.
     */
    const walk = (list: readonly number[]): { candidates: Candidate[]; order: number[] } | undefined => {
      const found: Candidate[] = [];
      const remaining: number[] = [];
      for (const slot of list) {
        // Evaluated and failed (while looking for a holder, or in an earlier walk).
        if (state[slot] === 0) continue;
        if (found.length === limit) {
          remaining.push(slot);
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
        remaining.push(slot);
        found.push({ host: slots[slot]!, weight: weights[slot]! });
      }
      return { candidates: found, order: remaining };
    };
    /** How long the kept order may be. */
    const room = Math.max(keptOrder, limit + EXTRA_PICKED);
    let walked = walk(next);
    let complete = from.complete;
    // The order ran short: only a complete one says no other host passes. The kept state still
    // holds (no min or max moved, every potential candidate weighed with them: the memo's
    // weights are written by nothing else while it is not `ready`), so the next best are
    // selected from it, as the first ranking's step 3 does, instead of ranking anew.
    for (let wanted = room; walked !== undefined && walked.candidates.length < limit && !complete; wanted *= 4) {
      const refill = selectPotential(state, weights, nameRank, wanted);
      complete = refill.length < wanted;
      walked = walk(refill);
    }
    if (walked === undefined) return undefined;
    const { candidates, order: remaining } = walked;
    if (candidates.length === 0) return giveUp('nothing passes');
    // Changed hosts inserted, or a refill, may have grown the order: its tail goes (all worse
    // than what stays).
    const trimmed = remaining.length > room;
    if (trimmed) remaining.length = room;
    memo.kept = { ...from, order: remaining, complete: complete && !trimmed, passing, holders, changesSeen: changesNow };
    return { candidates, passed: candidates.length < limit ? candidates.length : passing, min: Float64Array.from(min), scale: Float64Array.from(scale), bounded: true };
  }

  state.fill(0);
  const named = ranker.candidateHosts(prepared);
  if (named !== undefined && index.host !== undefined) {
    for (const name of named) {
      const host = index.host(name);
      if (host !== undefined && slots[host.slot] === host) consider(host.slot);
    }
  } else if (named !== undefined) {
    for (let slot = 0; slot < n; slot++) if (named.has(slots[slot]?.name ?? '')) consider(slot);
  } else {
    // Unknown scores are left for the extremes' pass, which reads every score anyway: looking
    // for them here took 0.55 of 3.0 ms in a standalone copy of this pass at 100,000 slots.
    forEverySlot(n, (slot) => consider(slot, true));
  }

  // 2. Each weigher's min and max over the hosts that pass. One pass finds every weigher's
  // most extreme potential candidates (an evaluated one first among equals); only when one
  // of them fails its filters is that weigher's list looked for again.
  const min = new Float64Array(w);
  const max = new Float64Array(w);
  let extremes = extremesOf(state, raw, w, scoreColumns);
  if (extremes.unknown > 0) {
    // Potential candidates whose score is unknown (left by step 1): evaluated, as step 1 would
    // have, and the extremes found again.
    for (let slot = 0; slot < n; slot++) {
      if (state[slot] !== 1 || !unknownScore(slot)) continue;
      state[slot] = 0;
      evaluate(slot);
    }
    extremes = extremesOf(state, raw, w, scoreColumns);
  }
  if (budget < 0) return giveUp('budget (unknown scores)');
  if (mismatch) return giveUp('mismatch');
  const { lowSlot, highSlot } = extremes;
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
  weighPotential(state, raw, multiplierOfSlot, scoreColumns, min, scale, weights);
  // A host evaluated in step 3 (its state now 2) is weighed again, from its raw scores.
  const weigh = (slot: number): void => {
    weights[slot] = weightOf(slot, true, w, raw, multiplierOfSlot, scoreColumns, min, scale);
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
    const wanted = Math.max(limit - candidates.length + extra, round === 0 ? ranker.keptOrder : 0);
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

/** Hosts examined at once beyond `limit` when looking for the best (times 4 each time they all fail). */
const EXTRA_PICKED = 4;

/** Potential candidates a bounded ranking keeps in order for the memo's next ranking (`BoundedKept`). */
export const KEPT_ORDER = 32;

/** Hosts evaluated, at most, when looking for another holder of a kept min or max. */
const HOLDER_EVALUATIONS = 4;

/**
 * What a bounded ranking keeps for the next ranking of the same memo (a repeated shape), so
 * that ranking judges only the hosts changed since (through the index's change journal)
 * instead of passing over every slot. It holds while no changed host scores outside a min or
 * max, every min and max is still held by a host that passes (when its holder changed: itself
 * if it passed again with that score, else another host with it, found in slot order from the
 * old holder on, round, at most HOLDER_EVALUATIONS evaluated);
 * otherwise the ranking starts anew. Weights of the unchanged hosts stay in the memo
 * (`Memo.weights`), computed with these min and max, so when the kept order runs short of the
 * hosts asked for, the next best are selected from every slot's kept state and weight (one
 * pass, no hook call) rather than ranked anew. At 10,000 hosts of the mixed workload, 1,488
 * of 1,504 repeated rankings answered from it, 340 of them refilled (docs/benchmarks.md).
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
 * the first in slot order. -1 where no slot is a potential candidate. `unknown`: how many
 * scores of potential candidates are unknown (NaN); the extremes are valid only when none is.
 */
function extremesOf(state: Uint8Array, raw: Float64Array, w: number, columns: readonly Float64Array[]): { lowSlot: Int32Array; highSlot: Int32Array; unknown: number } {
  const lowSlot = new Int32Array(w).fill(-1);
  const highSlot = new Int32Array(w).fill(-1);
  const lowValue = new Float64Array(w);
  const highValue = new Float64Array(w);
  /** Whether the host holding `lowSlot` (`highSlot`) was evaluated. */
  const lowEvaluated = new Uint8Array(w);
  const highEvaluated = new Uint8Array(w);
  let unknown = 0;
  for (let slot = 0; slot < state.length; slot++) {
    const st = state[slot]!;
    if (st === 0) continue;
    const evaluated = st === 2;
    for (let i = 0; i < w; i++) {
      const evaluatedScore = raw[slot * w + i]!;
      const summaryScore = columns[i]![slot]!;
      const v = evaluated ? evaluatedScore : summaryScore;
      unknown += v !== v ? 1 : 0;
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
  return { lowSlot, highSlot, unknown };
}

/**
 * Where a bounded ranking finds each weigher's multiplier on a host: `memo`
 * (`Memo.multipliers`, at slot * w + i) for an evaluated host (`evaluate` sets them) and for a
 * potential candidate whose host has aggregate metadata, or may have (`prune` sets them);
 * `configured` for a potential candidate without (`metadata`, the built-in summary, 0).
 * Writing every potential candidate's multipliers took 0.7 of 3.0 ms in a standalone copy of
 * a first ranking's pass over 100,000 slots.
 */
interface SlotMultipliers {
  memo: Float64Array;
  configured: Float64Array;
  metadata: Float64Array | undefined;
}

/**
 * The total weight of `slot` (as `Ranker.reweigh` computes it): from its raw scores when
 * `evaluated`, else from its summaries, with its multipliers (`SlotMultipliers`).
 */
function weightOf(slot: number, evaluated: boolean, w: number, raw: Float64Array, multipliers: SlotMultipliers, columns: readonly Float64Array[], min: Float64Array, scale: Float64Array): number {
  const configured = !evaluated && multipliers.metadata !== undefined && multipliers.metadata[slot] === 0;
  let weight = 0;
  for (let i = 0; i < w; i++) {
    const k = slot * w + i;
    const evaluatedScore = raw[k]!;
    const summaryScore = columns[i]![slot]!;
    const multiplier = configured ? multipliers.configured[i]! : multipliers.memo[k]!;
    weight += multiplier * ((evaluated ? evaluatedScore : summaryScore) - min[i]!) * scale[i]!;
  }
  return weight;
}

/** `weights` of every potential candidate (`state` not 0), by `weightOf`. */
function weighPotential(state: Uint8Array, raw: Float64Array, multipliers: SlotMultipliers, columns: readonly Float64Array[], min: Float64Array, scale: Float64Array, weights: Float64Array): void {
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
export class NameOrder {
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
