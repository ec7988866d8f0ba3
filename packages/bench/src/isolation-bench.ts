/**
 * Plugin isolation benchmark: `npm run bench -- isolation [--calls N] [--json]`.
 *
 * What `isolation: worker` costs per hook call (docs/plugins.md, "Isolation"): one
 * resource plugin's `test` called N times one after another through the dispatcher, as the
 * tracker calls it for a claim, in process and in a worker thread. Two plugins: `noop`
 * (fixtures/noop-plugin.mjs, whose test does nothing: the cost of the call alone) and the
 * first-party `vcpu` on the `cloud-vm` host profile (a real test of a real request). Also
 * timed: starting the plugin (createPluginRuntime: load, factory; a worker's start-up
 * included) and, in a worker, the first call after a timeout (a fresh worker, discover
 * replayed). Results go to docs/benchmarks.md.
 */
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { configFromObject, createPluginRuntime, type Isolation } from '@ert/core';
import { parseFlavor } from '@ert/placement';
import type { ClaimRequest, Logger } from '@ert/plugin-api';

interface Args {
  calls: number;
  json: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { calls: 20_000, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--calls') {
      const n = Number(argv[++i]);
      if (!Number.isSafeInteger(n) || n < 100) throw new Error(`isolation-bench: --calls must be an integer of at least 100, got "${String(argv[i])}"`);
      args.calls = n;
    } else if (arg === '--json') args.json = true;
    else if (arg === '--help' || arg === '-h') {
      console.log('usage: npm run bench -- isolation [--calls N] [--json]');
      process.exit(0);
    } else throw new Error(`isolation-bench: unknown option "${arg}" (see --help)`);
  }
  return args;
}

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const NOOP = fileURLToPath(new URL('../fixtures/noop-plugin.mjs', import.meta.url));
const HOST_PROFILE = fileURLToPath(new URL('../../../config/hosts/cloud-vm', import.meta.url));

const silent: Logger = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, child: () => silent };

interface Figures {
  plugin: string;
  isolation: Isolation;
  /** createPluginRuntime for this one plugin (load, factory; a worker's start-up), ms. */
  startMs: number;
  calls: number;
  /** Per `test` call through the dispatcher, µs. */
  meanUs: number;
  p50Us: number;
  p99Us: number;
  /** Worker only: the first call after a timeout terminated the worker (fresh worker + discover replayed), ms. */
  afterTimeoutMs?: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function measure(plugin: 'noop' | 'vcpu', isolation: Isolation, calls: number): Promise<Figures> {
  const ref = plugin === 'noop' ? { name: 'noop', use: NOOP } : 'vcpu';
  const config = configFromObject(
    { log: { level: 'silent' }, tracker: { hostName: 'bench', root: HOST_PROFILE, resources: [ref], hookTimeout: '5s' }, plugins: { [plugin]: { isolation } } },
    { configDir: REPO },
  );
  const started = performance.now();
  const runtime = await createPluginRuntime({ config, side: 'compute', logger: silent });
  const startMs = performance.now() - started;
  const resource = runtime.resources[0]!;
  const hooks = resource.hooks;
  const { dispatcher } = runtime;
  try {
    const found = await dispatcher.call(plugin, 'discover', () => hooks.discover());
    if (!found.available) throw new Error(`isolation-bench: ${plugin} is unavailable on ${HOST_PROFILE}: ${found.reason ?? ''}`);
    const flavor = { name: 'small', vcpus: 2, memoryMb: 2048, diskGb: 0, extraSpecs: {} };
    const request: ClaimRequest = {
      instance: { uuid: '00000000-0000-4000-8000-000000000001', projectId: 'p', userId: 'u', flavor },
      spec: parseFlavor(flavor, { keys: runtime.extraSpecKeys }),
      kind: 'claim',
    };
    const test = hooks.test!;
    const once = () => dispatcher.call(plugin, 'test', () => test.call(hooks, request), { timeoutMs: 5000 });
    for (let i = 0; i < Math.min(2000, calls); i++) await once();
    const times = new Float64Array(calls);
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) {
      const s = performance.now();
      await once();
      times[i] = performance.now() - s;
    }
    const total = performance.now() - t0;
    const sorted = [...times].sort((a, b) => a - b);
    const figures: Figures = {
      plugin,
      isolation,
      startMs: Math.round(startMs * 10) / 10,
      calls,
      meanUs: Math.round((total / calls) * 1000 * 10) / 10,
      p50Us: Math.round(percentile(sorted, 50) * 1000 * 10) / 10,
      p99Us: Math.round(percentile(sorted, 99) * 1000 * 10) / 10,
    };
    if (isolation === 'worker' && plugin === 'noop') {
      const hang: ClaimRequest = { ...request, instance: { ...request.instance, uuid: 'hang' } };
      await dispatcher.call(plugin, 'test', () => test.call(hooks, hang), { timeoutMs: 50 }).catch(() => undefined);
      const s = performance.now();
      await once();
      figures.afterTimeoutMs = Math.round((performance.now() - s) * 10) / 10;
    }
    return figures;
  } finally {
    await hooks.close?.();
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const results: Figures[] = [];
  for (const plugin of ['noop', 'vcpu'] as const) {
    for (const isolation of ['inprocess', 'worker'] as const) results.push(await measure(plugin, isolation, args.calls));
  }
  const machine = { cpu: cpus()[0]?.model ?? 'unknown', cores: availableParallelism(), node: process.version, loadavg: loadavg().map((l) => Math.round(l * 100) / 100) };
  if (args.json) {
    console.log(JSON.stringify({ machine, results }, null, 2));
    return;
  }
  console.log(`isolation bench: ${args.calls} sequential test() calls per row; ${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, load ${machine.loadavg.join(' ')}`);
  console.log('plugin  isolation  start ms  mean µs  p50 µs  p99 µs  after-timeout ms');
  for (const r of results) {
    console.log(
      `${r.plugin.padEnd(7)} ${r.isolation.padEnd(10)} ${String(r.startMs).padStart(8)} ${String(r.meanUs).padStart(8)} ${String(r.p50Us).padStart(7)} ${String(r.p99Us).padStart(7)}  ${r.afterTimeoutMs === undefined ? '-' : String(r.afterTimeoutMs)}`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
