/**
 * A host's generation moves once for every change, whoever makes it: a scheduler takes a claim's
 * answer (`generationBefore` -> `generation`, not `shared`) as its own bump and learns of other
 * changes only from generations it has not seen (`hostChanges`, the host manager's
 * `acknowledge`). On PostgreSQL a tracker's `upsertHost` and a scheduler's claim can run at once:
 * the upsert reads the host, the claim bumps it and commits, and the upsert's update, which waited
 * for the row, must bump on top of the claim's bump.
 *
 * Seen red with `upsertHost` writing the generation it read plus one (hosts.ts): the host ended at
 * the claim's generation after two changes, so the scheduler, told that generation by its claim,
 * would never see the status change. SQLite holds its write lock for the whole transaction, so
 * the two cannot interleave there; the test runs on PostgreSQL (ERT_TEST_PG_URL), with each claim
 * path (the scheduler's store knows the class ids first, so the quick claim is the one taken),
 * and waits for the server to show each backend waiting rather than for a fixed time.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createStore, type Store } from '@ert/store';
import { claimPaths, inv, isolatedOptions, lockHolder } from './backends.js';

const pgPaths = claimPaths.filter((path) => path.client === 'pg');
const ROOT = '5c1d7a4e-0000-4000-8000-000000000001';

describe.skipIf(pgPaths.length === 0)('a claim and upsertHost on one host at once (PostgreSQL)', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  for (const { label, extra } of pgPaths) {
    it(`both bump the host's generation (${label})`, async () => {
      const { options, cleanup } = isolatedOptions('pg', `host_generation_${label}`);
      cleanups.push(cleanup);
      // The tracker's store and the scheduler's, as two processes hold them.
      const tracker: Store = await createStore(options);
      cleanups.push(() => tracker.close());
      await tracker.migrate();
      const scheduler: Store = await createStore({ ...options, ...extra });
      cleanups.push(() => scheduler.close());
      await tracker.createProvider({ uuid: ROOT, name: 'h' });
      await tracker.setInventories(ROOT, 0, { VCPU: inv(8) });
      const start = await tracker.upsertHost({ name: 'h', rootProviderUuid: ROOT });
      // The scheduler's store learns the class ids here, as a running scheduler has: a store that
      // does not know a claim's class sends it through the general transaction.
      await scheduler.getInventories(ROOT);
      const { holder, untilWaiting, close } = await lockHolder(options);
      cleanups.push(close);

      // Another writer holds the host's row, so the claim's bump and then the upsert's update
      // queue behind it, the upsert having read the host already.
      await holder.run(`BEGIN; SELECT 1 FROM hosts WHERE name = 'h' FOR UPDATE`);
      let claimDone = false;
      let upsertDone = false;
      const claim = scheduler
        .writeAllocations([{ consumer: { uuid: 'c-1', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: ROOT, resourceClass: 'VCPU', amount: 1 }] }])
        .finally(() => (claimDone = true));
      await untilWaiting(1);
      const upsert = tracker.upsertHost({ name: 'h', rootProviderUuid: ROOT, status: 'disabled' }).finally(() => (upsertDone = true));
      await untilWaiting(2);
      // The overlap this is about: both wait for the row, the claim first.
      expect({ claimDone, upsertDone }).toEqual({ claimDone: false, upsertDone: false });
      await holder.run('COMMIT');

      const claimed = await claim;
      const upserted = await upsert;
      // The claim, first in the row's queue, was told its own bump...
      expect(claimed.hosts).toEqual([{ name: 'h', generationBefore: start.generation, generation: start.generation + 1, shared: false }]);
      // ...and the upsert bumped on top of it, so a reader that saw the claim's generation sees a change.
      expect(upserted.generation).toBe(start.generation + 2);
      expect(await tracker.getHost('h')).toMatchObject({ generation: start.generation + 2, status: 'disabled' });
    });
  }
});
