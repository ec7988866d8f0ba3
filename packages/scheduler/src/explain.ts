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

/** Why the host at a slot was rejected (`Ranker.reasonOf`: asked of its filter when only its summary bound was looked at). */
export type ReasonOf = (slot: number) => string;

/**
 * Every host the memo rejected, counted under the step that removed it (in the order the
 * explanation lists the steps), each passed to `visit` with its count and slot.
 */
function countRejected(
  slots: ReadonlyArray<Host | undefined>,
  memo: Memo,
  visit: (count: FilterCount, host: string, slot: number) => void,
): { hosts: number; filters: FilterCount[] } {
  const { prepared } = memo;
  const counts = new Map<number, FilterCount>();
  const steps = prepared.narrowing?.steps ?? [];
  const order: Array<[number, string]> = [
    ...steps.map((n, i): [number, string] => [REQUEST_FILTER_BASE - i, n.filter]),
    [EXCLUDED_BY_HOST_MANAGER, HOST_MANAGER],
    ...prepared.filters.map((f, i): [number, string] => [i, f.name]),
    [EXCLUDED_BY_WEIGHER, WEIGHERS],
  ];
  for (const [code, filter] of order) {
    const step = code <= REQUEST_FILTER_BASE ? steps[REQUEST_FILTER_BASE - code]! : undefined;
    counts.set(code, { filter, ...(step ? { stage: 'request-filter' as const, query: narrowingQuery(step) } : {}), removed: 0, examples: [] });
  }
  let hosts = 0;
  for (let slot = 0; slot < slots.length; slot++) {
    const host = slots[slot];
    if (!host) continue;
    hosts++;
    const outcome = memo.outcomes[slot]!;
    if (outcome === PASSED) continue;
    const count = counts.get(outcome)!;
    count.removed++;
    visit(count, host.name, slot);
  }
  return { hosts, filters: order.map(([code]) => counts.get(code)!) };
}

const byHost = (a: { host: string }, b: { host: string }): number => (a.host < b.host ? -1 : a.host > b.host ? 1 : 0);

/**
 * Build the explanation from an up-to-date memo (every host evaluated for this request) and
 * its ranking (with every candidate: `limit` at least the number of hosts).
 */
export function buildExplanation(slots: ReadonlyArray<Host | undefined>, memo: Memo, ranking: Ranking, reasonOf: ReasonOf): Explanation {
  const { prepared } = memo;
  const rejected: Explanation['rejected'] = [];
  const { hosts, filters } = countRejected(slots, memo, (count, host, slot) => {
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
 * name, the reasons asked for those only. At 100,000 hosts the lists and their sort were
 * most of a failed request's cost.
 */
export function buildSummary(slots: ReadonlyArray<Host | undefined>, memo: Memo, ranking: Ranking, reasonOf: ReasonOf): ExplanationSummary {
  const { hosts, filters } = countRejected(slots, memo, (count, host, slot) => {
    const examples = count.examples;
    if (examples.length === SUMMARY_EXAMPLES && !(host < examples[SUMMARY_EXAMPLES - 1]!.host)) return;
    let at = examples.length;
    while (at > 0 && host < examples[at - 1]!.host) at--;
    // Only the hosts shown are asked for their reason.
    examples.splice(at, 0, { host, reason: reasonOf(slot) });
    if (examples.length > SUMMARY_EXAMPLES) examples.pop();
  });
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
