import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { normalizeInventory, type PlacementRequest } from '@ert/plugin-api';
import {
  allocationCandidates,
  parseCandidatesQuery,
  PlacementQueryError,
  type CandidatesResult,
  type FitProvider,
} from '@ert/placement';

// ert's allocation candidates against answers recorded from the real OpenStack Placement
// 8.0.0 (scripts/placement-compare.mjs; the fixture's `format` field describes every field).
// Allocation requests are compared as sets, provider summaries exactly (traits as sets).

interface RecordedInventory {
  total: number;
  reserved: number;
  min_unit: number;
  max_unit: number;
  step_size: number;
  allocation_ratio: number;
}

interface RecordedProvider {
  uuid: string;
  name: string;
  parentUuid: string | null;
  inventories: Record<string, RecordedInventory>;
  usages: Record<string, number>;
  traits: string[];
  aggregates: string[];
}

/** An allocation request with provider names for uuids: { allocations: name -> class -> n, mappings: suffix -> names }. */
interface RecordedRequest {
  allocations: Record<string, Record<string, number>>;
  mappings: Record<string, string[]>;
}

interface RecordedSummary {
  resources: Record<string, { capacity: number; used: number }>;
  traits: string[];
  parent_provider_uuid: string | null;
  root_provider_uuid: string;
}

interface RecordedAnswer {
  count: number;
  allocationRequests?: RecordedRequest[];
  digest?: string;
  summaries: string[];
  summaryExceptions?: Record<string, RecordedSummary>;
  invalid?: string[];
}

interface RecordedQuery extends Partial<RecordedAnswer> {
  query: string;
  status: number;
  ms: number;
  code?: string;
  message?: string;
  kind?: 'query' | 'unknown-trait' | 'unknown-class';
  /** Placement 8.0.0 bugs this query's answer is exposed to (see the script's placementBugs()). */
  bugs?: string[];
  /** Placement's answer with those bugs worked around, where they can be. */
  corrected?: RecordedAnswer & { query: string; corrections: string[] };
  limitOf?: string;
}

interface RecordedWorld {
  name: string;
  seed: number | null;
  providers: RecordedProvider[];
  queries: RecordedQuery[];
}

interface Recording {
  placementVersion: string;
  microversion: string;
  worlds: RecordedWorld[];
}

const recording = JSON.parse(readFileSync(new URL('./fixtures/placement-8.0.0-candidates.json', import.meta.url), 'utf8')) as Recording;
const [major, minor] = recording.microversion.split('.').map(Number) as [number, number];
const microversion = { major, minor };

/** Everything a test needs about one recorded world. */
class World {
  readonly providers: FitProvider[];
  readonly byUuid = new Map<string, RecordedProvider>();
  readonly byName = new Map<string, RecordedProvider>();
  readonly traits = new Set<string>();
  readonly classes = new Set<string>();

  constructor(readonly recorded: RecordedWorld) {
    for (const p of recorded.providers) {
      this.byUuid.set(p.uuid, p);
      this.byName.set(p.name, p);
      for (const t of p.traits) this.traits.add(t);
      for (const c of Object.keys(p.inventories)) this.classes.add(c);
    }
    this.providers = recorded.providers.map((p) => ({
      uuid: p.uuid,
      name: p.name,
      parentUuid: p.parentUuid ?? undefined,
      inventories: Object.fromEntries(
        Object.entries(p.inventories).map(([rc, inv]) => [
          rc,
          normalizeInventory({
            total: inv.total,
            reserved: inv.reserved,
            minUnit: inv.min_unit,
            maxUnit: inv.max_unit,
            stepSize: inv.step_size,
            allocationRatio: inv.allocation_ratio,
          }),
        ]),
      ),
      usages: { ...p.usages },
      traits: new Set(p.traits),
      aggregates: new Set(p.aggregates),
    }));
  }

  name(uuid: string): string {
    const p = this.byUuid.get(uuid);
    if (!p) throw new Error(`ert answered with provider ${uuid}, which is not in world ${this.recorded.name}`);
    return p.name;
  }

  root(p: RecordedProvider): RecordedProvider {
    let cur = p;
    while (cur.parentUuid !== null) cur = this.byUuid.get(cur.parentUuid)!;
    return cur;
  }

  /** The summary Placement gives a provider (checked against each recorded one when recording), uuids as names. */
  summary(name: string, exceptions: Record<string, RecordedSummary> | undefined): RecordedSummary {
    const recorded = exceptions?.[name];
    if (recorded) return { ...recorded, traits: [...recorded.traits].sort() };
    const p = this.byName.get(name)!;
    const resources: RecordedSummary['resources'] = {};
    for (const [rc, inv] of Object.entries(p.inventories)) {
      resources[rc] = { capacity: Math.trunc((inv.total - inv.reserved) * inv.allocation_ratio), used: p.usages[rc] ?? 0 };
    }
    return {
      resources,
      traits: [...p.traits].sort(),
      parent_provider_uuid: p.parentUuid === null ? null : this.byUuid.get(p.parentUuid)!.name,
      root_provider_uuid: this.root(p).name,
    };
  }
}

function canonical<T>(value: T): T {
  if (Array.isArray(value)) return value.map(canonical) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    ) as T;
  }
  return value;
}

const keyOf = (r: RecordedRequest): string => JSON.stringify(canonical(r));

/** The fixture's digest: sha256 of the canonical requests, sorted, one per line. */
function digestOf(keys: string[]): string {
  return createHash('sha256').update([...keys].sort().join('\n')).digest('hex');
}

interface ErtAnswer {
  keys: string[];
  summaries: Record<string, RecordedSummary>;
  truncated: boolean;
}

/** ert's answer in the fixture's terms (names for uuids, canonical order). */
function ertAnswer(world: World, result: CandidatesResult): ErtAnswer {
  const keys = result.allocationRequests.map((ar) =>
    keyOf({
      allocations: Object.fromEntries(Object.entries(ar.allocations).map(([u, res]) => [world.name(u), { ...res }])),
      mappings: Object.fromEntries(Object.entries(ar.mappings).map(([s, us]) => [s, us.map((u) => world.name(u)).sort()])),
    }),
  );
  const summaries: Record<string, RecordedSummary> = {};
  for (const [uuid, s] of Object.entries(result.providerSummaries)) {
    summaries[world.name(uuid)] = {
      resources: s.resources,
      traits: [...s.traits].sort(),
      parent_provider_uuid: s.parentProviderUuid === null ? null : world.name(s.parentProviderUuid),
      root_provider_uuid: world.name(s.rootProviderUuid),
    };
  }
  return { keys, summaries, truncated: result.truncated };
}

function setDiff(expected: readonly string[], actual: readonly string[]): { missing: string[]; extra: string[]; duplicates: string[] } {
  const want = new Set(expected);
  const got = new Set(actual);
  return {
    missing: [...want].filter((k) => !got.has(k)).slice(0, 5),
    extra: [...got].filter((k) => !want.has(k)).slice(0, 5),
    duplicates: actual.filter((k, i) => actual.indexOf(k) !== i).slice(0, 5),
  };
}

function expectedSummaries(world: World, answer: RecordedAnswer, names: Iterable<string> = answer.summaries): Record<string, RecordedSummary> {
  return Object.fromEntries([...names].sort().map((n) => [n, world.summary(n, answer.summaryExceptions)]));
}

function sortedSummaries(summaries: Record<string, RecordedSummary>): Record<string, RecordedSummary> {
  return canonical(Object.fromEntries(Object.keys(summaries).sort().map((n) => [n, summaries[n]!])));
}

/** Traits and classes a parsed request names. */
function namesIn(request: PlacementRequest): { traits: Set<string>; classes: Set<string> } {
  const traits = new Set<string>([...(request.rootRequiredTraits ?? []), ...(request.rootForbiddenTraits ?? [])]);
  const classes = new Set<string>();
  for (const g of request.groups) {
    for (const t of [...g.requiredTraits, ...g.forbiddenTraits, ...(g.anyOfTraits ?? []).flat()]) traits.add(t);
    for (const c of Object.keys(g.resources)) classes.add(c);
  }
  return { traits, classes };
}

function parse(query: string) {
  return parseCandidatesQuery(new URLSearchParams(query), microversion);
}

/** Requests whose amounts add up to what the query asks and fit the world (Placement's bug makes some that do not). */
function validRequests(world: World, request: PlacementRequest, requests: readonly RecordedRequest[]): RecordedRequest[] {
  const asked: Record<string, number> = {};
  for (const g of request.groups) for (const [rc, n] of Object.entries(g.resources)) asked[rc] = (asked[rc] ?? 0) + n;
  return requests.filter((r) => {
    const sums: Record<string, number> = {};
    for (const [name, res] of Object.entries(r.allocations)) {
      const p = world.byName.get(name)!;
      for (const [rc, n] of Object.entries(res)) {
        sums[rc] = (sums[rc] ?? 0) + n;
        const inv = p.inventories[rc]!;
        if (n > inv.max_unit || n + (p.usages[rc] ?? 0) > Math.trunc((inv.total - inv.reserved) * inv.allocation_ratio)) return false;
      }
    }
    return Object.keys({ ...sums, ...asked }).every((rc) => sums[rc] === asked[rc]);
  });
}

/** What ert must answer: Placement's, or Placement's with its bugs worked around; undefined when neither is known. */
function truth(q: RecordedQuery): RecordedAnswer | undefined {
  if (q.corrected) return q.corrected;
  if ((q.bugs?.length ?? 0) > 0 || q.invalid) return undefined;
  return q as RecordedAnswer;
}

describe(`allocation candidates recorded from Placement ${recording.placementVersion} at ${recording.microversion}`, () => {
  it('has the recording', () => {
    expect(recording.placementVersion).toBe('8.0.0');
    expect(recording.worlds.length).toBeGreaterThan(0);
  });

  for (const recorded of recording.worlds) {
    describe(recorded.name, () => {
      const world = new World(recorded);
      const byQuery = new Map(recorded.queries.map((q) => [q.query, q]));

      for (const q of recorded.queries) {
        if (q.status === 400 && q.kind === 'query') {
          it(`400 ${q.code}: ${q.query}`, () => {
            let thrown: unknown;
            try {
              parse(q.query);
            } catch (err) {
              thrown = err;
            }
            expect(thrown, 'parseCandidatesQuery accepted a query Placement refused').toBeInstanceOf(PlacementQueryError);
            const err = thrown as PlacementQueryError;
            expect({ status: err.status, code: err.code }).toEqual({ status: q.status, code: q.code });
            // Placement's detail goes on with jsonschema's dump of the schema after ert's text.
            expect(q.message!.startsWith(err.message), `Placement said: ${q.message}`).toBe(true);
          });
          continue;
        }

        if (q.status === 400) {
          it(`400 ${q.kind} (a database lookup, not the parser): ${q.query}`, () => {
            const { request } = parse(q.query);
            const named = namesIn(request);
            // "No such trait(s): A, B." / "... No such resource class X."
            if (q.kind === 'unknown-trait') {
              const missing = /No such trait\(s\): (.*)\./.exec(q.message!)![1]!.split(', ');
              for (const t of missing) {
                expect(named.traits.has(t)).toBe(true);
                expect(world.traits.has(t)).toBe(false);
              }
            } else {
              const missing = /No such resource class (.*)\./.exec(q.message!)![1]!;
              expect(named.classes.has(missing)).toBe(true);
              expect(world.classes.has(missing)).toBe(false);
            }
          });
          continue;
        }

        if (q.limitOf !== undefined) {
          it(`limit: ${q.query}`, () => {
            const base = byQuery.get(q.limitOf!)!;
            const expected = truth(base);
            const { request, limit } = parse(q.query);
            expect(limit).toBeDefined();
            const got = ertAnswer(world, allocationCandidates(request, { providers: world.providers }, { limit }));
            const gotRequests = got.keys.map((k) => JSON.parse(k) as RecordedRequest);
            expect(validRequests(world, request, gotRequests).length).toBe(gotRequests.length);
            if (expected === undefined) {
              expect(got.keys.length).toBeLessThanOrEqual(limit!);
              return;
            }
            expect(got.keys.length).toBe(Math.min(limit!, expected.count));
            if (expected.allocationRequests) {
              const all = new Set(expected.allocationRequests.map(keyOf));
              expect(got.keys.filter((k) => !all.has(k))).toEqual([]);
            }
            // Summaries: those of the trees the returned requests use (research_context.py limit_results).
            const roots = new Set(gotRequests.flatMap((r) => Object.keys(r.allocations).map((n) => world.root(world.byName.get(n)!).name)));
            const names = expected.summaries.filter((n) => roots.has(world.root(world.byName.get(n)!).name));
            expect(sortedSummaries(got.summaries)).toEqual(sortedSummaries(expectedSummaries(world, expected, names)));
          });
          continue;
        }

        const expected = truth(q);
        if (expected === undefined) {
          // Placement's answer is exposed to one of its bugs that the recording could not work
          // around: ert must return only valid candidates, and every valid one Placement found.
          it(`200, Placement's answer not usable (${[...(q.bugs ?? []), ...(q.invalid ?? [])][0]}): ${q.query}`, () => {
            const { request } = parse(q.query);
            const got = ertAnswer(world, allocationCandidates(request, { providers: world.providers }));
            const gotRequests = got.keys.map((k) => JSON.parse(k) as RecordedRequest);
            expect(validRequests(world, request, gotRequests).length).toBe(gotRequests.length);
            const placementValid = validRequests(world, request, q.allocationRequests ?? []).map(keyOf);
            expect(setDiff(placementValid, got.keys).missing).toEqual([]);
          });
          continue;
        }

        const label = q.corrected ? ` (Placement's bugs ${q.bugs!.join(', ')} worked around: ${q.corrected.corrections.join('; ')})` : '';
        it(`200, ${expected.count} candidates${label}: ${q.query}`, () => {
          const { request, limit } = parse(q.query);
          expect(limit).toBeUndefined();
          const got = ertAnswer(world, allocationCandidates(request, { providers: world.providers }));
          expect(got.truncated).toBe(false);
          if (expected.allocationRequests) {
            const want = expected.allocationRequests.map(keyOf);
            expect({ count: got.keys.length, ...setDiff(want, got.keys) }).toEqual({ count: expected.count, missing: [], extra: [], duplicates: [] });
          } else {
            expect(got.keys.length).toBe(expected.count);
            expect(digestOf(got.keys), 'the digest of the allocation requests').toBe(expected.digest);
          }
          expect(sortedSummaries(got.summaries)).toEqual(sortedSummaries(expectedSummaries(world, expected)));
        });
      }
    });
  }
});
