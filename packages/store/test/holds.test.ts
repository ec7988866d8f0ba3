/**
 * Exclusive assignments in the store (issue 11, point 4): a unit of a host (a pinned CPU, a
 * cache way) has at most one holder, and a counted pool (huge pages) is never overdrawn,
 * whichever process writes. On SQLite and PostgreSQL.
 *
 * Mutations seen caught (each turned these red once):
 * - the ledger check skipped in applyAllocationCalls (`ledger?.set` removed): units were
 *   still refused, by the unique index, but as a bare ERT_STORE_CONFLICT naming neither unit
 *   nor holder, and pools were overdrawn (10 of 14 tests red on both backends);
 * - `ledger?.rollback` removed: a refused call's holds stayed in the ledger and a later call
 *   of the same combined batch was refused for a unit nobody held ("combined calls" red);
 * - pools summed without subtracting the instance's own amount: re-confirming an instance
 *   with the same pages was refused ("pools" red);
 * - the ledger read as two statements again (by host, then by instance): "one statement" red.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Flavor } from '@ert/plugin-api';
import type { InstanceRecord, Store } from '@ert/store';
import { claimPaths, inv, openStore, rejection, firstAloneRestCombined } from './backends.js';

const flavor: Flavor = { name: 'pinned', vcpus: 2, memoryMb: 0, diskGb: 0, extraSpecs: {} };
const consumer = (uuid: string, generation?: number | null) => ({ uuid, projectId: 'proj', userId: 'user', ...(generation !== undefined ? { generation } : {}) });

function record(uuid: string, host: string, extra: Partial<InstanceRecord> = {}): InstanceRecord {
  return { uuid, host, projectId: 'proj', userId: 'user', flavor, state: 'active', assignments: {}, ...extra };
}


describe.each(claimPaths)('exclusive holds on $label', ({ client, extra }) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;

  beforeAll(async () => {
    ({ store, cleanup } = await openStore(client, 'holds', extra));
  });
  afterAll(async () => {
    await cleanup();
  });

  /** A fresh host with 64 VCPU. */
  async function host(): Promise<{ name: string; provider: string }> {
    n += 1;
    const name = `holds-${n}`;
    const provider = `00000000-0000-4000-b000-${String(n).padStart(12, '0')}`;
    await store.createProvider({ uuid: provider, name });
    await store.setInventories(provider, undefined, { VCPU: inv(64) });
    await store.upsertHost({ name, rootProviderUuid: provider });
    return { name, provider };
  }
  const claim = (h: { name: string; provider: string }, uuid: string, extra: Partial<InstanceRecord>) =>
    store.writeAllocations([{ consumer: consumer(uuid, null), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record(uuid, h.name, extra) }]);

  // One read of the ledger per claim: the host's holds and the instance's own (wherever they
  // are, a move's old host included) in one statement; the checks above and below prove it
  // reads the same rows. Mutation seen caught: the two reads back (2 selects of instance_holds).
  // The general transaction's (the quick claim reads everything in one round trip of its own,
  // without knex: quick-claim.test.ts counts its trips).
  it.runIf(extra.quickClaims === false)('reads the holds a claim is checked against in one statement', async () => {
    const h = await host();
    await claim(h, 'once-a', { cpus: [1] });
    const { knex } = store as unknown as { knex: { on(event: 'query', fn: (q: { sql: string }) => void): void; removeListener(event: 'query', fn: (q: { sql: string }) => void): void } };
    const reads: string[] = [];
    const listen = (q: { sql: string }) => {
      if (/^select .*instance_holds/i.test(q.sql)) reads.push(q.sql);
    };
    knex.on('query', listen);
    try {
      await claim(h, 'once-b', { cpus: [2], units: ['llc/L3-0/way/1'] });
    } finally {
      knex.removeListener('query', listen);
    }
    expect(reads).toHaveLength(1);
    expect((await rejection(claim(h, 'once-c', { cpus: [2] }))).code).toBe('ERT_STORE_ASSIGNMENT_TAKEN');
  });

  it('refuses a CPU or a unit another instance of the host holds, naming both, and writes nothing', async () => {
    const h = await host();
    await claim(h, 'a1', { cpus: [2, 3], units: ['llc/L3-0/way/5'] });
    const cpu = await rejection(claim(h, 'b1', { cpus: [3, 4] }));
    expect(cpu.code).toBe('ERT_STORE_ASSIGNMENT_TAKEN');
    expect(cpu.message).toBe(`host ${h.name}: instance b1 cannot take cpu/3: instance a1 holds it`);
    const way = await rejection(claim(h, 'b1', { units: ['llc/L3-0/way/5'] }));
    expect(way.message).toContain('cannot take llc/L3-0/way/5: instance a1 holds it');
    expect(await store.getInstance('b1')).toBeUndefined();
    expect((await store.getAllocations('b1')).allocations).toEqual([]);
    expect(await store.getUsages(h.provider)).toEqual({ VCPU: 2 });
    // Other units of the same host, and the same units on another host, are free.
    await claim(h, 'b1', { cpus: [4, 5], units: ['llc/L3-0/way/6'] });
    await claim(await host(), 'c1', { cpus: [2, 3], units: ['llc/L3-0/way/5'] });
    expect(await store.getInstance('b1')).toMatchObject({ cpus: [4, 5], units: ['llc/L3-0/way/6'] });
  });

  it('frees the units of a removed or rewritten record, and lets an instance rewrite its own', async () => {
    const h = await host();
    await claim(h, 'a2', { cpus: [0, 1], units: ['u/x'] });
    // Rewriting with the same holds (a confirmation) is not a conflict with itself.
    await store.writeAllocations([{ consumer: consumer('a2'), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('a2', h.name, { cpus: [0, 1], units: ['u/x'] }) }]);
    // Rewritten without cpu 1: cpu 1 is free, cpu 0 is not.
    await store.upsertInstance(record('a2', h.name, { cpus: [0], units: ['u/x'] }));
    await claim(h, 'b2', { cpus: [1] });
    expect((await rejection(store.upsertInstance(record('c2', h.name, { cpus: [0] })))).code).toBe('ERT_STORE_ASSIGNMENT_TAKEN');
    // Removed with its allocations: everything it held is free.
    await store.writeAllocations([{ consumer: consumer('a2'), allocations: [], removeInstance: true }]);
    await claim(h, 'c2', { cpus: [0], units: ['u/x'] });
    // Deleted by deleteInstance: the same.
    await store.deleteInstance('c2');
    await store.upsertInstance(record('d2', h.name, { cpus: [0], units: ['u/x'] }));
  });

  it('a resize hands the old CPUs to the migration record and a revert hands them back, in one transaction each', async () => {
    const h = await host();
    await claim(h, 'r3', { cpus: [8, 9] });
    const resized = record('r3', h.name, { state: 'resizing', migrationUuid: 'm3', cpus: [10, 11] });
    await store.writeAllocations([
      { consumer: consumer('r3'), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: resized },
      { consumer: consumer('m3', null), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('m3', h.name, { state: 'resizing', cpus: [8, 9] }) },
    ]);
    expect((await rejection(claim(h, 'x3', { cpus: [9] }))).message).toContain('cpu/9: instance m3 holds it');
    expect((await rejection(claim(h, 'x3', { cpus: [11] }))).message).toContain('cpu/11: instance r3 holds it');
    // Revert: the migration record goes first, the instance takes its old CPUs back.
    await store.writeAllocations([
      { consumer: consumer('m3'), allocations: [], removeInstance: true },
      { consumer: consumer('r3'), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('r3', h.name, { cpus: [8, 9] }) },
    ]);
    await claim(h, 'x3', { cpus: [10, 11] });
    // The other order (the instance before the migration lets go) is refused as a whole.
    await store.writeAllocations([
      { consumer: consumer('x3'), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('x3', h.name, { state: 'resizing', migrationUuid: 'm4', cpus: [12] }) },
      { consumer: consumer('m4', null), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('m4', h.name, { state: 'resizing', cpus: [10, 11] }) },
    ]);
    const wrongOrder = await rejection(
      store.writeAllocations([
        { consumer: consumer('x3'), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('x3', h.name, { cpus: [10, 11] }) },
        { consumer: consumer('m4'), allocations: [], removeInstance: true },
      ]),
    );
    expect(wrongOrder.message).toContain('cpu/10: instance m4 holds it');
    expect(await store.getInstance('m4')).toMatchObject({ cpus: [10, 11] });
  });

  it('a cold migration frees the holds on the host it leaves', async () => {
    const from = await host();
    const to = await host();
    await claim(from, 'mv', { cpus: [5] });
    await store.writeAllocations([{ consumer: consumer('mv'), allocations: [{ providerUuid: to.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('mv', to.name, { cpus: [5] }) }]);
    await claim(from, 'after', { cpus: [5] });
    expect((await rejection(claim(to, 'other', { cpus: [5] }))).message).toContain('instance mv holds it');
  });

  it('pools: the sum over the host never exceeds the capacity the writer names; an instance re-counts its own amount once', async () => {
    const h = await host();
    const pages = (amount: number) => ({ pools: { 'memory/node0/1048576kB': { amount, capacity: 10 } } });
    await claim(h, 'p1', pages(6));
    const over = await rejection(claim(h, 'p2', pages(5)));
    expect(over.code).toBe('ERT_STORE_ASSIGNMENT_TAKEN');
    expect(over.message).toBe(`host ${h.name}: instance p2 cannot take 5 of pool memory/node0/1048576kB: other instances hold 6 of its 10`);
    await claim(h, 'p2', pages(4));
    // p1 confirmed again with the same pages: its own 6 are not counted twice.
    await store.upsertInstance(record('p1', h.name, pages(6)));
    expect((await rejection(store.upsertInstance(record('p1', h.name, pages(7))))).code).toBe('ERT_STORE_ASSIGNMENT_TAKEN');
    await store.writeAllocations([{ consumer: consumer('p2'), allocations: [], removeInstance: true }]);
    await store.upsertInstance(record('p1', h.name, pages(10)));
    expect(await store.getInstance('p1')).toMatchObject({ pools: { 'memory/node0/1048576kB': { amount: 10, capacity: 10 } } });
  });

  it('combined calls are checked one by one: a refused call leaves no hold behind for the calls after it', async () => {
    const h = await host();
    await claim(h, 'k0', { cpus: [1] });
    const other = await host();
    // The first call is committed alone; the three behind it, in flight together, in one
    // transaction (`shared` below shows it). The second call's first write takes cpu 2, its
    // second write is refused (cpu 1 is k0's): the whole call is refused, and cpu 2 is free
    // for the call after it.
    const results = await Promise.allSettled(
      await firstAloneRestCombined([
        () => claim(other, 'lead', {}),
        () =>
          store.writeAllocations([
            { consumer: consumer('k1', null), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('k1', h.name, { cpus: [2] }) },
            { consumer: consumer('k1b', null), allocations: [{ providerUuid: h.provider, resourceClass: 'VCPU', amount: 2 }], instance: record('k1b', h.name, { cpus: [1] }) },
          ]),
        () => claim(h, 'k2', { cpus: [2, 3] }),
        () => claim(h, 'k3', { cpus: [4] }),
      ]),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason.message).toContain('cpu/1: instance k0 holds it');
    const k2 = (results[2] as PromiseFulfilledResult<Awaited<ReturnType<Store['writeAllocations']>>>).value;
    expect(k2.hosts).toEqual([expect.objectContaining({ name: h.name, shared: true })]);
    expect(await store.getInstance('k1')).toBeUndefined();
    expect(await store.getInstance('k2')).toMatchObject({ cpus: [2, 3] });
  });

  it('refuses malformed or repeated holds as invalid', async () => {
    const h = await host();
    expect((await rejection(claim(h, 'v1', { units: ['a', 'a'] }))).code).toBe('ERT_STORE_INVALID');
    expect((await rejection(claim(h, 'v1', { units: [''] }))).code).toBe('ERT_STORE_INVALID');
    expect((await rejection(claim(h, 'v1', { pools: { p: { amount: 0, capacity: 4 } } }))).code).toBe('ERT_STORE_INVALID');
    expect((await rejection(claim(h, 'v1', { cpus: [1], units: ['cpu/1'] }))).message).toContain('holds cpu/1 twice');
  });
});
