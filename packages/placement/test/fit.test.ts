import { describe, expect, it } from 'vitest';
import { fitRequest, parseFlavor, type FitAllocation, type FitTree } from '@ert/placement';
import { normalizeInventory, type HostState, type ProviderState, type RequestSpec } from '@ert/plugin-api';
import { group, provider, spec } from './helpers.js';

const alloc = (name: string, resourceClass: string, amount: number): FitAllocation => ({ providerUuid: `uuid-${name}`, resourceClass, amount });

// --- fixtures modelled on Placement's functional-test fixtures ----------------------------

/** SharedStorageFixture: two compute nodes without disk, one shared storage pool in their aggregate. */
const sharedStorage = (ssTraits = ['MISC_SHARES_VIA_AGGREGATE']): FitTree => ({
  providers: [provider('cn1', { inv: { VCPU: 24, MEMORY_MB: 128 * 1024 }, aggs: ['agg1'] })],
  sharingProviders: [provider('ss', { inv: { DISK_GB: 2000 }, traits: ssTraits, aggs: ['agg1'] })],
});

/** NUMA compute node: the root has only DISK_GB; two NUMA children hold VCPU and MEMORY_MB. */
const numaHost = (extra: { numa0Traits?: string[]; numa1Traits?: string[]; rootAggs?: string[]; used0?: Record<string, number> } = {}): FitTree => ({
  providers: [
    provider('cn', { inv: { DISK_GB: 1000 }, aggs: extra.rootAggs ?? [], traits: ['HW_CPU_X86_AVX2'] }),
    provider('numa0', { parent: 'cn', inv: { VCPU: 4, MEMORY_MB: 2048 }, traits: extra.numa0Traits ?? [], used: extra.used0 ?? {} }),
    provider('numa1', { parent: 'cn', inv: { VCPU: 4, MEMORY_MB: 2048 }, traits: extra.numa1Traits ?? ['HW_NUMA_ROOT'] }),
  ],
});

/** Two SR-IOV physical functions under one compute node (granular-request fixture). */
const sriovHost = (pfs = 2): FitTree => ({
  providers: [
    provider('cn', { inv: { VCPU: 8, MEMORY_MB: 4096 } }),
    ...Array.from({ length: pfs }, (_, i) =>
      provider(`pf${i + 1}`, { parent: 'cn', inv: { SRIOV_NET_VF: 8, NET_BW_EGR_KILOBIT_PER_SEC: 10000 }, traits: [`CUSTOM_PHYSNET${i + 1}`, 'HW_NIC_OFFLOAD_GENEVE'] }),
    ),
  ],
});

interface Case {
  name: string;
  tree: FitTree;
  spec: RequestSpec;
  preallocated?: FitAllocation[];
  /** Allocations Placement's first candidate (root first, tree order) gives, or a reason pattern. */
  expect: FitAllocation[] | RegExp;
}

const cases: Case[] = [
  // allocation-candidates.yaml with SharedStorageFixture
  {
    name: 'sharing provider supplies DISK_GB to a tree in its aggregate',
    tree: sharedStorage(),
    spec: spec([group('', { VCPU: 1, MEMORY_MB: 1024, DISK_GB: 100 })]),
    expect: [alloc('cn1', 'VCPU', 1), alloc('cn1', 'MEMORY_MB', 1024), alloc('ss', 'DISK_GB', 100)],
  },
  {
    name: 'a provider without MISC_SHARES_VIA_AGGREGATE shares nothing',
    tree: sharedStorage([]),
    spec: spec([group('', { VCPU: 1, DISK_GB: 100 })]),
    expect: /resources: no provider has DISK_GB inventory/,
  },
  {
    name: 'a sharing provider outside the tree aggregates shares nothing',
    tree: { providers: [provider('cn1', { inv: { VCPU: 4 }, aggs: ['other'] })], sharingProviders: sharedStorage().sharingProviders! },
    spec: spec([group('', { VCPU: 1, DISK_GB: 100 })]),
    expect: /no provider has DISK_GB inventory/,
  },
  {
    name: 'local disk is preferred over shared when both fit',
    tree: { providers: [provider('cn1', { inv: { VCPU: 4, DISK_GB: 200 }, aggs: ['agg1'] })], sharingProviders: sharedStorage().sharingProviders! },
    spec: spec([group('', { VCPU: 1, DISK_GB: 100 })]),
    expect: [alloc('cn1', 'VCPU', 1), alloc('cn1', 'DISK_GB', 100)],
  },
  {
    name: 'shared disk is used when the local disk is full',
    tree: {
      providers: [provider('cn1', { inv: { VCPU: 4, DISK_GB: 200 }, used: { DISK_GB: 150 }, aggs: ['agg1'] })],
      sharingProviders: sharedStorage().sharingProviders!,
    },
    spec: spec([group('', { VCPU: 1, DISK_GB: 100 })]),
    expect: [alloc('cn1', 'VCPU', 1), alloc('ss', 'DISK_GB', 100)],
  },
  {
    name: 'required trait satisfied by the sharing provider in the allocation (union of providers)',
    tree: sharedStorage(['MISC_SHARES_VIA_AGGREGATE', 'STORAGE_DISK_SSD']),
    spec: spec([group('', { VCPU: 1, DISK_GB: 100 }, { requiredTraits: ['STORAGE_DISK_SSD'] })]),
    expect: [alloc('cn1', 'VCPU', 1), alloc('ss', 'DISK_GB', 100)],
  },
  {
    name: 'required trait only on a sharing provider that is not used does not count',
    tree: sharedStorage(['MISC_SHARES_VIA_AGGREGATE', 'STORAGE_DISK_SSD']),
    spec: spec([group('', { VCPU: 1 }, { requiredTraits: ['STORAGE_DISK_SSD'] })]),
    expect: /required trait/,
  },
  {
    name: 'forbidden trait on the sharing provider excludes it',
    tree: sharedStorage(['MISC_SHARES_VIA_AGGREGATE', 'STORAGE_DISK_SSD']),
    spec: spec([group('', { VCPU: 1, DISK_GB: 100 }, { forbiddenTraits: ['STORAGE_DISK_SSD'] })]),
    expect: /DISK_GB is only on providers excluded by the group's forbidden traits, member_of or in_tree \(ss\)/,
  },
  // allocation-candidates-nested / NUMA: each class whole on one provider, classes may spread
  {
    name: 'unnumbered classes spread over the tree: disk on root, cpu and memory on the first NUMA node',
    tree: numaHost(),
    spec: spec([group('', { VCPU: 2, MEMORY_MB: 1024, DISK_GB: 10 })]),
    expect: [alloc('numa0', 'VCPU', 2), alloc('numa0', 'MEMORY_MB', 1024), alloc('cn', 'DISK_GB', 10)],
  },
  {
    name: 'an amount is never split across providers (6 VCPU over two NUMA nodes of 4)',
    tree: numaHost(),
    spec: spec([group('', { VCPU: 6 })]),
    expect: /resources: no provider has 6 free VCPU \(most free: 4 on numa0\)/,
  },
  {
    name: 'different classes of the unnumbered group may come from different NUMA nodes',
    tree: numaHost({ used0: { MEMORY_MB: 2048 } }),
    spec: spec([group('', { VCPU: 2, MEMORY_MB: 1024 })]),
    expect: [alloc('numa0', 'VCPU', 2), alloc('numa1', 'MEMORY_MB', 1024)],
  },
  {
    name: 'required traits of the unnumbered group: the union of the providers used (root trait + NUMA trait)',
    tree: numaHost(),
    spec: spec([group('', { VCPU: 1, DISK_GB: 1 }, { requiredTraits: ['HW_CPU_X86_AVX2', 'HW_NUMA_ROOT'] })]),
    expect: [alloc('numa1', 'VCPU', 1), alloc('cn', 'DISK_GB', 1)],
  },
  {
    name: 'a trait on an unused provider does not satisfy the unnumbered group',
    tree: numaHost(),
    spec: spec([group('', { VCPU: 1 }, { requiredTraits: ['HW_CPU_X86_AVX2'] })]),
    expect: /resources: no provider that can supply the group has required trait\(s\) HW_CPU_X86_AVX2/,
  },
  {
    name: 'forbidden trait steers the unnumbered group away from a NUMA node',
    tree: numaHost({ numa0Traits: ['CUSTOM_SLOW'] }),
    spec: spec([group('', { VCPU: 1 }, { forbiddenTraits: ['CUSTOM_SLOW'] })]),
    expect: [alloc('numa1', 'VCPU', 1)],
  },
  {
    name: 'traits and no resources: judged on the root',
    tree: numaHost(),
    spec: spec([group('', {}, { requiredTraits: ['HW_CPU_X86_AVX2'] })]),
    expect: [],
  },
  {
    name: 'traits and no resources: the root lacks the trait',
    tree: numaHost(),
    spec: spec([group('', {}, { requiredTraits: ['HW_NUMA_ROOT'] })]),
    expect: /resources: required trait\(s\) HW_NUMA_ROOT not on cn/,
  },
  {
    name: 'traits and no resources: forbidden on the root',
    tree: numaHost(),
    spec: spec([group('', {}, { forbiddenTraits: ['HW_CPU_X86_AVX2'] })]),
    expect: /forbidden trait\(s\) HW_CPU_X86_AVX2 on cn/,
  },
  // member_of: the provider or its root in the aggregate
  {
    name: 'member_of matches a nested provider through its root',
    tree: numaHost({ rootAggs: ['aggA'] }),
    spec: spec([group('', { VCPU: 1 }, { memberOf: [['aggA', 'aggB']] })]),
    expect: [alloc('numa0', 'VCPU', 1)],
  },
  {
    name: 'member_of excludes a tree in no listed aggregate',
    tree: numaHost({ rootAggs: ['aggC'] }),
    spec: spec([group('', { VCPU: 1 }, { memberOf: [['aggA', 'aggB']] })]),
    expect: /VCPU is only on providers excluded/,
  },
  {
    name: 'several member_of lists must all match',
    tree: numaHost({ rootAggs: ['aggA'] }),
    spec: spec([group('', { VCPU: 1 }, { memberOf: [['aggA'], ['aggB']] })]),
    expect: /excluded/,
  },
  {
    name: 'member_of on a sharing provider looks at its own aggregates',
    tree: sharedStorage(),
    spec: spec([group('', { VCPU: 1, DISK_GB: 10 }, { memberOf: [['agg1']] })]),
    expect: [alloc('cn1', 'VCPU', 1), alloc('ss', 'DISK_GB', 10)],
  },
  // granular (numbered groups)
  {
    name: 'a numbered group puts all its classes on one provider with its traits',
    tree: sriovHost(),
    spec: spec([group('', { VCPU: 1 }), group('1', { SRIOV_NET_VF: 1, NET_BW_EGR_KILOBIT_PER_SEC: 1000 }, { requiredTraits: ['CUSTOM_PHYSNET2'] })]),
    expect: [alloc('cn', 'VCPU', 1), alloc('pf2', 'SRIOV_NET_VF', 1), alloc('pf2', 'NET_BW_EGR_KILOBIT_PER_SEC', 1000)],
  },
  {
    name: 'a numbered group is not split across providers even when the tree has enough in total',
    tree: {
      providers: [
        provider('cn', { inv: { VCPU: 8 } }),
        provider('pf1', { parent: 'cn', inv: { SRIOV_NET_VF: 8 } }),
        provider('pf2', { parent: 'cn', inv: { NET_BW_EGR_KILOBIT_PER_SEC: 10000 } }),
      ],
    },
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 1, NET_BW_EGR_KILOBIT_PER_SEC: 1000 })]),
    expect: /resources1: no single provider has SRIOV_NET_VF, NET_BW_EGR_KILOBIT_PER_SEC/,
  },
  {
    name: 'group_policy=isolate: two numbered groups on two different PFs',
    tree: sriovHost(),
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 1 }), group('2', { SRIOV_NET_VF: 1 })], 'isolate'),
    expect: [alloc('pf1', 'SRIOV_NET_VF', 1), alloc('pf2', 'SRIOV_NET_VF', 1)],
  },
  {
    name: 'group_policy=isolate with a single PF: no candidate',
    tree: sriovHost(1),
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 1 }), group('2', { SRIOV_NET_VF: 1 })], 'isolate'),
    expect: /fit one by one but not together with group_policy=isolate/,
  },
  {
    name: 'group_policy=none lets numbered groups share a provider; their amounts add up',
    tree: sriovHost(1),
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 3 }), group('2', { SRIOV_NET_VF: 5 })], 'none'),
    expect: [alloc('pf1', 'SRIOV_NET_VF', 8)],
  },
  {
    name: 'group_policy=none: amounts of two groups on one provider count against its capacity',
    tree: sriovHost(1),
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 5 }), group('2', { SRIOV_NET_VF: 5 })], 'none'),
    expect: /fit one by one but not together/,
  },
  {
    name: 'isolate does not separate the unnumbered group from numbered groups',
    tree: { providers: [provider('cn', { inv: { VCPU: 8 } })] },
    spec: spec([group('', { VCPU: 2 }), group('1', { VCPU: 2 }), group('2', { VCPU: 2 })], 'isolate'),
    expect: /not together with group_policy=isolate/,
  },
  {
    name: 'the unnumbered group and one numbered group share the root; amounts add up',
    tree: { providers: [provider('cn', { inv: { VCPU: 8 } })] },
    spec: spec([group('', { VCPU: 2 }), group('1', { VCPU: 3 })]),
    expect: [alloc('cn', 'VCPU', 5)],
  },
  {
    name: 'forbidden trait in a numbered group excludes that provider',
    tree: sriovHost(),
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 1 }, { forbiddenTraits: ['CUSTOM_PHYSNET1'] })]),
    expect: [alloc('pf2', 'SRIOV_NET_VF', 1)],
  },
  {
    name: 'no provider has the numbered group traits',
    tree: sriovHost(),
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 1 }, { requiredTraits: ['CUSTOM_PHYSNET9'] })]),
    expect: /resources1: no single provider has SRIOV_NET_VF with required traits CUSTOM_PHYSNET9/,
  },
  {
    // Placement 8.0.0 (research_context.get_provider_ids_matching): a numbered group's
    // provider must itself be in the aggregate; the root's aggregates do not span the tree
    // for it (they do for the unnumbered group).
    name: 'numbered group member_of does not inherit the root aggregate',
    tree: { providers: [provider('cn', { inv: { VCPU: 8 }, aggs: ['a1'] }), provider('pf1', { parent: 'cn', inv: { SRIOV_NET_VF: 4 } })] },
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 1 }, { memberOf: [['a1']] })]),
    expect: /resources1: no single provider has SRIOV_NET_VF with member_of in:a1/,
  },
  {
    name: 'numbered group member_of: the provider itself in the aggregate',
    tree: { providers: [provider('cn', { inv: { VCPU: 8 } }), provider('pf1', { parent: 'cn', inv: { SRIOV_NET_VF: 4 }, aggs: ['a1'] })] },
    spec: spec([group('', {}), group('1', { SRIOV_NET_VF: 1 }, { memberOf: [['a1']] })]),
    expect: [alloc('pf1', 'SRIOV_NET_VF', 1)],
  },
  {
    // Unnumbered member_of: a provider, or the tree's root, must be in EVERY list by itself
    // (RPCandidateList.filter_by_rp_or_tree with the providers matching all lists).
    name: 'unnumbered member_of lists are met by the provider or by the root, not half each',
    tree: { providers: [provider('cn', { aggs: ['a2'] }), provider('numa0', { parent: 'cn', inv: { VCPU: 8 }, aggs: ['a1'] })] },
    spec: spec([group('', { VCPU: 1 }, { memberOf: [['a1'], ['a2']] })]),
    expect: /VCPU is only on providers excluded/,
  },
  {
    name: 'a numbered group can be served by a sharing provider',
    tree: sharedStorage(),
    spec: spec([group('', { VCPU: 1 }), group('1', { DISK_GB: 50 })]),
    expect: [alloc('cn1', 'VCPU', 1), alloc('ss', 'DISK_GB', 50)],
  },
  {
    name: 'backtracking: the first choice for the unnumbered group would starve the numbered group',
    tree: {
      providers: [provider('cn', { inv: { VCPU: 4 } }), provider('numa0', { parent: 'cn', inv: { VCPU: 2 } })],
    },
    spec: spec([group('', { VCPU: 2 }), group('1', { VCPU: 3 })]),
    expect: [alloc('numa0', 'VCPU', 2), alloc('cn', 'VCPU', 3)],
  },
  // inventory rules (allocation-candidates.yaml: max_unit, min_unit, step_size, reserved, ratio)
  {
    name: 'max_unit exceeded',
    tree: { providers: [provider('cn', { inv: { VCPU: { total: 32, maxUnit: 8 } } })] },
    spec: spec([group('', { VCPU: 10 })]),
    expect: /resources: VCPU on cn: amount 10 is above max_unit 8/,
  },
  {
    name: 'below min_unit',
    tree: { providers: [provider('cn', { inv: { MEMORY_MB: { total: 4096, minUnit: 512 } } })] },
    spec: spec([group('', { MEMORY_MB: 256 })]),
    expect: /amount 256 is below min_unit 512/,
  },
  {
    name: 'not a multiple of step_size',
    tree: { providers: [provider('cn', { inv: { DISK_GB: { total: 100, stepSize: 10 } } })] },
    spec: spec([group('', { DISK_GB: 15 })]),
    expect: /amount 15 is not a multiple of step_size 10/,
  },
  {
    name: 'step size met by a second provider',
    tree: {
      providers: [provider('cn', { inv: { DISK_GB: { total: 100, stepSize: 10 } } }), provider('d1', { parent: 'cn', inv: { DISK_GB: { total: 100, stepSize: 5 } } })],
    },
    spec: spec([group('', { DISK_GB: 15 })]),
    expect: [alloc('d1', 'DISK_GB', 15)],
  },
  {
    name: 'capacity = (total - reserved) * allocation_ratio',
    tree: { providers: [provider('cn', { inv: { VCPU: { total: 8, reserved: 2, allocationRatio: 2 } }, used: { VCPU: 10 } })] },
    spec: spec([group('', { VCPU: 2 })]),
    expect: [alloc('cn', 'VCPU', 2)],
  },
  {
    name: 'capacity exhausted by usage',
    tree: { providers: [provider('cn', { inv: { VCPU: { total: 8, reserved: 2, allocationRatio: 2 } }, used: { VCPU: 11 } })] },
    spec: spec([group('', { VCPU: 2 })]),
    expect: /no provider has 2 free VCPU \(most free: 1 on cn\)/,
  },
  // preallocated
  {
    name: 'preallocated classes leave the unnumbered group; their amounts count as used',
    tree: {
      providers: [provider('cn', { inv: { VCPU: 8 } }), provider('llc0', { parent: 'cn', inv: { CUSTOM_LLC_WAYS: 11 }, traits: ['CUSTOM_RDT_CAT'] })],
    },
    spec: spec([group('', { VCPU: 2, CUSTOM_LLC_WAYS: 4 }, { requiredTraits: ['CUSTOM_RDT_CAT'] })]),
    preallocated: [alloc('llc0', 'CUSTOM_LLC_WAYS', 4)],
    expect: [alloc('cn', 'VCPU', 2)],
  },
  {
    name: 'preallocated on a provider without room',
    tree: { providers: [provider('cn', { inv: { VCPU: 8, CUSTOM_CU: 10 }, used: { CUSTOM_CU: 8 } })] },
    spec: spec([group('', { VCPU: 2, CUSTOM_CU: 4 })]),
    preallocated: [alloc('cn', 'CUSTOM_CU', 4)],
    expect: /preallocated CUSTOM_CU on cn: needs 4, 2 free of capacity 10/,
  },
  {
    name: 'preallocated on a provider not in the tree',
    tree: { providers: [provider('cn', { inv: { VCPU: 8 } })] },
    spec: spec([group('', { VCPU: 2 })]),
    preallocated: [alloc('elsewhere', 'VCPU', 1)],
    expect: /provider uuid-elsewhere is not in the tree/,
  },
  {
    name: 'preallocated usage makes the rest not fit',
    tree: { providers: [provider('cn', { inv: { VCPU: 4 } })] },
    spec: spec([group('', { VCPU: 2 }), group('1', { VCPU: 2 })]),
    preallocated: [alloc('cn', 'VCPU', 3)],
    expect: /resources1: no single provider can supply 2 VCPU \(VCPU on cn: needs 2, 1 free of capacity 4\)/,
  },
  {
    name: 'forbidden trait on a preallocated provider',
    tree: { providers: [provider('cn', { inv: { VCPU: 8 } }), provider('llc0', { parent: 'cn', inv: { CUSTOM_LLC_WAYS: 11 }, traits: ['CUSTOM_SLOW'] })] },
    spec: spec([group('', { VCPU: 2 }, { forbiddenTraits: ['CUSTOM_SLOW'] })]),
    preallocated: [alloc('llc0', 'CUSTOM_LLC_WAYS', 2)],
    expect: /preallocated provider llc0 has forbidden trait\(s\) CUSTOM_SLOW/,
  },
  {
    name: 'empty request fits with no allocations',
    tree: { providers: [provider('cn', {})] },
    spec: spec([group('', {})]),
    expect: [],
  },
];

describe('fitRequest: Placement allocation-candidate scenarios', () => {
  it.each(cases)('$name', ({ tree, spec: request, preallocated, expect: expected }) => {
    const result = fitRequest(request, tree, preallocated ? { preallocated } : {});
    if (expected instanceof RegExp) {
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.reason).toMatch(expected);
    } else {
      expect(result).toEqual({ ok: true, allocations: expected });
    }
  });

  it('gives the same answer for a spec reused across hosts (compiled once)', () => {
    const request = spec([group('', { VCPU: 2 })]);
    const small = { providers: [provider('a', { inv: { VCPU: 1 } })] };
    const big = { providers: [provider('b', { inv: { VCPU: 4 } })] };
    expect(fitRequest(request, small).ok).toBe(false);
    expect(fitRequest(request, big)).toEqual({ ok: true, allocations: [alloc('b', 'VCPU', 2)] });
    expect(fitRequest(request, small).ok).toBe(false);
  });

  it('preallocation on one call does not leak into the next call with the same spec', () => {
    const request = spec([group('', { VCPU: 2, CUSTOM_CU: 4 })]);
    const tree = { providers: [provider('cn', { inv: { VCPU: 8, CUSTOM_CU: 10 } })] };
    expect(fitRequest(request, tree, { preallocated: [alloc('cn', 'CUSTOM_CU', 4)] })).toEqual({ ok: true, allocations: [alloc('cn', 'VCPU', 2)] });
    expect(fitRequest(request, tree)).toEqual({ ok: true, allocations: [alloc('cn', 'VCPU', 2), alloc('cn', 'CUSTOM_CU', 4)] });
  });

  it('fits a spec parsed from a Nova flavor with granular groups', () => {
    const parsed = parseFlavor(
      {
        name: 'sriov',
        vcpus: 2,
        memoryMb: 1024,
        diskGb: 0,
        extraSpecs: { 'resources1:SRIOV_NET_VF': '1', 'trait1:CUSTOM_PHYSNET1': 'required', 'resources2:SRIOV_NET_VF': '1', group_policy: 'isolate' },
      },
      { keys: [] },
    );
    const tree = sriovHost();
    expect(fitRequest(parsed, tree)).toEqual({
      ok: true,
      allocations: [alloc('cn', 'VCPU', 2), alloc('cn', 'MEMORY_MB', 1024), alloc('pf1', 'SRIOV_NET_VF', 1), alloc('pf2', 'SRIOV_NET_VF', 1)],
    });
  });

  it('accepts the scheduler HostState (ProviderState) as a tree', () => {
    const root: ProviderState = {
      uuid: 'uuid-h1',
      name: 'h1',
      parentUuid: undefined,
      generation: 3,
      inventories: { VCPU: normalizeInventory({ total: 4 }) },
      usages: { VCPU: 1 },
      traits: new Set(),
      aggregates: new Set(),
    };
    const host: Pick<HostState, 'providers' | 'sharingProviders'> = { providers: [root], sharingProviders: [] };
    expect(fitRequest(spec([group('', { VCPU: 3 })]), host)).toEqual({ ok: true, allocations: [alloc('h1', 'VCPU', 3)] });
    expect(fitRequest(spec([group('', { VCPU: 4 })]), host)).toEqual({ ok: false, reason: 'resources: no provider has 4 free VCPU (most free: 3 on h1)' });
  });

  it('finds the isolated assignment in a wide tree where most providers are full', () => {
    const providers = [provider('cn', { inv: { VCPU: 8 } })];
    for (let i = 0; i < 12; i++) providers.push(provider(`pf${i}`, { parent: 'cn', inv: { SRIOV_NET_VF: 2 }, used: { SRIOV_NET_VF: i % 4 === 3 ? 0 : 2 } }));
    const groups = [group('', {}), ...[1, 2, 3].map((n) => group(String(n), { SRIOV_NET_VF: 2 }))];
    expect(fitRequest(spec(groups, 'isolate'), { providers })).toEqual({
      ok: true,
      allocations: [alloc('pf3', 'SRIOV_NET_VF', 2), alloc('pf7', 'SRIOV_NET_VF', 2), alloc('pf11', 'SRIOV_NET_VF', 2)],
    });
    const four = [...groups, group('4', { SRIOV_NET_VF: 2 })];
    expect(fitRequest(spec(four, 'isolate'), { providers })).toMatchObject({ ok: false, reason: expect.stringMatching(/not together with group_policy=isolate/) });
  });
});
