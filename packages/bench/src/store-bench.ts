/**
 * Store benchmark: `npm run bench -- store [--hosts N] [--seconds S] [--inflight K] [--json [--detail]]`.
 *
 * Imports a fleet of N hosts (a root provider with VCPU, MEMORY_MB and DISK_GB plus two NUMA
 * children with CUSTOM_LLC_WAYS) into a fresh database, then measures claims per second. A claim
 * is one `writeAllocations` of a new consumer holding VCPU, MEMORY_MB and DISK_GB on the root of
 * a random host. Figures per backend (SQLite always; PostgreSQL when ERT_TEST_PG_URL is set):
 * - sequentialClaimsPerSecond: one process, one claim at a time (one transaction per claim);
 * - claimsPerSecond: one process, K claims in flight (the store combines them into shared
 *   transactions: write-combining);
 * - uncombinedClaimsPerSecond: the same with write-combining off (one transaction per claim);
 * - concurrent4ClaimsPerSecond: 4 processes claiming at once (K in flight each) on one database;
 * - importHostsMs, loadHostsMs: importing the fleet, and one full `loadHosts()`.
 * Each figure is measured for S seconds. `--json` prints exactly the figures issue 2 asks for,
 * `{ "sqlite": { "claimsPerSecond": N, "concurrent4ClaimsPerSecond": N }, "postgres": { ... } }`
 * (postgres only when ERT_TEST_PG_URL is set); `--json --detail` adds the other figures.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { normalizeInventory } from '@ert/plugin-api';
import { createStore, dropPostgresSchema } from '@ert/store';
import type { HostImport, Store, StoreOptions } from '@ert/store';

const PROCESSES = 4;

interface Args {
  hosts: number;
  seconds: number;
  inflight: number;
  json: boolean;
  detail: boolean;
}

interface Figures {
  importHostsMs: number;
  loadHostsMs: number;
  sequentialClaimsPerSecond: number;
  claimsPerSecond: number;
  uncombinedClaimsPerSecond: number;
  concurrent4ClaimsPerSecond: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { hosts: 10_000, seconds: 3, inflight: 64, json: false, detail: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const positive = (): number => {
      const v = argv[++i];
      const n = Number(v);
      if (v === undefined || !Number.isFinite(n) || n <= 0) throw new Error(`store-bench: ${arg} must be a positive number, got "${String(v)}"`);
      return n;
    };
    if (arg === '--hosts') args.hosts = Math.floor(positive());
    else if (arg === '--seconds') args.seconds = positive();
    else if (arg === '--inflight') args.inflight = Math.floor(positive());
    else if (arg === '--json') args.json = true;
    else if (arg === '--detail') args.detail = true;
    else throw new Error(`store-bench: unknown option "${arg}"`);
  }
  return args;
}

function fleet(hosts: number): HostImport[] {
  const big = (total: number) => normalizeInventory({ total, maxUnit: total });
  return Array.from({ length: hosts }, (_, i): HostImport => ({
    host: { name: `bench-${i}` },
    providers: [
      { uuid: `bench-${i}`, name: `bench-${i}`, inventories: { VCPU: big(1_000_000), MEMORY_MB: big(1_000_000_000), DISK_GB: big(100_000_000) }, traits: ['HW_CPU_X86_AVX2'], aggregates: [] },
      { uuid: `bench-${i}-n0`, name: `bench-${i}-n0`, parentUuid: `bench-${i}`, inventories: { CUSTOM_LLC_WAYS: normalizeInventory({ total: 11 }) }, traits: [], aggregates: [] },
      { uuid: `bench-${i}-n1`, name: `bench-${i}-n1`, parentUuid: `bench-${i}`, inventories: { CUSTOM_LLC_WAYS: normalizeInventory({ total: 11 }) }, traits: [], aggregates: [] },
    ],
  }));
}

/** Claims for `seconds` with `inflight` concurrent callers; returns claims per second. */
async function claimFor(store: Store, hosts: number, seconds: number, inflight: number, prefix: string): Promise<number> {
  let next = 0;
  let done = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (performance.now() < deadline) {
        const n = next++;
        const host = `bench-${(n * 7919) % hosts}`;
        await store.writeAllocations([
          {
            consumer: { uuid: `${prefix}-${n}`, projectId: 'bench', userId: 'bench', generation: null },
            allocations: [
              { providerUuid: host, resourceClass: 'VCPU', amount: 2 },
              { providerUuid: host, resourceClass: 'MEMORY_MB', amount: 4096 },
              { providerUuid: host, resourceClass: 'DISK_GB', amount: 40 },
            ],
          },
        ]);
        done++;
      }
    }),
  );
  return done / ((performance.now() - start) / 1000);
}

/** Child mode: `--child <options> <hosts> <seconds> <inflight> <prefix> <startAt>`; prints claims per second. */
async function child(argv: string[]): Promise<void> {
  const [optionsJson, hosts, seconds, inflight, prefix, startAt] = argv;
  const store = await createStore(JSON.parse(optionsJson!) as StoreOptions);
  await store.getHost('bench-0'); // open the connection before the start line
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(startAt) - Date.now())));
  const rate = await claimFor(store, Number(hosts), Number(seconds), Number(inflight), prefix!);
  await store.close();
  process.stdout.write(String(rate));
}

function runChild(options: StoreOptions, args: Args, prefix: string, startAt: number): Promise<number> {
  const script = fileURLToPath(import.meta.url);
  const proc = spawn(process.execPath, [script, '--child', JSON.stringify(options), String(args.hosts), String(args.seconds), String(args.inflight), prefix, String(startAt)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    proc.on('error', reject);
    proc.on('close', (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`store-bench child exited with ${String(code)}`))));
  });
}

async function measure(options: StoreOptions, args: Args): Promise<Figures> {
  const store = await createStore(options);
  try {
    await store.migrate();
    let t = performance.now();
    await store.importHosts(fleet(args.hosts));
    const importHostsMs = performance.now() - t;
    t = performance.now();
    await store.loadHosts();
    const loadHostsMs = performance.now() - t;
    const sequentialClaimsPerSecond = await claimFor(store, args.hosts, args.seconds, 1, 'seq');
    const claimsPerSecond = await claimFor(store, args.hosts, args.seconds, args.inflight, 'one');
    const uncombined = await createStore({ ...options, combineWrites: false });
    const uncombinedClaimsPerSecond = await claimFor(uncombined, args.hosts, args.seconds, args.inflight, 'unc').finally(() => uncombined.close());
    const startAt = Date.now() + 2000;
    const rates = await Promise.all(Array.from({ length: PROCESSES }, (_, i) => runChild(options, args, `p${i}`, startAt)));
    const concurrent4ClaimsPerSecond = rates.reduce((a, b) => a + b, 0);
    return { importHostsMs, loadHostsMs, sequentialClaimsPerSecond, claimsPerSecond, uncombinedClaimsPerSecond, concurrent4ClaimsPerSecond };
  } finally {
    await store.close();
  }
}

/** The `--json` shape: per backend, only one-process and four-process claims per second. */
function headlineFigures(results: Record<string, Figures>): Record<string, Pick<Figures, 'claimsPerSecond' | 'concurrent4ClaimsPerSecond'>> {
  return Object.fromEntries(
    Object.entries(results).map(([backend, f]) => [backend, { claimsPerSecond: f.claimsPerSecond, concurrent4ClaimsPerSecond: f.concurrent4ClaimsPerSecond }]),
  );
}

function rounded(f: Figures): Figures {
  return Object.fromEntries(Object.entries(f).map(([k, v]) => [k, Math.round(v)])) as unknown as Figures;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === '--child') return child(argv.slice(1));
  const args = parseArgs(argv);
  const results: Record<string, Figures> = {};

  const dir = mkdtempSync(path.join(tmpdir(), 'ert-store-bench-'));
  try {
    results.sqlite = rounded(await measure({ client: 'sqlite3', connection: path.join(dir, 'bench.db') }, args));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pgUrl = process.env.ERT_TEST_PG_URL;
  if (pgUrl) {
    const schema = `ert_bench_${process.pid}`;
    const options: StoreOptions = { client: 'pg', connection: pgUrl, schema };
    try {
      results.postgres = rounded(await measure(options, args));
    } finally {
      await dropPostgresSchema(pgUrl, schema);
    }
  }

  if (args.json) {
    console.log(JSON.stringify(args.detail ? results : headlineFigures(results), null, 2));
    return;
  }
  console.log(`store benchmark: ${args.hosts} hosts (3 providers each), ${args.seconds}s per figure, ${args.inflight} claims in flight per process`);
  const rows: Array<[string, keyof Figures]> = [
    ['import hosts (ms)', 'importHostsMs'],
    ['loadHosts, all (ms)', 'loadHostsMs'],
    ['claims/s, 1 process, 1 at a time', 'sequentialClaimsPerSecond'],
    [`claims/s, 1 process, ${args.inflight} in flight`, 'claimsPerSecond'],
    [`  same, write-combining off`, 'uncombinedClaimsPerSecond'],
    [`claims/s, ${PROCESSES} processes`, 'concurrent4ClaimsPerSecond'],
  ];
  const backends = Object.keys(results);
  console.log(['figure'.padEnd(40), ...backends.map((b) => b.padStart(10))].join(''));
  for (const [label, key] of rows) console.log([label.padEnd(40), ...backends.map((b) => String(results[b]![key]).padStart(10))].join(''));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
