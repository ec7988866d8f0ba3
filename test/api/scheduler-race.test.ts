import { servedAt, stopAll } from './served.js';
import type { ChildProcess } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { normalizeInventory } from '@ert/plugin-api';
import { createStore, dropPostgresSchema, type StoreOptions } from '@ert/store';
import { buildPackage } from '../build.js';
import { REPO, scratchDir, startErt } from '../cli/helpers.js';

/**
 * Scheduling over HTTP with several schedulers on one store: two real `ert serve` processes
 * (packages/cli/dist/bin.js), each with its own scheduler, receive concurrent
 * `POST /scheduler/v1/select` for one host with VCPU 10 (flavor: 1 VCPU). Whatever each
 * scheduler believes, the store's claim never places more than fits: the placed instances
 * are at most 10, the host's usage is exactly their count, every other answer is a 409
 * ERT_SCHEDULER_NO_VALID_HOST, and once the race is over selects fill the host to exactly
 * 10. The overlap is measured: requests in flight at once, and requests of the two servers
 * in flight together. On SQLite always; on PostgreSQL when ERT_TEST_PG_URL is set.
 */

const PROVIDER = '5c000000-0000-4000-8000-000000000010';
const CAPACITY = 10;
const CLIENTS = 32;
const SERVERS = 2;
const HEADERS = { 'x-auth-token': 'admin', 'content-type': 'application/json' };

interface Attempt {
  server: number;
  start: number;
  end: number;
  status: number;
  code?: string;
  uuid?: string;
  /** A 409 whose scheduler had a claim refused by the store (a lost race) before giving up. */
  lostRace?: boolean;
}

async function select(base: string, server: number, log: Attempt[]): Promise<Attempt> {
  const start = performance.now();
  const res = await fetch(`${base}/scheduler/v1/select`, { method: 'POST', headers: HEADERS, body: JSON.stringify({ flavor: 'one' }) });
  const body = (await res.json()) as { instances?: Array<{ uuid: string; host: string }>; error?: { code: string; details?: { attempts?: Array<{ error: string }> } } };
  const attempt: Attempt = { server, start, end: performance.now(), status: res.status, ...(body.error ? { code: body.error.code } : {}), ...(body.instances ? { uuid: body.instances[0]!.uuid } : {}), lostRace: (body.error?.details?.attempts ?? []).some((a) => a.error.startsWith('ERT_STORE_')) };
  log.push(attempt);
  return attempt;
}

function maxInFlight(log: Attempt[]): number {
  const events = log.flatMap((a) => [
    [a.start, 1],
    [a.end, -1],
  ]) as Array<[number, number]>;
  events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let now = 0;
  let max = 0;
  for (const [, d] of events) max = Math.max(max, (now += d));
  return max;
}

const cases: Array<'sqlite3' | 'pg'> = ['sqlite3'];
if (process.env.ERT_TEST_PG_URL) cases.push('pg');

describe.each(cases)('POST /scheduler/v1/select from 32 clients of two ert serve processes on one %s store', (client) => {
  const children: ChildProcess[] = [];
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    await stopAll(children);
    for (const cleanup of cleanups) await cleanup();
  });

  it('never places more than fits, with the requests of both servers overlapping', { timeout: 180_000 }, async () => {
    buildPackage(join(REPO, 'packages/cli'));
    const dir = await scratchDir('ert-sched-race-');
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const schema = `t_srace_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const options: StoreOptions = client === 'pg' ? { client, connection: process.env.ERT_TEST_PG_URL!, schema } : { client, connection: join(dir, 'ert.db') };
    if (client === 'pg') cleanups.push(() => dropPostgresSchema(options.connection, schema));
    const store = await createStore(options);
    await store.migrate();
    await store.importHosts([
      {
        host: { name: 'tiny', status: 'up', lastUpdate: Date.now() },
        providers: [{ uuid: PROVIDER, name: 'tiny', inventories: { VCPU: normalizeInventory({ total: CAPACITY }), MEMORY_MB: normalizeInventory({ total: 65536 }) }, traits: [], aggregates: [] }],
      },
    ]);
    const config = join(dir, 'ert.config.yaml');
    await writeFile(
      config,
      stringify({
        store: client === 'pg' ? { client, connection: options.connection, schema } : { client, connection: './ert.db' },
        log: { level: 'warn' },
        tracker: { staleAfter: '1h' },
        scheduler: { consumers: [], filters: ['status', 'resources'], weighers: [], refreshInterval: 0 },
        flavors: [{ name: 'one', vcpus: 1, memory_mb: 256, disk_gb: 0 }],
      }),
    );
    for (let i = 0; i < SERVERS; i++) children.push(startErt(['--config', config, 'serve', '--port', '0'], { cwd: dir }));
    const bases = await Promise.all(children.map(async (c) => (await servedAt(c)).origin));

    const log: Attempt[] = [];
    const results = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => select(bases[i % SERVERS]!, i % SERVERS, log)));
    const placed = results.filter((r) => r.status === 200);
    const others = results.filter((r) => r.status !== 200);
    const inFlight = maxInFlight(log);
    const across = log.filter((a) => log.some((b) => b.server !== a.server && b.start < a.end && b.end > a.start)).length;
    console.log(
      `${client}: ${placed.length} placed (${SERVERS} servers: ${Array.from({ length: SERVERS }, (_, s) => placed.filter((p) => p.server === s).length).join(' + ')}), ` +
        `${others.length} refused (${[...new Set(others.map((o) => `${o.status} ${o.code}`))].join(', ')}); ${others.filter((o) => o.lostRace).length} after a claim the store refused; at most ${inFlight} in flight; ${across} overlapping the other server's`,
    );
    expect(placed.length).toBeGreaterThan(0);
    expect(placed.length).toBeLessThanOrEqual(CAPACITY);
    expect(others.every((o) => o.status === 409 && o.code === 'ERT_SCHEDULER_NO_VALID_HOST')).toBe(true);
    expect(inFlight).toBeGreaterThan(SERVERS);
    expect(across).toBeGreaterThan(0);

    // The store holds exactly what was answered 200.
    const records = await store.listInstances({ host: 'tiny' });
    expect(records.map((r) => r.uuid).sort()).toEqual(placed.map((p) => p.uuid).sort());
    const usage = async () => (await store.loadHosts(['tiny']))[0]!.providers[0]!.usages.VCPU ?? 0;
    expect(await usage()).toBe(placed.length);

    // Once the race is over, selects through either server fill the host to exactly its capacity.
    let total = placed.length;
    for (let i = 0; total < CAPACITY + 1 && i < CAPACITY * 2; i++) {
      const r = await select(bases[i % SERVERS]!, i % SERVERS, log);
      if (r.status !== 200) {
        expect(r.code).toBe('ERT_SCHEDULER_NO_VALID_HOST');
        break;
      }
      total++;
    }
    expect(total).toBe(CAPACITY);
    expect(await usage()).toBe(CAPACITY);

    // Each server counted its decisions (ert_scheduler_decisions_total): together, every answer.
    const metrics = await Promise.all(bases.map(async (b) => (await fetch(`${b}/metrics`)).text()));
    const count = (outcome: string) => metrics.reduce((n, text) => n + Number(new RegExp(`ert_scheduler_decisions_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0), 0);
    expect(count('placed')).toBe(CAPACITY);
    expect(count('placed') + count('no_valid_host')).toBe(log.length);
    await store.close();
  });
});
