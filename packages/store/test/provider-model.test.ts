/*
 * `loadProviders` keeps the whole model between calls and reads in proportion to what changed
 * (provider-model.ts; migration 0010's model_version on SQLite, 0011's change_xid on
 * PostgreSQL). The guarantee: whatever
 * changed, and whoever changed it (this store, another process's store, plain SQL), the next
 * call returns exactly what a full read returns. The oracle is a second store opened on the
 * same database whose first call reads everything.
 *
 * Mutations seen red: the provider's name left out of the version compared (the rename went
 * unseen, on both backends); the SQLite model_version check returning the kept model without
 * comparing versions (every change made by the other store unseen); the resource_classes
 * triggers dropped from migration 0010 (the class renamed by plain SQL unseen on SQLite); on
 * PostgreSQL, the rows-since-xmin read trusted without the row count (the delete unseen).
 */
import knexFactory from 'knex';
import { afterEach, describe, expect, it } from 'vitest';
import { createStore, type Store, type StoreOptions } from '@ert/store';
import { backends, inv, openStore } from './backends.js';

describe.each(backends)('loadProviders kept between calls (%s)', (client) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function pair(): Promise<{ store: Store; other: Store; options: StoreOptions; full(): Promise<unknown> }> {
    const opened = await openStore(client, 'model');
    cleanups.push(opened.cleanup);
    const other = await createStore(opened.options);
    cleanups.push(() => other.close());
    return {
      store: opened.store,
      other,
      options: opened.options,
      // A store that never read before reads everything.
      async full() {
        const fresh = await createStore(opened.options);
        try {
          return await fresh.loadProviders();
        } finally {
          await fresh.close();
        }
      },
    };
  }

  it('returns the same array while nothing changed, and what a full read returns after each kind of write, by itself or another store', async () => {
    const { store, other, full } = await pair();
    await store.createProvider({ uuid: 'a', name: 'a' });
    await store.createProvider({ uuid: 'b', name: 'b' });
    await store.setInventories('a', undefined, { VCPU: inv(8), MEMORY_MB: inv(4096) });
    await store.setInventories('b', undefined, { VCPU: inv(4) });
    const first = await store.loadProviders();
    expect(first).toEqual(await full());
    expect(await store.loadProviders()).toBe(first);

    const writes: Array<[string, (s: Store) => Promise<unknown>]> = [
      ['inventories', (s) => s.setInventories('b', undefined, { VCPU: inv(6), DISK_GB: inv(100) })],
      ['traits', (s) => s.setTraits('a', undefined, ['CUSTOM_GOLD', 'HW_CPU_X86_AVX2'])],
      ['aggregates', (s) => s.setAggregates('b', undefined, ['aaaaaaaa-0000-4000-8000-000000000001'])],
      ['allocations', (s) => s.writeAllocations([{ consumer: { uuid: 'c1', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: 'a', resourceClass: 'VCPU', amount: 3 }] }])],
      ['allocations removed', (s) => s.deleteAllocations('c1')],
      ['a child', (s) => s.createProvider({ uuid: 'a1', name: 'a1', parentUuid: 'a' })],
      ['a rename', (s) => s.updateProvider('b', { name: 'b-renamed' })],
      ['a re-parenting', (s) => s.updateProvider('b', { parentUuid: 'a' })],
      ['a delete', (s) => s.deleteProvider('a1')],
      ['a class renamed', (s) => s.ensureResourceClasses(['CUSTOM_OLD']).then(() => s.setInventories('a', undefined, { VCPU: inv(8), MEMORY_MB: inv(4096), CUSTOM_OLD: inv(2) })).then(() => s.renameResourceClass('CUSTOM_OLD', 'CUSTOM_NEW'))],
    ];
    let previous = first;
    for (const [i, [what, write]] of writes.entries()) {
      // Alternate writers: this store (its own connection) and another (as another process would).
      await write(i % 2 === 0 ? store : other);
      const now = await store.loadProviders();
      expect(now, what).toEqual(await full());
      expect(now, `${what}: a new array`).not.toBe(previous);
      expect(await store.loadProviders(), `${what}: kept`).toBe(now);
      previous = now;
    }
    const names = previous.map((p) => [p.name, p.parentUuid ?? null, Object.keys(p.inventories).sort()]);
    expect(names).toEqual([
      ['a', null, ['CUSTOM_NEW', 'MEMORY_MB', 'VCPU']],
      ['b-renamed', 'a', ['DISK_GB', 'VCPU']],
    ]);
  });

  it('sees writes made with plain SQL, bypassing the store', async () => {
    const { store, options, full } = await pair();
    await store.createProvider({ uuid: 'a', name: 'a' });
    await store.ensureResourceClasses(['CUSTOM_X']);
    await store.setInventories('a', undefined, { CUSTOM_X: inv(1) });
    expect(await store.loadProviders()).toEqual(await full());
    const knex = knexFactory(
      options.client === 'sqlite3'
        ? { client: 'sqlite3', connection: { filename: options.connection }, useNullAsDefault: true }
        : { client: 'pg', connection: options.connection, searchPath: [options.schema!] },
    );
    try {
      await knex('providers').where('uuid', 'a').update({ name: 'a-by-sql' });
      expect((await store.loadProviders())[0]!.name).toBe('a-by-sql');
      await knex('resource_classes').where('name', 'CUSTOM_X').update({ name: 'CUSTOM_Y' });
      expect(Object.keys((await store.loadProviders())[0]!.inventories)).toEqual(['CUSTOM_Y']);
      expect(await store.loadProviders()).toEqual(await full());
    } finally {
      await knex.destroy();
    }
  });
});
