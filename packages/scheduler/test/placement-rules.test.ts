import { describe, expect, it } from 'vitest';
import { normalizeInventory } from '@ert/plugin-api';
import type { PlacementRequest } from '@ert/plugin-api';
import type { Store, StoreOptions } from '@ert/store';
import { parseFlavor } from '@ert/placement';
import { NoValidHostError } from '../src/index.js';
import type { Scheduler } from '../src/index.js';
import { BACKENDS, flavor, instances, useFleets, uuidFor } from './helpers.js';

// Placement's rules through the whole scheduler (issue 10): `explain` and `select` give one
// answer because both run the same fit, and the built-in `traits` pre-filter never rejects
// a host that Placement would accept (sharing providers count).
//
// Mutations seen caught: the old `traits` filter (numbered traits looked for on the tree
// only; unnumbered forbidden traits judged on the tree only) fails the sharing-provider
// tests; dropping the summed max_unit check in placement's search makes explain pass a host
// that select then cannot claim.

const FILTERS = ['status', 'traits', 'resources'];
const AGG = '11111111-2222-4333-8444-555555555555';

describe.each(BACKENDS)('Placement rules through the scheduler on %s', (client) => {
  const fleets = useFleets(client, 'ert-sched-rules-');
  const fleet = fleets.fleet;
  const scheduler = (options: StoreOptions, store: Store): Promise<Scheduler> => fleets.scheduler(options, store, { filters: FILTERS, maxAttempts: 2 });

  /** A shared disk pool in AGG: MISC_SHARES_VIA_AGGREGATE plus `traits`, 1000 DISK_GB. */
  async function sharedDisk(store: Store, traits: string[]): Promise<string> {
    const uuid = uuidFor(`nfs-${traits.join('-')}`);
    await store.ensureResourceClasses(['DISK_GB']);
    const created = await store.createProvider({ uuid, name: `nfs-${traits.join('-') || 'plain'}` });
    await store.setInventories(uuid, created.generation, { DISK_GB: normalizeInventory({ total: 1000 }) });
    await store.setTraits(uuid, undefined, ['MISC_SHARES_VIA_AGGREGATE', ...traits]);
    await store.setAggregates(uuid, undefined, [AGG]);
    return uuid;
  }

  it('rule 3a: a numbered group is placed on a sharing provider that has its required trait', async () => {
    const { store, options } = await fleet('r3a', [{ name: 'h1', inventories: { VCPU: 8, MEMORY_MB: 8192 }, aggregates: [AGG] }]);
    const nfs = await sharedDisk(store, ['CUSTOM_SSD']);
    const s = await scheduler(options, store);
    const request = { flavor: flavor('ssd', 1, 512, { 'resources1:DISK_GB': '10', 'trait1:CUSTOM_SSD': 'required' }), instances: instances(1) };
    expect((await s.explain(request)).passed).toBe(1);
    const [selection] = await s.select(request);
    expect(selection!.host).toBe('h1');
    expect(selection!.allocations).toContainEqual({ providerUuid: nfs, resourceClass: 'DISK_GB', amount: 10 });
    expect(await store.getUsages(nfs)).toEqual({ DISK_GB: 10 });
  });

  it("rule 3b: the unnumbered group's forbidden trait binds only the providers that serve it", async () => {
    const { store, options } = await fleet('r3b', [{ name: 'h1', inventories: { VCPU: 8 }, traits: ['CUSTOM_GOLD'], aggregates: [AGG] }]);
    const nfs = await sharedDisk(store, []);
    const s = await scheduler(options, store);
    const request = { flavor: flavor('not-gold-disk', 1, 0, { 'resources:DISK_GB': '10', 'trait:CUSTOM_GOLD': 'forbidden', 'resources1:VCPU': '1' }), instances: instances(1) };
    expect((await s.explain(request)).rejected).toEqual([]);
    const [selection] = await s.select(request);
    expect(selection!.allocations.sort((a, b) => a.resourceClass.localeCompare(b.resourceClass))).toEqual([
      { providerUuid: nfs, resourceClass: 'DISK_GB', amount: 10 },
      { providerUuid: uuidFor('h1'), resourceClass: 'VCPU', amount: 1 },
    ]);
  });

  it('a Placement-style request instead of a flavor: explained as parsed, placed, recorded under the placement-request flavor', async () => {
    const { store, options } = await fleet('preq', [
      { name: 'h1', inventories: { VCPU: 8, MEMORY_MB: 4096 }, traits: ['CUSTOM_SLOW'] },
      { name: 'h2', inventories: { VCPU: 8, MEMORY_MB: 4096 }, children: [{ key: 'nic', inventories: { SRIOV_NET_VF: 4 }, traits: ['CUSTOM_PHYSNET1'] }] },
    ]);
    const s = await scheduler(options, store);
    const placement: PlacementRequest = {
      groups: [
        { suffix: '', resources: { VCPU: 2, MEMORY_MB: 1024 }, requiredTraits: [], forbiddenTraits: ['CUSTOM_SLOW'], memberOf: [] },
        { suffix: '_NIC', resources: { SRIOV_NET_VF: 1 }, requiredTraits: ['CUSTOM_PHYSNET1'], forbiddenTraits: [], memberOf: [] },
      ],
      groupPolicy: 'isolate',
    };
    const [inst] = instances(1);
    const explanation = await s.explain({ placement, instances: [inst!] });
    expect(explanation.request).toEqual(placement);
    expect(explanation.rejected.map((r) => r.host)).toEqual(['h1']);
    const [selection] = await s.select({ placement, instances: [inst!] });
    expect(selection!.host).toBe('h2');
    expect(selection!.allocations).toContainEqual({ providerUuid: uuidFor('h2_nic'), resourceClass: 'SRIOV_NET_VF', amount: 1 });
    // The instance records the request as a flavor that parses back to the same groups (what a tracker confirming it reads).
    const record = await store.getInstance(inst!.uuid);
    expect(record).toMatchObject({ host: 'h2', flavor: { name: 'placement-request' } });
    expect(parseFlavor(record!.flavor, { keys: [] }).groups).toEqual(explanation.request.groups);
    await expect(s.select({ placement: { ...placement, groupPolicy: 'separate' as never }, instances: instances(1) })).rejects.toThrow(/groupPolicy=separate: expected none or isolate/);
    await expect(s.select({ placement, flavor: flavor('both', 1, 1), instances: instances(1) })).rejects.toThrow(/either flavor or placement/);
  });

  it('rule 4: two groups that together pass max_unit are refused by explain and select alike; a fitting pair is claimed whole', async () => {
    const { store, options } = await fleet('r4', [{ name: 'h1', inventories: { VCPU: { total: 4, maxUnit: 4, allocationRatio: 4 } } }]);
    const s = await scheduler(options, store);
    const twoGroups = (each: number) => ({
      flavor: flavor(`2x${each}`, 0, 0, { 'resources1:VCPU': String(each), 'resources2:VCPU': String(each), group_policy: 'none' }),
      instances: instances(1),
    });
    const tooBig = twoGroups(4);
    const explanation = await s.explain(tooBig);
    expect(explanation.passed).toBe(0);
    expect(explanation.rejected).toEqual([{ host: 'h1', filter: 'resources', reason: expect.stringMatching(/not together/) }]);
    await expect(s.select(tooBig)).rejects.toBeInstanceOf(NoValidHostError);

    const fits = twoGroups(2);
    expect((await s.explain(fits)).passed).toBe(1);
    const [selection] = await s.select(fits);
    expect(selection!.allocations).toEqual([{ providerUuid: uuidFor('h1'), resourceClass: 'VCPU', amount: 4 }]);
    expect(await store.getUsages(uuidFor('h1'))).toEqual({ VCPU: 4 });
  });
});
