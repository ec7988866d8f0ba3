import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { normalizeInventory } from '@ert/plugin-api';
import { createStore, dropPostgresSchema, type HostImport, type Store, type StoreOptions } from '@ert/store';
import { HostSnapshots } from '../src/host-snapshots.js';
import { backends } from './world.js';

/**
 * HostSnapshots (what `GET /scheduler/v1/hosts` reads) keeps every host's snapshot between
 * calls and reloads only the hosts whose generation moved. After each kind of write, by this
 * store or another (as another process would), it returns exactly what a full `loadHosts()`
 * returns.
 *
 * Mutations seen red: a host kept once loaded whatever its generation (the stats, the claim,
 * the status and the inventory change all unseen); `changedHosts` trusting a partial answer
 * without the count ("a host deleted" and "deleted and another added" unseen).
 */

const inv = (total: number) => normalizeInventory({ total });
const host = (i: number): HostImport => ({
  host: { name: `h${i}`, status: 'up', lastUpdate: 1_000 },
  providers: [{ uuid: `00000000-0000-4000-8000-00000000000${i}`, name: `h${i}`, inventories: { VCPU: inv(8), MEMORY_MB: inv(4096) }, traits: [], aggregates: [] }],
});

describe.each(backends)('HostSnapshots (%s)', (client) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function open(): Promise<{ store: Store; other: Store }> {
    const dir = mkdtempSync(path.join(tmpdir(), 'ert-host-snapshots-'));
    const schema = `t_hs_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const options: StoreOptions = client === 'pg' ? { client, connection: process.env['ERT_TEST_PG_URL']!, schema } : { client, connection: path.join(dir, 'ert.db') };
    const store = await createStore(options);
    await store.migrate();
    const other = await createStore(options);
    cleanups.push(async () => {
      await other.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      if (client === 'pg') await dropPostgresSchema(options.connection, schema);
    });
    return { store, other };
  }

  it('returns what a full read returns after each kind of write, by this store or another', async () => {
    const { store, other } = await open();
    await store.importHosts([host(1), host(2), host(3)]);
    const kept = new HostSnapshots(store);
    const full = async () => (await other.loadHosts()).sort((a, b) => (a.host.name < b.host.name ? -1 : 1));
    expect(await kept.all()).toEqual(await full());

    const writes: Array<[string, (s: Store) => Promise<unknown>]> = [
      ['stats', (s) => s.writeStats('h1', 'vcpu', 1, { free: 3 })],
      ['a claim', (s) => s.writeAllocations([{ consumer: { uuid: 'c1', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: '00000000-0000-4000-8000-000000000002', resourceClass: 'VCPU', amount: 2 }] }])],
      ['a status', (s) => s.setHostStatus('h3', 'disabled', 'maintenance')],
      ['an inventory', (s) => s.setInventories('00000000-0000-4000-8000-000000000001', undefined, { VCPU: inv(16), MEMORY_MB: inv(4096) })],
      ['a sync touching the row', (s) => s.upsertHost({ name: 'h2', rootProviderUuid: '00000000-0000-4000-8000-000000000002', lastUpdate: 2_000 })],
      ['a new host', (s) => s.importHosts([host(4)])],
      ['a host deleted', (s) => s.deleteHost('h3')],
      // As many hosts as before: only the whole list tells that h4 went.
      ['a host deleted and another added', async (s) => (await s.deleteHost('h4'), await s.importHosts([host(5)]))],
    ];
    for (const [i, [what, write]] of writes.entries()) {
      await write(i % 2 === 0 ? store : other);
      expect(await kept.all(), what).toEqual(await full());
    }
    expect((await kept.all()).map((s) => s.host.name)).toEqual(['h1', 'h2', 'h5']);
  });

  /**
   * Calls that arrive while a read is queued share it, and each gets a read that started after
   * it was made. Mutation seen red: without the sharing (every call queued on its own), the
   * two calls queued together below read the generations twice, not once.
   */
  it('shares one queued read among the calls made meanwhile, each read starting after its call', async () => {
    const { store } = await open();
    await store.importHosts([host(1), host(2)]);
    let reads = 0;
    const counted = { hostChanges: (since?: string) => (reads++, store.hostChanges(since)), loadHosts: (names?: string[]) => store.loadHosts(names) };
    const kept = new HostSnapshots(counted);
    const first = kept.all();
    await new Promise((r) => setImmediate(r));
    // Queued behind the first (running or done): one read for the two.
    const [a, b] = [kept.all(), kept.all()];
    const [, sa, sb] = await Promise.all([first, a, b]);
    expect(reads).toBe(2);
    expect(sa).toBe(sb);
    // A call after a write gets a read that sees it.
    await store.writeStats('h1', 'vcpu', 1, { free: 1 });
    const sc = await kept.all();
    expect(reads).toBe(3);
    expect(sc.find((s) => s.host.name === 'h1')!.stats.vcpu).toBeDefined();
  });
});
