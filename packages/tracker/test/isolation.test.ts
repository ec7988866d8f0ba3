// Issue 11, point 9: a hook that busy-loops blocks the event loop, so in-process the
// dispatcher's `hookTimeout` timer never fires and the tracker hangs (the documented cost of
// the default, `isolation: inprocess`: shown only in a child process, below). Under
// `isolation: worker` the plugin runs in a worker thread: its `test` doing `for (;;) {}`
// refuses the claim within about hookTimeout, naming plugin and hook, the tracker's thread
// keeps running (a heartbeat timer is measured), the worker is terminated and the next call
// starts a fresh one with the plugin's view replayed, so the next claim is decided by the
// plugin again. A real tracker on a real SQLite file; the fixtures are path plugins
// (fixtures/isolation/), loaded in the worker by the same loader as in-process.
//
// The workers run packages/core/dist/isolation/worker.js, built before the tests run.
// The trade-off itself is shown in a child process (fixtures/isolation/child.mjs, built
// dist), SIGKILLed when done: in process the busy `test` stops the child's heartbeat timer
// for good and the claim never returns; in a worker the claim is refused at the timeout
// while the heartbeat goes on.
//
// Mutation seen caught: the timeout listener's `expired` not registered in `guarded`
// (packages/core/src/isolation/host.ts) — the worker is never terminated, so the busy one
// stays busy: the busy claim is still refused at hookTimeout (the parent's timer runs), but
// the next claim, which calls spin's `test` on the same worker, times out too ("a fresh
// worker answers" turned red). The replay removed from `live` (no `this.replay`): the
// replayed view assertion turned red (instances []).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { threadId } from 'node:worker_threads';
import { beforeAll, describe, expect, it } from 'vitest';
import { configFromObject, type ErtConfig } from '@ert/core';
import type { StoreOptions } from '@ert/store';
// @ts-expect-error plain JS fixture
import { counting } from './fixtures/plugins.mjs';
import { ok, refused, request, useBench, type Bench } from './harness.js';
import { buildPackage, REPO_ROOT } from '../../../test/build.js';

// The workers (and the child process below) run the built dist: build it first (incremental).
beforeAll(() => buildPackage(path.join(REPO_ROOT, 'packages', 'tracker')), 300_000);

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/isolation/${name}.mjs`, import.meta.url));
const SPIN = fixture('spin');
const THROWER = fixture('thrower');
const COUNTER = fixture('counter');
const HOOK_TIMEOUT_MS = 800;

function isolatedConfig(bench: Bench, store: StoreOptions, plugins: Record<string, object>, tracker: Record<string, unknown> = {}): ErtConfig {
  return configFromObject(
    {
      store,
      log: { level: 'silent' },
      tracker: {
        hostName: 'host1',
        root: bench.dir,
        resources: [
          counting({ name: 'cpu', resourceClass: 'VCPU', total: 16 }),
          counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 8192 }),
          { name: 'spin', use: SPIN },
          { name: 'thrower', use: THROWER },
          { name: 'counter', use: COUNTER },
        ],
        interval: '1h',
        hookTimeout: `${HOOK_TIMEOUT_MS}ms`,
        ...tracker,
      },
      plugins,
    },
    { configDir: bench.dir },
  );
}

/** The longest gap between ticks of a 10 ms timer while `fn` runs: how long the event loop was blocked. */
async function heartbeat<T>(fn: () => Promise<T>): Promise<{ result: T; maxGapMs: number; elapsedMs: number }> {
  let last = performance.now();
  let maxGapMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
  }, 10);
  const started = performance.now();
  try {
    const result = await fn();
    return { result, maxGapMs: Math.max(maxGapMs, performance.now() - last), elapsedMs: performance.now() - started };
  } finally {
    clearInterval(timer);
  }
}

describe('isolation: worker (SQLite)', () => {
  const bench = useBench('sqlite3');

  async function setup(plugins: Record<string, object>, tracker: Record<string, unknown> = {}) {
    const storeOptions = bench.storeOptions();
    const store = await bench.openStore(storeOptions);
    const t = await bench.tracker(isolatedConfig(bench, storeOptions, plugins, tracker), store);
    await t.sync();
    const stats = async (plugin: string) => (await store.readStats('host1'))[plugin]?.data as Record<string, unknown>;
    return { store, tracker: t, stats };
  }

  const WORKERS = { spin: { isolation: 'worker' }, thrower: { isolation: 'worker' }, counter: { isolation: 'worker', total: 8 } };

  it('a test() that busy-loops refuses the claim within about hookTimeout, naming plugin and hook; the tracker stays responsive and the next claim is decided by a fresh worker with the view replayed', async () => {
    const { store, tracker, stats } = await setup(WORKERS);
    // Each isolated plugin runs in a thread of its own, not this one.
    const first = await stats('spin');
    expect(first['threadId']).not.toBe(threadId);
    expect((await stats('counter'))['threadId']).not.toBe(first['threadId']);
    const held = ok(await tracker.claim(request(1, 128, { 'resources:CUSTOM_WORK': '2' })));
    expect((await stats('spin'))['instances']).toEqual([held.instance.uuid]);

    const busy = request(1, 128, { 'resources:CUSTOM_SPIN': '1' });
    const { result, maxGapMs, elapsedMs } = await heartbeat(() => tracker.claim(busy));
    expect(refused(result)).toEqual([{ plugin: 'spin', reason: `Plugin "spin" hook "test" did not finish within ${HOOK_TIMEOUT_MS} ms` }]);
    expect(elapsedMs).toBeGreaterThanOrEqual(HOOK_TIMEOUT_MS - 5);
    expect(elapsedMs).toBeLessThan(HOOK_TIMEOUT_MS + 1500);
    // The loop ran in the worker: this thread's timers kept firing (in-process it would be blocked for good).
    expect(maxGapMs).toBeLessThan(HOOK_TIMEOUT_MS / 2);
    expect(await store.getInstance(busy.uuid)).toBeUndefined();

    // The next claim (spin's test is asked again: a fresh worker answers) goes through.
    const next = ok(await tracker.claim(request(1, 128, { 'resources:CUSTOM_WORK': '3' })));
    const after = await stats('spin');
    expect(after['threadId']).not.toBe(first['threadId']);
    // Its view was replayed: the instance claimed before the timeout, the new one, one discover.
    expect(after['instances']).toEqual([held.instance.uuid, next.instance.uuid].sort());
    expect(after['discovered']).toBe(1);
    // The isolated counter still decides with its view: 5 of 8 used, 4 more do not fit.
    expect(refused(await tracker.claim(request(1, 128, { 'resources:CUSTOM_WORK': '4' })))).toEqual([
      { plugin: 'counter', reason: 'counter: needs 4 CUSTOM_WORK, 3 free' },
    ]);
    // A periodic update (discover, reset, re-add) works on the fresh worker too.
    const synced = await tracker.sync();
    expect(synced.problems).toEqual([]);
    expect((await stats('spin'))['instances']).toEqual([held.instance.uuid, next.instance.uuid].sort());
  });

  it('a test() that throws refuses the claim with its message, naming plugin and hook', async () => {
    const { tracker } = await setup(WORKERS);
    expect(refused(await tracker.claim(request(1, 128, { 'thrower:mode': 'throw' })))).toEqual([
      { plugin: 'thrower', reason: 'Plugin "thrower" hook "test" failed: thrower: refused by a throw' },
    ]);
    ok(await tracker.claim(request(1, 128)));
  });

  it.each([
    ['a function', 'function'],
    ['a Promise in a field', 'promise'],
  ])('a test() result holding %s cannot leave the worker: the claim is refused as an invalid result naming plugin and hook', async (_label, mode) => {
    const { tracker } = await setup(WORKERS);
    const reasons = refused(await tracker.claim(request(1, 128, { 'thrower:mode': mode })));
    expect(reasons).toEqual([
      { plugin: 'thrower', reason: expect.stringMatching(/^Plugin "thrower" hook "test" returned an invalid result: it cannot be passed out of the plugin's worker thread .*could not be cloned/) },
    ]);
    // Not a crash: the same worker answers the next claim.
    ok(await tracker.claim(request(1, 128)));
  });

  it('tracker.isolation: worker is the default of every plugin; plugins.<name>.isolation: inprocess keeps one in this thread', async () => {
    const { stats } = await setup(
      { cpu: { isolation: 'inprocess' }, mem: { isolation: 'inprocess' }, counter: { isolation: 'inprocess', total: 8 } },
      { isolation: 'worker' },
    );
    expect((await stats('spin'))['threadId']).not.toBe(threadId);
    expect((await stats('counter'))['threadId']).toBe(threadId);
  });

  it('without isolation config (the default, inprocess) the plugins run in the tracker thread', async () => {
    const { stats } = await setup({ counter: { total: 8 } });
    expect((await stats('spin'))['threadId']).toBe(threadId);
    expect((await stats('counter'))['threadId']).toBe(threadId);
  });
});

interface ChildLine {
  beat?: number;
  claiming?: number;
  outcome?: unknown;
  at?: number;
}

describe('the trade-off, in a child process (SQLite)', () => {
  const bench = useBench('sqlite3');
  const CHILD = fixture('child');

  it.each(['inprocess', 'worker'] as const)('isolation %s', async (isolation) => {
    const child = spawn(process.execPath, [CHILD, JSON.stringify({ db: path.join(bench.dir, 'child.db'), root: bench.dir, isolation })], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: ChildLine[] = [];
    let stderr = '';
    let buffer = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      const parts = buffer.split('\n');
      buffer = parts.pop()!;
      for (const part of parts) if (part.trim() !== '') lines.push(JSON.parse(part) as ChildLine);
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    try {
      await expect.poll(() => lines.some((l) => l.claiming !== undefined), { timeout: 20_000, interval: 50 }).toBe(true);
      const claiming = lines.find((l) => l.claiming !== undefined)!.claiming!;
      // Five timeouts (300 ms each) later:
      await new Promise((r) => setTimeout(r, 1500));
      const outcome = lines.find((l) => l.outcome !== undefined);
      const lateBeats = lines.filter((l) => l.beat !== undefined && l.beat > claiming + 200);
      if (isolation === 'inprocess') {
        // The documented cost of the default: the loop holds the only thread, the dispatcher's
        // 300 ms timer never fires, the claim never ends and the timers of the process stop.
        expect(outcome).toBeUndefined();
        expect(lateBeats).toEqual([]);
      } else {
        expect(outcome).toEqual({ outcome: [{ plugin: 'spin', reason: 'Plugin "spin" hook "test" did not finish within 300 ms' }], at: expect.any(Number) });
        expect(outcome!.at! - claiming).toBeLessThan(300 + 1000);
        expect(lateBeats.length).toBeGreaterThan(0);
      }
    } finally {
      child.kill('SIGKILL');
      const { code, signal } = await exited;
      if (isolation === 'worker') expect({ code, signal, stderr }).toEqual({ code: 0, signal: null, stderr: '' });
    }
  }, 40_000);
});
