/**
 * `writeAllocations` with `removeInstance` (issue 11.5, issue 17): an instance record goes
 * with its allocations in one transaction. The faults here are real database errors raised
 * inside that transaction by a trigger (SQLite `RAISE(ABORT)`, PostgreSQL `RAISE EXCEPTION`),
 * at the instance delete and at the host generation bump (the transaction's last statement),
 * on SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Flavor } from '@ert/plugin-api';
import type { InstanceRecord, Store } from '@ert/store';
import type { KnexStore } from '../src/store.js';
import { claimPaths, inv, openStore, rejection, firstAloneRestCombined } from './backends.js';

const flavor: Flavor = { name: 'small', vcpus: 2, memoryMb: 0, diskGb: 0, extraSpecs: {} };

function record(uuid: string, host: string, extra: Partial<InstanceRecord> = {}): InstanceRecord {
  return { uuid, host, projectId: 'proj', userId: 'user', flavor, state: 'active', assignments: {}, ...extra };
}

const consumer = (uuid: string, generation?: number | null) => ({ uuid, projectId: 'proj', userId: 'user', ...(generation !== undefined ? { generation } : {}) });


describe.each(claimPaths)('removeInstance on $label', ({ client, extra }) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;

  beforeAll(async () => {
    ({ store, cleanup } = await openStore(client, 'atomic', extra));
  });
  afterAll(async () => {
    await cleanup();
  });

  /** A host with 8 VCPU, one instance `i` holding 2 and its migration record `m` holding 3 (a pending resize). */
  async function resized(): Promise<{ host: string; provider: string; i: string; m: string }> {
    n += 1;
    const host = `atomic-${n}`;
    const provider = `00000000-0000-4000-a000-${String(n).padStart(12, '0')}`;
    await store.createProvider({ uuid: provider, name: host });
    await store.setInventories(provider, undefined, { VCPU: inv(8) });
    await store.upsertHost({ name: host, rootProviderUuid: provider });
    const i = `i-${n}`;
    const m = `m-${n}`;
    await store.writeAllocations([
      { consumer: consumer(i, null), allocations: [{ providerUuid: provider, resourceClass: 'VCPU', amount: 2 }], instance: record(i, host, { state: 'resizing', migrationUuid: m }) },
      { consumer: consumer(m, null), allocations: [{ providerUuid: provider, resourceClass: 'VCPU', amount: 3 }], instance: record(m, host, { state: 'resizing' }) },
    ]);
    return { host, provider, i, m };
  }

  const release = (r: { i: string; m: string }) =>
    store.writeAllocations([
      { consumer: consumer(r.i), allocations: [], removeInstance: true },
      { consumer: consumer(r.m), allocations: [], removeInstance: true },
    ]);

  it('removes the records with their allocations in one call, bumping the host once; nothing to remove is a no-op', async () => {
    const r = await resized();
    const before = (await store.getHost(r.host))!.generation;
    const result = await release(r);
    expect(result.hosts).toEqual([{ name: r.host, generationBefore: before, generation: before + 1, shared: false }]);
    expect(await store.listInstances({ host: r.host })).toEqual([]);
    expect(await store.getAllocations(r.i)).toEqual({ generation: null, allocations: [] });
    expect(await store.getAllocations(r.m)).toEqual({ generation: null, allocations: [] });
    expect(await store.getUsages(r.provider)).toEqual({});
    // Again: no record, no consumer -- nothing changes, no host is bumped.
    expect(await release(r)).toEqual({ hosts: [] });
    expect((await store.getHost(r.host))!.generation).toBe(before + 1);
  });

  it('refuses removeInstance with allocations or with an instance, writing nothing', async () => {
    const r = await resized();
    const withAllocations = await rejection(
      store.writeAllocations([{ consumer: consumer(r.i), allocations: [{ providerUuid: r.provider, resourceClass: 'VCPU', amount: 1 }], removeInstance: true }]),
    );
    expect(withAllocations.code).toBe('ERT_STORE_INVALID');
    const withInstance = await rejection(store.writeAllocations([{ consumer: consumer(r.i), allocations: [], instance: record(r.i, r.host), removeInstance: true }]));
    expect(withInstance.code).toBe('ERT_STORE_INVALID');
    expect((await store.listInstances({ host: r.host })).map((i) => i.uuid).sort()).toEqual([r.i, r.m].sort());
    expect(await store.getUsages(r.provider)).toEqual({ VCPU: 5 });
  });

  // A fault raised by the database inside the transaction, after the allocations were deleted
  // (at the instance delete) and after the records were deleted (at the host bump, the last
  // statement): the release is rolled back whole.
  // Mutation seen caught: the instance rows deleted through `this.knex` instead of `trx` in
  // applyAllocationCalls (the records vanished while the allocations came back: the "hosts"
  // case went red on SQLite and PostgreSQL).
  it.each([
    ['instances', 'DELETE'],
    ['hosts', 'UPDATE'],
  ])('a database error at the %s %s rolls the whole release back: records and allocations stay together', async (table, operation) => {
    const r = await resized();
    const { knex } = store as unknown as KnexStore;
    const hostGeneration = (await store.getHost(r.host))!.generation;
    if (client === 'sqlite3') {
      await knex.raw(`CREATE TRIGGER ert_fault BEFORE ${operation} ON ${table} BEGIN SELECT RAISE(ABORT, 'injected fault'); END`);
    } else {
      await knex.raw(`CREATE OR REPLACE FUNCTION ert_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$`);
      await knex.raw(`CREATE TRIGGER ert_fault BEFORE ${operation} ON ${table} FOR EACH ROW EXECUTE FUNCTION ert_fault()`);
    }
    try {
      const err = await rejection(release(r));
      expect(err.message).toMatch(/injected fault/);
    } finally {
      await knex.raw(client === 'sqlite3' ? 'DROP TRIGGER ert_fault' : `DROP TRIGGER ert_fault ON ${table}`);
    }
    expect((await store.listInstances({ host: r.host })).map((i) => i.uuid).sort()).toEqual([r.i, r.m].sort());
    expect((await store.getAllocations(r.i)).allocations).toEqual([{ providerUuid: r.provider, resourceClass: 'VCPU', amount: 2 }]);
    expect((await store.getAllocations(r.m)).allocations).toEqual([{ providerUuid: r.provider, resourceClass: 'VCPU', amount: 3 }]);
    expect(await store.getUsages(r.provider)).toEqual({ VCPU: 5 });
    expect((await store.getHost(r.host))!.generation).toBe(hostGeneration);
    // Without the fault the same release goes through whole.
    await release(r);
    expect(await store.listInstances({ host: r.host })).toEqual([]);
    expect(await store.getUsages(r.provider)).toEqual({});
  });

  // Calls combined in one transaction apply in order: a removal followed by a new claim of the
  // same uuid leaves the new record; a claim followed by its removal leaves nothing.
  // Mutation seen caught: deleting every removed uuid after the upserts (the re-claimed record
  // vanished).
  it('applies removals and writes of combined calls in their order', async () => {
    const r = await resized();
    const generation = (await store.getProvider(r.provider))!.generation;
    const claim = (uuid: string, amount: number) =>
      store.writeAllocations([{ consumer: consumer(uuid), allocations: [{ providerUuid: r.provider, resourceClass: 'VCPU', amount }], instance: record(uuid, r.host) }]);
    const fresh = `${r.i}-new`;
    // The first call runs alone; the others queue behind it and are committed together.
    await Promise.all(
      await firstAloneRestCombined([
        () => claim(`${r.i}-first`, 1),
        () => store.writeAllocations([{ consumer: consumer(r.i), allocations: [], removeInstance: true }]),
        () => claim(r.i, 1),
        () => claim(fresh, 1),
        () => store.writeAllocations([{ consumer: consumer(fresh), allocations: [], removeInstance: true }]),
      ]),
    );
    expect((await store.getProvider(r.provider))!.generation - generation).toBe(2);
    expect(await store.getInstance(r.i)).toMatchObject({ uuid: r.i, state: 'active' });
    expect((await store.getAllocations(r.i)).allocations).toEqual([{ providerUuid: r.provider, resourceClass: 'VCPU', amount: 1 }]);
    expect(await store.getInstance(fresh)).toBeUndefined();
    expect((await store.getAllocations(fresh)).generation).toBeNull();
    expect(await store.getUsages(r.provider)).toEqual({ VCPU: 1 + 1 + 3 });
  });
});
