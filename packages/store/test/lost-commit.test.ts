/**
 * A claim whose COMMIT's answer is lost with the connection (PostgreSQL). The server may have
 * committed it or not; the store must not guess. Claims, on the quick path (`quick-claim.ts`)
 * and in the general transaction (`allocations.ts`), ask the server what became of their
 * transaction (`lost-commit.ts`) and answer as it did; combined claims whose outcome cannot be
 * learnt are not re-applied one by one (a re-applied claim that had committed would be refused
 * as a consumer conflict: a claim in the store, its caller told it is someone else's).
 *
 * A proxy between the store and the server (`CommitProxy`) drops the server's answer to a
 * COMMIT (the transaction committed), replaces it with a FATAL error, drops the COMMIT itself
 * or an earlier trip (the server rolls back when the connection closes), and can keep the
 * server out of reach for a moment.
 *
 * Mutations seen caught (each turned this file red once, then was restored):
 * - the quick path not asking the server (`quickClaims` mapping the doubt's cause instead):
 *   six tests red (ERT_STORE_UNAVAILABLE for claims that committed; no `committed` detail);
 * - the quick path asking while it still held the broken connection (the first version):
 *   "a pool of one connection (quick path)" red (knex's acquire timeout, 60 s);
 * - the general transaction not asking (`resolveLostCommit: true` dropped from
 *   `commitCombined`'s write): its three tests red;
 * - `commitCombined` re-applying a batch whatever the outcome: both "server out of reach"
 *   tests red (consumer conflicts for claims in the store);
 * - `commitCombined` refusing to re-apply any ERT_STORE_UNAVAILABLE without `committed: false`
 *   (the first version): "connection lost before the COMMIT" red;
 * - a FATAL answer taken as a rollback (as any error not known as a lost connection was, in
 *   the first version): "a FATAL answer" red;
 * - an aborted transaction reported without `committed: false`: "lone claim, COMMIT lost" red;
 * - `StoreOptions.logger` not given to knex (PostgreSQL): "lone claim, answer lost" red (knex's
 *   "Connection Error" printed with console.log instead);
 * - `rawWrite` counting a settled commit as a failed transaction (as the first versions did):
 *   "lone claim, answer lost" red;
 * - `StoreContext.read` failing when only its COMMIT failed: "a read whose COMMIT answer is
 *   lost" red (ERT_STORE_UNAVAILABLE).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AllocationWrite, Store, StoreOptions } from '@ert/store';
import { createStore } from '@ert/store';
import { inv, isolatedOptions, rejection, firstAloneRestCombined } from './backends.js';
import { CommitProxy } from './commit-proxy.js';

const pgUrl = process.env.ERT_TEST_PG_URL;

describe.skipIf(!pgUrl)('a claim whose COMMIT answer is lost (PostgreSQL)', () => {
  let proxy: CommitProxy;
  let proxied: string;
  const opened: Array<{ store: Store; cleanup(): Promise<void> }> = [];

  beforeAll(async () => {
    const url = new URL(pgUrl!);
    proxy = new CommitProxy({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(await proxy.listen());
    proxied = url.toString();
  });
  afterAll(() => proxy.close());
  afterEach(async () => {
    proxy.arm('pass');
    for (const { store, cleanup } of opened.splice(0)) {
      await store.close();
      await cleanup();
    }
  });

  /** What the stores' `logger` was told (knex's pool diagnostics). */
  const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];

  /** A store through the proxy, on its own schema, with one host of 8 VCPUs. */
  async function open(label: string, extra: Partial<StoreOptions> = {}): Promise<Store> {
    const isolated = isolatedOptions('pg', label);
    const logger = { warn: (fields: Record<string, unknown>, message: string) => void warnings.push({ fields, message }) };
    const store = await createStore({ ...isolated.options, connection: proxied, logger, ...extra });
    opened.push({ store, cleanup: isolated.cleanup });
    await store.migrate();
    await store.createProvider({ uuid: 'root', name: 'host-0' });
    await store.setInventories('root', undefined, { VCPU: inv(8) });
    await store.upsertHost({ name: 'host-0', rootProviderUuid: 'root' });
    return store;
  }

  const claim = (consumer: string, amount = 1): AllocationWrite[] => [
    { consumer: { uuid: consumer, projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: 'root', resourceClass: 'VCPU', amount }] },
  ];
  const used = async (store: Store) => (await store.getUsages('root'))['VCPU'] ?? 0;
  /** Three calls made together: the first goes alone, the other two wait for it and are combined (two COMMITs in all). */
  const threeCalls = async (store: Store) => Promise.allSettled(await firstAloneRestCombined(['c-0', 'c-1', 'c-2'].map((consumer) => () => store.writeAllocations(claim(consumer)))));

  it('lone claim, answer lost: answered as committed, with the host to reload', async () => {
    const observed: Array<{ operation: string; ok: boolean }> = [];
    const store = await open('lost_lone', { onTransaction: ({ kind, operation, ok }) => void (kind === 'write' && observed.push({ operation, ok })) });
    const before = await store.hostGenerations();
    proxy.arm('lose-answer');
    const printed = vi.spyOn(console, 'log');
    warnings.length = 0;
    const result = await store.writeAllocations(claim('c-1', 2));
    expect(proxy.acted).toBe('lose-answer');
    // knex's word of the lost connection went to the store's logger, not to the console.
    expect(warnings).toContainEqual({ fields: { source: 'knex' }, message: expect.stringMatching(/^Connection Error: /) });
    expect(printed.mock.calls.flat().join('\n')).not.toMatch(/Connection Error/);
    printed.mockRestore();
    // The generation is the store's; `shared` because the store cannot tell whether another writer bumped it too.
    expect(result.hosts).toEqual([{ name: 'host-0', generationBefore: before.get('host-0'), generation: before.get('host-0')! + 1, shared: true }]);
    expect(await store.getAllocations('c-1')).toMatchObject({ allocations: [{ providerUuid: 'root', resourceClass: 'VCPU', amount: 2 }] });
    // Counted once, as the server said: committed.
    expect(observed.filter((o) => o.operation === 'writeAllocations')).toEqual([{ operation: 'writeAllocations', ok: true }]);
    expect(await used(store)).toBe(2);
  });

  for (const quickClaims of [true, false]) {
    it(`lone claim, answer lost, a pool of one connection (${quickClaims ? 'quick path' : 'general transaction'}): asked once the broken connection is given back`, { timeout: 20_000 }, async () => {
      // Asking while holding the broken connection would wait for the pool's only one (knex's
      // acquire timeout, 60 s) and end unknown.
      const store = await open(`lost_pool1_${quickClaims}`, { quickClaims, pool: { min: 0, max: 1 } });
      proxy.arm('lose-answer');
      const started = performance.now();
      await store.writeAllocations(claim('c-1', 2));
      expect(proxy.acted).toBe('lose-answer');
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(await used(store)).toBe(2);
    });
  }

  it('combined claims, a FATAL answer of a code not known as a lost connection: asked, answered as committed', async () => {
    const store = await open('fatal_combined');
    proxy.arm('fatal-answer', 2);
    const outcomes = await threeCalls(store);
    expect(proxy.acted).toBe('fatal-answer');
    expect(proxy.commits).toBe(2);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(await used(store)).toBe(3);
  });

  it('combined claims, answer lost: each answered as committed, none re-applied', async () => {
    const store = await open('lost_combined');
    // The first call is in flight alone; the next two wait for it and are combined: the proxy sees two COMMITs in all.
    proxy.arm('lose-answer', 2);
    const outcomes = await threeCalls(store);
    expect(proxy.acted).toBe('lose-answer');
    expect(proxy.commits).toBe(2);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    for (const consumer of ['c-0', 'c-1', 'c-2']) expect((await store.getAllocations(consumer)).allocations).toHaveLength(1);
    expect(await used(store)).toBe(3);
  });

  it('lone claim, COMMIT lost: unavailable, nothing written, and said so', async () => {
    const store = await open('lost_commit_lone');
    proxy.arm('lose-commit');
    const error = await rejection(store.writeAllocations(claim('c-1')));
    expect(proxy.acted).toBe('lose-commit');
    expect(error.code).toBe('ERT_STORE_UNAVAILABLE');
    expect(error.details).toMatchObject({ committed: false });
    expect((await store.getAllocations('c-1')).allocations).toEqual([]);
    expect(await used(store)).toBe(0);
  });

  it('combined claims, COMMIT lost: rolled back by the server, so re-applied one by one', async () => {
    const store = await open('lost_commit_combined');
    proxy.arm('lose-commit', 2);
    const outcomes = await threeCalls(store);
    expect(proxy.acted).toBe('lose-commit');
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(await used(store)).toBe(3);
  });

  it('combined claims, connection lost before the COMMIT: nothing written, so re-applied one by one', async () => {
    const store = await open('lost_begin_combined');
    proxy.arm('lose-begin', 2);
    const outcomes = await threeCalls(store);
    expect(proxy.acted).toBe('lose-begin');
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(await used(store)).toBe(3);
  });

  it('general transaction, answer lost: each combined call answered as committed', async () => {
    const store = await open('lost_general', { quickClaims: false });
    proxy.arm('lose-answer', 2);
    const outcomes = await threeCalls(store);
    expect(proxy.acted).toBe('lose-answer');
    expect(proxy.commits).toBe(2);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(await used(store)).toBe(3);
  });

  it('a read whose COMMIT answer is lost answers what it read (a read-only COMMIT changes nothing)', async () => {
    const store = await open('lost_read');
    await store.writeAllocations(claim('c-0', 3));
    proxy.arm('lose-answer');
    expect(await used(store)).toBe(3);
    expect(proxy.acted).toBe('lose-answer');
  });

  for (const quickClaims of [true, false]) {
    it(`server out of reach once the answer is lost (${quickClaims ? 'quick path' : 'general transaction'}): unavailable, not refused as conflicts`, async () => {
      const store = await open(`lost_cut_${quickClaims}`, { quickClaims });
      proxy.arm('lose-answer', 2, { refuse: 1 });
      const outcomes = await threeCalls(store);
      expect(proxy.acted).toBe('lose-answer');
      expect(outcomes[0]!.status).toBe('fulfilled');
      for (const outcome of outcomes.slice(1)) {
        expect(outcome.status).toBe('rejected');
        expect((outcome as PromiseRejectedResult).reason).toMatchObject({ code: 'ERT_STORE_UNAVAILABLE' });
        expect((outcome as PromiseRejectedResult).reason.details).toEqual({ committed: 'unknown' });
      }
      // They did commit: "unavailable" tells the callers to re-read, which shows them.
      expect(await used(store)).toBe(3);
    });
  }
});
