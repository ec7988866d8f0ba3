/**
 * Placement API benchmark: `npm run bench -- api [--flat N] [--trees N] [--requests N]
 * [--clients N] [--puts N] [--store sqlite|pg] [--pg URL] [--workers N] [--no-placement] [--json]`.
 *
 * The same load, over HTTP on 127.0.0.1, against `ert serve --workers N` and, when Debian's
 * placement-api is installed, Placement 8.0.0 (noauth2; under uwsgi with N processes when
 * uwsgi and its python3 plugin are installed, as deployments run it, else its own
 * single-threaded server), one after the other, on the same store kind: a fresh SQLite file
 * each, or with `--store pg` a fresh schema (ert) and database (Placement) on the PostgreSQL
 * server of `--pg` (default $ERT_TEST_PG_URL). Each is loaded through its own REST API (so
 * loading is also a write test):
 * 1. flat: `--flat` providers with VCPU 64 (ratio 4), MEMORY_MB 262144 and DISK_GB 2000;
 *    `GET /allocation_candidates?resources=...&limit=1000` (Nova's max_placement_results), the
 *    amounts varying per request so that most requests are shapes not seen before;
 * 2. trees: `--trees` hosts, each a root with DISK_GB and two NUMA children with VCPU and
 *    MEMORY_MB; the request puts VCPU and MEMORY_MB in a granular group (1.25+);
 * 3. Nova's loop: `--requests` times, GET candidates for the flat shape (limit 1000) then PUT
 *    the first candidate's allocations, one after the other: every candidates request sees a
 *    model the previous claim changed (the cache-unfriendly case);
 * 4. claims: `--clients` clients PUT allocations (1.28, new consumers, VCPU 1 and MEMORY_MB
 *    512 on a random flat provider) until `--puts` have been sent; 204s and 409s apart.
 * Checked at the end, on each server: every candidates answer was 200 with candidates, and
 * the usages of the flat providers add up to exactly the claims answered 204. The client is
 * node:http with kept-alive connections (`call`), the same for both servers. Figures go to
 * docs/benchmarks.md.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { seededRandom } from '@ert/core';
import { dropPostgresSchema } from '@ert/store';

interface Args {
  store: 'sqlite' | 'pg';
  pg: string | undefined;
  workers: number;
  flat: number;
  trees: number;
  requests: number;
  clients: number;
  puts: number;
  placement: boolean;
  json: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { store: 'sqlite', pg: process.env['ERT_TEST_PG_URL'], workers: 2, flat: 5000, trees: 2000, requests: 40, clients: 64, puts: 2000, placement: true, json: false };
  const int = (name: string, value: string | undefined, min: number): number => {
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < min) throw new Error(`api-bench: ${name} must be an integer of at least ${min}, got "${String(value)}"`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--flat') args.flat = int(arg, argv[++i], 1);
    else if (arg === '--trees') args.trees = int(arg, argv[++i], 1);
    else if (arg === '--requests') args.requests = int(arg, argv[++i], 1);
    else if (arg === '--clients') args.clients = int(arg, argv[++i], 1);
    else if (arg === '--puts') args.puts = int(arg, argv[++i], 1);
    else if (arg === '--no-placement') args.placement = false;
    else if (arg === '--store') {
      const kind = argv[++i];
      if (kind !== 'sqlite' && kind !== 'pg') throw new Error(`api-bench: --store must be sqlite or pg, got "${String(kind)}"`);
      args.store = kind;
    } else if (arg === '--pg') args.pg = argv[++i];
    else if (arg === '--workers') args.workers = int(arg, argv[++i], 1);
    else if (arg === '--json') args.json = true;
    else if (arg === '--help' || arg === '-h') {
      console.log('usage: npm run bench -- api [--flat N] [--trees N] [--requests N] [--clients N] [--puts N] [--store sqlite|pg] [--pg URL] [--workers N] [--no-placement] [--json]');
      process.exit(0);
    } else throw new Error(`api-bench: unknown option "${arg}" (see --help)`);
  }
  if (args.store === 'pg' && !args.pg) throw new Error('api-bench: --store pg needs --pg URL (or ERT_TEST_PG_URL)');
  return args;
}

const BIN = fileURLToPath(new URL('../../cli/dist/bin.js', import.meta.url));
const HEADERS = { 'content-type': 'application/json', 'x-auth-token': 'admin' };

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

interface Server {
  name: string;
  base: string;
  stop(): Promise<void>;
}

async function waitUp(base: string, child: ChildProcess, name: string): Promise<void> {
  for (const deadline = Date.now() + 60_000; ; ) {
    if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode})`);
    try {
      if ((await fetch(`${base}/`)).ok) return;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error(`${name} did not answer on ${base}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function startErt(args: Args): Promise<Server> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ert-api-bench-'));
  const config = path.join(dir, 'ert.config.yaml');
  const schema = `ert_api_bench_${process.pid}`;
  const store = args.store === 'pg' ? `store:\n  client: pg\n  connection: ${JSON.stringify(args.pg)}\n  schema: ${schema}\n` : 'store:\n  client: sqlite3\n  connection: ./ert.db\n';
  writeFileSync(config, `${store}log:\n  level: warn\n`);
  const migrate = spawnSync(process.execPath, [BIN, '--config', config, 'db', 'migrate'], { encoding: 'utf8' });
  if (migrate.status !== 0) throw new Error(`ert db migrate failed: ${migrate.stderr}`);
  const port = await freePort();
  const child = spawn(process.execPath, [BIN, '--config', config, 'serve', '--host', '127.0.0.1', '--port', String(port), '--prefix', '', '--workers', String(args.workers)], { stdio: ['ignore', 'ignore', 'inherit'] });
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    if (args.store === 'pg') await dropPostgresSchema(args.pg!, schema);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitUp(base, child, 'ert serve');
  } catch (err) {
    await stop();
    throw err;
  }
  return { name: `ert serve (${args.store}, ${args.workers} workers)`, base, stop };
}

/** Runs `psql` on the PostgreSQL server of `url` (its maintenance database), for CREATE/DROP DATABASE. */
function psql(url: string, sql: string): void {
  const server = new URL(url);
  server.pathname = '/postgres';
  const done = spawnSync('psql', [server.toString(), '-v', 'ON_ERROR_STOP=1', '-q', '-c', sql], { encoding: 'utf8' });
  if (done.status !== 0) throw new Error(`psql ${sql}: ${done.stderr}`);
}

async function startPlacement(args: Args): Promise<Server | undefined> {
  if (spawnSync('sh', ['-c', 'command -v placement-api && command -v placement-manage']).status !== 0) return undefined;
  const dir = mkdtempSync(path.join(tmpdir(), 'placement-api-bench-'));
  const database = `placement_bench_${process.pid}`;
  let connection = `sqlite:///${dir}/placement.sqlite`;
  if (args.store === 'pg') {
    psql(args.pg!, `CREATE DATABASE ${database}`);
    const url = new URL(args.pg!);
    url.protocol = 'postgresql+psycopg2:';
    url.pathname = `/${database}`;
    connection = url.toString();
  }
  writeFileSync(path.join(dir, 'placement.conf'), ['[DEFAULT]', `log_file = ${dir}/placement-api.log`, '[api]', 'auth_strategy = noauth2', '[placement_database]', `connection = ${connection}`, ''].join('\n'));
  const dropDatabase = () => {
    if (args.store === 'pg') psql(args.pg!, `DROP DATABASE IF EXISTS ${database}`);
  };
  const sync = spawnSync('placement-manage', ['--config-file', path.join(dir, 'placement.conf'), 'db', 'sync'], { encoding: 'utf8' });
  if (sync.status !== 0) {
    dropDatabase();
    throw new Error(`placement-manage db sync failed: ${sync.stderr}`);
  }
  const port = await freePort();
  const env = { ...process.env, OS_PLACEMENT_CONFIG_DIR: dir };
  // uwsgi with N processes is how Placement is deployed; its own server (wsgiref) is one thread.
  const uwsgi = spawnSync('sh', ['-c', 'command -v uwsgi && test -e /usr/lib/uwsgi/plugins/python3_plugin.so']).status === 0;
  // On SQLite, Placement's processes fail each other's writes ("database is locked", 500): one.
  const processes = args.store === 'sqlite' ? 1 : args.workers;
  const child = uwsgi
    ? spawn('uwsgi', ['--http-socket', `127.0.0.1:${port}`, '--plugin', 'python3', '--wsgi-file', '/usr/bin/placement-api', '--processes', String(processes), '--threads', '1', '--master', '--die-on-term', '--listen', '1024', '--disable-logging', '--add-header', 'Connection: close'], { cwd: dir, env, stdio: ['ignore', 'ignore', 'ignore'] })
    : spawn('placement-api', ['--host', '127.0.0.1', '--port', String(port)], { env, stdio: ['ignore', 'ignore', 'ignore'] });
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    dropDatabase();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitUp(base, child, 'placement-api');
  } catch (err) {
    await stop();
    throw err;
  }
  return { name: uwsgi ? `Placement 8.0.0 (${args.store}, uwsgi ${processes} process${processes === 1 ? '' : 'es'})` : `Placement 8.0.0 (${args.store}, its own one-thread server)`, base, stop };
}

/**
 * The load generator's connections: node:http with keep-alive, not `fetch`. On this two-core
 * machine the client shares the CPU with the server under test and its database; `fetch`
 * (undici's WHATWG streams) took about 0.8 core for 1,750 PUTs a second, more than the
 * server. Both servers are measured through the same client.
 */
const AGENT = new Agent({ keepAlive: true, maxSockets: 256 });

function call(base: string, method: string, url: string, version: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...HEADERS, 'openstack-api-version': `placement ${version}` };
    if (payload !== undefined) headers['content-length'] = Buffer.byteLength(payload);
    const req = request(`${base}${url}`, { method, agent: AGENT, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        try {
          resolve({ status: res.statusCode ?? 0, json: text === '' ? undefined : (JSON.parse(text) as unknown) });
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

async function must(base: string, method: string, url: string, version: string, body?: unknown): Promise<unknown> {
  const { status, json } = await call(base, method, url, version, body);
  if (status >= 300) throw new Error(`${method} ${url}: ${status} ${JSON.stringify(json)}`);
  return json;
}

/** Run `tasks` with at most `width` in flight. */
async function pool<T>(items: readonly T[], width: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await task(items[next++]!);
    }),
  );
}

const inventory = (total: number, extra: Record<string, number> = {}) => ({ total, ...extra });

interface World {
  flat: string[];
  /** Root uuid -> its two NUMA children's uuids. */
  trees: Map<string, [string, string]>;
}

/** The same providers on a server, through its API (uuids fixed, so both servers hold the same world). */
async function load(server: Server, world: World): Promise<number> {
  const started = performance.now();
  await pool(world.flat, 8, async (uuid) => {
    await must(server.base, 'POST', '/resource_providers', '1.20', { uuid, name: `flat-${uuid.slice(0, 8)}` });
    await must(server.base, 'PUT', `/resource_providers/${uuid}/inventories`, '1.20', {
      resource_provider_generation: 0,
      inventories: { VCPU: inventory(64, { allocation_ratio: 4 }), MEMORY_MB: inventory(262144), DISK_GB: inventory(2000) },
    });
  });
  await pool([...world.trees], 8, async ([uuid, children]) => {
    await must(server.base, 'POST', '/resource_providers', '1.20', { uuid, name: `tree-${uuid.slice(0, 8)}` });
    await must(server.base, 'PUT', `/resource_providers/${uuid}/inventories`, '1.20', { resource_provider_generation: 0, inventories: { DISK_GB: inventory(1000) } });
    for (const [node, child] of children.entries()) {
      await must(server.base, 'POST', '/resource_providers', '1.20', { uuid: child, name: `tree-${uuid.slice(0, 8)}-numa${node}`, parent_provider_uuid: uuid });
      await must(server.base, 'PUT', `/resource_providers/${child}/inventories`, '1.20', {
        resource_provider_generation: 0,
        inventories: { VCPU: inventory(32, { allocation_ratio: 4 }), MEMORY_MB: inventory(131072) },
      });
    }
  });
  return (performance.now() - started) / 1000;
}

interface Timing {
  requests: number;
  failed: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
}

function timing(samples: number[], failed: number): Timing {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { requests: samples.length, failed, p50Ms: round(at(0.5)), p99Ms: round(at(0.99)), meanMs: round(samples.reduce((a, b) => a + b, 0) / Math.max(1, samples.length)) };
}
const round = (x: number) => Math.round(x * 100) / 100;

/** Candidates requests, one at a time (latency, not throughput); `query(i)` varies the shape. */
async function candidates(server: Server, n: number, version: string, query: (i: number) => string, expectAtLeast: number): Promise<Timing> {
  const samples: number[] = [];
  let failed = 0;
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const { status, json } = await call(server.base, 'GET', `/allocation_candidates?${query(i)}`, version).catch(() => ({ status: 0, json: undefined }));
    const ms = performance.now() - started;
    const count = (json as { allocation_requests?: unknown[] } | undefined)?.allocation_requests?.length ?? 0;
    if (status !== 200 || count < expectAtLeast) failed++;
    else samples.push(ms);
  }
  return timing(samples, failed);
}

/**
 * Nova's scheduler loop, one decision at a time: GET candidates (the flat shape, limit 1000),
 * PUT the first candidate's allocations (VCPU 1, MEMORY_MB 512, project `bench`). Each
 * candidates request sees the model the previous claim changed. Returns the candidates
 * latency, the whole decision's, and the claims answered 204.
 */
async function novaLoop(server: Server, n: number, expectAtLeast: number): Promise<{ candidates: Timing; decisions: Timing; ok: number }> {
  const candidateMs: number[] = [];
  const decisionMs: number[] = [];
  let failed = 0;
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const got = await call(server.base, 'GET', `/allocation_candidates?resources=VCPU:1,MEMORY_MB:512&limit=1000`, '1.39').catch(() => ({ status: 0, json: undefined }));
    const fetched = performance.now();
    const requests = (got.json as { allocation_requests?: Array<{ allocations: Record<string, unknown> }> } | undefined)?.allocation_requests ?? [];
    if (got.status !== 200 || requests.length < expectAtLeast) {
      failed++;
      continue;
    }
    const put = await call(server.base, 'PUT', `/allocations/${randomUUID()}`, '1.28', { allocations: requests[0]!.allocations, project_id: 'bench', user_id: 'bench', consumer_generation: null }).catch(() => ({ status: 0 }));
    if (put.status !== 204) {
      failed++;
      continue;
    }
    ok++;
    candidateMs.push(fetched - started);
    decisionMs.push(performance.now() - started);
  }
  return { candidates: timing(candidateMs, failed), decisions: timing(decisionMs, failed), ok };
}

interface Claims extends Timing {
  ok: number;
  conflicts: number;
  perSecond: number;
}

async function claims(server: Server, world: World, clients: number, puts: number, seed: number): Promise<Claims> {
  const random = seededRandom(seed);
  const jobs = Array.from({ length: puts }, () => world.flat[Math.floor(random() * world.flat.length)]!);
  const samples: number[] = [];
  let ok = 0;
  let conflicts = 0;
  let failed = 0;
  const started = performance.now();
  await pool(jobs, clients, async (provider) => {
    const t = performance.now();
    // A refused connection (a server whose backlog is full) is a failure, counted apart.
    const { status } = await call(server.base, 'PUT', `/allocations/${randomUUID()}`, '1.28', {
      allocations: { [provider]: { resources: { VCPU: 1, MEMORY_MB: 512 } } },
      project_id: 'bench',
      user_id: 'bench',
      consumer_generation: null,
    }).catch(() => ({ status: 0 }));
    const ms = performance.now() - t;
    if (status === 204) {
      ok++;
      samples.push(ms);
    } else if (status === 409) conflicts++;
    else failed++;
  });
  const seconds = (performance.now() - started) / 1000;
  return { ...timing(samples, failed), ok, conflicts, perSecond: round(ok / seconds) };
}

/** The flat providers' usages add up to the claims answered 204 (VCPU 1 and MEMORY_MB 512 each). */
async function checkUsages(server: Server, ok: number): Promise<string | undefined> {
  const usages = (await must(server.base, 'GET', '/usages?project_id=bench', '1.9')) as { usages: Record<string, number> };
  const vcpu = usages.usages['VCPU'] ?? 0;
  const memory = usages.usages['MEMORY_MB'] ?? 0;
  if (vcpu !== ok || memory !== ok * 512) return `${server.name}: usages VCPU ${vcpu}, MEMORY_MB ${memory} after ${ok} claims of 1 VCPU and 512 MB`;
  return undefined;
}

async function run(server: Server, world: World, args: Args): Promise<Record<string, unknown>> {
  const loadSeconds = await load(server, world);
  const flat = await candidates(server, args.requests, '1.39', (i) => `resources=VCPU:${1 + (i % 16)},MEMORY_MB:${1024 * (1 + ((i * 7) % 32))}&limit=1000`, Math.min(1000, world.flat.length));
  const trees = await candidates(
    server,
    args.requests,
    '1.39',
    (i) => `resources=DISK_GB:${10 + (i % 50)}&resources1=VCPU:${1 + (i % 8)},MEMORY_MB:${1024 * (1 + ((i * 5) % 16))}&group_policy=none&limit=1000`,
    Math.min(1000, world.trees.size),
  );
  const nova = await novaLoop(server, args.requests, Math.min(1000, world.flat.length));
  const put = await claims(server, world, args.clients, args.puts, 7);
  const problem = await checkUsages(server, put.ok + nova.ok);
  if (problem) throw new Error(`api-bench: wrong result: ${problem}`);
  return { server: server.name, loadSeconds: round(loadSeconds), flatCandidates: flat, treeCandidates: trees, novaLoop: nova, claims: put };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const random = seededRandom(42);
  const uuid = () => Array.from({ length: 32 }, () => Math.floor(random() * 16).toString(16)).join('').replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
  const world: World = { flat: Array.from({ length: args.flat }, uuid), trees: new Map(Array.from({ length: args.trees }, () => [uuid(), [uuid(), uuid()]] as [string, [string, string]])) };
  const results: Array<Record<string, unknown>> = [];
  for (const start of [startErt, ...(args.placement ? [startPlacement] : [])]) {
    const server = await start(args);
    if (!server) {
      if (!args.json) console.log('placement-api is not installed: ert only (apt-get install placement-api to compare)');
      continue;
    }
    try {
      if (!args.json) console.log(`${server.name}: loading ${args.flat} flat providers and ${args.trees} trees through its API ...`);
      results.push(await run(server, world, args));
    } finally {
      await server.stop();
    }
  }
  const report = { machine: { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown', loadavg: loadavg().map(round) }, node: process.version, args, results };
  if (args.json) {
    console.log(JSON.stringify(report, null, 2));
    return;
  }
  for (const r of results) {
    const f = r['flatCandidates'] as Timing;
    const t = r['treeCandidates'] as Timing;
    const c = r['claims'] as Claims;
    const nova = r['novaLoop'] as { candidates: Timing; decisions: Timing; ok: number };
    console.log(`\n${String(r['server'])} (loaded in ${String(r['loadSeconds'])} s)`);
    console.log(`  GET /allocation_candidates, ${args.flat} flat providers: p50 ${f.p50Ms} ms, p99 ${f.p99Ms} ms (${f.requests} ok, ${f.failed} failed)`);
    console.log(`  GET /allocation_candidates, ${args.trees} NUMA trees, granular: p50 ${t.p50Ms} ms, p99 ${t.p99Ms} ms (${t.requests} ok, ${t.failed} failed)`);
    console.log(`  Nova's loop (GET candidates, PUT the first): candidates p50 ${nova.candidates.p50Ms} ms, p99 ${nova.candidates.p99Ms} ms; decision p50 ${nova.decisions.p50Ms} ms (${nova.ok} claimed, ${nova.candidates.failed} failed)`);
    console.log(`  PUT /allocations, ${args.clients} clients: ${c.perSecond}/s, p50 ${c.p50Ms} ms, p99 ${c.p99Ms} ms (${c.ok} claimed, ${c.conflicts} 409, ${c.failed} failed; usages checked)`);
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
