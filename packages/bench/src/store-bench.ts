/**
 * Store benchmark: `npm run bench -- store [--hosts N] [--seconds S] [--inflight K] [--json [--detail]]`.
 *
 * Imports a fleet of N hosts (a root provider with real capacities: 64 VCPU at ratio 4, 256 GiB
 * MEMORY_MB, 2,000 DISK_GB, max_unit as Nova sets it; plus two NUMA children with
 * CUSTOM_LLC_WAYS) for each of the four phases below into a fresh database (4 x N hosts), then
 * measures claims per second, each phase on its own fleet: every phase starts from empty hosts,
 * so its refusals, and its figure, do not depend on how much the phases before it filled. A claim is one
 * `writeAllocations` of a new consumer holding VCPU, MEMORY_MB and DISK_GB on the root of a
 * host, sized from a mix of flavors (1-16 VCPU, 2-64 GiB, 20-160 GB); half the claims go to a
 * tenth of the hosts, so hot hosts fill up and claims are refused for capacity, as in a real
 * fleet. Refused claims are counted apart (`refused`), never as claims made. At the end the
 * store's usage of every provider and class must equal the sum of the claims that succeeded
 * (kept by the benchmark itself, child processes included) and stay within capacity: a
 * difference is a wrong answer (exit 1). Figures per backend (SQLite always; PostgreSQL when
 * ERT_TEST_PG_URL is set):
 * - sequentialClaimsPerSecond: one process, one claim at a time (one transaction per claim);
 * - claimsPerSecond: one process, K claims in flight (the store combines them into shared
 *   transactions: write-combining);
 * - uncombinedClaimsPerSecond: the same with write-combining off (one transaction per claim);
 * - concurrent4ClaimsPerSecond: 4 processes claiming at once (K in flight each) on one database;
 * - importHostsMs, loadHostsMs: importing one phase's fleet (N hosts), and one full `loadHosts()` (4 x N).
 * Each figure is measured for S seconds. `--json` prints the headline figures,
 * `{ "sqlite": { "claimsPerSecond", "concurrent4ClaimsPerSecond", "refused", "usageMismatches",
 * "overCapacity" }, "postgres": { ... } }` (postgres only when ERT_TEST_PG_URL is set);
 * `--json --detail` adds the other figures.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { capacityOf, normalizeInventory } from '@ert/plugin-api';
import { CapacityExceededError, createStore, dropPostgresSchema } from '@ert/store';
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
  /** Claims refused for capacity per second (one process, K in flight; and 4 processes). */
  refusedPerSecond: number;
  concurrent4RefusedPerSecond: number;
  /** Claims refused for capacity in all phases. */
  refused: number;
  /** Providers and classes whose usage differs from the sum of the successful claims (must be 0). */
  usageMismatches: number;
  /** Providers and classes over capacity at the end (must be 0). */
  overCapacity: number;
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
    else if (arg === '--help' || arg === '-h') {
      console.log('usage: npm run bench -- store [--hosts N] [--seconds S] [--inflight K] [--json [--detail]]');
      process.exit(0);
    } else throw new Error(`store-bench: unknown option "${arg}" (see --help)`);
  }
  return args;
}

/** The root inventories of every bench host: a 64-core, 256 GiB, 2 TB compute node. */
const ROOT_INVENTORY = {
  VCPU: normalizeInventory({ total: 64, maxUnit: 64, allocationRatio: 4 }),
  MEMORY_MB: normalizeInventory({ total: 262_144, reserved: 4096, maxUnit: 262_144 }),
  DISK_GB: normalizeInventory({ total: 2000, maxUnit: 2000 }),
};

/** The flavors claims are sized from: [VCPU, MEMORY_MB, DISK_GB]. */
const CLAIM_SIZES: ReadonlyArray<readonly [number, number, number]> = [
  [1, 2048, 20],
  [2, 4096, 40],
  [2, 8192, 40],
  [4, 8192, 80],
  [4, 16384, 80],
  [8, 32768, 160],
  [16, 65536, 160],
];

/** The phases, each claiming on a fleet of its own (`<phase>-<i>` hosts). */
const PHASES = ['seq', 'one', 'unc', 'four'] as const;

function fleet(hosts: number, phase: string): HostImport[] {
  return Array.from({ length: hosts }, (_, i): HostImport => {
    const name = `${phase}-${i}`;
    return {
      host: { name },
      providers: [
        { uuid: name, name, inventories: ROOT_INVENTORY, traits: ['HW_CPU_X86_AVX2'], aggregates: [] },
        { uuid: `${name}-n0`, name: `${name}-n0`, parentUuid: name, inventories: { CUSTOM_LLC_WAYS: normalizeInventory({ total: 11 }) }, traits: [], aggregates: [] },
        { uuid: `${name}-n1`, name: `${name}-n1`, parentUuid: name, inventories: { CUSTOM_LLC_WAYS: normalizeInventory({ total: 11 }) }, traits: [], aggregates: [] },
      ],
    };
  });
}

/** What one claiming run made and refused; `used` sums the amounts of the claims that succeeded, by "provider|class". */
interface ClaimRun {
  perSecond: number;
  refusedPerSecond: number;
  refused: number;
  used: Record<string, number>;
}

/**
 * Claims on the hosts of `phase`'s fleet for `seconds` with `inflight` concurrent callers. A
 * claim refused for capacity (CapacityExceededError) is counted apart; any other error ends
 * the run. `prefix` makes the consumers' uuids (one per process).
 */
async function claimFor(store: Store, phase: string, hosts: number, seconds: number, inflight: number, prefix: string): Promise<ClaimRun> {
  let next = 0;
  let done = 0;
  let refused = 0;
  const used: Record<string, number> = {};
  const start = performance.now();
  const deadline = start + seconds * 1000;
  const hot = Math.max(1, Math.floor(hosts / 10));
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (performance.now() < deadline) {
        const n = next++;
        // Half the claims go to a tenth of the hosts: those fill up and refuse.
        const host = `${phase}-${n % 2 === 0 ? (n * 7919) % hot : (n * 7919) % hosts}`;
        const [vcpu, memory, disk] = CLAIM_SIZES[(n * 31) % CLAIM_SIZES.length]!;
        const allocations = [
          { providerUuid: host, resourceClass: 'VCPU', amount: vcpu },
          { providerUuid: host, resourceClass: 'MEMORY_MB', amount: memory },
          { providerUuid: host, resourceClass: 'DISK_GB', amount: disk },
        ];
        try {
          await store.writeAllocations([{ consumer: { uuid: `${prefix}-${n}`, projectId: 'bench', userId: 'bench', generation: null }, allocations }]);
        } catch (error) {
          if (!(error instanceof CapacityExceededError)) throw error;
          refused++;
          continue;
        }
        done++;
        for (const a of allocations) used[`${a.providerUuid}|${a.resourceClass}`] = (used[`${a.providerUuid}|${a.resourceClass}`] ?? 0) + a.amount;
      }
    }),
  );
  const seconds_ = (performance.now() - start) / 1000;
  return { perSecond: done / seconds_, refusedPerSecond: refused / seconds_, refused, used };
}

function addUsed(into: Record<string, number>, from: Record<string, number>): void {
  for (const [key, amount] of Object.entries(from)) into[key] = (into[key] ?? 0) + amount;
}

/**
 * The store's usage of every provider and class against the benchmark's own sum of the
 * claims that succeeded, and against capacity: how many differ or exceed (0 when right).
 */
async function checkUsage(store: Store, expected: Record<string, number>): Promise<{ mismatched: number; overCapacity: number }> {
  let mismatched = 0;
  let overCapacity = 0;
  for (const host of await store.loadHosts()) {
    for (const provider of host.providers) {
      for (const [resourceClass, inventory] of Object.entries(provider.inventories)) {
        const usage = provider.usages[resourceClass] ?? 0;
        if (usage !== (expected[`${provider.uuid}|${resourceClass}`] ?? 0)) mismatched++;
        if (usage > capacityOf(inventory)) overCapacity++;
      }
    }
  }
  return { mismatched, overCapacity };
}

/** Child mode: `--child <options> <phase> <hosts> <seconds> <inflight> <prefix> <startAt>`; prints claims per second. */
async function child(argv: string[]): Promise<void> {
  const [optionsJson, phase, hosts, seconds, inflight, prefix, startAt] = argv;
  const store = await createStore(JSON.parse(optionsJson!) as StoreOptions);
  await store.getHost(`${phase!}-0`); // open the connection before the start line
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(startAt) - Date.now())));
  const run = await claimFor(store, phase!, Number(hosts), Number(seconds), Number(inflight), prefix!);
  await store.close();
  process.stdout.write(JSON.stringify(run));
}

function runChild(options: StoreOptions, args: Args, prefix: string, startAt: number): Promise<ClaimRun> {
  const script = fileURLToPath(import.meta.url);
  const proc = spawn(process.execPath, [script, '--child', JSON.stringify(options), 'four', String(args.hosts), String(args.seconds), String(args.inflight), prefix, String(startAt)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    proc.on('error', reject);
    proc.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as ClaimRun) : reject(new Error(`store-bench child exited with ${String(code)}`))));
  });
}

async function measure(options: StoreOptions, args: Args): Promise<Figures> {
  const store = await createStore(options);
  try {
    await store.migrate();
    let t = performance.now();
    await store.importHosts(fleet(args.hosts, PHASES[0]));
    const importHostsMs = performance.now() - t;
    for (const phase of PHASES.slice(1)) await store.importHosts(fleet(args.hosts, phase));
    t = performance.now();
    await store.loadHosts();
    const loadHostsMs = performance.now() - t;
    const expected: Record<string, number> = {};
    const sequential = await claimFor(store, 'seq', args.hosts, args.seconds, 1, 'seq');
    const combined = await claimFor(store, 'one', args.hosts, args.seconds, args.inflight, 'one');
    const uncombined = await createStore({ ...options, combineWrites: false });
    const separate = await claimFor(uncombined, 'unc', args.hosts, args.seconds, args.inflight, 'unc').finally(() => uncombined.close());
    const startAt = Date.now() + 2000;
    const children = await Promise.all(Array.from({ length: PROCESSES }, (_, i) => runChild(options, args, `p${i}`, startAt)));
    for (const run of [sequential, combined, separate, ...children]) addUsed(expected, run.used);
    const { mismatched, overCapacity } = await checkUsage(store, expected);
    return {
      importHostsMs,
      loadHostsMs,
      sequentialClaimsPerSecond: sequential.perSecond,
      claimsPerSecond: combined.perSecond,
      uncombinedClaimsPerSecond: separate.perSecond,
      concurrent4ClaimsPerSecond: children.reduce((a, r) => a + r.perSecond, 0),
      refusedPerSecond: combined.refusedPerSecond,
      concurrent4RefusedPerSecond: children.reduce((a, r) => a + r.refusedPerSecond, 0),
      refused: [sequential, combined, separate, ...children].reduce((a, r) => a + r.refused, 0),
      usageMismatches: mismatched,
      overCapacity,
    };
  } finally {
    await store.close();
  }
}

/** The `--json` shape: per backend, only one-process and four-process claims per second. */
function headlineFigures(results: Record<string, Figures>): Record<string, Pick<Figures, 'claimsPerSecond' | 'concurrent4ClaimsPerSecond' | 'refused' | 'usageMismatches' | 'overCapacity'>> {
  return Object.fromEntries(
    Object.entries(results).map(([backend, f]) => [
      backend,
      { claimsPerSecond: f.claimsPerSecond, concurrent4ClaimsPerSecond: f.concurrent4ClaimsPerSecond, refused: f.refused, usageMismatches: f.usageMismatches, overCapacity: f.overCapacity },
    ]),
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

  const wrong = Object.values(results).reduce((n, f) => n + f.usageMismatches + f.overCapacity, 0);
  if (wrong > 0) process.exitCode = 1;
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
    [`refused/s, 1 process, ${args.inflight} in flight`, 'refusedPerSecond'],
    [`refused/s, ${PROCESSES} processes`, 'concurrent4RefusedPerSecond'],
    ['refused claims, all phases', 'refused'],
    ['usage != sum of claims (must be 0)', 'usageMismatches'],
    ['over capacity (must be 0)', 'overCapacity'],
  ];
  const backends = Object.keys(results);
  console.log(['figure'.padEnd(40), ...backends.map((b) => b.padStart(10))].join(''));
  for (const [label, key] of rows) console.log([label.padEnd(40), ...backends.map((b) => String(results[b]![key]).padStart(10))].join(''));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
