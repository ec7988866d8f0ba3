import type { PlacementRequest } from '@ert/plugin-api';
import { placementRequestOf } from '@ert/placement';
import type { Host } from './host-state.js';
import { EXCLUDED_BY_HOST_MANAGER, EXCLUDED_BY_WEIGHER, PASSED, REQUEST_FILTER_BASE } from './memo.js';
import { narrowingQuery } from './request-filters.js';
import type { Memo, Ranking } from './memo.js';

/** Name under which host-manager exclusions (consumer plugins) are counted. */
export const HOST_MANAGER = 'host-manager';
/** Name under which hosts a weigher failed on are counted. */
export const WEIGHERS = 'weighers';

/** How many hosts one filter removed, and why (examples are capped in summaries). */
export interface FilterCount {
  /**
   * Filter name, or `host-manager` / `weighers` for hosts removed before / after the filters,
   * or a request filter's name (with `stage: 'request-filter'`).
   */
  filter: string;
  /** Present for request filters (docs/request-filters.md), which narrow the hosts before anything else. */
  stage?: 'request-filter';
  /** A request filter's narrowing as a Placement query (`member_of=in:...`, `member_of=!in:...`). */
  query?: string;
  removed: number;
  examples: Array<{ host: string; reason: string }>;
}

/** Counts per filter with a few example reasons: what a NoValidHostError carries. */
export interface ExplanationSummary {
  flavor: string;
  /** Hosts the scheduler holds. */
  hosts: number;
  /** Hosts that passed every filter and weigher. */
  passed: number;
  /** In order: the request filters that narrowed the request, host-manager, each applied filter in configured order, weighers. */
  filters: FilterCount[];
}

/** Score of one weigher for one candidate. */
export interface WeigherScore {
  raw: number;
  /** Min-max normalised over the candidates, in [0, 1]. */
  normalized: number;
  /** Multiplier used for this host (configured, or the aggregate's override). */
  multiplier: number;
}

/** Everything `explain` reports about one request. */
export interface Explanation extends ExplanationSummary {
  /**
   * The request as the filters saw it after parsing: the groups (unnumbered first) with
   * their resources, traits and aggregates, and group_policy, same_subtree, root_required.
   */
  request: PlacementRequest;
  /** Every host removed, with the filter that removed it and its reason, by host name. */
  rejected: Array<{ host: string; filter: string; reason: string }>;
  /** Every candidate, best first: total weight and each weigher's part. */
  weighed: Array<{ host: string; weight: number; weights: Record<string, WeigherScore> }>;
}

/** Example reasons kept per filter in a summary. */
const SUMMARY_EXAMPLES = 5;

/** Why the host at a slot was rejected (`Ranker.reasonOf`: worked out when asked, a filter's reason asked of the filter again). */
export type ReasonOf = (slot: number) => string;

/**
 * Every host the memo rejected, counted under the step that removed it (in the order the
 * explanation lists the steps, examples left empty), each passed to `visit` with its step's
 * count and index in `filters`, and its slot. One pass of array reads: at 100,000 hosts a map
 * lookup and a name comparison per host were most of a failed request's summary.
 */
function countRejected(slots: ReadonlyArray<Host | undefined>, memo: Memo, visit: (count: FilterCount, step: number, slot: number) => void): { hosts: number; filters: FilterCount[] } {
  const { prepared, outcomes } = memo;
  const steps = prepared.narrowing?.steps ?? [];
  const order: Array<[number, string]> = [
    ...steps.map((n, i): [number, string] => [REQUEST_FILTER_BASE - i, n.filter]),
    [EXCLUDED_BY_HOST_MANAGER, HOST_MANAGER],
    ...prepared.filters.map((f, i): [number, string] => [i, f.name]),
    [EXCLUDED_BY_WEIGHER, WEIGHERS],
  ];
  const filters = order.map(([code, filter]): FilterCount => {
    const step = code <= REQUEST_FILTER_BASE ? steps[REQUEST_FILTER_BASE - code]! : undefined;
    return { filter, ...(step ? { stage: 'request-filter' as const, query: narrowingQuery(step) } : {}), removed: 0, examples: [] };
  });
  // An outcome code's step: codes run from the last request filter's up to the last filter's index.
  const lowest = Math.min(...order.map(([code]) => code));
  const stepOf = new Int32Array(prepared.filters.length - lowest).fill(-1);
  order.forEach(([code], step) => (stepOf[code - lowest] = step));
  const removed = new Int32Array(order.length);
  let hosts = 0;
  for (let slot = 0; slot < slots.length; slot++) {
    if (slots[slot] === undefined) continue;
    hosts++;
    const outcome = outcomes[slot]!;
    if (outcome === PASSED) continue;
    const step = stepOf[outcome - lowest];
    if (step === undefined || step < 0) throw new Error(`explain: slot ${slot} has outcome ${outcome}, which no step of this request gives`);
    removed[step]!++;
    visit(filters[step]!, step, slot);
  }
  filters.forEach((count, step) => (count.removed = removed[step]!));
  return { hosts, filters };
}

const byHost = (a: { host: string }, b: { host: string }): number => (a.host < b.host ? -1 : a.host > b.host ? 1 : 0);

/**
 * Build the explanation from an up-to-date memo (every host evaluated for this request) and
 * its ranking (with every candidate: `limit` at least the number of hosts).
 */
export function buildExplanation(slots: ReadonlyArray<Host | undefined>, memo: Memo, ranking: Ranking, reasonOf: ReasonOf): Explanation {
  const { prepared } = memo;
  const rejected: Explanation['rejected'] = [];
  const { hosts, filters } = countRejected(slots, memo, (count, _step, slot) => {
    const host = slots[slot]!.name;
    const reason = reasonOf(slot);
    count.examples.push({ host, reason });
    rejected.push({ host, filter: count.filter, reason });
  });
  rejected.sort(byHost);
  for (const count of filters) count.examples.sort(byHost);
  const w = prepared.weighers.length;
  const weighed = ranking.candidates.map(({ host, weight }) => {
    const weights: Record<string, WeigherScore> = {};
    prepared.weighers.forEach((weigher, i) => {
      const k = host.slot * w + i;
      const raw = memo.raw[k]!;
      weights[weigher.name] = { raw, normalized: (raw - ranking.min[i]!) * ranking.scale[i]!, multiplier: memo.multipliers[k]! };
    });
    return { host: host.name, weight, weights };
  });
  return {
    flavor: prepared.spec.flavor.name,
    request: placementRequestOf(prepared.spec),
    hosts,
    passed: ranking.passed,
    filters,
    rejected,
    weighed,
  };
}

/**
 * What `summarize(buildExplanation(...))` gives (a NoValidHostError's details), without
 * building the per-host lists: each step's count and its SUMMARY_EXAMPLES first hosts by
 * name (`nameRank`: each slot's place in the name order, `NameOrder.of`), the reasons asked
 * for those only. At 100,000 hosts the lists and their sort were most of a failed request's
 * cost.
 */
export function buildSummary(slots: ReadonlyArray<Host | undefined>, memo: Memo, ranking: Ranking, reasonOf: ReasonOf, nameRank: Int32Array): ExplanationSummary {
  /** Per step, the slots of its first hosts by name so far, in name order. */
  const shown: number[][] = [];
  const { hosts, filters } = countRejected(slots, memo, (_count, step, slot) => {
    const first = (shown[step] ??= []);
    const rank = nameRank[slot]!;
    if (first.length === SUMMARY_EXAMPLES && rank >= nameRank[first[SUMMARY_EXAMPLES - 1]!]!) return;
    let at = first.length;
    while (at > 0 && rank < nameRank[first[at - 1]!]!) at--;
    first.splice(at, 0, slot);
    if (first.length > SUMMARY_EXAMPLES) first.pop();
  });
  // Only the hosts shown are asked for their reason.
  shown.forEach((first, step) => (filters[step]!.examples = first.map((slot) => ({ host: slots[slot]!.name, reason: reasonOf(slot) }))));
  return summarize({ flavor: memo.prepared.spec.flavor.name, hosts, passed: ranking.passed, filters });
}

/** The explanation without per-host lists, examples capped (small enough for an error's details). */
export function summarize(explanation: ExplanationSummary): ExplanationSummary {
  return {
    flavor: explanation.flavor,
    hosts: explanation.hosts,
    passed: explanation.passed,
    filters: explanation.filters.map((f) => ({
      filter: f.filter,
      ...(f.stage !== undefined ? { stage: f.stage } : {}),
      ...(f.query !== undefined ? { query: f.query } : {}),
      removed: f.removed,
      examples: f.examples.slice(0, SUMMARY_EXAMPLES),
    })),
  };
}
