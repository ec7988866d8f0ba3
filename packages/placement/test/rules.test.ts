import { describe, expect, it } from 'vitest';
import { allocationCandidates, fitRequest, parseFlavor, SearchBudgetError, type FitProvider } from '@ert/placement';
import type { RequestGroup, RequestSpec } from '@ert/plugin-api';
import { group, provider, spec } from './helpers.js';

// Regression tests for the rules where ert used to differ from Placement 8.0.0 (issue 10),
// each with the answer Placement gives on the same data, and for the request shapes that
// made the old search take seconds. Budgets below are step counts (deterministic), never
// wall-clock time: a shape that must be decided in few steps is run with a small budget.

const SHARES = 'MISC_SHARES_VIA_AGGREGATE';

describe('rule 2: several groups on one provider fit its max_unit together', () => {
  // Mutation seen caught: dropping the max_unit half of AnchorSearch.fitsNow.
  const host = { providers: [provider('cn', { inv: { VCPU: { total: 4, maxUnit: 4, allocationRatio: 4 } } })] };
  const two = spec([group('', {}), group('1', { VCPU: 4 }), group('2', { VCPU: 4 })], 'none');

  it('VCPU max_unit 4: two groups of 4 VCPU under group_policy=none do not fit (Placement: no candidate)', () => {
    const fit = fitRequest(two, host);
    expect(fit.ok).toBe(false);
    expect(allocationCandidates(two, { providers: host.providers }).allocationRequests).toEqual([]);
  });

  it('the unnumbered group and a numbered one are summed too', () => {
    const mixed = spec([group('', { VCPU: 3 }), group('1', { VCPU: 2 })]);
    expect(fitRequest(mixed, host).ok).toBe(false);
    expect(fitRequest(spec([group('', { VCPU: 2 }), group('1', { VCPU: 2 })]), host)).toEqual({
      ok: true,
      allocations: [{ providerUuid: 'uuid-cn', resourceClass: 'VCPU', amount: 4 }],
    });
  });
});

describe('rule 3: traits of sharing providers', () => {
  const sharedWorld = (sharingTraits: string[], hostTraits: string[] = []): { host: FitProvider; sharing: FitProvider } => ({
    host: provider('cn', { inv: { VCPU: 8, MEMORY_MB: 8192 }, aggs: ['A'], traits: hostTraits }),
    sharing: provider('ss', { inv: { DISK_GB: 1000 }, aggs: ['A'], traits: [SHARES, ...sharingTraits] }),
  });

  it('(a) a numbered group is served by a sharing provider that has its required trait', () => {
    const { host, sharing } = sharedWorld(['CUSTOM_SSD']);
    const request = spec([group('', { VCPU: 1 }), group('1', { DISK_GB: 10 }, { requiredTraits: ['CUSTOM_SSD'] })]);
    expect(fitRequest(request, { providers: [host], sharingProviders: [sharing] })).toEqual({
      ok: true,
      allocations: [
        { providerUuid: 'uuid-cn', resourceClass: 'VCPU', amount: 1 },
        { providerUuid: 'uuid-ss', resourceClass: 'DISK_GB', amount: 10 },
      ],
    });
  });

  it("(b) the unnumbered group's forbidden trait applies only to the providers serving it", () => {
    const { host, sharing } = sharedWorld([], ['CUSTOM_GOLD']);
    const request = spec([group('', { DISK_GB: 10 }, { forbiddenTraits: ['CUSTOM_GOLD'] }), group('1', { VCPU: 1 })]);
    const fit = fitRequest(request, { providers: [host], sharingProviders: [sharing] });
    expect(fit.ok).toBe(true);
    const candidates = allocationCandidates(request, { providers: [host, sharing] });
    expect(candidates.allocationRequests).toEqual([{ allocations: { 'uuid-ss': { DISK_GB: 10 }, 'uuid-cn': { VCPU: 1 } }, mappings: { '': ['uuid-ss'], '1': ['uuid-cn'] } }]);
  });
});

describe('rule 1 end to end: a flavor whose numbered group holds its VCPU and memory', () => {
  it('fits a host with exactly that much (Placement and Nova: fits; the old parser counted it twice)', () => {
    const request = parseFlavor({ name: 'numbered', vcpus: 4, memoryMb: 2048, diskGb: 0, extraSpecs: { 'resources1:VCPU': '4', 'resources1:MEMORY_MB': '2048' } }, { keys: [] });
    expect(fitRequest(request, { providers: [provider('cn', { inv: { VCPU: 4, MEMORY_MB: 4096 } })] }).ok).toBe(true);
  });
});

describe('Placement 1.31-1.39 request features', () => {
  const numa = (): FitProvider[] => [
    provider('cn', { inv: { DISK_GB: 100 }, traits: ['CUSTOM_ROOT'], aggs: ['RA'] }),
    provider('numa0', { parent: 'cn', inv: { VCPU: 4, MEMORY_MB: 4096 }, traits: ['HW_NUMA_ROOT'] }),
    provider('numa1', { parent: 'cn', inv: { VCPU: 4, MEMORY_MB: 4096 }, traits: ['HW_NUMA_ROOT', 'CUSTOM_FAST'] }),
    provider('nic0', { parent: 'numa0', inv: { SRIOV_NET_VF: 4 } }),
    provider('nic1', { parent: 'numa1', inv: { SRIOV_NET_VF: 4 } }),
  ];
  const withSubtree = (groups: RequestGroup[], sameSubtree: string[][]): RequestSpec => ({ ...spec(groups, 'none'), sameSubtree });

  it('same_subtree keeps a NIC under the NUMA node that gives the CPUs', () => {
    // Mutation seen caught: sameSubtreeMet with "ancestor of any" instead of "of all".
    const request = withSubtree([group('', {}), group('_CPU', { VCPU: 2 }, { requiredTraits: ['CUSTOM_FAST'] }), group('_NIC', { SRIOV_NET_VF: 1 })], [['_CPU', '_NIC']]);
    const all = allocationCandidates(request, { providers: numa() });
    expect(all.allocationRequests).toEqual([{ allocations: { 'uuid-numa1': { VCPU: 2 }, 'uuid-nic1': { SRIOV_NET_VF: 1 } }, mappings: { _CPU: ['uuid-numa1'], _NIC: ['uuid-nic1'] } }]);
    expect(fitRequest(request, { providers: numa() }).ok).toBe(true);
  });

  it('a resourceless group in same_subtree names the subtree without allocating', () => {
    const request = withSubtree([group('', {}), group('_ANCHOR', {}, { requiredTraits: ['CUSTOM_FAST'] }), group('_NIC', { SRIOV_NET_VF: 1 })], [['_ANCHOR', '_NIC']]);
    expect(allocationCandidates(request, { providers: numa() }).allocationRequests).toEqual([
      { allocations: { 'uuid-nic1': { SRIOV_NET_VF: 1 } }, mappings: { _ANCHOR: ['uuid-numa1'], _NIC: ['uuid-nic1'] } },
    ]);
  });

  it('same_subtree with no common ancestor among the chosen providers fails', () => {
    const request = withSubtree([group('', {}), group('_A', { SRIOV_NET_VF: 1 }, { memberOf: [] }), group('_B', { VCPU: 1 }, { requiredTraits: ['CUSTOM_FAST'] })], [['_A', '_B']]);
    // nic0 is not under numa1, nic1 is: only the nic1 + numa1 pair is in one subtree.
    expect(allocationCandidates(request, { providers: numa() }).allocationRequests.map((r) => r.mappings)).toEqual([{ _A: ['uuid-nic1'], _B: ['uuid-numa1'] }]);
  });

  it('root_required and its forbidden form judge the root only', () => {
    const base = spec([group('', { VCPU: 1 })]);
    expect(fitRequest({ ...base, rootRequiredTraits: ['CUSTOM_ROOT'] }, { providers: numa() }).ok).toBe(true);
    expect(fitRequest({ ...base, rootRequiredTraits: ['CUSTOM_FAST'] }, { providers: numa() })).toMatchObject({ ok: false, reason: expect.stringMatching(/root_required/) });
    expect(fitRequest({ ...base, rootForbiddenTraits: ['CUSTOM_ROOT'] }, { providers: numa() }).ok).toBe(false);
  });

  it('any-of traits (required=in:A,B) are met by one provider of a numbered group, or by the unnumbered group together', () => {
    const numbered = spec([group('', {}), { ...group('1', { VCPU: 1 }), anyOfTraits: [['CUSTOM_FAST', 'CUSTOM_NONE']] }]);
    expect(allocationCandidates(numbered, { providers: numa() }).allocationRequests.map((r) => r.mappings['1'])).toEqual([['uuid-numa1']]);
    const unnumbered = spec([{ ...group('', { VCPU: 1, DISK_GB: 1 }), anyOfTraits: [['CUSTOM_ROOT', 'CUSTOM_NONE']] }]);
    expect(allocationCandidates(unnumbered, { providers: numa() }).allocationRequests).toHaveLength(2);
  });

  it('forbidden aggregates: the root in one excludes the whole tree for the unnumbered group, not for a numbered one', () => {
    // Mutation seen caught: ignoring the root in the unnumbered group's forbidden-aggregate check.
    const unnumbered = spec([{ ...group('', { VCPU: 1 }), forbiddenAggregates: ['RA'] }]);
    expect(fitRequest(unnumbered, { providers: numa() }).ok).toBe(false);
    const numbered = spec([group('', {}), { ...group('1', { VCPU: 1 }), forbiddenAggregates: ['RA'] }]);
    expect(fitRequest(numbered, { providers: numa() }).ok).toBe(true);
  });

  it('in_tree restricts a group to the tree of the named provider; an unknown uuid matches nothing', () => {
    const other = [provider('cn2', { inv: { VCPU: 8 } })];
    const world = [...numa(), ...other];
    const inTree = (uuid: string) => spec([{ ...group('', { VCPU: 1 }), inTree: uuid }]);
    const roots = (uuid: string) => allocationCandidates(inTree(uuid), { providers: world }).allocationRequests.flatMap((r) => Object.keys(r.allocations));
    expect(new Set(roots('uuid-nic1'))).toEqual(new Set(['uuid-numa0', 'uuid-numa1']));
    expect(roots('uuid-cn2')).toEqual(['uuid-cn2']);
    expect(roots('uuid-unknown')).toEqual([]);
  });

  it('nestedAware=false (below 1.29) drops candidates that use two providers of one tree', () => {
    const request = spec([group('', { VCPU: 1, DISK_GB: 1 })]);
    expect(allocationCandidates(request, { providers: numa() }).allocationRequests).toHaveLength(2);
    expect(allocationCandidates(request, { providers: numa() }, { nestedAware: false }).allocationRequests).toEqual([]);
  });

  it('a request only a sharing provider serves is one candidate, however many trees it serves', () => {
    const sharing = provider('ss', { inv: { DISK_GB: 100 }, aggs: ['A'], traits: [SHARES] });
    const hosts = [1, 2, 3].map((i) => provider(`cn${i}`, { inv: { VCPU: 2 }, aggs: ['A'] }));
    const result = allocationCandidates(spec([group('', { DISK_GB: 10 })]), { providers: [...hosts, sharing] });
    expect(result.allocationRequests).toEqual([{ allocations: { 'uuid-ss': { DISK_GB: 10 } }, mappings: { '': ['uuid-ss'] } }]);
    expect(Object.keys(result.providerSummaries)).toEqual(['uuid-ss']);
  });
});

describe('the shortcut for plain requests stays within its kind', () => {
  // Mutations seen caught: simpleFit taking requests with required or forbidden traits, or
  // with member_of, or on a tree that has sharing providers.
  const host = [provider('cn', { inv: { VCPU: 4 }, traits: ['CUSTOM_SLOW'], aggs: ['A'] })];
  const plain = (more: Partial<RequestGroup> = {}) => spec([{ ...group('', { VCPU: 1 }), ...more }]);

  it('judges traits and aggregates (only a request with none of them is plain)', () => {
    expect(fitRequest(plain(), { providers: host }).ok).toBe(true);
    expect(fitRequest(plain({ requiredTraits: ['CUSTOM_FAST'] }), { providers: host })).toMatchObject({ ok: false, reason: expect.stringMatching(/CUSTOM_FAST/) });
    expect(fitRequest(plain({ forbiddenTraits: ['CUSTOM_SLOW'] }), { providers: host }).ok).toBe(false);
    expect(fitRequest(plain({ memberOf: [['B']] }), { providers: host }).ok).toBe(false);
    expect(fitRequest(plain({ forbiddenAggregates: ['A'] }), { providers: host }).ok).toBe(false);
  });

  it('uses a sharing provider when the tree has none of the class', () => {
    const sharing = provider('ss', { inv: { DISK_GB: 100 }, traits: [SHARES], aggs: ['A'] });
    expect(fitRequest(spec([group('', { VCPU: 1, DISK_GB: 10 })]), { providers: host, sharingProviders: [sharing] }).ok).toBe(true);
  });
});

describe('search bookkeeping keeps every answer', () => {
  it('isolate keeps numbered groups apart but lets the unnumbered group share a provider with one of them', () => {
    // Mutation seen caught: the isolate matching bound treating providers the unnumbered group uses as taken.
    const providers = [provider('cn', { inv: { VCPU: 4 } }), provider('mem', { parent: 'cn', inv: { MEMORY_MB: 1024 } })];
    const request = spec([group('', { VCPU: 1 }), group('1', { VCPU: 1 }), group('2', { MEMORY_MB: 1 })], 'isolate');
    expect(fitRequest(request, { providers }).ok).toBe(true);
    expect(allocationCandidates(request, { providers }).allocationRequests).toHaveLength(1);
  });

  it('twin groups under group_policy=none may share one provider (the yes/no search orders twins, it does not separate them)', () => {
    // Mutation seen caught: ordering twins strictly (as under isolate) under none.
    const providers = [provider('cn', { inv: { VCPU: 2 } })];
    const request = spec([group('', {}), group('1', { VCPU: 1 }), group('2', { VCPU: 1 })], 'none');
    expect(fitRequest(request, { providers })).toEqual({ ok: true, allocations: [{ providerUuid: 'uuid-cn', resourceClass: 'VCPU', amount: 2 }] });
  });

  it('the failure memo never hides candidates that differ only in which twin group sits where', () => {
    // Mutation seen caught: remembering sub-searches that did find candidates. 3 identical
    // groups of 1 VCPU on 3 children of 2 VCPU: every assignment but "all three on one
    // child" fits: 3^3 - 3 = 24 candidates, with and without the memo from the first step.
    const providers = [provider('root'), ...[0, 1, 2].map((i) => provider(`c${i}`, { parent: 'root', inv: { VCPU: 2 } }))];
    const request = spec([group('', {}), group('1', { VCPU: 1 }), group('2', { VCPU: 1 }), group('3', { VCPU: 1 })], 'none');
    expect(allocationCandidates(request, { providers }).allocationRequests).toHaveLength(24);
    expect(allocationCandidates(request, { providers }, { memoAfterSteps: 0 }).allocationRequests).toHaveLength(24);
  });
});

describe('shapes that made the old search exponential are decided in few steps', () => {
  const wide = (children: number, perChild: Record<string, number>, rootInventory: Record<string, number> = {}): FitProvider[] => [
    provider('root', { inv: rootInventory }),
    ...Array.from({ length: children }, (_, i) => provider(`c${i}`, { parent: 'root', inv: perChild })),
  ];
  const numberedGroups = (k: number, resources: Record<string, number>): RequestGroup[] => Array.from({ length: k }, (_, i) => group(String(i + 1), resources));

  it('1 root + 8 children of 1 VCPU, 7 isolated groups: fits (Placement 8.0.0 took minutes); 9 groups do not', () => {
    const providers = wide(8, { VCPU: 1 });
    const seven = spec([group('', {}), ...numberedGroups(7, { VCPU: 1 })], 'isolate');
    expect(fitRequest(seven, { providers }, { budget: 200 }).ok).toBe(true);
    const nine = spec([group('', {}), ...numberedGroups(9, { VCPU: 1 })], 'isolate');
    const refused = fitRequest(nine, { providers }, { budget: 200 });
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.budgetExceeded).toBeUndefined();
  });

  it('10 children and 11 isolated groups: refused by the matching bound at once', () => {
    const providers = wide(10, { VCPU: 4 });
    const request = spec([group('', {}), ...numberedGroups(11, { VCPU: 1 })], 'isolate');
    const fit = fitRequest(request, { providers }, { budget: 200 });
    expect(fit.ok).toBe(false);
    if (!fit.ok) expect(fit.budgetExceeded).toBeUndefined();
  });

  it('8 groups under group_policy=none and an unsatisfiable unnumbered required trait: refused without enumerating the groups', () => {
    const providers = wide(8, { VCPU: 2 }, { MEMORY_MB: 1024 });
    const request = spec([group('', { MEMORY_MB: 512 }, { requiredTraits: ['CUSTOM_NOWHERE'] }), ...numberedGroups(8, { VCPU: 1 })], 'none');
    const fit = fitRequest(request, { providers }, { budget: 100 });
    expect(fit).toMatchObject({ ok: false, reason: expect.stringMatching(/CUSTOM_NOWHERE/) });
  });

  it('8 identical groups under none on 8 identical children: found after one descent', () => {
    const providers = wide(8, { VCPU: 1 });
    const request = spec([group('', {}), ...numberedGroups(8, { VCPU: 1 })], 'none');
    expect(fitRequest(request, { providers }, { budget: 100 }).ok).toBe(true);
  });

  it('a request past the budget is refused with a reason naming the limit', () => {
    // Groups of different sizes over mixed children: no symmetry to exploit, and it does not fit.
    const providers = [provider('root'), ...Array.from({ length: 12 }, (_, i) => provider(`c${i}`, { parent: 'root', inv: { VCPU: 3 + (i % 4) } }))];
    const groups = [group('', {}), ...Array.from({ length: 14 }, (_, i) => group(String(i + 1), { VCPU: 1 + (i % 5) }))];
    const fit = fitRequest(spec(groups, 'none'), { providers }, { budget: 20 });
    expect(fit).toMatchObject({ ok: false, budgetExceeded: true, reason: expect.stringMatching(/search budget of 20 steps/) });
    expect(() => allocationCandidates(spec(groups, 'none'), { providers }, { budget: 20 })).toThrow(SearchBudgetError);
  });
});
