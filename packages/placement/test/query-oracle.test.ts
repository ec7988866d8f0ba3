import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseCandidatesQuery, PlacementQueryError, type CandidatesQuery } from '@ert/placement';

// parseCandidatesQuery against Placement 8.0.0's own parsing code, run on generated query
// strings by scripts/placement-query-oracle.mjs (fixtures/placement-8.0.0-query-oracle.json).

interface OracleGroup {
  suffix: string;
  resources: Record<string, number>;
  required: string[][];
  forbidden: string[];
  memberOf: string[][];
  forbiddenAggregates: string[];
  inTree: string | null;
}

interface OracleCase {
  qs: string;
  mv: string;
  status: number;
  code?: string;
  message?: string;
  limit?: number | null;
  groupPolicy?: string | null;
  rootRequired?: string[];
  rootForbidden?: string[];
  sameSubtree?: string[][];
  groups?: OracleGroup[];
}

const oracle = JSON.parse(readFileSync(new URL('./fixtures/placement-8.0.0-query-oracle.json', import.meta.url), 'utf8')) as { cases: OracleCase[] };

/** The pairs as webob reads them (it splits on ';' too). */
function params(qs: string): URLSearchParams {
  return new URLSearchParams(qs.split(/[&;]/).filter(Boolean).join('&'));
}

const sortedUnique = (values: Iterable<string>): string[] => [...new Set(values)].sort();

interface Comparable {
  limit: number | undefined;
  groupPolicy: string;
  rootRequired: string[];
  rootForbidden: string[];
  sameSubtree: string[];
  suffixed: string[];
  groups: Record<string, { resources: Record<string, number>; required: string[]; forbidden: string[]; memberOf: string[]; forbiddenAggregates: string[]; inTree: string | undefined }>;
}

function fromOracle(c: OracleCase): Comparable {
  const groups: Comparable['groups'] = {
    '': { resources: {}, required: [], forbidden: [], memberOf: [], forbiddenAggregates: [], inTree: undefined },
  };
  for (const g of c.groups!) {
    groups[g.suffix] = {
      resources: g.resources,
      required: sortedUnique(g.required.map((s) => s.join('|'))),
      forbidden: sortedUnique(g.forbidden),
      memberOf: sortedUnique(g.memberOf.map((s) => s.join('|'))),
      forbiddenAggregates: sortedUnique(g.forbiddenAggregates),
      inTree: g.inTree ?? undefined,
    };
  }
  return {
    limit: c.limit ?? undefined,
    groupPolicy: c.groupPolicy === 'isolate' ? 'isolate' : 'none',
    rootRequired: c.rootRequired!,
    rootForbidden: c.rootForbidden!,
    sameSubtree: c.sameSubtree!.map((s) => s.join('|')),
    suffixed: c.groups!.map((g) => g.suffix).filter((s) => s !== ''),
    groups,
  };
}

function fromErt(q: CandidatesQuery): Comparable {
  const groups: Comparable['groups'] = {};
  for (const g of q.request.groups) {
    groups[g.suffix] = {
      resources: g.resources,
      required: sortedUnique([...g.requiredTraits, ...(g.anyOfTraits ?? []).map((s) => [...s].sort().join('|'))]),
      forbidden: sortedUnique(g.forbiddenTraits),
      memberOf: sortedUnique(g.memberOf.map((s) => [...s].sort().join('|'))),
      forbiddenAggregates: sortedUnique(g.forbiddenAggregates ?? []),
      inTree: g.inTree,
    };
  }
  return {
    limit: q.limit,
    groupPolicy: q.request.groupPolicy,
    rootRequired: [...(q.request.rootRequiredTraits ?? [])].sort(),
    rootForbidden: [...(q.request.rootForbiddenTraits ?? [])].sort(),
    sameSubtree: (q.request.sameSubtree ?? []).map((s) => [...s].sort().join('|')),
    suffixed: q.request.groups.map((g) => g.suffix).filter((s) => s !== ''),
    groups,
  };
}

/** Placement lists some suffixes and traits from Python sets, in an order that varies per process. */
function canonicalMessage(message: string): string {
  return message
    .replace(/\[([^\]]*)\]/g, (_, list: string) => `[${list.split(', ').sort().join(', ')}]`)
    .replace(/root_required: (.*)$/, (_, list: string) => `root_required: ${list.split(', ').sort().join(', ')}`);
}

describe('parseCandidatesQuery agrees with Placement 8.0.0 parsing code', () => {
  it.each(oracle.cases.map((c) => [`${c.mv} ${c.status} ${c.qs}`, c] as const))('%s', (_, c) => {
    const [major, minor] = c.mv.split('.').map(Number) as [number, number];
    let parsed: CandidatesQuery | undefined;
    let thrown: unknown;
    try {
      parsed = parseCandidatesQuery(params(c.qs), { major, minor });
    } catch (err) {
      thrown = err;
    }
    if (c.status === 200) {
      expect(thrown).toBeUndefined();
      expect(fromErt(parsed!)).toEqual(fromOracle(c));
    } else {
      expect(thrown).toBeInstanceOf(PlacementQueryError);
      const err = thrown as PlacementQueryError;
      expect({ status: err.status, code: err.code, message: canonicalMessage(err.message) }).toEqual({
        status: c.status,
        code: c.code,
        message: canonicalMessage(c.message!),
      });
    }
  });
});
