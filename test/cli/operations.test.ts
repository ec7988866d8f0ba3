import type { ChildProcess } from 'node:child_process';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import knexFactory from 'knex';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMetrics, type ErtMetrics } from '@ert/api';
import { MIGRATIONS_TABLE } from '@ert/store';
import { createTracker } from '@ert/tracker';
import { Project, startErt } from './helpers.js';
import { parseExposition, valueOf, type Exposition } from '../api/exposition.js';
import { World, flavor, instance } from '../reservations/world.js';
import { trackerObserver } from '../../packages/cli/src/ops.js';

/**
 * The operator's side of the long-running commands (docs/operations.md), on real processes
 * bound to 127.0.0.1: `/metrics` scraped and parsed (the key series present, and counting what
 * was done), `/healthz`, `/readyz` (503 when the store's schema is outdated or its file is
 * gone), request ids in every log line of a request, and `ert serve` stopping on SIGTERM
 * while a request is in flight (the request is answered, the process exits 0). In process
 * (nothing in `ert host run` makes a confirmation fail on demand): the reservation series of
 * the tracker observer `host run` wires, for a confirmation that fails.
 */

async function scrape(base: string): Promise<Exposition> {
  const res = await fetch(`${base}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/* ------------------------------------------------------------------ processes */

/** Collects a child's stderr and resolves when a line matches. */
class Daemon {
  stderr = '';
  stdout = '';
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    child.stderr!.on('data', (d) => (this.stderr += d));
    child.stdout!.on('data', (d) => (this.stdout += d));
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  async waitFor(pattern: RegExp, timeoutMs = 30_000): Promise<RegExpExecArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = pattern.exec(this.stderr);
      if (m) return m;
      if (this.child.exitCode !== null) throw new Error(`exited ${this.child.exitCode} before ${pattern}:\n${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms:\n${this.stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stop(): Promise<number | null> {
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const ADMIN = { 'x-auth-token': 'admin', 'openstack-api-version': 'placement 1.39' };

function sqlite(file: string) {
  return knexFactory({ client: 'sqlite3', connection: { filename: file }, useNullAsDefault: true, pool: { min: 1, max: 1 } });
}

/** Take out the newest migration's row (the schema looks one version old) and give a function that puts it back. */
async function outdateSchema(file: string): Promise<() => Promise<void>> {
  const knex = sqlite(file);
  try {
    const row = (await knex(MIGRATIONS_TABLE).orderBy('id', 'desc').first()) as Record<string, unknown>;
    await knex(MIGRATIONS_TABLE).where('id', row.id as number).delete();
    return async () => {
      const again = sqlite(file);
      try {
        await again(MIGRATIONS_TABLE).insert(row);
      } finally {
        await again.destroy();
      }
    };
  } finally {
    await knex.destroy();
  }
}

async function readyz(base: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/readyz`);
  return { status: res.status, body: await res.json() };
}

/* ------------------------------------------------------------------ ert serve */

describe('ert serve: /metrics, /healthz, /readyz, request ids, SIGTERM', () => {
  let project: Project;
  let db: string;

  beforeAll(async () => {
    project = await Project.create();
    // A long busy timeout: the SIGTERM test holds the store's write lock while a request waits for it.
    await project.writeConfig({ store: { client: 'sqlite3', connection: './ert.db', busyTimeout: '20s' } });
    db = join(project.dir, 'ert.db');
    const synced = await project.run(['host', 'sync', '--json']);
    expect(synced.code, synced.stderr).toBe(0);
  });
  afterAll(async () => project?.remove());

  async function startServe(): Promise<{ daemon: Daemon; base: string }> {
    const daemon = new Daemon(startErt(['--config', project.configFile, '--log-level', 'info', 'serve', '--port', '0'], { cwd: project.dir }));
    const m = await daemon.waitFor(/Placement API on (http:\/\/127\.0\.0\.1:\d+)/);
    // Ready once it has read every host's snapshot (the check host-snapshots, a few ms here).
    // Mutation seen red: with ert serve's onHostSnapshotsRead never setting the check's result
    // (packages/cli/src/commands/serve.ts), /readyz stays 503 and every test here fails.
    await expect.poll(async () => (await readyz(m[1]!)).status, { timeout: 10_000, interval: 20 }).toBe(200);
    return { daemon, base: m[1]! };
  }

  it('counts requests by route pattern, method and status; exposes hosts, store latency and process metrics; logs request ids', async () => {
    const { daemon, base } = await startServe();
    try {
      const health = await fetch(`${base}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      expect((await readyz(base)).status).toBe(200);

      const before = await scrape(base);
      const list = `${base}/placement/resource_providers`;
      const providers = (await (await fetch(list, { headers: ADMIN })).json()) as { resource_providers: Array<{ uuid: string }> };
      expect(providers.resource_providers.length).toBeGreaterThan(0);
      await fetch(list, { headers: ADMIN });
      const one = await fetch(`${base}/placement/resource_providers/${providers.resource_providers[0]!.uuid}`, { headers: ADMIN });
      expect(one.status).toBe(200);
      const requestId = one.headers.get('x-openstack-request-id')!;
      expect((await fetch(`${base}/no/such/path/${'x'.repeat(10)}`)).status).toBe(404);
      const after = await scrape(base);

      // Types and naming.
      expect(after.types.get('ert_http_requests_total')).toBe('counter');
      expect(after.types.get('ert_http_request_duration_seconds')).toBe('histogram');
      expect(after.types.get('ert_store_transaction_duration_seconds')).toBe('histogram');
      expect(after.types.get('ert_hosts')).toBe('gauge');

      // By route pattern, not the URL: the two lists are one series, the show is its pattern.
      const listed = { route: '/placement/resource_providers', method: 'GET', status: '200' };
      expect((valueOf(after, 'ert_http_requests_total', listed) ?? 0) - (valueOf(before, 'ert_http_requests_total', listed) ?? 0)).toBe(2);
      expect(valueOf(after, 'ert_http_request_duration_seconds_count', listed)).toBe(2);
      expect(valueOf(after, 'ert_http_request_duration_seconds_bucket', { ...listed, le: '+Inf' })).toBe(2);
      expect(valueOf(after, 'ert_http_requests_total', { route: '/placement/resource_providers/:uuid', method: 'GET', status: '200' })).toBe(1);
      expect(valueOf(after, 'ert_http_requests_total', { route: '(unmatched)', method: 'GET', status: '404' })).toBe(1);
      const routes = new Set(after.samples.filter((s) => s.name === 'ert_http_requests_total').map((s) => s.labels.route));
      expect([...routes].some((r) => r!.includes('/no/such') || /[0-9a-f]{8}-/.test(r!))).toBe(false);
      // The previous scrape is a request too.
      expect(valueOf(after, 'ert_http_requests_total', { route: '/metrics', method: 'GET', status: '200' })).toBe(1);

      // Hosts by status, read from the store at scrape time; store reads timed; process metrics.
      expect(valueOf(after, 'ert_hosts', { status: 'up' })).toBe(1);
      expect(valueOf(after, 'ert_hosts', { status: 'stale' })).toBe(0);
      const reads = valueOf(after, 'ert_store_transaction_duration_seconds_count', { kind: 'read', operation: 'read', outcome: 'ok' }) ?? 0;
      expect(reads).toBeGreaterThan(valueOf(before, 'ert_store_transaction_duration_seconds_count', { kind: 'read', operation: 'read', outcome: 'ok' }) ?? 0);
      expect(valueOf(after, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
      expect(after.samples.some((s) => s.name === 'nodejs_heap_size_used_bytes')).toBe(true);
      // No scheduler runs in ert serve yet (POST /select): the decision series exist, empty.
      expect(after.types.get('ert_scheduler_decision_duration_seconds')).toBe('histogram');

      // Fastify's request id is on every log line of that request, and is the id the client got.
      const lines = daemon.stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { reqId?: string; msg: string; req?: { url: string } });
      const ofRequest = lines.filter((l) => l.reqId === requestId);
      expect(ofRequest.map((l) => l.msg)).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
      expect(lines.filter((l) => l.req?.url?.startsWith('/placement/resource_providers/')).every((l) => l.reqId === requestId)).toBe(true);
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
  });

  // Seen to fail when broken: with `storeCheck` answering { ok: true } whatever the store says
  // (packages/api/src/ops.ts), both 503s below were 200s.
  it('/readyz is 503 with the reason while the schema is outdated or the store file is gone, 200 again after', async () => {
    const { daemon, base } = await startServe();
    try {
      expect(await readyz(base)).toMatchObject({ status: 200, body: { status: 'ready', checks: { store: 'ok' } } });

      const restore = await outdateSchema(db);
      const outdated = await readyz(base);
      expect(outdated).toMatchObject({ status: 503, body: { status: 'unavailable', code: 'ERT_STORE_SCHEMA_OUTDATED' } });
      expect(outdated.body.reason).toMatch(/^store: .*pending/);
      await fetch(`${base}/healthz`).then((r) => expect(r.status).toBe(200)); // alive all the same
      await restore();
      expect((await readyz(base)).status).toBe(200);

      await rename(db, `${db}.moved`);
      try {
        expect(await readyz(base)).toMatchObject({ status: 503, body: { status: 'unavailable', code: 'ERT_STORE_MISSING' } });
      } finally {
        await rename(`${db}.moved`, db);
      }
      expect((await readyz(base)).status).toBe(200);
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
  });

  // Seen to fail when broken: with `closeGracefully` (packages/cli/src/ops.ts) cutting the
  // connections at once (`closeAllConnections()` before `close()`), the PUT in flight failed
  // with "fetch failed" (socket closed) instead of its 201. The stop's logs: seen red without
  // the 5 s "still stopping" report, and without its list of open connections (`trackConnections`
  // not called in `serveOps`).
  it('SIGTERM: stops accepting, answers the request in flight, closes the store and exits 0', async () => {
    const { daemon, base } = await startServe();
    // Hold SQLite's write lock: the PUT below waits for it (store.busyTimeout, 20 s) and is in flight.
    const holder = sqlite(db);
    const trx = await holder.transaction();
    try {
      await trx.raw('UPDATE resource_classes SET name = name WHERE id = 0');
      const put = fetch(`${base}/placement/resource_classes/CUSTOM_SLOW_SHUTDOWN`, { method: 'PUT', headers: ADMIN });
      await daemon.waitFor(/"url":"\/placement\/resource_classes\/CUSTOM_SLOW_SHUTDOWN".*"msg":"incoming request"/);
      await new Promise((r) => setTimeout(r, 200));
      daemon.child.kill('SIGTERM');
      await daemon.waitFor(/SIGTERM received, stopping/);
      await new Promise((r) => setTimeout(r, 200));
      // Not accepting any more (the listening socket is closed), while the PUT still waits.
      await expect(fetch(`${base}/healthz`)).rejects.toThrow();
      expect(daemon.child.exitCode).toBe(null);
      // Each step of the stop is logged; one still waiting after 5 s says on what.
      expect(daemon.stderr).toMatch(/"msg":"stopping: no longer accepting; answering the requests in flight"/);
      await daemon.waitFor(/"connections":1,.*"msg":"still stopping: waiting for requests or connections"/, 10_000);
      // ...naming the connection and the request it is still answering.
      const report = daemon.stderr.split('\n').find((line) => line.includes('still stopping'))!;
      const open = (JSON.parse(report) as { open: Array<{ peer: string; openMs: number; request?: string; requestMs?: number }> }).open;
      expect(open).toEqual([{ peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/), openMs: expect.any(Number), request: 'PUT /placement/resource_classes/CUSTOM_SLOW_SHUTDOWN', requestMs: expect.any(Number) }]);
      expect(open[0]!.requestMs).toBeGreaterThanOrEqual(5_000);

      await trx.rollback();
      const res = await put;
      expect(res.status).toBe(201);
      expect(await daemon.exited).toBe(0);
      expect(daemon.stderr).toMatch(/"msg":"stopped: requests answered, server closed"/);
      expect(daemon.stdout).toMatch(/^stopped serving http:\/\/127\.0\.0\.1:\d+\/placement$/m);
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
      await holder.destroy();
      await daemon.stop();
    }
    // The write was committed before the process ended, and the store was left closed (the file opens and reads).
    const after = sqlite(db);
    try {
      expect(await after('resource_classes').where('name', 'CUSTOM_SLOW_SHUTDOWN').first()).toBeDefined();
    } finally {
      await after.destroy();
    }
  });
});

/* ------------------------------------------------------------------ ert host run --metrics-port */

describe('ert host run --metrics-port', () => {
  let project: Project;

  beforeAll(async () => {
    project = await Project.create();
  });
  afterAll(async () => project?.remove());

  it('serves hook timings per plugin, claims and reservations, hosts, /healthz and /readyz; stops on SIGTERM', async () => {
    const daemon = new Daemon(startErt(['--config', project.configFile, '--log-level', 'warn', 'host', 'run', '--metrics-port', '0'], { cwd: project.dir }));
    try {
      const base = (await daemon.waitFor(/metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/))[1]!;
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      await daemon.waitFor(/tracking host node1/);
      const ready = await readyz(base);
      expect(ready).toMatchObject({ status: 200, body: { status: 'ready', checks: { store: 'ok', tracker: { host: 'node1' } } } });
      expect(ready.body.checks.tracker.plugins).toEqual(expect.arrayContaining([{ plugin: 'gpu', available: true }, { plugin: 'vcpu', available: true }]));

      const before = await scrape(base);
      expect(before.types.get('ert_plugin_hook_duration_seconds')).toBe('histogram');
      expect(valueOf(before, 'ert_plugin_hook_calls_total', { plugin: 'gpu', hook: 'discover' })).toBeGreaterThanOrEqual(1);
      expect(valueOf(before, 'ert_plugin_hook_duration_seconds_count', { plugin: 'vcpu', hook: 'discover' })).toBeGreaterThanOrEqual(1);
      expect(valueOf(before, 'ert_hosts', { status: 'up' })).toBe(1);
      expect(valueOf(before, 'ert_tracker_claim_conflicts_total')).toBe(0);
      const testsBefore = valueOf(before, 'ert_plugin_hook_calls_total', { plugin: 'vcpu', hook: 'test' }) ?? 0;

      // A scheduler (another process) reserves an instance on node1; this tracker confirms it.
      const scheduled = await project.run(['--json', 'schedule', '--flavor', 'small']);
      expect(scheduled.code, scheduled.stderr).toBe(0);
      const after = await until('the reservation confirmed', async () => {
        const e = await scrape(base);
        return valueOf(e, 'ert_tracker_reservations_total', { outcome: 'confirmed' }) === 1 ? e : undefined;
      });
      expect(valueOf(after, 'ert_tracker_claims_total', { outcome: 'claimed' })).toBe(1);
      expect(valueOf(after, 'ert_tracker_claim_duration_seconds_count', { outcome: 'claimed' })).toBe(1);
      expect(valueOf(after, 'ert_plugin_hook_calls_total', { plugin: 'vcpu', hook: 'test' })).toBe(testsBefore + 1);
      expect(valueOf(after, 'ert_store_transaction_duration_seconds_count', { kind: 'write', operation: 'writeAllocations', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
      expect(valueOf(after, 'ert_http_requests_total', { route: '/metrics', method: 'GET', status: '200' })).toBeGreaterThanOrEqual(2);

      // Not ready while the store file is gone; ready again when it is back.
      const db = join(project.dir, 'ert.db');
      await rename(db, `${db}.moved`);
      try {
        expect(await readyz(base)).toMatchObject({ status: 503, body: { code: 'ERT_STORE_MISSING' } });
      } finally {
        await rename(`${db}.moved`, db);
      }
      expect((await readyz(base)).status).toBe(200);

      expect(await daemon.stop()).toBe(0);
      await expect(fetch(`${base}/healthz`)).rejects.toThrow();
    } finally {
      await daemon.stop();
    }
  });

  it('refuses a --metrics-port that is not a port (exit 2)', async () => {
    const result = await project.run(['host', 'run', '--metrics-port', 'http']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--metrics-port must be a port number');
  });
});

describe("ert host run's reservation series: a confirmation that fails", () => {
  // `ConfirmReport.failed`: a reservation whose confirmation failed with an error (not a
  // refusal) stays `scheduled` and is tried again at the next pass. In process: a real tracker
  // on a SQLite file, fed to the metrics through `trackerObserver` (packages/cli/src/ops.ts,
  // what `ert host run` wires), a real scheduler's reservations, and the store read of one of
  // them failing. Seen red with the `failed` line removed from `ErtMetrics.onConfirm` (no
  // `failed` sample: 0, not 1).
  const world = new World();
  beforeEach(() => world.init());
  afterEach(() => world.close());

  const reservations = async (metrics: ErtMetrics) => {
    const exposition = parseExposition((await metrics.expose()).body);
    return Object.fromEntries(['confirmed', 'refused', 'expired', 'failed'].map((outcome) => [outcome, valueOf(exposition, 'ert_tracker_reservations_total', { outcome }) ?? 0]));
  };

  it('counts it as failed at each pass it fails, beside the confirmations', async () => {
    let poisoned = '';
    const store = world.storeWith({ getAllocations: (uuid: string) => (uuid === poisoned ? Promise.reject(new Error('poisoned read')) : world.store.getAllocations(uuid)) });
    const metrics = createMetrics({ defaultMetrics: false });
    await mkdir(join(world.dir, 'h1', 'disk'), { recursive: true });
    await writeFile(join(world.dir, 'h1', 'disk', 'total_gb'), '500\n');
    const tracker = await createTracker({ config: world.config('h1'), store, observer: trackerObserver(metrics) });
    try {
      await tracker.sync();
      const scheduler = await world.scheduler();
      const [older, newer] = [instance(), instance()];
      const small = flavor('small', 1, 10);
      await scheduler.select({ flavor: small, instances: [older] });
      await scheduler.select({ flavor: small, instances: [newer] });
      poisoned = older.uuid;
      expect(await tracker.confirmScheduled()).toEqual({ confirmed: [newer.uuid], refused: [], expired: [], failed: [{ uuid: older.uuid, error: 'poisoned read' }] });
      expect(await reservations(metrics)).toEqual({ confirmed: 1, refused: 0, expired: 0, failed: 1 });
      // Still `scheduled`: the next pass tries it again, and its failure is counted again.
      expect((await tracker.confirmScheduled()).failed).toEqual([{ uuid: older.uuid, error: 'poisoned read' }]);
      expect(await reservations(metrics)).toEqual({ confirmed: 1, refused: 0, expired: 0, failed: 2 });
      poisoned = '';
      expect((await tracker.confirmScheduled()).confirmed).toEqual([older.uuid]);
      expect(await reservations(metrics)).toEqual({ confirmed: 2, refused: 0, expired: 0, failed: 2 });
    } finally {
      await tracker.stop();
    }
  });
});
