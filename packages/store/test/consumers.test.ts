/**
 * Consumers as Placement has them (issue 13, the allocation writes of `ert serve`): the
 * generation count (1 after the first write), `consumerType`, the reads `getConsumer` and
 * `listConsumers`, and `reshape` (inventories and allocations of several providers in one
 * transaction), on SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '@ert/store';
import { claimPaths, inv, openStore, rejection } from './backends.js';


describe.each(claimPaths)('consumers and reshape on $label', ({ client, extra }) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;
  const uuid = (label: string) => `${label}-${++n}`;

  beforeAll(async () => {
    ({ store, cleanup } = await openStore(client, 'consumers', extra));
  });
  afterAll(async () => {
    await cleanup();
  });

  async function provider(inventories: Record<string, number> = { VCPU: 8 }, parentUuid?: string): Promise<string> {
    const id = uuid('rp');
    await store.createProvider({ uuid: id, name: id, ...(parentUuid ? { parentUuid } : {}) });
    await store.setInventories(id, undefined, Object.fromEntries(Object.entries(inventories).map(([rc, total]) => [rc, inv(total)])));
    return id;
  }

  it('counts consumer generations as Placement does and keeps the type written', async () => {
    const rp = await provider();
    const c = uuid('c');
    await store.writeAllocations([{ consumer: { uuid: c, projectId: 'p', userId: 'u', generation: null, consumerType: 'INSTANCE' }, allocations: [{ providerUuid: rp, resourceClass: 'VCPU', amount: 1 }] }]);
    expect(await store.getConsumer(c)).toEqual({ uuid: c, generation: 1, projectId: 'p', userId: 'u', consumerType: 'INSTANCE', allocations: [{ providerUuid: rp, resourceClass: 'VCPU', amount: 1 }] });
    // No type given: the current one stays; project and user follow the write.
    await store.writeAllocations([{ consumer: { uuid: c, projectId: 'p2', userId: 'u2', generation: 1 }, allocations: [{ providerUuid: rp, resourceClass: 'VCPU', amount: 2 }] }]);
    expect(await store.getConsumer(c)).toMatchObject({ generation: 2, projectId: 'p2', userId: 'u2', consumerType: 'INSTANCE' });
    await store.writeAllocations([{ consumer: { uuid: c, projectId: 'p2', userId: 'u2', generation: 2, consumerType: 'MIGRATION' }, allocations: [{ providerUuid: rp, resourceClass: 'VCPU', amount: 2 }] }]);
    expect((await store.getConsumer(c))!.consumerType).toBe('MIGRATION');
    // Emptied: gone, and the next write is a new consumer again.
    await store.writeAllocations([{ consumer: { uuid: c, projectId: 'p2', userId: 'u2', generation: 3 }, allocations: [] }]);
    expect(await store.getConsumer(c)).toBeUndefined();
    await store.writeAllocations([{ consumer: { uuid: c, projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: rp, resourceClass: 'VCPU', amount: 1 }] }]);
    expect(await store.getConsumer(c)).toMatchObject({ generation: 1, consumerType: null });
  });

  it('lists consumers, by provider and by project and user', async () => {
    const a = await provider();
    const b = await provider();
    const [c1, c2, c3] = [uuid('l'), uuid('l'), uuid('l')];
    await store.writeAllocations([
      { consumer: { uuid: c1, projectId: 'lp1', userId: 'u1', generation: null }, allocations: [{ providerUuid: a, resourceClass: 'VCPU', amount: 1 }, { providerUuid: b, resourceClass: 'VCPU', amount: 2 }] },
      { consumer: { uuid: c2, projectId: 'lp1', userId: 'u2', generation: null }, allocations: [{ providerUuid: b, resourceClass: 'VCPU', amount: 3 }] },
      { consumer: { uuid: c3, projectId: 'lp2', userId: 'u1', generation: null }, allocations: [{ providerUuid: a, resourceClass: 'VCPU', amount: 4 }] },
    ]);
    const onA = await store.listConsumers({ providerUuid: a });
    expect(onA.map((c) => c.uuid)).toEqual([c1, c3]);
    // A consumer's every allocation, not only those on the provider.
    expect(onA[0]!.allocations).toEqual([
      { providerUuid: a, resourceClass: 'VCPU', amount: 1 },
      { providerUuid: b, resourceClass: 'VCPU', amount: 2 },
    ]);
    expect((await store.listConsumers({ projectId: 'lp1' })).map((c) => c.uuid)).toEqual([c1, c2]);
    expect((await store.listConsumers({ projectId: 'lp1', userId: 'u2' })).map((c) => c.uuid)).toEqual([c2]);
    expect((await store.listConsumers()).map((c) => c.uuid)).toEqual(expect.arrayContaining([c1, c2, c3]));
  });

  it('reshapes: moves a class from a root to a new child with its allocations, in one transaction', async () => {
    const root = await provider({ VCPU: 8, CUSTOM_R: 4 });
    const child = uuid('child');
    await store.createProvider({ uuid: child, name: child, parentUuid: root });
    await store.upsertHost({ name: `h-${root}`, rootProviderUuid: root });
    const c = uuid('c');
    await store.writeAllocations([{ consumer: { uuid: c, projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: root, resourceClass: 'VCPU', amount: 2 }, { providerUuid: root, resourceClass: 'CUSTOM_R', amount: 3 }] }]);
    const [r0, c0, h0] = [(await store.getInventories(root)).generation, (await store.getInventories(child)).generation, (await store.getHost(`h-${root}`))!.generation];
    await store.reshape(
      [
        { providerUuid: root, generation: r0, inventories: { VCPU: inv(8) } },
        { providerUuid: child, generation: c0, inventories: { CUSTOM_R: inv(4) } },
      ],
      [{ consumer: { uuid: c, projectId: 'p', userId: 'u', generation: 1 }, allocations: [{ providerUuid: root, resourceClass: 'VCPU', amount: 2 }, { providerUuid: child, resourceClass: 'CUSTOM_R', amount: 3 }] }],
    );
    expect(Object.keys((await store.getInventories(root)).inventories)).toEqual(['VCPU']);
    expect(Object.keys((await store.getInventories(child)).inventories)).toEqual(['CUSTOM_R']);
    expect(await store.getUsages(child)).toEqual({ CUSTOM_R: 3 });
    expect(await store.getUsages(root)).toEqual({ VCPU: 2 });
    expect((await store.getConsumer(c))!.generation).toBe(2);
    expect((await store.getInventories(root)).generation).toBeGreaterThan(r0);
    expect((await store.getInventories(child)).generation).toBeGreaterThan(c0);
    expect((await store.getHost(`h-${root}`))!.generation).toBeGreaterThan(h0);
  });

  it('a reshape that fails writes nothing: stale generation, class left in use, capacity', async () => {
    const root = await provider({ VCPU: 8, CUSTOM_R: 4 });
    const child = uuid('child');
    await store.createProvider({ uuid: child, name: child, parentUuid: root });
    const c = uuid('c');
    await store.writeAllocations([{ consumer: { uuid: c, projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: root, resourceClass: 'CUSTOM_R', amount: 3 }] }]);
    const before = async () => ({
      root: await store.getInventories(root),
      child: await store.getInventories(child),
      usages: [await store.getUsages(root), await store.getUsages(child)],
      consumer: await store.getConsumer(c),
    });
    const snapshot = await before();
    const g = snapshot.root.generation;
    const cg = snapshot.child.generation;
    const stale = await rejection(store.reshape([{ providerUuid: child, generation: cg, inventories: { CUSTOM_R: inv(4) } }, { providerUuid: root, generation: g + 7, inventories: { VCPU: inv(8) } }], []));
    expect(stale.code).toBe('ERT_STORE_PROVIDER_GENERATION_CONFLICT');
    expect(await before()).toEqual(snapshot);
    // The class leaves the root while the consumer's allocation stays on it.
    const inUse = await rejection(store.reshape([{ providerUuid: root, generation: g, inventories: { VCPU: inv(8) } }, { providerUuid: child, generation: cg, inventories: { CUSTOM_R: inv(4) } }], []));
    expect(inUse.code).toBe('ERT_STORE_INVENTORY_IN_USE');
    expect(await before()).toEqual(snapshot);
    const full = await rejection(
      store.reshape(
        [{ providerUuid: child, generation: cg, inventories: { CUSTOM_R: inv(2) } }],
        [{ consumer: { uuid: c, projectId: 'p', userId: 'u', generation: 1 }, allocations: [{ providerUuid: child, resourceClass: 'CUSTOM_R', amount: 3 }] }],
      ),
    );
    expect(full.code).toBe('ERT_STORE_CAPACITY_EXCEEDED');
    expect(await before()).toEqual(snapshot);
    const unknown = await rejection(store.reshape([{ providerUuid: 'no-such-provider', generation: 0, inventories: {} }], []));
    expect(unknown.code).toBe('ERT_STORE_NOT_FOUND');
    expect(await before()).toEqual(snapshot);
  });
});
