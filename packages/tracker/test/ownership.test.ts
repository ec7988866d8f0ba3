/*
 * Issue 20, point 1 (ownership): the tracker owns what its plugins and provider config files
 * report, and nothing else. A sync adds, updates and removes only its own providers, traits
 * and inventories; what another writer (an operator through `ert serve`, Neutron creating its
 * bandwidth provider under the compute host) wrote survives (docs/ownership.md).
 *
 * Each guarantee was seen red once with the code it guards broken (noted per test).
 */
import { describe, expect, it } from 'vitest';
import { normalizeInventory } from '@ert/plugin-api';
import type { Store } from '@ert/store';
import { providerUuid } from '../src/index.js';
import { BACKENDS, useBench } from './harness.js';
// @ts-expect-error plain-JS fixtures shared with the child process of the restart test
import { counting, ways } from './fixtures/plugins.mjs';

const ROOT = providerUuid('host1');
/** A provider another service creates under the host's root, named as Neutron names its own. */
const NIC = { uuid: '7a9d1e04-0000-4000-8000-00000000b00d', name: 'host1:NIC Switch agent', parentUuid: ROOT };
const CONSUMER = { uuid: '7a9d1e04-0000-4000-8000-0000000c0a5e', projectId: 'neutron', userId: 'port' };

/** What an operator or another service does through the API: read-modify-write, no owner. */
async function addTrait(store: Store, uuid: string, trait: string): Promise<void> {
  const provider = (await store.getProvider(uuid))!;
  await store.setTraits(uuid, provider.generation, [...(await store.getTraits(uuid)), trait]);
}

async function outsideWrites(store: Store): Promise<void> {
  await addTrait(store, ROOT, 'CUSTOM_OPERATOR_GOLD');
  await store.createProvider(NIC);
  await store.setInventories(NIC.uuid, 0, { NET_BW_EGR_KILOBIT_PER_SEC: normalizeInventory({ total: 10_000_000 }) });
  await store.setTraits(NIC.uuid, undefined, ['CUSTOM_PHYSNET_PUBLIC']);
  await store.writeAllocations([{ consumer: { ...CONSUMER, generation: null }, allocations: [{ providerUuid: NIC.uuid, resourceClass: 'NET_BW_EGR_KILOBIT_PER_SEC', amount: 1000 }] }]);
  // An inventory of a class the tracker does not report, on the root the tracker owns.
  const root = await store.getInventories(ROOT);
  await store.setInventories(ROOT, root.generation, { ...root.inventories, CUSTOM_OUTSIDE_SLOTS: normalizeInventory({ total: 3 }) });
}

async function outsideWritesSurvive(store: Store): Promise<void> {
  expect(await store.getTraits(ROOT)).toEqual(['CUSTOM_CACHE_WAYS', 'CUSTOM_OPERATOR_GOLD', 'HW_CPU_X86_AVX2']);
  expect(await store.getProvider(NIC.uuid)).toMatchObject({ name: NIC.name, parentUuid: ROOT, rootUuid: ROOT });
  expect((await store.getProvider(NIC.uuid))!.owner).toBeUndefined();
  expect((await store.getInventories(NIC.uuid)).inventories['NET_BW_EGR_KILOBIT_PER_SEC']!.total).toBe(10_000_000);
  expect(await store.getTraits(NIC.uuid)).toEqual(['CUSTOM_PHYSNET_PUBLIC']);
  expect(await store.getUsages(NIC.uuid)).toEqual({ NET_BW_EGR_KILOBIT_PER_SEC: 1000 });
  expect((await store.getAllocations(CONSUMER.uuid)).allocations).toEqual([{ providerUuid: NIC.uuid, resourceClass: 'NET_BW_EGR_KILOBIT_PER_SEC', amount: 1000 }]);
  const root = (await store.getInventories(ROOT)).inventories;
  expect(Object.keys(root).sort()).toEqual(['CUSTOM_OUTSIDE_SLOTS', 'MEMORY_MB', 'VCPU']);
  expect(root['CUSTOM_OUTSIDE_SLOTS']!.total).toBe(3);
}

describe.each(BACKENDS)('ownership: a sync keeps what others wrote (%s)', (backend) => {
  const bench = useBench(backend);

  async function host(traits: string[] = ['HW_CPU_X86_AVX2']) {
    const store = await bench.openStore(bench.storeOptions());
    /** The cpu plugin's VCPU total, changed between syncs to make the tracker write the root's inventories. */
    const shape: { total?: number } = {};
    const resources = [counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, traits, shape }), counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096 }), ways()];
    const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources }), store);
    return { store, tracker, traits, shape };
  }

  // Seen red with reconcile.ts's retireProviders not filtering on owner (the NIC provider was
  // emptied: ERT_STORE_INVENTORY_IN_USE, and without its allocation deleted), with setTraits
  // called without { owner } (CUSTOM_OPERATOR_GOLD gone after the first sync), and with the
  // store's owner-scoped setInventories replacing the whole set (CUSTOM_OUTSIDE_SLOTS gone at
  // the second sync, the first that rewrites the root's inventories).
  it("an operator's trait, an outside child provider with inventory and allocation, and an outside inventory survive three syncs", async () => {
    const { store, tracker, shape } = await host();
    expect((await tracker.sync()).problems).toEqual([]);
    expect((await store.getProvider(ROOT))!.owner).toBe('tracker');
    expect((await store.getProvider(providerUuid('host1_cache_0')))!.owner).toBe('tracker');
    await outsideWrites(store);
    for (const total of [8, 16, 12]) {
      // The first sync has nothing of its own to write; the next two rewrite the root's VCPU.
      shape.total = total;
      const report = await tracker.sync();
      expect(report.problems).toEqual([]);
      expect(report.changes.filter((c) => !c.startsWith('stats of'))).toEqual(total === 8 ? [] : ['inventories of host1: VCPU']);
      await outsideWritesSurvive(store);
      expect((await store.getInventories(ROOT)).inventories['VCPU']!.total).toBe(total);
    }
    // The tracker's own traits are the ones it reports; the operator's is not among them.
    expect(await store.getTraits(ROOT, { owner: 'tracker' })).toEqual(['CUSTOM_CACHE_WAYS', 'HW_CPU_X86_AVX2']);
    expect(Object.keys((await store.getInventories(ROOT, { owner: 'tracker' })).inventories).sort()).toEqual(['MEMORY_MB', 'VCPU']);
    // The scheduler's view of the host holds the outside child and its usage.
    const [snapshot] = await store.loadHosts(['host1']);
    expect(snapshot!.providers.map((p) => p.name)).toContain(NIC.name);
  });

  // Seen red with the store's owner-scoped setTraits deleting every row of the provider (the
  // operator's trait went with the plugin's), and with it inserting without the owner (the
  // plugin's dropped trait stayed, as nobody's).
  it('a plugin that stops reporting a trait removes only that trait; a reported trait the API removed comes back', async () => {
    const { store, tracker, traits } = await host(['HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42']);
    await tracker.sync();
    await addTrait(store, ROOT, 'CUSTOM_OPERATOR_GOLD');
    expect(await store.getTraits(ROOT)).toEqual(['CUSTOM_CACHE_WAYS', 'CUSTOM_OPERATOR_GOLD', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42']);

    traits.splice(traits.indexOf('HW_CPU_X86_SSE42'), 1);
    const report = await tracker.sync();
    expect(report.changes).toContain('traits of host1: CUSTOM_CACHE_WAYS, HW_CPU_X86_AVX2');
    expect(await store.getTraits(ROOT)).toEqual(['CUSTOM_CACHE_WAYS', 'CUSTOM_OPERATOR_GOLD', 'HW_CPU_X86_AVX2']);

    // Placement semantics for the API: PUT traits replaces the whole set, and the tracker's
    // traits it leaves in keep their owner...
    const provider = (await store.getProvider(ROOT))!;
    await store.setTraits(ROOT, provider.generation, ['CUSTOM_OPERATOR_GOLD', 'HW_CPU_X86_AVX2', 'CUSTOM_OPERATOR_SILVER']);
    expect(await store.getTraits(ROOT, { owner: 'tracker' })).toEqual(['HW_CPU_X86_AVX2']);
    // ... and a trait the tracker reports that the API removed is back at the next sync.
    await tracker.sync();
    expect(await store.getTraits(ROOT)).toEqual(['CUSTOM_CACHE_WAYS', 'CUSTOM_OPERATOR_GOLD', 'CUSTOM_OPERATOR_SILVER', 'HW_CPU_X86_AVX2']);

    // A trait another writer set first and a plugin then reports is the tracker's from then on.
    await addTrait(store, ROOT, 'HW_CPU_X86_SSE42');
    traits.push('HW_CPU_X86_SSE42');
    await tracker.sync();
    expect(await store.getTraits(ROOT, { owner: 'tracker' })).toEqual(['CUSTOM_CACHE_WAYS', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42']);
    traits.pop();
    await tracker.sync();
    expect(await store.getTraits(ROOT)).toEqual(['CUSTOM_CACHE_WAYS', 'CUSTOM_OPERATOR_GOLD', 'CUSTOM_OPERATOR_SILVER', 'HW_CPU_X86_AVX2']);
  });

  // Seen red with retireProviders not filtering on owner (the outside child was retired with
  // the provider config's), and without the check for others' inventories (the retired
  // provider was deleted with the operator's CUSTOM_OUTSIDE_SLOTS).
  it("retires the tracker's providers nothing reports any more, and only those", async () => {
    const store = await bench.openStore(bench.storeOptions());
    const dir = await bench.providerDir({
      'pools.yaml': ['schema_version: "1.0"', 'providers:', '  - identification: { name: fpga_pool }', '    parent: "$HOST"', '    inventories:', '      additional:', '        - CUSTOM_FPGA_SLOT: { total: 2 }', '  - identification: { name: gpu_pool }', '    parent: "$HOST"', '    inventories:', '      additional:', '        - CUSTOM_GPU_SLOT: { total: 1 }', ''].join('\n'),
    });
    const resources = [counting({ name: 'cpu', resourceClass: 'VCPU', total: 8 })];
    const first = await bench.tracker(bench.config({ store: bench.storeOptions(), resources, providerConfigs: dir }), store);
    await first.sync();
    expect((await store.getProvider(providerUuid('host1_fpga_pool')))!.owner).toBe('tracker');
    await store.createProvider(NIC);
    const gpu = providerUuid('host1_gpu_pool');
    const inventories = await store.getInventories(gpu);
    await store.setInventories(gpu, inventories.generation, { ...inventories.inventories, CUSTOM_OUTSIDE_SLOTS: normalizeInventory({ total: 1 }) });
    await first.stop();

    // The same host without the provider config file: its pools are no longer reported.
    const second = await bench.tracker(bench.config({ store: bench.storeOptions(), resources }), store);
    const report = await second.sync();
    expect(report.changes).toContain('deleted provider host1_fpga_pool');
    expect(await store.getProvider(providerUuid('host1_fpga_pool'))).toBeUndefined();
    expect(await store.getProvider(NIC.uuid)).toMatchObject({ name: NIC.name });
    expect(report.problems).toEqual([expect.objectContaining({ code: 'ERT_STORE_PROVIDER_IN_USE', provider: 'host1_gpu_pool' })]);
    expect(Object.keys((await store.getInventories(gpu)).inventories)).toEqual(['CUSTOM_OUTSIDE_SLOTS']);
  });
});
