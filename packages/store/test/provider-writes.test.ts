import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore, type StoreError, type Store } from '@ert/store';
import { backends, inv, openStore } from './backends.js';

/**
 * The store methods behind the Placement API's provider writes (issue 13): rename and
 * re-parent, per-provider details of in-use refusals, custom resource classes (create,
 * rename, delete), recorded traits (list, create, delete) and inventories written over
 * capacity as Placement allows. Each refusal is checked to change nothing.
 */

async function failure(promise: Promise<unknown>): Promise<StoreError> {
  try {
    await promise;
  } catch (err) {
    return err as StoreError;
  }
  throw new Error('expected a rejection');
}

describe.each(backends)('provider writes on %s', (client) => {
  let store: Store;
  let options: Parameters<typeof createStore>[0];
  let cleanup: () => Promise<void>;
  const consumer = (uuid: string) => ({ uuid, projectId: 'proj', userId: 'user', generation: null });

  beforeAll(async () => {
    ({ store, options, cleanup } = await openStore(client, 'provwrites'));
  });
  afterAll(async () => {
    await cleanup();
  });

  describe('updateProvider', () => {
    it('renames, keeping the generation; a taken name is a conflict naming the duplicate, and changes nothing', async () => {
      const p = await store.createProvider({ uuid: 'ren-1', name: 'ren-1' });
      await store.createProvider({ uuid: 'ren-2', name: 'ren-2' });
      const renamed = await store.updateProvider('ren-1', { name: 'ren-1b' });
      expect(renamed).toEqual({ ...p, name: 'ren-1b' });
      expect(await store.updateProvider('ren-1', { name: 'ren-1b' })).toEqual(renamed);
      const clash = await failure(store.updateProvider('ren-1', { name: 'ren-2' }));
      expect(clash.code).toBe('ERT_STORE_CONFLICT');
      expect(clash.details).toMatchObject({ duplicate: 'name' });
      expect(await store.getProvider('ren-1')).toEqual(renamed);
      expect((await failure(store.updateProvider('nope', { name: 'x' }))).code).toBe('ERT_STORE_NOT_FOUND');
      const dup = await failure(store.createProvider({ uuid: 'ren-3', name: 'ren-2' }));
      expect(dup.details).toMatchObject({ duplicate: 'name' });
      expect((await failure(store.createProvider({ uuid: 'ren-2', name: 'ren-9' }))).details).toMatchObject({ duplicate: 'uuid' });
    });

    it('re-parents a subtree (its root follows), un-parents, and refuses loops and unknown parents', async () => {
      await store.createProvider({ uuid: 'a', name: 'a' });
      await store.createProvider({ uuid: 'a1', name: 'a1', parentUuid: 'a' });
      await store.createProvider({ uuid: 'a11', name: 'a11', parentUuid: 'a1' });
      await store.createProvider({ uuid: 'b', name: 'b' });
      // Guards the subtree's root update: without it a11 keeps root a.
      const moved = await store.updateProvider('a1', { parentUuid: 'b' });
      expect(moved).toMatchObject({ parentUuid: 'b', rootUuid: 'b', generation: 0 });
      expect(await store.getProvider('a11')).toMatchObject({ parentUuid: 'a1', rootUuid: 'b' });
      expect((await store.listProviders({ rootUuid: 'b' })).map((p) => p.uuid).sort()).toEqual(['a1', 'a11', 'b']);
      // Guards the loop check (without it b would become its own descendant's child).
      const loop = await failure(store.updateProvider('b', { parentUuid: 'a11' }));
      expect(loop.code).toBe('ERT_STORE_INVALID');
      expect((await failure(store.updateProvider('a1', { parentUuid: 'a1' }))).code).toBe('ERT_STORE_INVALID');
      expect(await store.getProvider('b')).toMatchObject({ rootUuid: 'b' });
      expect(await store.getProvider('b')).not.toHaveProperty('parentUuid');
      expect((await failure(store.updateProvider('a1', { parentUuid: 'missing' }))).code).toBe('ERT_STORE_NOT_FOUND');
      const root = await store.updateProvider('a1', { parentUuid: null });
      expect(root).toMatchObject({ uuid: 'a1', rootUuid: 'a1' });
      expect(root).not.toHaveProperty('parentUuid');
      expect(await store.getProvider('a11')).toMatchObject({ rootUuid: 'a1' });
      // Unchanged parent: nothing moves.
      expect(await store.updateProvider('a11', { parentUuid: 'a1', name: 'a11' })).toMatchObject({ parentUuid: 'a1', rootUuid: 'a1' });
    });

    it('never gives a host\'s root a parent; moving providers in and out of a host\'s tree bumps the host', async () => {
      await store.createProvider({ uuid: 'h-root', name: 'h-root' });
      await store.upsertHost({ name: 'h', rootProviderUuid: 'h-root' });
      await store.createProvider({ uuid: 'h-out', name: 'h-out' });
      const refused = await failure(store.updateProvider('h-root', { parentUuid: 'h-out' }));
      expect(refused.code).toBe('ERT_STORE_INVALID');
      expect(refused.message).toContain('host h');
      expect(await store.getProvider('h-root')).not.toHaveProperty('parentUuid');
      const g0 = (await store.getHost('h'))!.generation;
      await store.updateProvider('h-out', { parentUuid: 'h-root' });
      const g1 = (await store.getHost('h'))!.generation;
      expect(g1).toBeGreaterThan(g0);
      expect((await store.loadHosts(['h']))[0]!.providers.map((p) => p.uuid)).toEqual(['h-root', 'h-out']);
      await store.updateProvider('h-out', { parentUuid: null });
      expect((await store.getHost('h'))!.generation).toBeGreaterThan(g1);
      expect((await store.loadHosts(['h']))[0]!.providers.map((p) => p.uuid)).toEqual(['h-root']);
    });
  });

  describe('deleteProvider', () => {
    it('says why it refuses: children first, then allocations, then a host', async () => {
      await store.createProvider({ uuid: 'd', name: 'd' });
      await store.createProvider({ uuid: 'd1', name: 'd1', parentUuid: 'd' });
      await store.setInventories('d', undefined, { VCPU: inv(4) });
      await store.writeAllocations([{ consumer: consumer('d-c'), allocations: [{ providerUuid: 'd', resourceClass: 'VCPU', amount: 1 }] }]);
      await store.upsertHost({ name: 'd-host', rootProviderUuid: 'd' });
      expect((await failure(store.deleteProvider('d'))).details).toMatchObject({ reason: 'children' });
      await store.deleteProvider('d1');
      expect((await failure(store.deleteProvider('d'))).details).toMatchObject({ reason: 'allocations' });
      await store.deleteAllocations('d-c');
      expect((await failure(store.deleteProvider('d'))).details).toMatchObject({ reason: 'host' });
    });
  });

  describe('inventories over capacity', () => {
    it('refuses shrinking below usage by default; allowOverCapacity writes it, but never drops a used class', async () => {
      const p = await store.createProvider({ uuid: 'oc', name: 'oc' });
      await store.setInventories(p.uuid, 0, { VCPU: inv(4), MEMORY_MB: inv(100) });
      await store.writeAllocations([{ consumer: consumer('oc-c'), allocations: [{ providerUuid: 'oc', resourceClass: 'VCPU', amount: 3 }] }]);
      expect((await failure(store.setInventories('oc', undefined, { VCPU: inv(2) }))).code).toBe('ERT_STORE_INVENTORY_IN_USE');
      const dropped = await failure(store.setInventories('oc', undefined, { MEMORY_MB: inv(100) }, { allowOverCapacity: true }));
      expect(dropped.code).toBe('ERT_STORE_INVENTORY_IN_USE');
      expect((await store.getInventories('oc')).inventories.VCPU!.total).toBe(4);
      const over = await store.setInventories('oc', undefined, { VCPU: inv(2) }, { allowOverCapacity: true });
      expect((await store.getInventories('oc')).inventories.VCPU!.total).toBe(2);
      expect(over.generation).toBe(3);
      const noRoom = await failure(store.writeAllocations([{ consumer: consumer('oc-d'), allocations: [{ providerUuid: 'oc', resourceClass: 'VCPU', amount: 1 }] }]));
      expect(noRoom.code).toBe('ERT_STORE_CAPACITY_EXCEEDED');
    });
  });

  describe('resource classes', () => {
    it('creates custom classes (true, then false), refusing other names', async () => {
      expect(await store.createResourceClass('CUSTOM_NEW')).toBe(true);
      expect(await store.createResourceClass('CUSTOM_NEW')).toBe(false);
      expect(await store.listResourceClasses()).toContain('CUSTOM_NEW');
      for (const bad of ['VCPU', 'CUSTOM_lower', 'OTHER', `CUSTOM_${'X'.repeat(250)}`]) expect((await failure(store.createResourceClass(bad))).code).toBe('ERT_STORE_INVALID');
    });

    it('renames a class with its inventories and allocations; refuses standard, unknown and taken names, changing nothing', async () => {
      await store.createProvider({ uuid: 'rc-p', name: 'rc-p' });
      await store.setInventories('rc-p', undefined, { CUSTOM_OLD: inv(10) });
      await store.writeAllocations([{ consumer: consumer('rc-c'), allocations: [{ providerUuid: 'rc-p', resourceClass: 'CUSTOM_OLD', amount: 2 }] }]);
      await store.createResourceClass('CUSTOM_TAKEN');
      const taken = await failure(store.renameResourceClass('CUSTOM_OLD', 'CUSTOM_TAKEN'));
      expect(taken.code).toBe('ERT_STORE_CONFLICT');
      expect(taken.details).toMatchObject({ duplicate: 'name' });
      expect((await failure(store.renameResourceClass('VCPU', 'CUSTOM_V'))).code).toBe('ERT_STORE_INVALID');
      expect((await failure(store.renameResourceClass('CUSTOM_NONE', 'CUSTOM_V'))).code).toBe('ERT_STORE_NOT_FOUND');
      expect((await failure(store.renameResourceClass('CUSTOM_OLD', 'bad'))).code).toBe('ERT_STORE_INVALID');
      expect(Object.keys((await store.getInventories('rc-p')).inventories)).toEqual(['CUSTOM_OLD']);

      await store.renameResourceClass('CUSTOM_OLD', 'CUSTOM_RENAMED');
      const classes = await store.listResourceClasses();
      expect(classes).toContain('CUSTOM_RENAMED');
      expect(classes).not.toContain('CUSTOM_OLD');
      expect((await store.getInventories('rc-p')).inventories.CUSTOM_RENAMED!.total).toBe(10);
      expect(await store.getUsages('rc-p')).toEqual({ CUSTOM_RENAMED: 2 });
      expect((await store.getAllocations('rc-c')).allocations).toEqual([{ providerUuid: 'rc-p', resourceClass: 'CUSTOM_RENAMED', amount: 2 }]);
    });

    it('another process sees a rename and a delete: its cached ids do not resurrect the old class', async () => {
      const other = await createStore(options);
      try {
        await store.createProvider({ uuid: 'rc-x', name: 'rc-x' });
        await other.setInventories('rc-x', undefined, { CUSTOM_CACHED: inv(5) });
        expect((await other.getInventories('rc-x')).inventories).toHaveProperty('CUSTOM_CACHED');
        await store.renameResourceClass('CUSTOM_CACHED', 'CUSTOM_CACHED2');
        expect(Object.keys((await other.getInventories('rc-x')).inventories)).toEqual(['CUSTOM_CACHED2']);
        await store.setInventories('rc-x', undefined, {});
        await store.deleteResourceClass('CUSTOM_CACHED2');
        // Guards setInventories' fresh lookup: with the other process's cached id it would fail on the foreign key.
        await other.setInventories('rc-x', undefined, { CUSTOM_CACHED2: inv(3) });
        expect((await store.getInventories('rc-x')).inventories.CUSTOM_CACHED2!.total).toBe(3);
      } finally {
        await other.close();
      }
    });

    it('deletes an unused custom class; refuses standard, unknown and in-use ones', async () => {
      await store.createResourceClass('CUSTOM_GONE');
      await store.deleteResourceClass('CUSTOM_GONE');
      expect(await store.listResourceClasses()).not.toContain('CUSTOM_GONE');
      expect((await failure(store.deleteResourceClass('CUSTOM_GONE'))).code).toBe('ERT_STORE_NOT_FOUND');
      expect((await failure(store.deleteResourceClass('VCPU'))).code).toBe('ERT_STORE_INVALID');
      await store.createProvider({ uuid: 'rc-u', name: 'rc-u' });
      await store.setInventories('rc-u', undefined, { CUSTOM_USED: inv(1) });
      const used = await failure(store.deleteResourceClass('CUSTOM_USED'));
      expect(used.code).toBe('ERT_STORE_IN_USE');
      expect(await store.listResourceClasses()).toContain('CUSTOM_USED');
    });
  });

  describe('traits', () => {
    it('lists recorded traits with their association; creates and deletes custom ones', async () => {
      expect(await store.createTrait('CUSTOM_T1')).toBe(true);
      expect(await store.createTrait('CUSTOM_T1')).toBe(false);
      expect((await failure(store.createTrait('lower'))).code).toBe('ERT_STORE_INVALID');
      await store.createProvider({ uuid: 't-p', name: 't-p' });
      await store.setTraits('t-p', undefined, ['CUSTOM_T2', 'HW_CPU_X86_AVX2']);
      const listed = await store.listTraits();
      expect(listed).toEqual(
        expect.arrayContaining([
          { name: 'CUSTOM_T1', associated: false },
          { name: 'CUSTOM_T2', associated: true },
          { name: 'HW_CPU_X86_AVX2', associated: true },
        ]),
      );
      expect(listed.map((t) => t.name)).toEqual([...listed.map((t) => t.name)].sort());
      const inUse = await failure(store.deleteTrait('CUSTOM_T2'));
      expect(inUse.code).toBe('ERT_STORE_IN_USE');
      expect((await failure(store.deleteTrait('HW_CPU_X86_AVX2'))).code).toBe('ERT_STORE_INVALID');
      expect((await failure(store.deleteTrait('CUSTOM_NEVER'))).code).toBe('ERT_STORE_NOT_FOUND');
      await store.deleteTrait('CUSTOM_T1');
      expect((await store.listTraits()).map((t) => t.name)).not.toContain('CUSTOM_T1');
      expect(await store.getTraits('t-p')).toEqual(['CUSTOM_T2', 'HW_CPU_X86_AVX2']);
      // Removing the last provider's use frees it.
      await store.setTraits('t-p', undefined, []);
      expect((await store.listTraits()).find((t) => t.name === 'CUSTOM_T2')).toEqual({ name: 'CUSTOM_T2', associated: false });
      await store.deleteTrait('CUSTOM_T2');
    });
  });
});
