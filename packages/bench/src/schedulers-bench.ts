/**
 * Several schedulers on one PostgreSQL (issue 15): `npm run bench -- schedulers
 * [--processes 1,2,4] [--hosts N] [--decisions D] [--pg URL] [--seed S] [--json]`.
 *
 * Builds a fleet of N hosts through the real discovery (as `npm run bench -- scheduler`), then,
 * for each process count P: imports it into a fresh schema on the PostgreSQL server of `--pg`
 * (default $ERT_TEST_PG_URL), forks P scheduler processes on it (config/ert.config.yaml, the
 * five first-party plugins), and lets them make D decisions together, D / P each, one client
 * per process, each decision ending with its durable claim. The processes decide from their
 * own host states, refreshed from the store every `scheduler.refreshInterval` (1 s): a claim
 * another process took first is refused by the store, and the scheduler places on another
 * host. Every process first makes one untimed decision per flavor (its first rankings), then
 * all start at once. Reports per P: placed decisions per second over the whole run (first
 * start to last end), p50/p99 of a decision, and what was refused. Checked at the end: no
 * provider over capacity, and every placed instance's claim is in the store (else exit 1).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { seededRandom } from '@ert/core';
import type { ErtConfig } from '@ert/core';
import { createScheduler, NoValidHostError } from '@ert/scheduler';
import { createStore, dropPostgresSchema } from '@ert/store';
import { buildFleet } from '@ert/tracker';
import { benchConfig, flavorOf, overCapacityCount, percentile, repoRoot, round, WORKLOAD } from './scheduler-common.js';

const USAGE = 'usage: npm run bench -- schedulers [--processes 1,2,4] [--hosts N] [--decisions D] [--pg URL] [--seed S] [--json]';

interface Args {
  processes: number[];
  hosts: number;
  decisions: number;
  pg: string | undefined;
  seed: number;
  json: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { processes: [1, 2, 4], hosts: 10_000, decisions: 2_000, pg: process.env['ERT_TEST_PG_URL'], seed: 42, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const positive = (v: string | undefined): number => {
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < 1) throw new Error(`schedulers-bench: ${arg} must be a positive integer, got "${String(v)}"`);
      return n;
    };
    if (arg === '--processes') args.processes = (argv[++i] ?? '').split(',').map((p) => positive(p.trim()));
    else if (arg === '--hosts') args.hosts = positive(argv[++i]);
    else if (arg === '--decisions') args.decisions = positive(argv[++i]);
    else if (arg === '--seed') args.seed = positive(argv[++i]);
    else if (arg === '--pg') args.pg = argv[++i];
    else if (arg === '--json') args.json = true;
    else if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`schedulers-bench: unknown option "${arg}" (see --help)`);
  }
  if (!args.pg) throw new Error('schedulers-bench: needs a PostgreSQL server: --pg URL (or ERT_TEST_PG_URL)');
  return args;
}

/** The config every process uses: the five first-party plugins, the store on `schema`. */
function configOn(pg: string, schema: string): Promise<ErtConfig> {
  return benchConfig({ client: 'pg', connection: pg, schema });
}

/** What a scheduler process reports when it is done. */
interface ChildResult {
  startedAt: number;
  endedAt: number;
  latencies: number[];
  failed: number;
  placed: string[];
}

type ToChild = { go: true };
type FromChild = { ready: true } | { done: ChildResult } | { error: string };

/** A scheduler process: loads, makes one decision per flavor, says ready, waits for go, decides, reports. */
async function child(pg: string, schema: string, decisions: number, seed: number): Promise<void> {
  const send = (message: FromChild) => process.send!(message);
  const config = await configOn(pg, schema);
  const store = await createStore(config.store);
  const random = seededRandom(seed);
  const scheduler = await createScheduler({ config, store, random });
  const placed: string[] = [];
  const select = async (entry: (typeof WORKLOAD)[number]): Promise<boolean> => {
    const uuid = randomUUID();
    try {
      await scheduler.select({ flavor: flavorOf(entry), instances: [{ uuid, projectId: 'bench', userId: 'bench' }] });
      placed.push(uuid);
      return true;
    } catch (error) {
      if (error instanceof NoValidHostError) return false;
      throw error;
    }
  };
  for (const entry of WORKLOAD) await select(entry);
  await new Promise<void>((resolve) => {
    process.once('message', (message: ToChild) => {
      if (message.go) resolve();
    });
    send({ ready: true });
  });
  const latencies: number[] = [];
  let failed = 0;
  const startedAt = performance.timeOrigin + performance.now();
  for (let i = 0; i < decisions; i++) {
    const t0 = performance.now();
    const ok = await select(WORKLOAD[Math.floor(random() * WORKLOAD.length)]!);
    if (ok) latencies.push(performance.now() - t0);
    else failed++;
  }
  const endedAt = performance.timeOrigin + performance.now();
  await scheduler.close();
  await store.close();
  send({ done: { startedAt, endedAt, latencies, failed, placed } });
}

/** Runs P scheduler processes on a fresh schema holding `fleet`; their figures and the checks. */
async function run(args: Args, fleet: Awaited<ReturnType<typeof buildFleet>>, processes: number): Promise<Record<string, unknown>> {
  const schema = `ert_schedulers_bench_${process.pid}_${processes}`;
  const config = await configOn(args.pg!, schema);
  const store = await createStore(config.store);
  const children: ChildProcess[] = [];
  try {
    await store.migrate();
    await store.importHosts(fleet);
    const script = fileURLToPath(import.meta.url);
    const share = Math.ceil(args.decisions / processes);
    const results: Array<Promise<ChildResult>> = [];
    const ready: Array<Promise<void>> = [];
    for (let k = 0; k < processes; k++) {
      const proc = fork(script, ['--child', args.pg!, schema, String(share), String(args.seed + k)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push(proc);
      let markReady: () => void = () => undefined;
      ready.push(new Promise<void>((resolve) => (markReady = resolve)));
      results.push(
        new Promise<ChildResult>((resolve, reject) => {
          proc.on('message', (message: FromChild) => {
            if ('ready' in message) markReady();
            else if ('done' in message) resolve(message.done);
            else reject(new Error(`scheduler process ${k}: ${message.error}`));
          });
          proc.on('exit', (code) => reject(new Error(`scheduler process ${k} exited (${String(code)}) before reporting`)));
        }),
      );
    }
    await Promise.race([Promise.all(ready), Promise.all(results)]);
    const loadBefore = loadavg()[0]!;
    for (const proc of children) proc.send({ go: true } satisfies ToChild);
    const done = await Promise.all(results);
    const loadAfter = loadavg()[0]!;

    const latencies = Float64Array.from(done.flatMap((d) => d.latencies)).sort();
    const seconds = (Math.max(...done.map((d) => d.endedAt)) - Math.min(...done.map((d) => d.startedAt))) / 1000;
    const placed = done.flatMap((d) => d.placed);
    let missingClaims = 0;
    for (const uuid of placed) if ((await store.getAllocations(uuid)).allocations.length === 0) missingClaims++;
    const overCapacity = await overCapacityCount(store);
    return {
      processes,
      decisions: share * processes,
      placed: latencies.length,
      failed: done.reduce((n, d) => n + d.failed, 0),
      decisionsPerSecond: round(latencies.length / seconds, 0),
      // How long every process was deciding at once (the latest start to the earliest end).
      overlapSeconds: round((Math.min(...done.map((d) => d.endedAt)) - Math.max(...done.map((d) => d.startedAt))) / 1000),
      p50Ms: round(percentile(latencies, 50)),
      p99Ms: round(percentile(latencies, 99)),
      overCapacity,
      missingClaims,
      wrongAnswers: overCapacity + missingClaims,
      loadAverage: [round(loadBefore, 2), round(loadAfter, 2)],
    };
  } finally {
    for (const proc of children) if (proc.exitCode === null) proc.kill();
    await store.close();
    await dropPostgresSchema(args.pg!, schema);
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const config = await configOn(args.pg!, 'unused');
  const fleet = await buildFleet({ config, profilesDir: path.join(repoRoot, 'config', 'hosts'), hosts: args.hosts, seed: args.seed });
  const runs: Array<Record<string, unknown>> = [];
  for (const processes of args.processes) {
    const result = await run(args, fleet, processes);
    runs.push(result);
    if (!args.json) console.log(`${processes} process(es): ${String(result['decisionsPerSecond'])} placed/s, p50 ${String(result['p50Ms'])} ms, p99 ${String(result['p99Ms'])} ms, ${String(result['failed'])} failed, wrong ${String(result['wrongAnswers'])}`);
  }
  if (args.json) process.stdout.write(`${JSON.stringify({ hosts: args.hosts, node: process.version, runs })}\n`);
  if (runs.some((r) => (r['wrongAnswers'] as number) > 0)) process.exitCode = 1;
}

if (process.argv[2] === '--child') {
  const [, , , pg, schema, decisions, seed] = process.argv;
  child(pg!, schema!, Number(decisions), Number(seed)).catch((error: unknown) => {
    process.send?.({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) } satisfies FromChild);
    process.exitCode = 1;
  });
} else {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
