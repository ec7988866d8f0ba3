// Issue 11, points 1 and 2, across processes: tracker agents (each its own process, built
// dist, the fixture plugins) and the real `ert` CLI (another process) share one SQLite file
// (or PostgreSQL schema, when ERT_TEST_PG_URL is set) and nothing else. `ert schedule --count N --wait` reserves, the hosts' trackers confirm or
// refuse through their plugins, the CLI places refused instances elsewhere; a `schedule`
// killed while waiting leaves reservations that a tracker of another host expires, and
// `ert instances` shows them.
//
// Mutations seen caught (each made once, the test red, then reverted):
// - the tracker's reservation watch not started (nothing confirms in the agents' processes):
//   the first case timed out with the CLI still waiting;
// - `--wait` not passed on to `select` by schedule.ts: the selections came back on h1,
//   `scheduled`, without refusals (first case);
// - trackers expiring only their own host's reservations (`reapEverywhere` ignored in
//   reservations.ts): the killed batch's reservations on h1 stayed `scheduled` (second case).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createStore, dropPostgresSchema, type Store, type StoreOptions } from '@ert/store';
import { buildPackage } from '../build.js';
import { REPO, json, runErt, scratchDir, startErt } from '../cli/helpers.js';
import { BACKENDS } from './world.js';

const AGENT = join(REPO, 'test/reservations/fixtures/agent.mjs');
const BIG = { name: 'big', vcpus: 1, memory_mb: 256, disk_gb: 150, extra_specs: {} };

interface Agent {
  child: ChildProcess;
  stop(): Promise<void>;
}

let schemas = 0;

describe.each(BACKENDS)('reservations across processes (%s)', (backend) => {
  let dir = '';
  let storeOptions: StoreOptions;
  const agents: Agent[] = [];
  const stores: Store[] = [];
  const schemasMade: string[] = [];

  beforeAll(() => {
    buildPackage(join(REPO, 'packages/tracker'));
  });

  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop();
    for (const store of stores.splice(0)) await store.close();
    for (const schema of schemasMade.splice(0)) await dropPostgresSchema(process.env['ERT_TEST_PG_URL']!, schema);
    if (dir !== '') await rm(dir, { recursive: true, force: true });
    dir = '';
  });

  async function project(reservations: Record<string, string>): Promise<void> {
    dir = await scratchDir('ert-reservations-');
    if (backend === 'pg') {
      const schema = `reservations_mp_${process.pid}_${++schemas}`;
      schemasMade.push(schema);
      storeOptions = { client: 'pg', connection: process.env['ERT_TEST_PG_URL']!, schema };
    } else {
      storeOptions = { client: 'sqlite3', connection: join(dir, 'ert.db') };
    }
    const config = {
      store: backend === 'pg' ? storeOptions : { client: 'sqlite3', connection: './ert.db' },
      scheduler: { filters: ['resources'], refreshInterval: 0, maxAttempts: 3 },
      reservations,
      flavors: [BIG],
    };
    await writeFile(join(dir, 'ert.config.yaml'), stringify(config));
  }

  /** Start a tracker agent for `host` (disk inventory 500 GB, `free` GB really free) and wait until it has started. */
  async function agent(host: string, free: number, reservations: Record<string, string>, interval = '1h'): Promise<Agent> {
    const root = join(dir, host);
    await mkdir(join(root, 'disk'), { recursive: true });
    await writeFile(join(root, 'disk', 'total_gb'), '500\n');
    await writeFile(join(root, 'disk', 'free_gb'), `${free}\n`);
    const child = spawn(process.execPath, [AGENT], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    child.stdin!.write(JSON.stringify({ store: storeOptions, hostName: host, root, interval, reservations }) + '\n');
    const ready = await new Promise<boolean>((resolve) => {
      createInterface({ input: child.stdout! }).once('line', (line) => resolve(line === 'ready'));
      child.once('exit', () => resolve(false));
    });
    if (!ready) throw new Error(`agent ${host} did not start: ${stderr}`);
    const stop = () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      });
    const handle = { child, stop };
    agents.push(handle);
    return handle;
  }

  async function openStore(): Promise<Store> {
    const store = await createStore(storeOptions);
    stores.push(store);
    return store;
  }

  it('ert schedule --count 3 --wait: each host\u2019s tracker process confirms or refuses through its plugins, refused instances go elsewhere', async () => {
    const reservations = { timeout: '30s', pollInterval: '50ms' };
    await project(reservations);
    await agent('h1', 70, reservations);
    await agent('h2', 400, reservations);
    await agent('h3', 400, reservations);
    const result = await runErt(['schedule', '--flavor', 'big', '--count', '3', '--wait', '--json'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    const { selections } = json<{ selections: Array<{ instanceUuid: string; host: string; state: string; refusals: Array<{ host: string; state: string; reason: string }> }> }>(result);
    // h1's inventory takes all three (450 of 500); its disk plugin, in the h1 process, refuses each.
    expect(selections.map((s) => s.host).sort()).toEqual(['h2', 'h2', 'h3']);
    expect(selections.every((s) => s.state === 'active' && s.refusals[0]!.host === 'h1' && s.refusals[0]!.reason === 'plugin disk: disk: needs 150 GB, 70 GB free')).toBe(true);
    expect(selections.find((s) => s.host === 'h3')!.refusals[1]).toEqual({ host: 'h2', state: 'refused', reason: 'plugin disk: disk: needs 150 GB, 100 GB free' });

    const listed = json<{ instances: Array<{ uuid: string; host: string; state: string }> }>(await runErt(['instances', '--state', 'active', '--json'], { cwd: dir }));
    expect(listed.instances.map((i) => [i.uuid, i.host]).sort()).toEqual(selections.map((s) => [s.instanceUuid, s.host]).sort());
    const store = await openStore();
    // Each host's tracker process wrote its plugins' view of what it confirmed (and h1 holds nothing).
    expect(((await store.readStats('h1'))['cpu']!.data as { instances: string[] }).instances).toEqual([]);
    expect(((await store.readStats('h2'))['cpu']!.data as { instances: string[] }).instances).toHaveLength(2);
    expect(((await store.readStats('h3'))['cpu']!.data as { instances: string[] }).instances).toHaveLength(1);
  });

  it('a schedule --wait killed halfway leaves reservations; another host\u2019s tracker process expires them, and ert instances shows it', async () => {
    const reservations = { timeout: '1s', pollInterval: '50ms' };
    await project(reservations);
    // h1 registers and goes away: nobody will confirm what is reserved on it.
    const h1 = await agent('h1', 500, reservations);
    await h1.stop();
    const store = await openStore();
    const schedule = startErt(['schedule', '--flavor', 'big', '--count', '3', '--wait', '--confirm-timeout', '10m', '--json'], { cwd: dir });
    // Handshake: the reservations are in the store (the CLI now waits for h1, which is gone).
    await vi.waitFor(async () => expect(await store.listInstances({ state: 'scheduled' })).toHaveLength(3), { timeout: 20_000, interval: 50 });
    const exited = new Promise((resolve) => schedule.once('exit', resolve));
    schedule.kill('SIGKILL');
    await exited;
    const left = json<{ instances: Array<{ uuid: string; host: string; state: string }> }>(await runErt(['instances', '--host', 'h1', '--json'], { cwd: dir }));
    expect(left.instances.map((i) => i.state)).toEqual(['scheduled', 'scheduled', 'scheduled']);

    // A tracker of another host, updating every 200 ms, reaps them once they are older than 1 s.
    await agent('h2', 500, reservations, '200ms');
    await vi.waitFor(async () => expect(await store.listInstances({ state: 'expired' })).toHaveLength(3), { timeout: 20_000, interval: 50 });
    const expired = json<{ instances: Array<{ uuid: string; host: string; state: string; reason: string }> }>(await runErt(['instances', '--state', 'expired', '--json'], { cwd: dir }));
    expect(expired.instances.map((i) => i.uuid).sort()).toEqual(left.instances.map((i) => i.uuid).sort());
    for (const i of expired.instances) expect(i).toMatchObject({ host: 'h1', state: 'expired', reason: expect.stringMatching(/^reservation on host h1 not confirmed by its tracker within 1000 ms/) });
    const usage = await store.getUsages((await store.getHost('h1'))!.rootProviderUuid);
    expect(usage['DISK_GB'] ?? 0).toBe(0);
  });
});
