/**
 * SQLite driver comparison (issue 15): `npm run bench -- drivers [--hosts N] [--claims C] [--json]`.
 *
 * Where does a sequential claim's time go, and what would another driver give? The issue keeps
 * the sqlite3 driver and asks for a markedly faster one to be measured side by side, not
 * switched to. Five runs of C claims, one at a time, on copies of one SQLite file (N hosts,
 * each a root provider with VCPU and MEMORY_MB, imported through @ert/store; WAL,
 * synchronous=NORMAL, the store's pragmas), each claim VCPU 2 + MEMORY_MB 1024 on a random host
 * with its instance record, durable at commit, and a sixth of bare trips:
 *
 * - `store`: `store.writeAllocations`, the product's path (knex on node-sqlite3, every check of
 *   the store): a claim of a new consumer takes the quick claim, one trip to the driver
 *   (sqlite-claim.ts: one statement whose trigger checks and writes it; three when it declines).
 * - `store-general`: the same with `quickClaims: false`, through the general transaction (about
 *   fifteen statements, each a trip).
 * - `sqlite3`: the same 13 statements (the SQL the store sends, captured from knex) on
 *   node-sqlite3 directly, each awaited and prepared per call as knex does: the driver's cost
 *   without knex.
 * - `sqlite3-prepared`: the same, each statement prepared once and kept, reset only after a
 *   call that failed (what the store's statement cache does, connection.ts).
 * - `better-sqlite3`: the same statements, prepared once, on better-sqlite3 (synchronous, in
 *   process), in `BEGIN IMMEDIATE` instead of the store's lock-taking UPDATE (12 statements).
 *
 * - `trip`: a statement that does next to nothing, one at a time (`tripLatency`): the least a
 *   trip to the driver's thread pool costs on this machine, the floor under every node-sqlite3
 *   row above.
 *
 * The raw runs check capacity in JavaScript as the store does (inventory and usage read under
 * the write lock). At the end every run's usage per provider must equal its claims (else exit
 * 1). better-sqlite3 is not a dependency of ert: install it beside (`npm i --no-save
 * better-sqlite3`, compiles from source here); without it that run is reported as skipped.
 */
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { normalizeInventory, type Flavor } from '@ert/plugin-api';
import { createStore, type HostImport, type Store } from '@ert/store';

interface Args {
  hosts: number;
  claims: number;
  json: boolean;
}

interface RunResult {
  claimsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Trips to the driver per claim: counted on the store's connection, or the statements sent one by one (with BEGIN and COMMIT). */
  tripsPerClaim: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { hosts: 10_000, claims: 3_000, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const positive = (): number => {
      const v = argv[++i];
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < 1) throw new Error(`driver-bench: ${arg} must be a positive integer, got "${v}"`);
      return n;
    };
    if (arg === '--hosts') args.hosts = positive();
    else if (arg === '--claims') args.claims = positive();
    else if (arg === '--json') args.json = true;
    else if (arg === '--help' || arg === '-h') {
      console.log('usage: npm run bench -- drivers [--hosts N] [--claims C] [--json]');
      process.exit(0);
    } else throw new Error(`driver-bench: unknown option "${arg}" (options: --hosts N, --claims C, --json)`);
  }
  return args;
}

const FLAVOR: Flavor = { name: 'm1.medium', vcpus: 2, memoryMb: 1024, diskGb: 0, extraSpecs: {} };
const AMOUNTS = [
  ['VCPU', 2],
  ['MEMORY_MB', 1024],
] as const;

/** The SQL `writeAllocations` sends for one new consumer with an instance record (knex's text, captured). */
const SQL = {
  lock: 'UPDATE resource_classes SET name = name WHERE id = 0',
  consumers:
    'select `c`.`id`, `c`.`uuid`, `c`.`generation`, `c`.`project_id`, `c`.`user_id`, `c`.`consumer_type`, `a`.`provider_id`, `a`.`resource_class_id`, `a`.`used` from `consumers` as `c` left join `allocations` as `a` on `a`.`consumer_id` = `c`.`id` where `c`.`uuid` in (?) order by `c`.`id` asc',
  providers:
    'select `p`.`id`, `p`.`uuid`, `p`.`name`, `p`.`root_id`, exists (select 1 from provider_traits pt join traits t on t.id = pt.trait_id where pt.provider_id = p.id and t.name = ?) as sharing from `providers` as `p` where (`p`.`uuid` in (?)) order by `id` asc',
  inventories:
    'select `i`.*, (select sum(a.used) from allocations a where a.provider_id = i.provider_id and a.resource_class_id = i.resource_class_id) as used from `inventories` as `i` where `i`.`provider_id` in (?)',
  hosts: 'select `id`, `name` from `hosts` where `name` in (?)',
  insertConsumer: 'INSERT INTO `consumers` (`uuid`, `project_id`, `user_id`, `generation`, `consumer_type`) VALUES (?, ?, ?, ?, ?) RETURNING `id`, `uuid`',
  insertAllocations: 'INSERT INTO `allocations` (`provider_id`, `consumer_id`, `resource_class_id`, `used`) VALUES (?, ?, ?, ?), (?, ?, ?, ?)',
  bumpProviders: 'update `providers` set `generation` = `generation` + ? where `id` in (?)',
  instances: 'select `uuid`, `host_id` from `instances` where `uuid` in (?)',
  insertInstance:
    'INSERT INTO `instances` (`uuid`, `host_id`, `project_id`, `user_id`, `flavor`, `previous_flavor`, `migration_uuid`, `assignments`, `cpus`, `units`, `pools`, `reason`, `state`, `created_at`, `updated_at`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (`uuid`) DO UPDATE SET `host_id` = excluded.`host_id`, `project_id` = excluded.`project_id`, `user_id` = excluded.`user_id`, `flavor` = excluded.`flavor`, `previous_flavor` = excluded.`previous_flavor`, `migration_uuid` = excluded.`migration_uuid`, `assignments` = excluded.`assignments`, `cpus` = excluded.`cpus`, `units` = excluded.`units`, `pools` = excluded.`pools`, `reason` = excluded.`reason`, `state` = excluded.`state`, `updated_at` = excluded.`updated_at`',
  bumpHosts: 'update `hosts` set `generation` = generation + 1 where (`root_provider_id` in (?) or `id` in (?)) returning `id`, `name`, `generation`, `root_provider_id`',
} as const;

/** The store's pragmas (connection.ts), for the raw drivers. */
const PRAGMAS = ['PRAGMA journal_mode = WAL', 'PRAGMA synchronous = NORMAL', 'PRAGMA foreign_keys = ON', 'PRAGMA busy_timeout = 5000'];

interface InventoryRow {
  resource_class_id: number;
  total: number;
  reserved: number;
  allocation_ratio: number;
  used: number | null;
}

/** One claim's reads and writes, in the store's order, over a driver's `all` (every statement, rows or none). */
async function claimWith(db: { all(sql: string, params: unknown[]): unknown[] | Promise<unknown[]> }, host: { name: string; uuid: string }, classIds: Map<string, number>): Promise<void> {
  const uuid = randomUUID();
  await db.all(SQL.consumers, [uuid]);
  const [provider] = (await db.all(SQL.providers, ['MISC_SHARES_VIA_AGGREGATE', host.uuid])) as Array<{ id: number; root_id: number }>;
  const inventories = (await db.all(SQL.inventories, [provider!.id])) as InventoryRow[];
  for (const [rc, amount] of AMOUNTS) {
    const inv = inventories.find((r) => r.resource_class_id === classIds.get(rc));
    if (!inv || Number(inv.used ?? 0) + amount > (inv.total - inv.reserved) * inv.allocation_ratio) throw new Error(`driver-bench: ${rc} does not fit on ${host.name}`);
  }
  const [hostRow] = (await db.all(SQL.hosts, [host.name])) as Array<{ id: number }>;
  const [consumer] = (await db.all(SQL.insertConsumer, [uuid, 'p', 'u', 1, null])) as Array<{ id: number }>;
  await db.all(SQL.insertAllocations, [provider!.id, consumer!.id, classIds.get('VCPU'), 2, provider!.id, consumer!.id, classIds.get('MEMORY_MB'), 1024]);
  await db.all(SQL.bumpProviders, [1, provider!.id]);
  await db.all(SQL.instances, [uuid]);
  const now = Date.now();
  await db.all(SQL.insertInstance, [uuid, hostRow!.id, 'p', 'u', JSON.stringify(FLAVOR), null, null, '{}', null, null, null, null, 'active', now, now]);
  await db.all(SQL.bumpHosts, [provider!.root_id, hostRow!.id]);
}

/** A node-sqlite3 connection as the raw runs use it (`openSqlite3`). */
interface RawSqlite3 {
  all(sql: string, params: unknown[]): Promise<unknown[]>;
  exec(sql: string): Promise<void>;
  /** The work items handed to the driver's thread pool so far, with prepared statements: each `exec`, prepare, statement `all` and `reset`. */
  operations(): number;
  close(): Promise<void>;
}

/** node-sqlite3 without knex: `all` runs one statement and awaits its rows; `prepared`: statements prepared once and kept (else prepared per call, as knex does). */
async function openSqlite3(file: string, prepared = true): Promise<RawSqlite3> {
  // The store's driver, resolved from @ert/store (ert's only user of it).
  const require = createRequire(createRequire(import.meta.url).resolve('@ert/store'));
  const sqlite3 = require('sqlite3') as typeof import('sqlite3');
  const db = await new Promise<import('sqlite3').Database>((resolve, reject) => {
    const d = new sqlite3.Database(file, (err) => (err ? reject(err) : resolve(d)));
  });
  const statements = new Map<string, import('sqlite3').Statement>();
  let operations = 0;
  return {
    all: (sql, params) =>
      new Promise<unknown[]>((resolve, reject) => {
        if (!prepared) return db.all(sql, params, (err: Error | null, rows: unknown[]) => (err ? reject(err) : resolve(rows)));
        let stmt = statements.get(sql);
        if (!stmt) {
          operations++;
          statements.set(sql, (stmt = db.prepare(sql)));
        }
        const kept = stmt;
        operations++;
        // As the store does (connection.ts): a call that ran to its end holds no snapshot and is
        // not reset (a reset is a work item of its own, which the next call on the statement
        // waits for); a failed one is reset before its caller hears.
        kept.all(params, (err: Error | null, rows: unknown[]) => {
          if (err) {
            operations++;
            kept.reset();
          }
          return err ? reject(err) : resolve(rows);
        });
      }),
    exec: (sql) => {
      operations++;
      return new Promise<void>((resolve, reject) => db.exec(sql, (err) => (err ? reject(err) : resolve())));
    },
    operations: () => operations,
    async close() {
      for (const stmt of statements.values()) await new Promise<void>((resolve) => stmt.finalize(() => resolve()));
      await new Promise<void>((resolve, reject) => db.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

/** The `q` quantile (0 to 1) of `latencies` in ms, nearest rank. */
function quantiles(latencies: readonly number[]): (q: number) => number {
  const sorted = [...latencies].sort((a, b) => a - b);
  return (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function summary(latencies: number[], seconds: number, trips: number | (() => number)): RunResult {
  const quantile = quantiles(latencies);
  const at = (q: number) => Math.round(quantile(q) * 1000) / 1000;
  const tripsPerClaim = typeof trips === 'number' ? trips : Math.round((trips() / latencies.length) * 100) / 100;
  return { claimsPerSecond: Math.round(latencies.length / seconds), p50Ms: at(0.5), p99Ms: at(0.99), tripsPerClaim };
}

async function timed(claims: number, one: (i: number) => Promise<void> | void, trips: number | (() => number)): Promise<RunResult> {
  const latencies: number[] = [];
  const start = performance.now();
  for (let i = 0; i < claims; i++) {
    const t = performance.now();
    await one(i);
    latencies.push(performance.now() - t);
  }
  return summary(latencies, (performance.now() - start) / 1000, trips);
}

/** How long the main thread computes between two trips in `tripLatency`'s second run, in ms: about a decision's own JavaScript at 10,000 hosts (0.1-0.2 ms, docs/benchmarks.md). */
const BUSY_BETWEEN_TRIPS_MS = 0.2;

/**
 * A trip's latency, p50 and p99 in µs: `backToBack` the next call made as the last one's answer
 * came; `afterBusy` after BUSY_BETWEEN_TRIPS_MS of work on the main thread. `operationsPerTrip`:
 * the work items each timed call handed to the driver's pool (1: the statement alone).
 */
interface TripLatency {
  backToBackP50Us: number;
  backToBackP99Us: number;
  afterBusyP50Us: number;
  afterBusyP99Us: number;
  operationsPerTrip: number;
}

/**
 * A round trip to node-sqlite3's thread pool and back, for a statement that does next to
 * nothing (`SELECT ?1` on a database in memory, prepared once before the timed calls): the
 * driver hands every statement to a pool thread and its answer back to the main thread, so
 * this is the least a statement on node-sqlite3 takes, a lone claim's included. Timed back to
 * back, and with the main thread busy between calls as a scheduler's decision keeps it.
 */
async function tripLatency(trips: number): Promise<TripLatency> {
  const db = await openSqlite3(':memory:');
  try {
    const sql = 'SELECT ?1 AS x';
    // Prepared (and the code warmed) before anything is timed.
    await db.all(sql, [0]);
    const before = db.operations();
    const run = async (busyMs: number): Promise<[number, number]> => {
      const latencies: number[] = [];
      for (let i = 0; i < trips; i++) {
        const until = performance.now() + busyMs;
        while (performance.now() < until);
        const t = performance.now();
        await db.all(sql, [i]);
        latencies.push(performance.now() - t);
      }
      const quantile = quantiles(latencies);
      return [Math.round(quantile(0.5) * 1000), Math.round(quantile(0.99) * 1000)];
    };
    const [backToBackP50Us, backToBackP99Us] = await run(0);
    const [afterBusyP50Us, afterBusyP99Us] = await run(BUSY_BETWEEN_TRIPS_MS);
    const operationsPerTrip = (db.operations() - before) / (2 * trips);
    return { backToBackP50Us, backToBackP99Us, afterBusyP50Us, afterBusyP99Us, operationsPerTrip };
  } finally {
    await db.close();
  }
}

/** Counts the calls the store makes on its one pooled SQLite connection (`exec`, `all`, `run`: each a trip to the driver's thread). */
async function countTrips(store: Store): Promise<() => number> {
  type Conn = Record<'exec' | 'all' | 'run', (...args: unknown[]) => unknown>;
  const pool = (store as unknown as { knex: { client: { acquireConnection(): Promise<Conn>; releaseConnection(c: Conn): Promise<unknown> } } }).knex.client;
  const conn = await pool.acquireConnection();
  await pool.releaseConnection(conn);
  let trips = 0;
  for (const method of ['exec', 'all', 'run'] as const) {
    const call = conn[method];
    conn[method] = function (this: unknown, ...args: unknown[]) {
      trips++;
      return call.apply(this, args);
    };
  }
  return () => trips;
}

/** Each provider's usage must be 2 VCPU and 1024 MEMORY_MB per claim made on it; the count of providers where it is not (wrong answers). */
async function checkUsage(file: string, expected: Map<string, number>): Promise<number> {
  const store = await createStore({ client: 'sqlite3', connection: file });
  try {
    let mismatches = 0;
    for (const [uuid, claims] of expected) {
      const usages = await store.getUsages(uuid);
      if (usages['VCPU'] !== 2 * claims || usages['MEMORY_MB'] !== 1024 * claims) mismatches++;
    }
    return mismatches;
  } finally {
    await store.close();
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(path.join(tmpdir(), 'ert-driver-bench-'));
  const log = (s: string) => {
    if (!args.json) process.stderr.write(s + '\n');
  };
  try {
    const base = path.join(dir, 'base.db');
    const store = await createStore({ client: 'sqlite3', connection: base });
    await store.migrate();
    const hosts = Array.from({ length: args.hosts }, (_, i) => ({ name: `host-${String(i).padStart(6, '0')}`, uuid: randomUUID() }));
    const imports: HostImport[] = hosts.map((h) => ({
      host: { name: h.name },
      providers: [{ uuid: h.uuid, name: h.name, inventories: { VCPU: normalizeInventory({ total: 1_000_000 }), MEMORY_MB: normalizeInventory({ total: 1_000_000_000 }) }, traits: [], aggregates: [] }],
    }));
    for (let i = 0; i < imports.length; i += 1000) await store.importHosts(imports.slice(i, i + 1000));
    const classes = await store.listResourceClasses();
    await store.close();
    log(`driver-bench: ${args.hosts} hosts imported; ${args.claims} sequential claims per driver`);
    const classIds = new Map<string, number>();
    {
      const raw = await openSqlite3(base);
      for (const row of (await raw.all('select id, name from resource_classes', [])) as Array<{ id: number; name: string }>) classIds.set(row.name, row.id);
      await raw.close();
    }
    if (!classes.includes('VCPU')) throw new Error('driver-bench: the store has no VCPU class');
    // The same host sequence for every run.
    let seed = 42;
    const picks = Array.from({ length: args.claims }, () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return hosts[seed % hosts.length]!;
    });
    const expected = new Map<string, number>();
    for (const h of picks) expected.set(h.uuid, (expected.get(h.uuid) ?? 0) + 1);
    const copy = (name: string) => {
      const file = path.join(dir, `${name}.db`);
      copyFileSync(base, file);
      return file;
    };
    const results: Record<string, RunResult | { skipped: string }> = {};
    const mismatches: Record<string, number> = {};

    // 1. The product's path: quick claims (quick-claim.ts, the default), then every claim
    // through the general transaction. Trips to the driver counted on the store's connection.
    for (const [name, quickClaims] of [
      ['store', true],
      ['store-general', false],
    ] as const) {
      const file = copy(name);
      const s = await createStore({ client: 'sqlite3', connection: file, quickClaims });
      const trips = await countTrips(s);
      results[name] = await timed(
        args.claims,
        async (i) => {
          const h = picks[i]!;
          const uuid = randomUUID();
          await s.writeAllocations([
            {
              consumer: { uuid, projectId: 'p', userId: 'u', generation: null },
              allocations: AMOUNTS.map(([resourceClass, amount]) => ({ providerUuid: h.uuid, resourceClass, amount })),
              instance: { uuid, host: h.name, projectId: 'p', userId: 'u', flavor: FLAVOR, state: 'active', assignments: {} },
            },
          ]);
        },
        trips,
      );
      await s.close();
      mismatches[name] = await checkUsage(file, expected);
      log(`  ${name} (knex + sqlite3${quickClaims ? ', quick claims' : ', general transaction'}): ${JSON.stringify(results[name])}`);
    }

    // 2. node-sqlite3 without knex: the same statements, prepared per call (as knex does) and prepared once.
    for (const [name, prepared] of [
      ['sqlite3', false],
      ['sqlite3-prepared', true],
    ] as const) {
      const file = copy(name);
      const db = await openSqlite3(file, prepared);
      await db.exec(PRAGMAS.join(';'));
      results[name] = await timed(
        args.claims,
        async (i) => {
          await db.exec('BEGIN');
          try {
            await db.all(SQL.lock, []);
            await claimWith(db, picks[i]!, classIds);
            await db.exec('COMMIT');
          } catch (err) {
            await db.exec('ROLLBACK');
            throw err;
          }
        },
        13, // BEGIN, the lock, 10 statements, COMMIT
      );
      await db.close();
      mismatches[name] = await checkUsage(file, expected);
      log(`  ${name}: ${JSON.stringify(results[name])}`);
    }

    // 3. better-sqlite3, if installed beside.
    {
      type BetterDb = { pragma(s: string): unknown; prepare(sql: string): { all(...p: unknown[]): unknown[]; run(...p: unknown[]): unknown; reader: boolean }; exec(sql: string): void; close(): void };
      let Better: (new (file: string) => BetterDb) | undefined;
      try {
        Better = ((await import('better-sqlite3' as string)) as { default: new (file: string) => BetterDb }).default;
      } catch {
        results['better-sqlite3'] = { skipped: 'better-sqlite3 is not installed (npm i --no-save better-sqlite3)' };
      }
      if (Better) {
        const file = copy('better');
        const db = new Better(file);
        for (const p of PRAGMAS) db.pragma(p.replace(/^PRAGMA /, ''));
        const statements = new Map<string, ReturnType<BetterDb['prepare']>>();
        const all = (sql: string, params: unknown[]) => {
          let stmt = statements.get(sql);
          if (!stmt) statements.set(sql, (stmt = db.prepare(sql)));
          if (stmt.reader) return stmt.all(...params);
          stmt.run(...params);
          return [];
        };
        results['better-sqlite3'] = await timed(
          args.claims,
          async (i) => {
            db.exec('BEGIN IMMEDIATE');
            try {
              await claimWith({ all }, picks[i]!, classIds);
              db.exec('COMMIT');
            } catch (err) {
              db.exec('ROLLBACK');
              throw err;
            }
          },
          0, // in process: its 12 statements are function calls
        );
        db.close();
        mismatches['better-sqlite3'] = await checkUsage(file, expected);
        log(`  better-sqlite3: ${JSON.stringify(results['better-sqlite3'])}`);
      }
    }
    // 4. The floor under every statement above: a trip to node-sqlite3's thread pool and back.
    const trip = await tripLatency(args.claims);
    log(`  trip (SELECT ?1, one at a time): ${JSON.stringify(trip)}`);
    const wrong = Object.values(mismatches).reduce((a, b) => a + b, 0);
    const out = { hosts: args.hosts, claims: args.claims, results, trip, usageMismatches: mismatches, loadAverage: Math.round(loadavg()[0]! * 100) / 100 };
    process.stdout.write(JSON.stringify(out, null, args.json ? 0 : 2) + '\n');
    if (wrong > 0) {
      process.stderr.write(`driver-bench: ${wrong} provider(s) whose usage does not equal the claims made\n`);
      process.exitCode = 1;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
