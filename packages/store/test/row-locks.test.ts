/**
 * Writers that meet on one row on PostgreSQL. SQLite holds its write lock for a whole
 * transaction, so none of these can interleave there; on PostgreSQL a row is locked only when a
 * statement reaches it, and a value read before that may be stale by the time it is written.
 * Each test lines the writers up behind a row another connection holds (waiting for the server
 * to show them waiting, not for a fixed time), then lets them go, and checks that no writer's
 * committed change was undone or split. Each was seen red with the code it guards put back as
 * it was (the mutation is named in the test's comment).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { TRAIT_SHARING_PROVIDER, type Flavor } from '@ert/plugin-api';
import { createStore, endReservation, withdrawInstance, type InstanceRecord, type Store, type StoreOptions } from '@ert/store';
import { inv, isolatedOptions, lockHolder } from './backends.js';

const flavor: Flavor = { name: 'small', vcpus: 2, memoryMb: 0, diskGb: 0, extraSpecs: {} };

describe.skipIf(!process.env.ERT_TEST_PG_URL)('writers that meet on one row (PostgreSQL)', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** Two stores on one fresh schema (two processes, `b` knowing the class ids as a running one does) and a lock holder. */
  async function twoProcesses(label: string, extra: Partial<StoreOptions> = {}, extraA: Partial<StoreOptions> = {}) {
    const { options, cleanup } = isolatedOptions('pg', label);
    cleanups.push(cleanup);
    const a: Store = await createStore({ ...options, ...extraA });
    cleanups.push(() => a.close());
    await a.migrate();
    const b: Store = await createStore({ ...options, ...extra });
    cleanups.push(() => b.close());
    const lock = await lockHolder(options);
    cleanups.push(lock.close);
    return { a, b, ...lock };
  }

  // Red with markStaleHosts reading the up hosts and then updating them by id: h1 ended stale
  // (and a sync then brought it back up, the operator's disable lost).
  it('markStaleHosts keeps an operator disable committed while it waited', async () => {
    const { a, b, holder, untilWaiting } = await twoProcesses('locks_stale_disable');
    await a.createProvider({ uuid: 'r1', name: 'h1' });
    await a.upsertHost({ name: 'h1', rootProviderUuid: 'r1', lastUpdate: 1000 });
    await holder.run(`BEGIN; SELECT 1 FROM hosts WHERE name = 'h1' FOR UPDATE`);
    const disable = a.setHostStatus('h1', 'disabled', 'broken DIMM');
    await untilWaiting(1);
    const stale = b.markStaleHosts(Date.now());
    await untilWaiting(2);
    await holder.run('COMMIT');
    await disable;
    expect(await stale).toEqual([]);
    expect(await a.getHost('h1')).toMatchObject({ status: 'disabled', statusReason: 'broken DIMM' });
  });

  // Red with the same mutation: the host that had just reported ended stale.
  it('markStaleHosts keeps a report committed while it waited', async () => {
    const { a, b, holder, untilWaiting } = await twoProcesses('locks_stale_report');
    await a.createProvider({ uuid: 'r1', name: 'h1' });
    await a.upsertHost({ name: 'h1', rootProviderUuid: 'r1', lastUpdate: 1000 });
    await holder.run(`BEGIN; SELECT 1 FROM hosts WHERE name = 'h1' FOR UPDATE`);
    const now = Date.now();
    const report = a.upsertHost({ name: 'h1', rootProviderUuid: 'r1', status: 'up', lastUpdate: now });
    await untilWaiting(1);
    const stale = b.markStaleHosts(now - 60_000);
    await untilWaiting(2);
    await holder.run('COMMIT');
    await report;
    expect(await stale).toEqual([]);
    expect(await a.getHost('h1')).toMatchObject({ status: 'up', lastUpdate: now });
  });

  // The tracker's sync (`keepDisabled`). Red with upsertHost writing `status` as given: the
  // host ended up, the disable committed before the sync's update lost.
  it("a host's report keeps an operator disable committed while it waited", async () => {
    const { a, b, holder, untilWaiting } = await twoProcesses('locks_report_disable');
    await a.createProvider({ uuid: 'r1', name: 'h1' });
    await a.upsertHost({ name: 'h1', rootProviderUuid: 'r1' });
    await holder.run(`BEGIN; SELECT 1 FROM hosts WHERE name = 'h1' FOR UPDATE`);
    const disable = a.setHostStatus('h1', 'disabled', 'broken DIMM');
    await untilWaiting(1);
    const report = b.upsertHost({ name: 'h1', rootProviderUuid: 'r1', status: 'up', keepDisabled: true, lastUpdate: 5000 });
    await untilWaiting(2);
    await holder.run('COMMIT');
    await disable;
    await report;
    expect(await a.getHost('h1')).toMatchObject({ status: 'disabled', statusReason: 'broken DIMM', lastUpdate: 5000 });
    // And a host that is not disabled is up again.
    await a.setHostStatus('h1', 'stale');
    expect(await b.upsertHost({ name: 'h1', rootProviderUuid: 'r1', status: 'up', keepDisabled: true })).toMatchObject({ status: 'up' });
  });

  /** Two hosts of 8 VCPUs; instance x claimed on h1 and refused there (its consumer gone, its record kept). */
  async function refusedOnH1(a: Store): Promise<InstanceRecord> {
    for (const [root, host] of [['r1', 'h1'], ['r2', 'h2']] as const) {
      await a.createProvider({ uuid: root, name: host });
      await a.setInventories(root, undefined, { VCPU: inv(8) });
      await a.upsertHost({ name: host, rootProviderUuid: root });
    }
    const record: InstanceRecord = { uuid: 'x', host: 'h1', projectId: 'p', userId: 'u', flavor, state: 'scheduled', assignments: {} };
    await a.writeAllocations([{ consumer: { uuid: 'x', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: 'r1', resourceClass: 'VCPU', amount: 2 }], instance: record }]);
    const { generation } = await a.getAllocations('x');
    expect((await endReservation(a, record, generation, 'refused', 'plugin vcpu: no')).ended).toBe(true);
    return record;
  }

  /**
   * Places x again on h2 from store `a`, held by the holder at x's record (the row is locked
   * first, so the placement and a writer started after it queue for it in that order).
   */
  async function placeAgainOnH2(a: Store, record: InstanceRecord, holder: { run(sql: string): Promise<unknown> }) {
    await holder.run(`BEGIN; SELECT 1 FROM instances WHERE uuid = 'x' FOR UPDATE`);
    return a.writeAllocations([
      { consumer: { uuid: 'x', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: 'r2', resourceClass: 'VCPU', amount: 2 }], instance: { ...record, host: 'h2' } },
    ]);
  }

  // Red without the general path's lock of the records before it reads the consumers again
  // (allocations.ts, lockRecords): the withdraw, which found no consumer, deleted the record the
  // re-placement had just written and was told `removed`, and x's 2 VCPUs on r2 stayed
  // allocated with no record (nothing reclaims them).
  it('a withdraw and a re-placement of one instance leave its record and allocations together', async () => {
    const { a, b, holder, untilWaiting } = await twoProcesses('locks_withdraw');
    const record = await refusedOnH1(a);
    const placed = placeAgainOnH2(a, record, holder);
    await untilWaiting(1);
    const withdrawn = withdrawInstance(b, 'x').then(
      (outcome) => ({ outcome }),
      (err: { code?: string }) => ({ error: err.code }),
    );
    await untilWaiting(2);
    await holder.run('COMMIT');
    await placed;
    // The withdraw came second: it is told the consumer changed (its caller reads again).
    expect(await withdrawn).toEqual({ error: 'ERT_STORE_CONFLICT' });
    expect(await a.getInstance('x')).toMatchObject({ host: 'h2', state: 'scheduled' });
    expect((await a.getAllocations('x')).allocations).toEqual([{ providerUuid: 'r2', resourceClass: 'VCPU', amount: 2 }]);
  });

  // Red with deleteInstance bumping the host it read before its delete waited: h2 stayed at
  // the generation the claim was told, so a scheduler would keep x there.
  it("deleteInstance bumps the host the record is on when it goes", async () => {
    const { a, b, holder, untilWaiting } = await twoProcesses('locks_delete_instance');
    const record = await refusedOnH1(a);
    const placed = placeAgainOnH2(a, record, holder);
    await untilWaiting(1);
    const deleted = b.deleteInstance('x');
    await untilWaiting(2);
    await holder.run('COMMIT');
    const h2 = (await placed).hosts.find((h) => h.name === 'h2')!;
    await deleted;
    expect(await a.getInstance('x')).toBeUndefined();
    expect((await a.getHost('h2'))!.generation).toBeGreaterThan(h2.generation);
  });

  // Red with createProvider reading its parent unlocked: c kept root ra while its parent p had
  // moved to rb, so c showed in host ha's tree and a claim on it bumped the wrong host. Red too
  // (a deadlock, ERT_STORE_CONFLICT) without updateProvider's lock of the tree, or with that
  // lock taken FOR UPDATE (c's foreign-key check on its root waits for it).
  it('a provider created under one that moves to another tree takes the new root', async () => {
    const { a, b, holder, untilWaiting } = await twoProcesses('locks_reparent');
    for (const [root, host] of [['ra', 'ha'], ['rb', 'hb']] as const) {
      await a.createProvider({ uuid: root, name: host });
      await a.upsertHost({ name: host, rootProviderUuid: root });
    }
    await a.createProvider({ uuid: 'p', name: 'p', parentUuid: 'ra' });
    // An uncommitted provider of the same name holds createProvider's insert after it read its parent.
    await holder.run(`BEGIN; INSERT INTO providers (uuid, name, generation) VALUES ('other', 'c', 0)`);
    const created = b.createProvider({ uuid: 'c', name: 'c', parentUuid: 'p' });
    await untilWaiting(1);
    const moved = a.updateProvider('p', { parentUuid: 'rb' });
    // The move either waits for the create (which holds its parent) or, unguarded, is done.
    await Promise.race([moved, untilWaiting(2)]);
    await holder.run('ROLLBACK');
    await created;
    await moved;
    const rootOf = new Map((await a.listProviders()).map((p) => [p.uuid, p.rootUuid]));
    expect({ p: rootOf.get('p'), c: rootOf.get('c') }).toEqual({ p: 'rb', c: 'rb' });
    const [hb] = await a.loadHosts(['hb']);
    expect(hb!.providers.map((p) => p.uuid).sort()).toEqual(['c', 'p', 'rb']);
  });

  // Red without the claims' lock of every host to bump up front (context.ts lockHostsToBump):
  // each claim bumped its own host, then waited for the other's (PostgreSQL's deadlock
  // detector failed one with ERT_STORE_CONFLICT after about a second).
  it('two claims on sharing providers of one aggregate both succeed', async () => {
    const { a, b, holder, untilWaiting } = await twoProcesses('locks_sharing', { quickClaims: false });
    for (const [root, host] of [['r1', 'h1'], ['r2', 'h2']] as const) {
      await a.createProvider({ uuid: root, name: host });
      await a.setInventories(root, undefined, { VCPU: inv(8) });
      await a.setAggregates(root, undefined, ['agg']);
      await a.upsertHost({ name: host, rootProviderUuid: root });
    }
    for (const shared of ['s1', 's2']) {
      await a.createProvider({ uuid: shared, name: shared });
      await a.setInventories(shared, undefined, { DISK_GB: inv(100) });
      await a.setTraits(shared, undefined, [TRAIT_SHARING_PROVIDER]);
      await a.setAggregates(shared, undefined, ['agg']);
    }
    const claim = (store: Store, consumer: string, root: string, shared: string) =>
      store.writeAllocations([
        {
          consumer: { uuid: consumer, projectId: 'p', userId: 'u', generation: null },
          allocations: [
            { providerUuid: root, resourceClass: 'VCPU', amount: 1 },
            { providerUuid: shared, resourceClass: 'DISK_GB', amount: 1 },
          ],
        },
      ]);
    // Lined up so that, bumping its own host first, each would then wait for the other's.
    await holder.run(`BEGIN; SELECT 1 FROM hosts WHERE name = 'h2' FOR UPDATE`);
    const second = claim(b, 'cb', 'r2', 's2');
    await untilWaiting(1);
    const first = claim(a, 'ca', 'r1', 's1');
    await untilWaiting(2);
    await holder.run('COMMIT');
    const outcomes = await Promise.allSettled([first, second]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(await a.getUsages('s1')).toEqual({ DISK_GB: 1 });
    expect(await a.getUsages('s2')).toEqual({ DISK_GB: 1 });
  });

  // A quick claim's record refers to its host, and PostgreSQL's foreign-key check locks that
  // host KEY SHARE. Red with lockHostsToBump locking FOR UPDATE (found by review): the general
  // claim held h1 and waited for h2, the quick batch held h2 (its first record) and waited for
  // h1 (its second), and the server broke the deadlock after a second: the quick batch failed
  // (then went through call by call, so only its failed transaction shows it).
  it("a general claim's host locks and a quick batch's records on the same hosts go through without a deadlock", async () => {
    const failed: string[] = [];
    const onTransaction = (t: { kind: string; operation: string; ok: boolean }) => void (t.ok ? undefined : failed.push(`${t.kind} ${t.operation}`));
    const { a, b, holder, untilWaiting } = await twoProcesses('locks_record_keys', { quickClaims: false, onTransaction }, { onTransaction });
    for (const [root, host] of [['r1', 'h1'], ['r2', 'h2'], ['rg', 'hg']] as const) {
      await a.createProvider({ uuid: root, name: host });
      await a.setInventories(root, undefined, { VCPU: inv(8) });
      await a.setAggregates(root, undefined, ['agg']);
      await a.upsertHost({ name: host, rootProviderUuid: root });
    }
    await a.createProvider({ uuid: 's', name: 's' });
    await a.setInventories('s', undefined, { DISK_GB: inv(100) });
    await a.setTraits('s', undefined, [TRAIT_SHARING_PROVIDER]);
    await a.setAggregates('s', undefined, ['agg']);
    // Another writer holds h2 as a bump does (NO KEY UPDATE), which a record's KEY SHARE passes.
    await holder.run(`BEGIN; UPDATE hosts SET generation = generation WHERE name = 'h2'`);
    // The general claim locks every host of the aggregate in id order: h1, then waits for h2.
    const general = b.writeAllocations([
      {
        consumer: { uuid: 'g', projectId: 'p', userId: 'u', generation: null },
        allocations: [
          { providerUuid: 'rg', resourceClass: 'VCPU', amount: 1 },
          { providerUuid: 's', resourceClass: 'DISK_GB', amount: 1 },
        ],
      },
    ]);
    await untilWaiting(1);
    // Two quick claims combined in one batch: records on h2, then on h1, inserted in that order.
    const record = (uuid: string, host: string): InstanceRecord => ({ uuid, host, projectId: 'p', userId: 'u', flavor, state: 'scheduled', assignments: {} });
    const quick = [
      a.writeAllocations([{ consumer: { uuid: 'q2', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: 'r2', resourceClass: 'VCPU', amount: 1 }], instance: record('q2', 'h2') }]),
      a.writeAllocations([{ consumer: { uuid: 'q1', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: 'r1', resourceClass: 'VCPU', amount: 1 }], instance: record('q1', 'h1') }]),
    ];
    await untilWaiting(2);
    await holder.run('COMMIT');
    const outcomes = await Promise.allSettled([general, ...quick]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as { code?: string }).code : o.status))).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(failed).toEqual([]);
  });
});
