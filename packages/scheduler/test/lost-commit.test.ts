/**
 * The scheduler's claim whose COMMIT's answer is lost (PostgreSQL), end to end: the store asks
 * the server (`packages/store/src/lost-commit.ts`) and answers the claim as committed, so
 * `select` returns the placement; the hosts are told `shared`, so the scheduler does not take
 * the store's generation as its own and reads the host again at its next refresh. Its view of
 * the host then equals the store's: the placement counted once, neither lost nor doubled.
 *
 * Seen red: with the store not asking (`quickClaims` mapping the doubt's cause instead),
 * `select` failed with ERT_STORE_UNAVAILABLE for an instance whose claim was in the store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore, dropPostgresSchema, type Store, type StoreOptions } from '@ert/store';
import { CommitProxy } from '../../store/test/commit-proxy.js';
import { createScheduler, type Scheduler } from '../src/index.js';
import { flavor, hostImport, instances, schedulerConfig, tempDir, uuidFor } from './helpers.js';

const pgUrl = process.env.ERT_TEST_PG_URL;

describe.skipIf(!pgUrl)('a claim whose COMMIT answer is lost, through the scheduler (PostgreSQL)', () => {
  let proxy: CommitProxy;
  let store: Store;
  let scheduler: Scheduler;
  const tmp = tempDir('ert-lost-commit-');
  const schema = `sched_lost_commit_${process.pid}`;

  beforeAll(async () => {
    const url = new URL(pgUrl!);
    proxy = new CommitProxy({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(await proxy.listen());
    const options: StoreOptions = { client: 'pg', connection: url.toString(), schema };
    store = await createStore({ ...options, logger: { warn: () => undefined } });
    await store.migrate();
    await store.importHosts([hostImport({ name: 'h1', inventories: { VCPU: 8, MEMORY_MB: 8192 } })]);
    // refreshInterval 0: every decision reads the hosts' changes first.
    scheduler = await createScheduler({ config: schedulerConfig(options, tmp.dir, { filters: ['status', 'resources'] }), store });
  });
  afterAll(async () => {
    await scheduler?.close();
    await store?.close();
    await proxy?.close();
    await dropPostgresSchema(pgUrl!, schema);
    tmp.cleanup();
  });

  it('select answers the placement, and the host is counted once after the next refresh', async () => {
    const [first, second] = instances(2);
    // The claim's write trip (the refresh's read transaction ends with a COMMIT too).
    proxy.arm('lose-answer', 1, { also: 'INSERT INTO consumers' });
    const [selection] = await scheduler.select({ flavor: flavor('small', 2, 1024), instances: [first!] });
    expect(proxy.acted).toBe('lose-answer');
    expect(selection).toMatchObject({ instanceUuid: first!.uuid, host: 'h1' });
    expect((await store.getAllocations(first!.uuid)).allocations).toHaveLength(2);
    expect(scheduler.host('h1')!.free('VCPU')).toBe(6);

    // The next decision refreshes first: h1's generation is not the one the scheduler holds, so
    // h1 is read again from the store, which holds the first claim.
    await scheduler.select({ flavor: flavor('small', 2, 1024), instances: [second!] });
    expect(await store.getUsages(uuidFor('h1'))).toMatchObject({ VCPU: 4, MEMORY_MB: 2048 });
    expect(scheduler.host('h1')!.free('VCPU')).toBe(4);
    expect(scheduler.host('h1')!.free('MEMORY_MB')).toBe(8192 - 2048);
    expect([...scheduler.host('h1')!.instances].sort()).toEqual([first!.uuid, second!.uuid].sort());
  });
});
