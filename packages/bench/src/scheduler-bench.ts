/**
 * Scheduler benchmark: `npm run bench -- scheduler [--hosts N] [--decisions D] [--strategy indexed|full-scan]
 * [--plugins vcpu,memory,...] [--concurrency C] [--seed S] [--profile FILE] [--heap-only] [--json]
 * [--workload flavors|mixed] [--new-share F] [--rates R1,R2,...]`.
 *
 * `--rates` runs open loop instead (no coordinated omission): for each rate R, `--decisions`
 * requests arrive at fixed intervals of 1/R s whether or not earlier ones are answered, each
 * timed from its intended arrival to its durable claim (so time spent queued behind slower
 * decisions counts); every decision counts (no warm-up), failures apart. Reports per rate the
 * throughput achieved, p50/p99/p99.9, how many requests were still unanswered when the last
 * one arrived, and the highest rate held with p99 <= 5 ms (over the whole run); and, apart,
 * the p99 of the requests that arrived after the first second (`p99AfterFirstSecondMs`: the
 * fresh scheduler's start and the queue behind it left out).
 *
 * `--workload mixed` (./workload.ts) sends a realistic mix instead of five fixed flavors: a
 * catalogue of 30+ flavors, every plugin's extra specs, server groups, host hints, custom
 * sizes, and requests built to fail; every decision is timed (no warm-up is hidden), first-seen
 * shapes are reported apart, failures are counted apart (a request built to fail that is
 * placed, or usage over capacity at the end, is a wrong answer: exit 1); `slowest` lists the
 * ten slowest placed decisions with their kind, their number in the run (`decision`, from 0)
 * and the time of their durable claims (`claimMs`); `schedulerP50Ms` / `schedulerP99Ms` (and the
 * first-seen `newShapeScheduler*`) are the decisions without their durable claims;
 * `failedP50Ms` / `failedMaxMs` time the failed requests (NoValidHost, with its explanation);
 * `gcMinorCount`, `gcMinorMs`, `gcMajorCount`, `gcMajorMs` and `gcMaxPauseMs` are the garbage
 * collector's pauses during the timed decisions (scavenges, mark-compacts, the longest).
 * With --concurrency C > 1, C clients send requests at once and the scheduler overlaps claims.
 * With --profile FILE, a V8 CPU profile of the timed decisions only is written to FILE (.cpuprofile):
 * the steady phase of `flavors`, every decision of `mixed`, the last rate's run in open loop.
 *
 * Builds a fleet of N hosts through the real discovery (the tracker's `buildFleet` over the host
 * profiles in config/hosts/* with the five first-party plugins), imports it into a fresh SQLite
 * file, creates a scheduler from config/ert.config.yaml (all five plugins as consumers, filters
 * and weighers where they provide them, every built-in filter, three weighers) and makes D
 * decisions, one instance each, drawn from a seeded mix of flavors. Every decision includes the
 * durable claim (`writeAllocations` with the instance record). Prints decisions per second and
 * latency percentiles, plus the heap a loaded scheduler takes per host (its host states and
 * the memos' arrays it allocates at load; measured with `process.memoryUsage().heapUsed`
 * after GC; the script re-runs itself with --expose-gc).
 *
 * Phases: a warm-up (one decision per flavor of the mix, untimed in the figures: each is the
 * first ranking of its request, a full scan, reported apart as `warmupMs`), then the steady
 * state: D decisions, each timed from the request to its durable claim. `loadAverage` is the
 * machine's 1-minute load average before and after the steady phase (figures on a loaded
 * machine are noisy).
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { constants, performance, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { seededRandom } from '@ert/core';
import type { ErtConfig } from '@ert/core';
import { createScheduler, NoValidHostError } from '@ert/scheduler';
import type { RankingStrategy, Scheduler } from '@ert/scheduler';
import { createStore } from '@ert/store';
import type { Store } from '@ert/store';
import { buildFleet } from '@ert/tracker';
import { benchConfig, FIRST_PARTY, flavorOf, overCapacityCount, percentile, repoRoot, round, WORKLOAD } from './scheduler-common.js';
import { Workload } from './workload.js';


interface Args {
  hosts: number;
  decisions: number;
  strategy: RankingStrategy;
  heapOnly: boolean;
  json: boolean;
  seed: number;
  /** First-party plugins to use (default all five); the others are left out of the config. */
  plugins: string[];
  /** Clients sending requests at once (> 1 turns on the scheduler's overlapClaims). */
  concurrency: number;
  /** Where to write a CPU profile of the steady phase (none when undefined). */
  profile: string | undefined;
  /** `flavors`: five fixed flavors, first decision of each untimed; `mixed`: the realistic workload (workload.ts), every decision timed. */
  workload: 'flavors' | 'mixed';
  /** With `mixed`: the share of requests of a never-seen shape. */
  newShare: number;
  /** Open loop at these offered rates (requests/s), one run each; closed loop when empty. */
  rates: number[];
}


function parseArgs(argv: string[]): Args {
  const args: Args = { hosts: 10_000, decisions: 5_000, strategy: 'indexed', heapOnly: false, json: false, seed: 42, plugins: FIRST_PARTY, concurrency: 1, profile: undefined, workload: 'flavors', newShare: 0.2, rates: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`scheduler-bench: ${arg} needs a value`);
      return v;
    };
    const positive = (v: string): number => {
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < 1) throw new Error(`scheduler-bench: ${arg} must be a positive integer, got "${v}"`);
      return n;
    };
    if (arg === '--hosts') args.hosts = positive(value());
    else if (arg === '--decisions') args.decisions = positive(value());
    else if (arg === '--seed') args.seed = positive(value());
    else if (arg === '--concurrency') args.concurrency = positive(value());
    else if (arg === '--profile') args.profile = path.resolve(value());
    else if (arg === '--strategy') {
      const v = value();
      if (v !== 'indexed' && v !== 'full-scan') throw new Error(`scheduler-bench: --strategy must be indexed or full-scan, got "${v}"`);
      args.strategy = v;
    } else if (arg === '--plugins') {
      args.plugins = value().split(',').filter((p) => p.length > 0);
      const unknown = args.plugins.filter((p) => !FIRST_PARTY.includes(p));
      if (unknown.length > 0) throw new Error(`scheduler-bench: --plugins takes ${FIRST_PARTY.join(',')}, got "${unknown.join(',')}"`);
    } else if (arg === '--workload') {
      const v = value();
      if (v !== 'flavors' && v !== 'mixed') throw new Error(`scheduler-bench: --workload must be flavors or mixed, got "${v}"`);
      args.workload = v;
    } else if (arg === '--new-share') {
      const v = Number(value());
      if (!(v >= 0 && v <= 1)) throw new Error(`scheduler-bench: --new-share must be a number from 0 to 1`);
      args.newShare = v;
    } else if (arg === '--rates') {
      args.rates = value()
        .split(',')
        .map((r) => positive(r.trim()));
    } else if (arg === '--heap-only') args.heapOnly = true;
    else if (arg === '--json') args.json = true;
    else if (arg === '--help' || arg === '-h') {
      console.log('usage: npm run bench -- scheduler [--hosts N] [--decisions D] [--strategy indexed|full-scan] [--plugins vcpu,memory,...] [--concurrency C] [--seed S] [--profile FILE] [--heap-only] [--json] [--workload flavors|mixed] [--new-share F] [--rates R1,R2,...]');
      process.exit(0);
    } else throw new Error(`scheduler-bench: unknown option "${arg}" (see --help)`);
  }
  return args;
}

/** Start a V8 CPU profile when `file` is given; the returned function stops it and writes it to `file` (.cpuprofile). */
async function startProfile(file: string | undefined): Promise<() => Promise<void>> {
  if (file === undefined) return async () => {};
  const profiler = new Session();
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.start');
  return async () => {
    const { profile } = await profiler.post('Profiler.stop');
    writeFileSync(file, JSON.stringify(profile));
    profiler.disconnect();
  };
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('scheduler-bench: run with --expose-gc');
  for (let i = 0; i < 3; i++) collect();
}

/**
 * Heap taken by a loaded scheduler (its host states): heapUsed after GC with
 * it minus without it; and apart, the typed arrays' backing stores (`arrayBuffers`: the host
 * summaries, versions, the memos' arrays), which heapUsed does not count. The scheduler is
 * closed and dropped before this returns: kept alive, it made every collection of the timed
 * decisions after it (with their own scheduler) mark a second fleet's host states.
 */
async function measureHeap(config: ErtConfig, store: Store, hosts: number): Promise<{ bytesPerHost: number; arrayBytesPerHost: number; loadMs: number }> {
  gc();
  const before = process.memoryUsage();
  const started = performance.now();
  let scheduler: Scheduler | undefined = await createScheduler({ config, store });
  const loadMs = performance.now() - started;
  gc();
  const after = process.memoryUsage();
  await scheduler.close();
  scheduler = undefined;
  gc();
  return { bytesPerHost: (after.heapUsed - before.heapUsed) / hosts, arrayBytesPerHost: (after.arrayBuffers - before.arrayBuffers) / hosts, loadMs };
}

/**
 * The garbage collector's pauses from now until `stop()`: count and milliseconds of minor
 * (scavenge) and major (mark-compact) collections, and the longest pause.
 */
function watchGc(): { stop(): { minor: { count: number; ms: number }; major: { count: number; ms: number }; maxMs: number } } {
  const totals = { minor: { count: 0, ms: 0 }, major: { count: 0, ms: 0 }, maxMs: 0 };
  const add = (entry: PerformanceEntry): void => {
    const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
    const into = kind === constants.NODE_PERFORMANCE_GC_MAJOR ? totals.major : kind === constants.NODE_PERFORMANCE_GC_MINOR ? totals.minor : undefined;
    if (into !== undefined) {
      into.count++;
      into.ms += entry.duration;
    }
    totals.maxMs = Math.max(totals.maxMs, entry.duration);
  };
  const observer = new PerformanceObserver((list) => list.getEntries().forEach(add));
  observer.observe({ entryTypes: ['gc'] });
  return {
    stop() {
      // Entries are delivered asynchronously: those still queued are taken here.
      observer.takeRecords().forEach(add);
      observer.disconnect();
      return totals;
    },
  };
}

/** `store`, with each `writeAllocations` (a durable claim) timed and its milliseconds given to `took`. */
function timingWrites(store: Store, took: (ms: number) => void): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'writeAllocations') {
        return async (...callArgs: Parameters<Store['writeAllocations']>) => {
          const t0 = performance.now();
          try {
            return await target.writeAllocations(...callArgs);
          } finally {
            took(performance.now() - t0);
          }
        };
      }
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * The realistic workload (workload.ts): one client, every decision timed from the request to
 * its durable claim, first-seen shapes apart, failures apart, and a check of the answers:
 * a request built to fail must fail, and no provider may end over capacity.
 */
async function runMixed(config: ErtConfig, store: Store, args: Args): Promise<Record<string, unknown>> {
  const random = seededRandom(args.seed);
  const workload = new Workload({ random, plugins: args.plugins, newShapeShare: args.newShare });
  // The durable claims are timed apart, so the scheduler's own part of each decision shows.
  let claimMs = 0;
  const timedStore = timingWrites(store, (ms) => (claimMs += ms));
  const scheduler = await createScheduler({ config, store: timedStore, strategy: args.strategy, random });
  const seen = new Set<string>();
  const all: number[] = [];
  const fresh: number[] = [];
  /** Each placed decision minus its durable claims (refresh, ranking, fit, bookkeeping). */
  const decide: number[] = [];
  const decideFresh: number[] = [];
  const failedByKind: Record<string, number> = {};
  let failed = 0;
  let failedAsBuilt = 0;
  let wrong = 0;
  let newShapes = 0;
  // The slowest placed decisions, with what they were (where the tail comes from).
  const SLOWEST = 10;
  const slowest: Array<{ ms: number; claimMs: number; decision: number; kind: string; flavor: string; firstSeen: boolean }> = [];
  /** Requests that failed (NoValidHost), timed too: an operator waits for that answer as well. */
  const failedMs: number[] = [];
  const gcPauses = watchGc();
  const stopProfile = await startProfile(args.profile);
  const loadBefore = loadavg()[0]!;
  const begin = performance.now();
  for (let i = 0; i < args.decisions; i++) {
    const uuid = randomUUID();
    const request = workload.next(uuid);
    const isNew = !seen.has(request.shape);
    seen.add(request.shape);
    if (isNew) newShapes++;
    const t0 = performance.now();
    const claimsBefore = claimMs;
    try {
      await scheduler.select({ flavor: request.flavor, ...(request.hints ? { hints: request.hints } : {}), instances: [{ uuid, projectId: 'bench', userId: 'bench' }] });
      const ms = performance.now() - t0;
      all.push(ms);
      const claimed = claimMs - claimsBefore;
      decide.push(ms - claimed);
      if (isNew) decideFresh.push(ms - claimed);
      slowest.push({ ms: round(ms), claimMs: round(claimed), decision: i, kind: request.kind, flavor: request.flavor.name, firstSeen: isNew });
      if (slowest.length > SLOWEST * 4) slowest.sort((a, b) => b.ms - a.ms).splice(SLOWEST);
      if (isNew) fresh.push(ms);
      workload.placed(uuid);
      if (request.mustFail !== undefined) wrong++;
    } catch (error) {
      if (!(error instanceof NoValidHostError)) throw error;
      failedMs.push(performance.now() - t0);
      failed++;
      failedByKind[request.kind] = (failedByKind[request.kind] ?? 0) + 1;
      if (request.mustFail !== undefined) failedAsBuilt++;
    }
  }
  const totalMs = performance.now() - begin;
  const loadAfter = loadavg()[0]!;
  const gc = gcPauses.stop();
  await stopProfile();
  await scheduler.close();
  // Correctness at the end: nothing over capacity anywhere.
  const overCapacity = await overCapacityCount(store);
  wrong += overCapacity;
  const sorted = Float64Array.from(all).sort();
  const sortedFresh = Float64Array.from(fresh).sort();
  return {
    workload: 'mixed',
    decisions: args.decisions,
    placed: all.length,
    failed,
    failedAsBuilt,
    failedByKind,
    wrongAnswers: wrong,
    overCapacity,
    flavorsInCatalogue: workload.flavors.length,
    newShareObserved: round(newShapes / args.decisions, 3),
    // Successful decisions only: a failure is not a decision made.
    decisionsPerSecond: round((all.length / totalMs) * 1000, 0),
    p50Ms: round(percentile(sorted, 50)),
    p99Ms: round(percentile(sorted, 99)),
    p999Ms: round(percentile(sorted, 99.9)),
    maxMs: round(sorted[sorted.length - 1] ?? NaN),
    newShapeP50Ms: round(percentile(sortedFresh, 50)),
    newShapeP99Ms: round(percentile(sortedFresh, 99)),
    // The same without the durable claims (the store's writes, timed apart).
    ...(() => {
      const d = Float64Array.from(decide).sort();
      const f = Float64Array.from(decideFresh).sort();
      return { schedulerP50Ms: round(percentile(d, 50)), schedulerP99Ms: round(percentile(d, 99)), newShapeSchedulerP50Ms: round(percentile(f, 50)), newShapeSchedulerP99Ms: round(percentile(f, 99)) };
    })(),
    ...(() => {
      const f = Float64Array.from(failedMs).sort();
      return { failedP50Ms: round(percentile(f, 50)), failedMaxMs: round(f[f.length - 1] ?? NaN) };
    })(),
    // The collector's pauses in the timed phase: scavenges (minor) and mark-compacts (major).
    gcMinorCount: gc.minor.count,
    gcMinorMs: round(gc.minor.ms, 0),
    gcMajorCount: gc.major.count,
    gcMajorMs: round(gc.major.ms, 0),
    gcMaxPauseMs: round(gc.maxMs),
    loadAverage: [round(loadBefore, 2), round(loadAfter, 2)],
    plugins: args.plugins,
    slowest: slowest.sort((a, b) => b.ms - a.ms).slice(0, SLOWEST),
  };
}

/** One open-loop run's figures. */
interface OpenLoopRun {
  offeredPerSecond: number;
  decisions: number;
  placed: number;
  failed: number;
  wrongAnswers: number;
  achievedPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  /**
   * p99 of the requests that arrived after the first second: the fresh scheduler's start (its
   * first rankings, the JIT) and the queue behind it left out. Null when the run is that short.
   */
  p99AfterFirstSecondMs: number | null;
  /** Requests not yet answered when the last one arrived (a backlog that grows: not held). */
  backlogAtLastArrival: number;
  held: boolean;
  loadAverage: number[];
}

/**
 * Open loop: `decisions` requests arrive every 1/rate s, each sent at its intended time without
 * waiting for earlier answers (the scheduler serialises decisions and overlaps their claims),
 * each timed from its intended arrival to its durable claim. A fresh scheduler per rate, over
 * the same store (earlier rates' instances stay placed, as in a filling cloud).
 */
async function runOpenLoop(config: ErtConfig, store: Store, args: Args, rate: number): Promise<OpenLoopRun> {
  const random = seededRandom(args.seed + rate);
  const mixed = args.workload === 'mixed' ? new Workload({ random, plugins: args.plugins, newShapeShare: args.newShare }) : undefined;
  const flavors = WORKLOAD.filter((f) => f.needs === undefined || args.plugins.includes(f.needs)).map(({ needs: _needs, ...flavor }) => flavor);
  const scheduler = await createScheduler({ config, store, strategy: args.strategy, random, overlapClaims: true });
  const latencies: number[] = [];
  // Those of the requests that arrived after the first second.
  const afterFirstSecond: number[] = [];
  let failed = 0;
  let wrong = 0;
  let answered = 0;
  let backlogAtLastArrival = 0;
  const interval = 1000 / rate;
  const pending: Array<Promise<void>> = [];
  const loadBefore = loadavg()[0]!;
  const begin = performance.now();
  for (let i = 0; i < args.decisions; i++) {
    const due = begin + i * interval;
    // Wait for the arrival time, letting decisions in flight run meanwhile.
    while (performance.now() < due) await new Promise<void>((resolve) => setImmediate(resolve));
    const uuid = randomUUID();
    const request = mixed?.next(uuid);
    const flavor = request?.flavor ?? flavors[Math.floor(random() * flavors.length)]!;
    pending.push(
      scheduler
        .select({ flavor, ...(request?.hints ? { hints: request.hints } : {}), instances: [{ uuid, projectId: 'bench', userId: 'bench' }] })
        .then(
          () => {
            const ms = performance.now() - due;
            latencies.push(ms);
            if (i >= rate) afterFirstSecond.push(ms);
            mixed?.placed(uuid);
            if (request?.mustFail !== undefined) wrong++;
          },
          (error: unknown) => {
            if (!(error instanceof NoValidHostError)) throw error;
            failed++;
          },
        )
        .finally(() => answered++),
    );
    if (i === args.decisions - 1) backlogAtLastArrival = i + 1 - answered;
  }
  await Promise.all(pending);
  const totalMs = performance.now() - begin;
  const loadAfter = loadavg()[0]!;
  await scheduler.close();
  const sorted = Float64Array.from(latencies).sort();
  const p99 = percentile(sorted, 99);
  const later = Float64Array.from(afterFirstSecond).sort();
  return {
    offeredPerSecond: rate,
    decisions: args.decisions,
    placed: latencies.length,
    failed,
    wrongAnswers: wrong,
    achievedPerSecond: round((latencies.length / totalMs) * 1000, 0),
    p50Ms: round(percentile(sorted, 50)),
    p99Ms: round(p99),
    p999Ms: round(percentile(sorted, 99.9)),
    maxMs: round(sorted[sorted.length - 1] ?? NaN),
    p99AfterFirstSecondMs: later.length > 0 ? round(percentile(later, 99)) : null,
    backlogAtLastArrival,
    held: p99 <= 5,
    loadAverage: [round(loadBefore, 2), round(loadAfter, 2)],
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const work = mkdtempSync(path.join(tmpdir(), 'ert-sched-bench-'));
  try {
    const config = await benchConfig({ client: 'sqlite3', connection: path.join(work, 'bench.db') }, args.plugins);
    // Without consumers (and the plugin filters and weighers that need their data): the heap
    // of the host states alone, beyond what plugins keep per host.
    const plugins = new Set(config.scheduler.consumers.map((c) => c.name));
    const bare: ErtConfig = {
      ...config,
      scheduler: {
        ...config.scheduler,
        consumers: [],
        filters: config.scheduler.filters.filter((f) => !plugins.has(f.name)),
        weighers: [],
      },
    };

    let started = performance.now();
    let fleet = await buildFleet({ config, profilesDir: path.join(repoRoot, 'config', 'hosts'), hosts: args.hosts, seed: args.seed });
    const buildMs = performance.now() - started;
    const store = await createStore(config.store);
    await store.migrate();
    started = performance.now();
    await store.importHosts(fleet);
    const importMs = performance.now() - started;
    const providers = fleet.reduce((n, h) => n + h.providers.length, 0);
    fleet = [];

    const bareHeap = await measureHeap(bare, store, args.hosts);
    const { bytesPerHost, arrayBytesPerHost, loadMs } = await measureHeap(config, store, args.hosts);

    const result: Record<string, unknown> = {
      hosts: args.hosts,
      providers,
      strategy: args.strategy,
      buildFleetMs: round(buildMs, 0),
      importMs: round(importMs, 0),
      loadMs: round(loadMs, 0),
      heapBytesPerHost: Math.round(bytesPerHost),
      heapBytesPerHostWithoutPluginData: Math.round(bareHeap.bytesPerHost),
      // Typed arrays (host summaries, versions) live outside the heap: counted apart.
      arrayBufferBytesPerHost: Math.round(arrayBytesPerHost),
    };
    if (!args.heapOnly && args.rates.length > 0) {
      const runs: OpenLoopRun[] = [];
      for (const [k, rate] of args.rates.entries()) {
        // With --profile, the last rate is profiled: the process is warmest by then.
        const stopProfile = await startProfile(k === args.rates.length - 1 ? args.profile : undefined);
        runs.push(await runOpenLoop(config, store, args, rate));
        await stopProfile();
      }
      const held = runs.filter((r) => r.held).map((r) => r.offeredPerSecond);
      const overCapacity = await overCapacityCount(store);
      Object.assign(result, {
        mode: 'open loop',
        workload: args.workload,
        openLoop: runs,
        highestRateHeldP99Under5Ms: held.length > 0 ? Math.max(...held) : null,
        overCapacity,
        wrongAnswers: runs.reduce((n, r) => n + r.wrongAnswers, 0) + overCapacity,
        plugins: args.plugins,
      });
    } else if (!args.heapOnly && args.workload === 'mixed') {
      Object.assign(result, await runMixed(config, store, args));
    } else if (!args.heapOnly) {
      const random = seededRandom(args.seed);
      const workload = WORKLOAD.filter((f) => f.needs === undefined || args.plugins.includes(f.needs));
      // Time the durable claims apart, to tell the store's part of a decision from the scheduler's.
      const claimDurations: number[] = [];
      const timedStore = timingWrites(store, (ms) => claimDurations.push(ms));
      const overlapClaims = args.concurrency > 1;
      const timed = await createScheduler({ config, store: timedStore, strategy: args.strategy, random, overlapClaims });
      const instance = () => [{ uuid: randomUUID(), projectId: 'bench', userId: 'bench' }];
      // Warm-up: the first decision of each flavor ranks every host once (a new request has no
      // memo yet); it is reported apart, not counted in the steady-state figures.
      const warmupMs: Record<string, number> = {};
      for (const entry of workload) {
        const t0 = performance.now();
        await timed.select({ flavor: flavorOf(entry), instances: instance() });
        warmupMs[entry.name] = round(performance.now() - t0, 1);
      }
      claimDurations.length = 0;
      const decides = new Float64Array(args.decisions);
      const latencies = new Float64Array(args.decisions);
      let failed = 0;
      let next = 0;
      // `concurrency` clients, each sending its next request when the previous one is answered.
      const client = async (): Promise<void> => {
        while (next < args.decisions) {
          const i = next++;
          const flavor = flavorOf(workload[Math.floor(random() * workload.length)]!);
          const claimsBefore = claimDurations.length;
          const t0 = performance.now();
          try {
            await timed.select({ flavor, instances: instance() });
          } catch (error) {
            if (!(error instanceof NoValidHostError)) throw error;
            failed++;
          }
          latencies[i] = performance.now() - t0;
          if (!overlapClaims) decides[i] = latencies[i]! - claimDurations.slice(claimsBefore).reduce((a, b) => a + b, 0);
        }
      };
      const stopProfile = await startProfile(args.profile);
      const loadBefore = loadavg()[0]!;
      const begin = performance.now();
      await Promise.all(Array.from({ length: args.concurrency }, client));
      const totalMs = performance.now() - begin;
      const loadAfter = loadavg()[0]!;
      await stopProfile();
      await timed.close();
      const sorted = latencies.slice().sort();
      const sortedClaims = Float64Array.from(claimDurations).sort();
      Object.assign(result, {
        decisions: args.decisions,
        concurrency: args.concurrency,
        failed,
        decisionsPerSecond: round((args.decisions / totalMs) * 1000, 0),
        p50Ms: round(percentile(sorted, 50)),
        p90Ms: round(percentile(sorted, 90)),
        p99Ms: round(percentile(sorted, 99)),
        maxMs: round(sorted[sorted.length - 1]!),
        // The store's durable claims (writeAllocations calls) on their own.
        claimP50Ms: round(percentile(sortedClaims, 50)),
        claimP99Ms: round(percentile(sortedClaims, 99)),
        // One client: each decision minus its claims (refresh, ranking, bookkeeping).
        ...(overlapClaims
          ? {}
          : (() => {
              const sortedDecides = decides.slice().sort();
              return { schedulerP50Ms: round(percentile(sortedDecides, 50)), schedulerP99Ms: round(percentile(sortedDecides, 99)) };
            })()),
        warmupMs,
        loadAverage: [round(loadBefore, 2), round(loadAfter, 2)],
        // The warm-up decisions (kept under this older name too).
        firstDecisionPerFlavorMs: Object.values(warmupMs),
        flavors: workload.map((f) => f.name),
        plugins: args.plugins,
        weighers: config.scheduler.weighers.map((w) => `${w.name}x${w.multiplier}`),
      });
    }
    await store.close();
    if (args.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else for (const [key, value] of Object.entries(result)) process.stdout.write(`${key.padEnd(36)} ${JSON.stringify(value)}\n`);
    if (typeof result['wrongAnswers'] === 'number' && result['wrongAnswers'] > 0) process.exitCode = 1;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (!(globalThis as { gc?: unknown }).gc) {
  // Heap figures need a real GC between measurements: re-run this script with --expose-gc.
  const child = spawnSync(process.execPath, [...process.execArgv, '--expose-gc', fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(child.status ?? 1);
} else {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
