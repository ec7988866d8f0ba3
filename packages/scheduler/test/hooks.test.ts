import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { definePlugin } from '@ert/plugin-api';
import type { HostState, RequestSpec } from '@ert/plugin-api';
import type { Store, StoreOptions } from '@ert/store';
import { createScheduler, NoValidHostError } from '../src/index.js';
import type { ExplanationSummary, Scheduler } from '../src/index.js';
import { freeRam } from './fixtures.js';
import { flavor, hostImport, instances, openStore, schedulerConfig, tempDir, uuidFor } from './helpers.js';
import type { HostSpec } from './helpers.js';

/*
 * Plugin hooks of the scheduler that fail: a weigher that throws or returns NaN, an
 * `appliesTo` that throws, a consumer's `placed` that throws, and async hooks (the scheduler's
 * per-host hooks are synchronous) whose promise rejects. Each fails closed for the host
 * concerned, with the plugin and hook named, and never crashes the process. Each test names
 * the mutation of the guarded code it was seen to catch. SQLite only: nothing here depends on
 * the store's backend.
 */

const small = flavor('small', 1, 1024);

/** Three hosts, free RAM best-to-worst: a (32 GiB), b (16 GiB), c (8 GiB). */
const FLEET: HostSpec[] = [
  { name: 'a', inventories: { VCPU: 8, MEMORY_MB: 32768 } },
  { name: 'b', inventories: { VCPU: 8, MEMORY_MB: 16384 } },
  { name: 'c', inventories: { VCPU: 8, MEMORY_MB: 8192 } },
];

describe('scheduler hooks that fail', () => {
  const tmp = tempDir('ert-hooks-');
  const closing: Array<Store | Scheduler> = [];
  let unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled = [];
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled);
  });
  afterAll(async () => {
    for (const x of closing.reverse()) await x.close();
    tmp.cleanup();
  });

  async function setup(label: string, sched: Parameters<typeof schedulerConfig>[2], extra: { hookTimeout?: string } = {}): Promise<{ store: Store; options: StoreOptions; s: Scheduler }> {
    const { store, options } = await openStore('sqlite3', tmp.dir, label);
    closing.push(store);
    await store.importHosts(FLEET.map(hostImport));
    const config = schedulerConfig(options, tmp.dir, { refreshInterval: '1h', ...sched });
    if (extra.hookTimeout) (config.scheduler as { hookTimeout: number }).hookTimeout = Number.parseInt(extra.hookTimeout, 10);
    const s = await createScheduler({ config, store });
    closing.push(s);
    return { store, options, s };
  }

  /** Lets pending promise callbacks (and unhandled-rejection detection) run. */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

  it("keeps a hook failure's message from the evaluation, and asks a filter again for its reason when an explanation shows it", async () => {
    // A memo keeps only hook failures' messages; a filter's own reason is asked of it again
    // when shown (Ranker.reasonOf). Hooks that fail or answer once, then behave: the
    // explanation gives what the evaluation saw, or says the filter contradicts itself.
    // Seen red with the filter's and the weigher's failures not kept (each asked again: a
    // reason from a hook that no longer fails), and with a filter's reason not asked again
    // (empty reasons).
    const calls = new Map<string, number>();
    const once = (key: string) => {
      const n = (calls.get(key) ?? 0) + 1;
      calls.set(key, n);
      return n === 1;
    };
    const moody = definePlugin({
      name: 'moody',
      filter: () => ({
        filter(host: HostState) {
          if (host.name === 'a' && once('filter-a')) throw new Error('a: first call fails');
          if (host.name === 'b' && once('filter-b')) return 'b: rejected once';
          if (host.name === 'c') return 'c: rejected';
          return undefined;
        },
      }),
    });
    const { s } = await setup('reasons', { filters: ['resources', moody], weighers: [{ name: 'free-ram', plugin: freeRam }] });
    const explanation = await s.explain({ flavor: small, instances: instances(1) });
    const reasons = Object.fromEntries(explanation.rejected.map((r) => [r.host, r.reason]));
    expect(reasons).toEqual({
      a: 'filter "moody" hook filter failed: Plugin "moody" hook "filter" failed: a: first call fails',
      b: 'filter "moody" rejected the host when it was evaluated, and passes it when asked why',
      c: 'c: rejected',
    });

    const flaky = definePlugin({
      name: 'flaky-weigher',
      weigher: () => ({
        weigh(host: HostState) {
          if (host.name === 'b' && once('weigh-b')) throw new Error('b: first weigh fails');
          return 1;
        },
      }),
    });
    const second = await setup('weigher-reasons', { filters: ['resources'], weighers: [{ name: 'flaky-weigher', plugin: flaky }] });
    const weighed = await second.s.explain({ flavor: small, instances: instances(1) });
    expect(weighed.rejected).toEqual([
      { host: 'b', filter: 'weighers', reason: 'weigher "flaky-weigher" hook weigh failed: Plugin "flaky-weigher" hook "weigh" failed: b: first weigh fails' },
    ]);
  });

  it("a hook failure's message goes when its host is evaluated again: the explanation gives what the new evaluation saw", async () => {
    // The memo keeps a hook failure's message by slot (`memo.failures`); a host evaluated again
    // (it changed) drops it first. Here `a`'s filter throws for `small` once, then rejects it
    // with a reason of its own; a claim of another flavor on `a` makes the memo of `small`
    // evaluate `a` again. Seen red with `memo.failures.delete(slot)` removed from
    // Ranker.evaluate: the second explanation gave the first evaluation's failure.
    let failed = false;
    const moody = definePlugin({
      name: 'moody',
      filter: () => ({
        filter(host: HostState, spec: RequestSpec) {
          if (host.name !== 'a' || spec.flavor.name !== 'small') return undefined;
          if (!failed) {
            failed = true;
            throw new Error('a: first call fails');
          }
          return 'a: rejected for small now';
        },
      }),
    });
    const { s } = await setup('stale-failure', { filters: ['resources', moody], weighers: [{ name: 'free-ram', plugin: freeRam }] });
    const reasonOfA = async () => (await s.explain({ flavor: small, instances: instances(1) })).rejected.find((r) => r.host === 'a')?.reason;
    expect(await reasonOfA()).toBe('filter "moody" hook filter failed: Plugin "moody" hook "filter" failed: a: first call fails');
    // Unchanged, `a` is not evaluated again: the kept message is still the reason.
    expect(await reasonOfA()).toBe('filter "moody" hook filter failed: Plugin "moody" hook "filter" failed: a: first call fails');
    // `a` (the most free RAM) takes another flavor's instance: it changed.
    const [placed] = await s.select({ flavor: flavor('other', 1, 512), instances: instances(1) });
    expect(placed!.host).toBe('a');
    expect(await reasonOfA()).toBe('a: rejected for small now');
  });

  // Mutation seen caught: `!Number.isFinite(score)` dropped from Ranker.evaluate (only the
  // type check left): `a` scored NaN and Infinity and stayed a candidate.
  it('a weigher that throws, returns NaN or Infinity excludes that host, naming the weigher and hook', async () => {
    const odd = definePlugin({
      name: 'odd',
      weigher: () => ({
        weigh(host: HostState) {
          if (host.name === 'a') return Number.NaN;
          if (host.name === 'b') throw new Error('b has no odd score');
          return 1;
        },
      }),
    });
    const { store, s } = await setup('weigh', { filters: ['resources'], weighers: [{ name: 'free-ram', plugin: freeRam }, { name: 'odd', plugin: odd }] });
    const explanation = await s.explain({ flavor: small, instances: instances(1) });
    const rejected = Object.fromEntries(explanation.rejected.map((r) => [r.host, r]));
    expect(rejected.a).toEqual({ host: 'a', filter: 'weighers', reason: 'weigher "odd" hook weigh returned NaN, not a finite number' });
    expect(rejected.b).toEqual({ host: 'b', filter: 'weighers', reason: 'weigher "odd" hook weigh failed: Plugin "odd" hook "weigh" failed: b has no odd score' });
    expect(explanation.weighed.map((w) => w.host)).toEqual(['c']);
    // `a` has the most free RAM, yet only `c` can be chosen.
    const [selection] = await s.select({ flavor: small, instances: instances(1) });
    expect(selection!.host).toBe('c');
    expect((await store.getUsages(uuidFor('a'))).VCPU ?? 0).toBe(0);

    const infinite = definePlugin({ name: 'inf', weigher: () => ({ weigh: (host: HostState) => (host.name === 'a' ? Infinity : 0) }) });
    const other = await setup('weigh-inf', { filters: ['resources'], weighers: [{ name: 'free-ram', plugin: freeRam }, { name: 'inf', plugin: infinite }] });
    const [chosen] = await other.s.select({ flavor: small, instances: instances(1) });
    expect(chosen!.host).toBe('b');
  });

  // Mutation seen caught: memoFor caching the memo of a request whose appliesTo threw (the
  // second select of the same request was refused on every host though the plugin recovered).
  it('an appliesTo that threw once does not keep failing the same request', async () => {
    let failures = 1;
    const flaky = definePlugin({
      name: 'flaky-applies',
      filter: () => ({
        appliesTo: () => {
          if (failures-- > 0) throw new Error('not ready yet');
          return true;
        },
        filter: () => undefined,
      }),
    });
    const { s } = await setup('applies-once', { filters: ['resources', flaky], weighers: [{ name: 'free-ram', plugin: freeRam }] });
    await expect(s.select({ flavor: small, instances: instances(1) })).rejects.toBeInstanceOf(NoValidHostError);
    const [selection] = await s.select({ flavor: small, instances: instances(1) });
    expect(selection!.host).toBe('a');
  });

  // Mutation seen caught: Ranker.prepare's old `catch { return true }` (a throwing appliesTo
  // counted as "applies" and the filter passed every host: the select succeeded on `a`).
  it('an appliesTo that throws fails every host it would judge, naming the plugin and hook', async () => {
    const calls: string[] = [];
    const shaky = definePlugin({
      name: 'shaky',
      filter: () => ({
        appliesTo: () => {
          throw new Error('cannot read the spec');
        },
        filter: (host: HostState) => void calls.push(host.name),
      }),
    });
    const { store, s } = await setup('applies-filter', { filters: ['resources', shaky], weighers: [{ name: 'free-ram', plugin: freeRam }] });
    const error = (await s.select({ flavor: small, instances: instances(1) }).catch((e: unknown) => e)) as NoValidHostError;
    expect(error).toBeInstanceOf(NoValidHostError);
    const shakyCount = (error.details as { summary: ExplanationSummary }).summary.filters.find((f) => f.filter === 'shaky')!;
    expect(shakyCount.removed).toBe(3);
    expect(shakyCount.examples[0]!.reason).toBe('filter "shaky" hook appliesTo failed: Plugin "shaky" hook "appliesTo" failed: cannot read the spec');
    // Its filter was never asked: it could not say whether it applies.
    expect(calls).toEqual([]);
    for (const name of ['a', 'b', 'c']) expect((await store.getUsages(uuidFor(name))).VCPU ?? 0).toBe(0);

    const shakyWeigher = definePlugin({
      name: 'shaky-w',
      weigher: () => ({
        appliesTo: () => {
          throw new Error('no idea');
        },
        weigh: () => 1,
      }),
    });
    const other = await setup('applies-weigher', { filters: ['resources'], weighers: [{ name: 'shaky-w', plugin: shakyWeigher }] });
    const explanation = await other.s.explain({ flavor: small, instances: instances(1) });
    expect(explanation.passed).toBe(0);
    expect(explanation.rejected.map((r) => [r.host, r.filter, r.reason])).toEqual(
      ['a', 'b', 'c'].map((h) => [h, 'weighers', 'weigher "shaky-w" hook appliesTo failed: Plugin "shaky-w" hook "appliesTo" failed: no idea']),
    );
    // An appliesTo that returns false still just skips (the filter or weigher does not apply).
    const skip = definePlugin({ name: 'skip', filter: () => ({ appliesTo: () => false, filter: () => 'never asked' }) });
    const third = await setup('applies-false', { filters: ['resources', skip] });
    expect((await third.s.select({ flavor: small, instances: instances(1) }))[0]!.host).toBe('a');
  });

  // Mutation seen caught: the `counted.problem` check after applyPlacement removed from placeOne (the
  // claim on `a` was written although the consumer could not follow it).
  it('a placed hook that throws: that host is not claimed, the next candidate is, and the reason names plugin and hook', async () => {
    const counting = definePlugin({
      name: 'counting',
      consumer: () => ({
        reads: [],
        consume: () => ({ placed: 0 }),
        placed(data: { placed: number }, placement: { host: string }) {
          if (placement.host === 'a') throw new Error('lost track of a');
          return { placed: data.placed + 1 };
        },
      }),
    });
    const { store, s } = await setup('placed', { consumers: [counting], filters: ['resources'], weighers: [{ name: 'free-ram', plugin: freeRam }], maxAttempts: 3 });
    const [selection] = await s.select({ flavor: small, instances: instances(1) });
    expect(selection!.host).toBe('b');
    expect((await store.getUsages(uuidFor('a'))).VCPU ?? 0).toBe(0);
    expect((await store.getUsages(uuidFor('b'))).VCPU).toBe(1);
    // What was counted on `a` in memory was undone (reloaded from the store).
    expect(s.host('a')!.free('VCPU')).toBe(8);
    expect(s.host('b')!.pluginData<{ placed: number }>('counting')).toEqual({ placed: 1 });

    // With one attempt allowed, the failure is the instance's: no valid host, the reason named.
    const one = await setup('placed-one', { consumers: [counting], filters: ['resources'], weighers: [{ name: 'free-ram', plugin: freeRam }], maxAttempts: 1 });
    const error = (await one.s.select({ flavor: small, instances: instances(1) }).catch((e: unknown) => e)) as NoValidHostError;
    expect(error).toBeInstanceOf(NoValidHostError);
    expect((error.details as { attempts: unknown }).attempts).toEqual([{ host: 'a', error: 'consumer "counting" hook placed failed: Plugin "counting" hook "placed" failed: lost track of a' }]);
    expect((await one.store.getUsages(uuidFor('a'))).VCPU ?? 0).toBe(0);
  });

  // Mutation seen caught: the thenable check removed from core's Dispatcher.callSync: the
  // rejections went unhandled (and the consumer's promise was taken as its host data, so `a`
  // stayed a candidate).
  it('async filter, weigher and consumer hooks whose promise rejects fail that host, with no unhandled rejection', async () => {
    const asyncFilter = definePlugin({
      name: 'async-filter',
      filter: () => ({ filter: ((host: HostState) => (host.name === 'a' ? Promise.reject(new Error('filter rejected')) : undefined)) as (host: HostState) => undefined }),
    });
    const asyncWeigher = definePlugin({
      name: 'async-weigher',
      weigher: () => ({ weigh: ((host: HostState) => (host.name === 'b' ? Promise.reject(new Error('weigher rejected')) : 1)) as (host: HostState) => number }),
    });
    const asyncConsumer = definePlugin({
      name: 'async-consumer',
      consumer: () => ({ reads: [], consume: ((_stats: unknown, host: HostState) => (host.name === 'c' ? Promise.reject(new Error('consume rejected')) : {})) as () => object }),
    });
    const { s } = await setup('async', {
      consumers: [asyncConsumer],
      filters: ['resources', asyncFilter],
      weighers: [{ name: 'async-weigher', plugin: asyncWeigher }],
    });
    const explanation = await s.explain({ flavor: small, instances: instances(1) });
    await settle();
    expect(unhandled).toEqual([]);
    const rejected = Object.fromEntries(explanation.rejected.map((r) => [r.host, [r.filter, r.reason]]));
    expect(rejected).toEqual({
      a: ['async-filter', 'filter "async-filter" hook filter failed: Plugin "async-filter" hook "filter" returned a promise; this hook must be synchronous'],
      b: ['weighers', 'weigher "async-weigher" hook weigh failed: Plugin "async-weigher" hook "weigh" returned a promise; this hook must be synchronous'],
      c: ['host-manager', 'consumer "async-consumer" hook consume failed: Plugin "async-consumer" hook "consume" returned a promise; this hook must be synchronous'],
    });
    // Only the hosts whose hook rejected are out: a hook's promise fails the host it was called for.
    await expect(s.select({ flavor: small, instances: instances(1) })).rejects.toBeInstanceOf(NoValidHostError);
    await settle();
    expect(unhandled).toEqual([]);
  });

  // Mutation seen caught: the scheduler runtime's dispatcher built without
  // `defaultTimeoutMs: hookTimeout` (core runtime.ts): createScheduler waited forever.
  it('scheduler.hookTimeout cuts off an async plugin factory that does not settle, naming plugin and hook', { timeout: 10_000 }, async () => {
    const hanging = definePlugin({ name: 'hanging', filter: () => new Promise<never>(() => undefined) });
    const { store, options } = await openStore('sqlite3', tmp.dir, 'timeout');
    closing.push(store);
    const config = schedulerConfig(options, tmp.dir, { filters: [hanging] });
    (config.scheduler as { hookTimeout: number }).hookTimeout = 100;
    const error = await createScheduler({ config, store }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERT_PLUGIN_HOOK_TIMEOUT', details: { plugin: 'hanging', hook: 'filter', timeoutMs: 100 } });
    // A factory that settles in time is waited for.
    const slow = definePlugin({ name: 'slow', filter: () => new Promise((resolve) => setTimeout(() => resolve({ filter: () => undefined }), 20)) });
    const ok = schedulerConfig(options, tmp.dir, { filters: [slow] });
    (ok.scheduler as { hookTimeout: number }).hookTimeout = 5_000;
    const s = await createScheduler({ config: ok, store });
    closing.push(s);
  });
});
