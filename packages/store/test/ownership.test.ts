/*
 * Ownership of providers, traits and inventories (issue 20, point 1; api.ts `setTraits`,
 * `setInventories`, `NewProvider.owner`; migration 0009). Each guarantee was seen red once
 * with the code it guards broken (noted per test).
 */
import knexFactory from 'knex';
import { afterEach, describe, expect, it } from 'vitest';
import { createStore, TRACKER_OWNER, type Store } from '@ert/store';
import { migrationSource, MIGRATIONS_TABLE } from '../src/migrations.js';
import { backends, inv, isolatedOptions, openStore } from './backends.js';

describe.each(backends)('ownership (%s)', (client) => {
  const opened: Array<{ cleanup(): Promise<void> }> = [];
  afterEach(async () => {
    for (const o of opened.splice(0)) await o.cleanup();
  });
  async function fresh(): Promise<Store> {
    const o = await openStore(client, 'own');
    opened.push(o);
    return o.store;
  }

  // Seen red with setTraits writing every row with the caller's owner (null): the API's PUT
  // took the tracker's traits from it, and the plugin's dropped trait then stayed forever.
  it('setTraits: an owner replaces only its own traits; a write without owner replaces the set, kept traits keeping their owner', async () => {
    const store = await fresh();
    await store.createProvider({ uuid: 'r', name: 'r', owner: TRACKER_OWNER });
    expect((await store.getProvider('r'))!.owner).toBe('tracker');
    await store.setTraits('r', 0, ['HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42'], { owner: TRACKER_OWNER });
    // The API: read-modify-write without owner.
    await store.setTraits('r', 1, ['CUSTOM_GOLD', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42']);
    expect(await store.getTraits('r', { owner: TRACKER_OWNER })).toEqual(['HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42']);
    // The tracker drops SSE42 and adds AES: the operator's GOLD stays.
    const written = await store.setTraits('r', 2, ['HW_CPU_X86_AES', 'HW_CPU_X86_AVX2'], { owner: TRACKER_OWNER });
    expect(written.generation).toBe(3);
    expect(await store.getTraits('r')).toEqual(['CUSTOM_GOLD', 'HW_CPU_X86_AES', 'HW_CPU_X86_AVX2']);
    expect(await store.getTraits('r', { owner: TRACKER_OWNER })).toEqual(['HW_CPU_X86_AES', 'HW_CPU_X86_AVX2']);
    // An owner naming a trait another writer set adopts it.
    await store.setTraits('r', undefined, ['CUSTOM_GOLD', 'HW_CPU_X86_AES'], { owner: TRACKER_OWNER });
    expect(await store.getTraits('r', { owner: TRACKER_OWNER })).toEqual(['CUSTOM_GOLD', 'HW_CPU_X86_AES']);
    expect(await store.getTraits('r')).toEqual(['CUSTOM_GOLD', 'HW_CPU_X86_AES']);
    // Without owner the set is replaced whole (Placement's PUT), whoever owned what.
    await store.setTraits('r', undefined, ['CUSTOM_SILVER']);
    expect(await store.getTraits('r')).toEqual(['CUSTOM_SILVER']);
    expect(await store.getTraits('r', { owner: TRACKER_OWNER })).toEqual([]);
  });

  // Seen red with setInventories dropping the other writers' rows on an owner's write, and
  // with the write without owner resetting every owner to null.
  it('setInventories: an owner replaces only its own classes; the in-use checks apply to the resulting set', async () => {
    const store = await fresh();
    await store.createProvider({ uuid: 'r', name: 'r', owner: TRACKER_OWNER });
    await store.setInventories('r', undefined, { VCPU: inv(8), MEMORY_MB: inv(1024) }, { owner: TRACKER_OWNER });
    // The API adds a class and rewrites VCPU's ratio: VCPU stays the tracker's.
    await store.setInventories('r', undefined, { VCPU: inv(8, { allocationRatio: 2 }), MEMORY_MB: inv(1024), CUSTOM_SLOTS: inv(3) });
    expect(Object.keys((await store.getInventories('r', { owner: TRACKER_OWNER })).inventories).sort()).toEqual(['MEMORY_MB', 'VCPU']);
    await store.writeAllocations([
      { consumer: { uuid: 'c', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: 'r', resourceClass: 'CUSTOM_SLOTS', amount: 2 }] },
    ]);
    // The tracker stops reporting MEMORY_MB and rewrites VCPU: CUSTOM_SLOTS, in use, stays.
    await store.setInventories('r', undefined, { VCPU: inv(16) }, { owner: TRACKER_OWNER });
    const { inventories } = await store.getInventories('r');
    expect(Object.keys(inventories).sort()).toEqual(['CUSTOM_SLOTS', 'VCPU']);
    expect(inventories['VCPU']!.total).toBe(16);
    expect(inventories['CUSTOM_SLOTS']!.total).toBe(3);
    expect(Object.keys((await store.getInventories('r', { owner: TRACKER_OWNER })).inventories)).toEqual(['VCPU']);
    // A reshape (an API write) keeps the owners of the classes it keeps.
    const before = await store.getInventories('r');
    await store.reshape([{ providerUuid: 'r', generation: before.generation, inventories: { VCPU: inv(16), CUSTOM_SLOTS: inv(4) } }], []);
    expect(Object.keys((await store.getInventories('r', { owner: TRACKER_OWNER })).inventories)).toEqual(['VCPU']);
    expect(Object.keys((await store.getInventories('r')).inventories).sort()).toEqual(['CUSTOM_SLOTS', 'VCPU']);
  });

  it('importHosts gives each provider its owner, and its traits and inventories the same', async () => {
    const store = await fresh();
    await store.importHosts([
      {
        host: { name: 'h' },
        providers: [
          { uuid: 'h', name: 'h', owner: TRACKER_OWNER, inventories: { VCPU: inv(4) }, traits: ['HW_CPU_X86_AVX2'], aggregates: [] },
          { uuid: 'x', name: 'x', parentUuid: 'h', inventories: { CUSTOM_X: inv(1) }, traits: ['CUSTOM_X'], aggregates: [] },
        ],
      },
    ]);
    expect((await store.getProvider('h'))!.owner).toBe('tracker');
    expect((await store.getProvider('x'))!.owner).toBeUndefined();
    expect(await store.getTraits('h', { owner: TRACKER_OWNER })).toEqual(['HW_CPU_X86_AVX2']);
    expect(await store.getTraits('x', { owner: TRACKER_OWNER })).toEqual([]);
    expect(Object.keys((await store.getInventories('h', { owner: TRACKER_OWNER })).inventories)).toEqual(['VCPU']);
  });

  // Seen red with the backfill matching every provider of a host's tree (the outside child
  // became the tracker's, and its next sync would have retired it).
  it("0009 attributes a host's root and its <host>_<key> providers, with their traits and inventories, to the tracker", async () => {
    const { options, cleanup } = isolatedOptions(client, 'own_mig');
    const old = knexFactory(
      client === 'pg'
        ? { client: 'pg', connection: options.connection, searchPath: [options.schema!] }
        : { client: 'sqlite3', connection: { filename: options.connection }, useNullAsDefault: true },
    );
    if (client === 'pg') await old.raw('CREATE SCHEMA IF NOT EXISTS ??', [options.schema!]);
    const names = (await migrationSource.getMigrations([])).filter((n) => n < '0009');
    await old.migrate.latest({ migrationSource: { ...migrationSource, getMigrations: async () => names }, tableName: MIGRATIONS_TABLE, ...(client === 'pg' ? { schemaName: options.schema! } : {}) });
    const insert = async (uuid: string, name: string, parent?: { id: number; root: number }): Promise<number> => {
      const [{ id }] = await old('providers').insert({ uuid, name, generation: 0, parent_id: parent?.id ?? null, root_id: parent?.root ?? null }).returning('id');
      if (!parent) await old('providers').update({ root_id: id }).where({ id });
      return id as number;
    };
    const root = await insert('h1', 'h1');
    const llc = await insert('h1-llc', 'h1_llc_0', { id: root, root });
    const nic = await insert('h1-nic', 'h1:NIC Switch agent', { id: root, root });
    const alone = await insert('share', 'nfs_instances');
    await old('hosts').insert({ name: 'h1', root_provider_id: root, status: 'up', last_update: 0, generation: 0 });
    const [{ id: trait }] = await old('traits').insert({ name: 'CUSTOM_T' }).returning('id');
    const [{ id: vcpu }] = await old('resource_classes').select('id').where({ name: 'VCPU' });
    for (const id of [root, llc, nic, alone]) {
      await old('provider_traits').insert({ provider_id: id, trait_id: trait });
      await old('inventories').insert({ provider_id: id, resource_class_id: vcpu, total: 4, reserved: 0, min_unit: 1, max_unit: 4, step_size: 1, allocation_ratio: 1 });
    }
    await old.destroy();

    const store = await createStore(options);
    opened.push({ cleanup: async () => { await store.close(); await cleanup(); } });
    await store.migrate();
    const owners = Object.fromEntries((await store.listProviders()).map((p) => [p.name, p.owner ?? null]));
    expect(owners).toEqual({ h1: 'tracker', h1_llc_0: 'tracker', 'h1:NIC Switch agent': null, nfs_instances: null });
    for (const [uuid, mine] of [['h1', true], ['h1-llc', true], ['h1-nic', false], ['share', false]] as const) {
      expect(await store.getTraits(uuid, { owner: TRACKER_OWNER }), uuid).toEqual(mine ? ['CUSTOM_T'] : []);
      expect(Object.keys((await store.getInventories(uuid, { owner: TRACKER_OWNER })).inventories), uuid).toEqual(mine ? ['VCPU'] : []);
      expect(await store.getTraits(uuid), uuid).toEqual(['CUSTOM_T']);
    }
  });
});
