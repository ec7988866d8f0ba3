/**
 * `hostChanges` (migration 0013, issue 15's "work proportional to change"): the hosts whose
 * generation moved since a token, whoever wrote (this store, another one, plain SQL), read in
 * proportion to what changed. On SQLite and PostgreSQL.
 *
 * Mutations seen caught (each turned this file red once, then was restored):
 * - SQLite's trigger on `UPDATE OF generation` dropped from the migration: every test but the
 *   token one red (claims, status changes and plain SQL bumps went unlisted);
 * - PostgreSQL's trigger made `BEFORE INSERT` only: the same tests red;
 * - PostgreSQL's token taken as the snapshot's xmax instead of its xmin: "a write in flight
 *   while the token is read" red (the transaction still open at the read was never listed);
 * - SQLite's token taken as the counter plus one: the same test red.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeInventory } from '@ert/plugin-api';
import { createStore, type HostChangeSet, type Store, type StoreOptions } from '@ert/store';
import type { KnexStore } from '../src/store.js';
import { backends, openStore, rawConnection } from './backends.js';

describe.each(backends)('hostChanges on %s', (client) => {
  let store: Store;
  let other: Store;
  let options: StoreOptions;
  let cleanup: () => Promise<void>;
  let n = 0;

  beforeAll(async () => {
    const opened = await openStore(client, 'host_changes');
    store = opened.store;
    options = opened.options;
    // A second store on the same database: another process's writes, as far as the first can tell.
    other = await createStore(opened.options);
    cleanup = async () => {
      await other.close();
      await opened.cleanup();
    };
  });
  afterAll(async () => {
    await cleanup();
  });

  /** `count` new hosts, each a root provider with 64 VCPU. */
  async function hosts(count: number): Promise<Array<{ name: string; uuid: string }>> {
    const made = Array.from({ length: count }, () => {
      n += 1;
      return { name: `hc-${n}`, uuid: `00000000-0000-4000-c000-${String(n).padStart(12, '0')}` };
    });
    await store.importHosts(made.map((h) => ({ host: { name: h.name }, providers: [{ uuid: h.uuid, name: h.name, inventories: { VCPU: normalizeInventory({ total: 64 }) }, traits: [], aggregates: [] }] })));
    return made;
  }

  /**
   * What an answer promises: every host in `moved` is listed, and every listed host with its
   * current generation. SQLite lists exactly those (one writer, stamps in commit order).
   * PostgreSQL may list unmoved hosts again while a transaction open elsewhere in the cluster
   * (another test file's, in CI) holds its snapshots' xmin back: seen with a `BEGIN; SELECT
   * pg_current_xact_id()` left open on another connection, an unchanged host was listed.
   */
  async function expectListed(changes: HostChangeSet, moved: string[]): Promise<void> {
    const now = await store.hostGenerations();
    for (const name of moved) expect(changes.hosts.has(name), name).toBe(true);
    for (const [name, generation] of changes.hosts) expect(generation, name).toBe(now.get(name));
    if (client === 'sqlite3') expect([...changes.hosts.keys()].sort()).toEqual([...moved].sort());
  }

  it('lists the hosts whose generation moved, whoever wrote, and nothing when nothing did', async () => {
    const [a, b, c, d, e] = await hosts(5);
    const start = await store.hostChanges();
    expect(start.complete).toBe(true);
    expect(start.hosts).toEqual(await store.hostGenerations());
    expect(start.total).toBe(start.hosts.size);

    // Nothing changed: an empty answer.
    const quiet = await store.hostChanges(start.token);
    expect(quiet).toMatchObject({ complete: false, total: start.total });
    await expectListed(quiet, []);

    // A claim (the quick path) on a, one through the general transaction by another store on b,
    // an operator's status on c, plain SQL on d; e untouched.
    await store.writeAllocations([{ consumer: { uuid: `hc-claim-${n}`, projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: a!.uuid, resourceClass: 'VCPU', amount: 2 }] }]);
    await other.writeAllocations([{ consumer: { uuid: `hc-claim2-${n}`, projectId: 'p', userId: 'u' }, allocations: [{ providerUuid: b!.uuid, resourceClass: 'VCPU', amount: 2 }] }, { consumer: { uuid: `hc-claim3-${n}`, projectId: 'p', userId: 'u' }, allocations: [{ providerUuid: b!.uuid, resourceClass: 'VCPU', amount: 1 }] }]);
    await store.setHostStatus(c!.name, 'disabled', 'maintenance');
    await (store as KnexStore).knex('hosts').where('name', d!.name).update({ generation: (store as KnexStore).knex.raw('generation + 1') });
    const changes = await store.hostChanges(quiet.token);
    await expectListed(changes, [a!.name, b!.name, c!.name, d!.name]);
    expect(changes).toMatchObject({ complete: false, total: start.total });

    // A new host is listed and counted; a removed one only counted.
    const [f] = await hosts(1);
    const added = await store.hostChanges(changes.token);
    await expectListed(added, [f!.name]);
    expect(added.total).toBe(start.total + 1);
    await store.deleteHost(e!.name);
    const removed = await store.hostChanges(added.token);
    await expectListed(removed, []);
    expect(removed.total).toBe(start.total);
  });

  it('reads every host for a token it cannot read from', async () => {
    await hosts(2);
    const all = await store.hostGenerations();
    const otherBackend = client === 'sqlite3' ? 'xid:5' : 'seq:5';
    for (const token of ['garbage', otherBackend, client === 'sqlite3' ? 'seq:99999999999' : 'xid:99999999999']) {
      const changes = await store.hostChanges(token);
      expect(changes.complete, token).toBe(true);
      expect(changes.hosts, token).toEqual(all);
    }
  });

  // Another connection bumps a host in a transaction left open while the token is read; it
  // commits after. The next answer must list that host: a token that moved past the open
  // transaction would lose it. The overlap is the point: the token is read inside it, and on
  // PostgreSQL after a later transaction committed.
  it('a write in flight while the token is read is listed in the next answer', async () => {
    const [h, g] = await hosts(2);
    const { run, close } = await rawConnection(options);
    const before = (await store.hostGenerations()).get(h!.name)!;
    await run(`BEGIN${client === 'sqlite3' ? ' IMMEDIATE' : ''}; UPDATE hosts SET generation = generation + 1 WHERE name = '${h!.name}'`);
    // PostgreSQL: a later transaction commits meanwhile, so the open one's id is below the
    // read's xmax (SQLite has one writer: nothing else can commit now).
    if (client === 'pg') await other.setHostStatus(g!.name, 'disabled');
    const token = (await store.hostChanges()).token;
    await run('COMMIT');
    await close();
    const changes = await store.hostChanges(token);
    expect(changes.hosts.get(h!.name)).toBe(before + 1);
  });

  // Random writes by both stores; a caller that applies each partial answer (and reads the whole
  // list when `total` says a host went, as the scheduler's HostManager does) always holds what a
  // full read says.
  it('applied answer by answer, equals a full read after any writes', { timeout: 120_000 }, async () => {
    const fleet = await hosts(6);
    const held = new Map(await store.hostGenerations());
    let token = (await store.hostChanges()).token;
    const deleted = new Set<string>();
    type Step = { kind: 'claim' | 'status' | 'sql' | 'delete' | 'add'; host: number; byOther: boolean };
    const step = fc.record({ kind: fc.constantFrom<Step['kind']>('claim', 'claim', 'status', 'sql', 'delete', 'add'), host: fc.nat(5), byOther: fc.boolean() });
    let claims = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 6 }), async (steps) => {
        for (const s of steps) {
          const writer = s.byOther ? other : store;
          const h = fleet[s.host]!;
          if (s.kind === 'add') fleet.push(...(await hosts(1)));
          else if (deleted.has(h.name)) continue;
          else if (s.kind === 'claim') await writer.writeAllocations([{ consumer: { uuid: `hcp-${++claims}`, projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: h.uuid, resourceClass: 'VCPU', amount: 1 }] }]);
          else if (s.kind === 'status') await writer.setHostStatus(h.name, claims % 2 === 0 ? 'disabled' : 'up');
          else if (s.kind === 'sql') await (store as KnexStore).knex('hosts').where('name', h.name).update({ generation: (store as KnexStore).knex.raw('generation + 1') });
          else if (s.kind === 'delete') {
            await writer.deleteHost(h.name, { force: true });
            deleted.add(h.name);
          }
        }
        let changes = await store.hostChanges(token);
        const added = [...changes.hosts.keys()].filter((name) => !held.has(name)).length;
        if (held.size + added !== changes.total) {
          changes = await store.hostChanges();
          expect(changes.complete).toBe(true);
          for (const name of [...held.keys()]) if (!changes.hosts.has(name)) held.delete(name);
        }
        for (const [name, generation] of changes.hosts) held.set(name, generation);
        token = changes.token;
        expect(held).toEqual(await store.hostGenerations());
      }),
      { numRuns: client === 'pg' ? 15 : 30 },
    );
  });
});
