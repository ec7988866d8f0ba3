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
 * Issue 13's race: 64 clients PUT allocations for distinct consumers (VCPU 1 each) against
 * one provider with VCPU total 10, retrying as Nova's report client does (a 409
 * `placement.concurrent_update` is retried, up to 4 attempts with a random sleep growing with
 * the attempt, here in milliseconds instead of Nova's seconds; a capacity 409 is "no room"
 * and not retried) -> exactly 10 succeed and the provider's usage is 10. Real `ert serve`
 * processes (packages/cli/dist/bin.js): one on SQLite, four on one PostgreSQL store (when
 * ERT_TEST_PG_URL is set). The overlap is measured, not assumed: the clients' requests are
 * in flight at once (the largest number in flight at one instant, and with several servers,
 * requests of different servers in flight together) and the refusals are counted.
 */

const PROVIDER = '10101010-1010-4010-8010-101010101010';
const CLIENTS = 64;
const CAPACITY = 10;

interface Attempt {
  server: number;
  start: number;
  end: number;
  status: number;
  code?: string;
}

const HEADERS = { 'x-auth-token': 'admin', 'openstack-api-version': 'placement 1.38', 'content-type': 'application/json' };

/** Nova's `put_allocations`: GET the consumer, PUT with its generation; retry concurrent_update (not a consumer generation conflict) up to 4 attempts. */
async function novaClaim(base: string, server: number, consumer: string, log: Attempt[]): Promise<'claimed' | 'no room' | 'gave up'> {
  for (let attempt = 1; attempt <= 4; attempt++) {
    const start = performance.now();
    const current = (await (await fetch(`${base}/allocations/${consumer}`, { headers: HEADERS })).json()) as { consumer_generation?: number };
    const res = await fetch(`${base}/allocations/${consumer}`, {
      method: 'PUT',
      headers: HEADERS,
      body: JSON.stringify({
        allocations: { [PROVIDER]: { resources: { VCPU: 1 } } },
        project_id: 'race',
        user_id: 'nova',
        consumer_generation: current.consumer_generation ?? null,
        consumer_type: 'INSTANCE',
      }),
    });
    const text = await res.text();
    const code = res.status === 409 ? (JSON.parse(text) as { errors: Array<{ code: string; detail: string }> }).errors[0]! : undefined;
    log.push({ server, start, end: performance.now(), status: res.status, ...(code ? { code: code.code } : {}) });
    if (res.status === 204) return 'claimed';
    if (res.status !== 409) throw new Error(`PUT ${consumer}: ${res.status} ${text}`);
    if (code!.code !== 'placement.concurrent_update' || code!.detail.includes('consumer generation conflict')) return 'no room';
    await new Promise((r) => setTimeout(r, Math.random() * 2 * attempt * 10));
  }
  return 'gave up';
}

/** The most requests in flight at one instant. */
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

const cases: Array<{ client: 'sqlite3' | 'pg'; servers: number }> = [{ client: 'sqlite3', servers: 1 }];
if (process.env.ERT_TEST_PG_URL) cases.push({ client: 'pg', servers: 4 });

describe.each(cases)('64 Nova-like clients racing for VCPU 10 through ert serve on $client ($servers server processes)', ({ client, servers }) => {
  const children: ChildProcess[] = [];
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    await stopAll(children);
    for (const cleanup of cleanups) await cleanup();
  });

  it('exactly 10 claims succeed, usage 10, with the requests overlapping', { timeout: 180_000 }, async () => {
    buildPackage(join(REPO, 'packages/api'));
    const dir = await scratchDir('ert-api-race-');
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const schema = `t_race_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const options: StoreOptions = client === 'pg' ? { client, connection: process.env.ERT_TEST_PG_URL!, schema } : { client, connection: join(dir, 'ert.db') };
    if (client === 'pg') cleanups.push(() => dropPostgresSchema(options.connection, schema));
    const store = await createStore(options);
    await store.migrate();
    await store.createProvider({ uuid: PROVIDER, name: 'race-cn' });
    await store.setInventories(PROVIDER, undefined, { VCPU: normalizeInventory({ total: CAPACITY }) });
    await store.close();
    const config = join(dir, 'ert.config.yaml');
    await writeFile(config, stringify({ store: client === 'pg' ? { client, connection: options.connection, schema } : { client, connection: './ert.db' } }));

    for (let i = 0; i < servers; i++) children.push(startErt(['--config', config, 'serve', '--port', '0', '--prefix', ''], { cwd: dir }));
    const bases = await Promise.all(children.map(async (c) => (await servedAt(c)).url));

    const log: Attempt[] = [];
    const consumers = Array.from({ length: CLIENTS }, (_, i) => `c0000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    const outcomes = await Promise.all(consumers.map((c, i) => novaClaim(bases[i % servers]!, i % servers, c, log)));

    const claimed = outcomes.filter((o) => o === 'claimed').length;
    const refusals = log.filter((a) => a.status === 409);
    const inFlight = maxInFlight(log);
    const acrossServers = servers > 1 ? log.filter((a) => log.some((b) => b.server !== a.server && b.start < a.end && b.end > a.start)).length : 0;
    console.log(
      `${client}, ${servers} server(s): ${claimed} claimed, ${outcomes.filter((o) => o === 'no room').length} no room, ${outcomes.filter((o) => o === 'gave up').length} gave up; ` +
        `${log.length} PUTs, ${refusals.length} x 409 (${refusals.filter((a) => a.code === 'placement.concurrent_update').length} concurrent_update); ` +
        `at most ${inFlight} in flight at once${servers > 1 ? `; ${acrossServers} PUTs overlapping another server's` : ''}`,
    );
    expect(claimed).toBe(CAPACITY);
    expect(outcomes.filter((o) => o === 'gave up')).toEqual([]);
    // The race happened: many requests in flight together, and every loser refused with a 409.
    expect(inFlight).toBeGreaterThan(CAPACITY);
    expect(refusals.length).toBeGreaterThanOrEqual(CLIENTS - CAPACITY);
    if (servers > 1) expect(acrossServers).toBeGreaterThan(CLIENTS / 2);

    const usages = (await (await fetch(`${bases[0]}/resource_providers/${PROVIDER}/usages`, { headers: HEADERS })).json()) as { usages: Record<string, number> };
    expect(usages.usages).toEqual({ VCPU: CAPACITY });
    const allocations = (await (await fetch(`${bases[servers - 1]}/resource_providers/${PROVIDER}/allocations`, { headers: HEADERS })).json()) as { allocations: Record<string, unknown> };
    expect(Object.keys(allocations.allocations)).toHaveLength(CAPACITY);
  });
});
