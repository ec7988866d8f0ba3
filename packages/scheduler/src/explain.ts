import type { PlacementRequest } from '@ert/plugin-api';
import { placementRequestOf } from '@ert/placement';
import type { Host } from './host-state.js';
import { EXCLUDED_BY_HOST_MANAGER, EXCLUDED_BY_WEIGHER, PASSED, REQUEST_FILTER_BASE } from './ranking.js';
import { narrowingQuery } from './request-filters.js';
import type { Memo, Ranking } from './ranking.js';

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

/**
 * Build the explanation from an up-to-date memo (every host evaluated for this request) and
 * its ranking (with every candidate: `limit` at least the number of hosts).
 */
export function buildExplanation(slots: ReadonlyArray<Host | undefined>, memo: Memo, ranking: Ranking): Explanation {
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
  const rejected: Explanation['rejected'] = [];
  let hosts = 0;
  for (let slot = 0; slot < slots.length; slot++) {
    const host = slots[slot];
    if (!host) continue;
    hosts++;
    const outcome = memo.outcomes[slot]!;
    if (outcome === PASSED) continue;
    const count = counts.get(outcome)!;
    const reason = memo.reasons[slot] ?? '';
    count.removed++;
    count.examples.push({ host: host.name, reason });
    rejected.push({ host: host.name, filter: count.filter, reason });
  }
  rejected.sort((a, b) => (a.host < b.host ? -1 : a.host > b.host ? 1 : 0));
  for (const count of counts.values()) count.examples.sort((a, b) => (a.host < b.host ? -1 : a.host > b.host ? 1 : 0));
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
    filters: order.map(([code]) => counts.get(code)!),
    rejected,
    weighed,
  };
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
