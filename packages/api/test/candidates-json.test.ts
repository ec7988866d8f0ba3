import { describe, expect, it } from 'vitest';
import { allocationCandidates, findCandidates, indexWorld, parseCandidatesQuery, PlacementQueryError, type CandidatesResult, type FitProvider } from '@ert/placement';
import { normalizeInventory, type PlacementRequest } from '@ert/plugin-api';
import { candidatesJson } from '../src/routes/candidates-json.js';
import { atLeast, v, type Version } from '../src/microversion.js';

/**
 * The candidates route writes its answer straight into bytes (candidates-json.ts). Those
 * bytes must be what serialising the answer as objects gives: this test shapes the body as
 * objects from the engine's own result, by PLACEMENT-API.md §3.9 (the shaping the route did
 * before), and compares bytes, at every microversion from 1.10 to 1.39, on a world with
 * nested trees, a sharing provider, traits, usages and uuids that JSON must escape.
 *
 * Mutations seen red: mappings written without sorting their keys' order as for-in gives it
 * (a `sort()` on the suffixes); the `used` filter dropped before 1.29; the requested-class
 * filter dropped before 1.27; a summary kept from a request at 1.28 reused at 1.39; summaries
 * kept by uuid instead of by provider snapshot (the usage after a claim not seen).
 */

function provider(uuid: string, input: { parent?: string; inv?: Record<string, number>; used?: Record<string, number>; traits?: string[]; aggs?: string[] }): FitProvider {
  return {
    uuid,
    name: `name-${uuid}`,
    ...(input.parent === undefined ? {} : { parentUuid: input.parent }),
    inventories: Object.fromEntries(Object.entries(input.inv ?? {}).map(([c, total]) => [c, normalizeInventory({ total })])),
    usages: input.used ?? {},
    traits: new Set(input.traits ?? []),
    aggregates: new Set(input.aggs ?? []),
  };
}

const world = indexWorld([
  provider('r1', { inv: { DISK_GB: 100 }, traits: ['CUSTOM_GOLD', 'HW_CPU_X86_AVX2'], aggs: ['agg'] }),
  provider('r1-numa0', { parent: 'r1', inv: { VCPU: 8, MEMORY_MB: 4096 }, used: { VCPU: 3 }, traits: ['HW_NUMA_ROOT'] }),
  provider('r1-numa1', { parent: 'r1', inv: { VCPU: 8, MEMORY_MB: 4096 }, traits: ['HW_NUMA_ROOT'] }),
  provider('r1-numa1-nic', { parent: 'r1-numa1', inv: { SRIOV_NET_VF: 4 }, traits: ['CUSTOM_PHYSNET_A'] }),
  // uuids a store may hold that JSON must escape: a quote, a backslash, a control character, non-ASCII.
  provider('r"2\\', { inv: { VCPU: 4, MEMORY_MB: 2048, DISK_GB: 10 }, used: { MEMORY_MB: 1024 }, aggs: ['agg'] }),
  provider('r2\u0001-child-é', { parent: 'r"2\\', inv: { VCPU: 2 }, traits: ['CUSTOM_Ü'] }),
  provider('shared', { inv: { DISK_GB: 1000 }, used: { DISK_GB: 5 }, traits: ['MISC_SHARES_VIA_AGGREGATE'], aggs: ['agg'] }),
  provider('r3', { inv: { VCPU: 16, MEMORY_MB: 8192 } }),
]);

const queries = [
  'resources=VCPU:1',
  'resources=VCPU:1,MEMORY_MB:1024,DISK_GB:5',
  'resources=DISK_GB:5&resources1=VCPU:1,MEMORY_MB:512&group_policy=none',
  'resources1=VCPU:1&resources2=VCPU:1&group_policy=none',
  'resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate&limit=2',
  'resources_CPU=VCPU:1&resources_NET=SRIOV_NET_VF:1&required_NET=CUSTOM_PHYSNET_A&same_subtree=_CPU,_NET&group_policy=none',
  'resources=VCPU:1&required=HW_NUMA_ROOT',
];

/** The body as objects, shaped from the engine's result by the version's rules. */
function referenceBody(result: CandidatesResult, request: PlacementRequest, version: Version): unknown {
  const sorted = <T>(entries: Array<[string, T]>) => Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const allocationRequests = result.allocationRequests.map((candidate) => {
    const entries = Object.entries(candidate.allocations).sort(([a], [b]) => (a < b ? -1 : 1));
    const out: Record<string, unknown> = atLeast(version, v('1.12'))
      ? { allocations: Object.fromEntries(entries.map(([uuid, amounts]) => [uuid, { resources: sorted(Object.entries(amounts)) }])) }
      : { allocations: entries.map(([uuid, amounts]) => ({ resource_provider: { uuid }, resources: sorted(Object.entries(amounts)) })) };
    if (atLeast(version, v('1.34'))) out.mappings = candidate.mappings;
    return out;
  });
  const requested = new Set(request.groups.flatMap((g) => Object.keys(g.resources)));
  const used = new Set(result.allocationRequests.flatMap((c) => Object.keys(c.allocations)));
  const summaries: Record<string, unknown> = {};
  for (const [uuid, s] of Object.entries(result.providerSummaries)) {
    if (!atLeast(version, v('1.29')) && !used.has(uuid)) continue;
    const summary: Record<string, unknown> = { resources: sorted(Object.entries(s.resources).filter(([c]) => atLeast(version, v('1.27')) || requested.has(c))) };
    if (atLeast(version, v('1.17'))) summary.traits = s.traits;
    if (atLeast(version, v('1.29'))) {
      summary.parent_provider_uuid = s.parentProviderUuid;
      summary.root_provider_uuid = s.rootProviderUuid;
    }
    summaries[uuid] = summary;
  }
  return { allocation_requests: allocationRequests, provider_summaries: summaries };
}

describe('the candidates answer written as bytes', () => {
  it('is byte for byte JSON.stringify of the answer shaped as objects, at every version from 1.10 to 1.39', () => {
    let compared = 0;
    // Twice over: the second pass answers from the summaries kept by the first.
    for (const pass of [1, 2]) {
      for (let minor = 10; minor <= 39; minor++) {
        const version = v(`1.${minor}`);
        for (const query of queries) {
          let parsed;
          try {
            parsed = parseCandidatesQuery(new URLSearchParams(query), version);
          } catch (err) {
            if (err instanceof PlacementQueryError) continue; // a parameter the version does not have
            throw err;
          }
          const options = { nestedAware: atLeast(version, v('1.29')), ...(parsed.limit === undefined ? {} : { limit: parsed.limit }) };
          const found = findCandidates(parsed.request, world, options);
          const bytes = candidatesJson(found.allocationRequests, world, parsed.request, version);
          const expected = JSON.stringify(referenceBody(allocationCandidates(parsed.request, world, options), parsed.request, version));
          expect(bytes.toString('utf8'), `${query} at 1.${minor}, pass ${pass}`).toBe(expected);
          if (found.allocationRequests.length > 0) compared++;
        }
      }
    }
    // Most shapes have candidates at most versions (the test compares real answers, not empty ones).
    expect(compared).toBeGreaterThan(250);
  });

  it('summarises a provider as it is now after a write replaced it (kept summaries are per snapshot)', () => {
    const version = v('1.39');
    const parsed = parseCandidatesQuery(new URLSearchParams('resources=VCPU:1,MEMORY_MB:1024'), version);
    const answer = (w: typeof world) => JSON.parse(candidatesJson(findCandidates(parsed.request, w).allocationRequests, w, parsed.request, version).toString('utf8'));
    expect(answer(world).provider_summaries['r3'].resources.VCPU).toEqual({ capacity: 16, used: 0 });
    // A claim on r3: the store hands a new snapshot of it, the index replaces it.
    const after = world.replaced([{ ...world.byUuid.get('r3')!, usages: { VCPU: 2, MEMORY_MB: 1024 } }])!;
    expect(answer(after).provider_summaries['r3'].resources).toEqual({ VCPU: { capacity: 16, used: 2 }, MEMORY_MB: { capacity: 8192, used: 1024 } });
  });
});
