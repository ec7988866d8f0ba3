// Issue 14, "Agents over HTTP", end to end with real processes: `ert serve` on the store
// (PostgreSQL when ERT_TEST_PG_URL is set, as in CI; else a SQLite file), and three
// `ert host run --server URL --token-file F` agents on three host profiles. The agents' own
// config points its store at a closed port: a tracker that opened the store instead of going
// through the server would fail, so every sync, stat and confirmation seen here went over HTTP.
//
// What it shows: POST /scheduler/v1/select with wait places instances that the agents'
// plugins confirm (state active, CPUs and ways assigned on the compute side); a disabled host
// receives nothing; the server's /metrics counts the decisions and the scheduler's plugin hook
// calls, and an agent's /metrics the per-plugin hook timings and its store calls; the server killed (SIGKILL) and restarted on
// the same port loses nothing: the instances and allocations placed before are all there, the
// agents come back by themselves (backoff) and confirm new placements; each agent logs the
// outage once when it starts and once when it ends, not once per retry.
//
// Mutations seen caught: FailureLog.failed logging every attempt (red: 103 "store unreachable"
// lines in one agent's log for one 4-second outage); the agent client raising a plain Error,
// not ERT_STORE_UNAVAILABLE, for a server it cannot reach (red: no "store unreachable" line,
// and one "failed" line per distinct socket error: ECONNRESET, "other side closed",
// ECONNREFUSED); ert serve not handing its scheduler's counters to the metrics (red: no
// ert_scheduler_hook_calls_total sample).
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { dropPostgresSchema, type StoreOptions } from '@ert/store';
import { PROFILES, runErt, scratchDir, startErt } from '../cli/helpers.js';
import { parseExposition, valueOf } from '../api/exposition.js';

const PG_URL = process.env['ERT_TEST_PG_URL'];
const HOSTS = [
  { name: 'agent-xeon', profile: 'xeon-2s-cat' },
  { name: 'agent-epyc', profile: 'epyc-1s' },
  { name: 'agent-numa', profile: 'xeon-4s-numa' },
];
const FLAVORS = [
  { name: 'small', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: {} },
  { name: 'pinned', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: { 'hw:cpu_policy': 'dedicated' } },
];
const TOKEN = 'admin';

interface Agent {
  name: string;
  child: ChildProcess;
  log: () => string;
  metrics: Promise<string>;
}

interface Selected {
  uuid: string;
  host: string;
  state: string;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

async function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  await once(child, 'exit');
}

function collect(child: ChildProcess): () => string {
  let text = '';
  child.stdout!.on('data', (d) => (text += d));
  child.stderr!.on('data', (d) => (text += d));
  return () => text;
}

describe(`ert host run --server: agents that report over HTTP (${PG_URL ? 'PostgreSQL' : 'SQLite'})`, () => {
  const children: ChildProcess[] = [];
  const cleanups: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const child of children) await stop(child);
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('places through the server, confirms on the hosts, skips a disabled host and survives a server restart', async () => {
    const dir = await scratchDir('ert-agents-');
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    let store: StoreOptions = { client: 'sqlite3', connection: join(dir, 'ert.db') };
    if (PG_URL) {
      const schema = `agents_e2e_${process.pid}`;
      store = { client: 'pg', connection: PG_URL, schema };
      cleanups.push(() => dropPostgresSchema(PG_URL, schema));
    }
    const serverDir = join(dir, 'server');
    const agentDir = join(dir, 'agent');
    const common = {
      log: { level: 'info' },
      tracker: { resources: ['vcpu', 'memory', 'llc'], interval: '1s', staleAfter: '1h' },
      scheduler: { consumers: ['vcpu', 'memory', 'llc'], filters: ['status', 'resources', 'vcpu', 'llc'], refreshInterval: 0 },
      reservations: { timeout: '30s', pollInterval: '50ms' },
      plugins: { vcpu: { allocationRatio: 1, dedicatedCpus: 'isolated' } },
      flavors: FLAVORS,
    };
    for (const [d, config] of [
      [serverDir, { ...common, store }],
      // Unusable on purpose: an agent that opened its store would fail here.
      [agentDir, { ...common, store: { client: 'pg', connection: 'postgres://nobody@127.0.0.1:1/none' } }],
    ] as const) {
      await mkdir(d, { recursive: true });
      await writeFile(join(d, 'ert.config.yaml'), stringify(config));
    }
    await writeFile(join(agentDir, 'token'), `${TOKEN}\n`);
    expect((await runErt(['db', 'migrate'], { cwd: serverDir })).code).toBe(0);

    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const startServer = async (): Promise<ChildProcess> => {
      const child = startErt(['serve', '--port', String(port)], { cwd: serverDir });
      children.push(child);
      const log = collect(child);
      await vi.waitFor(() => expect(log()).toMatch(/Placement API on/), { timeout: 30_000, interval: 50 });
      return child;
    };
    const api = async (path: string, body?: unknown): Promise<{ status: number; json: any }> => {
      const response = await fetch(origin + path, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { 'x-auth-token': TOKEN, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, json: text ? JSON.parse(text) : undefined };
    };
    const select = async (flavor: string, count: number): Promise<Selected[]> => {
      const answer = await api('/scheduler/v1/select', { flavor, count, wait: true });
      expect(answer.status, JSON.stringify(answer.json)).toBe(200);
      return answer.json.instances as Selected[];
    };

    let server = await startServer();
    const agents: Agent[] = HOSTS.map(({ name, profile }) => {
      const child = startErt(['host', 'run', '--server', origin, '--token-file', 'token', '--name', name, '--root', join(PROFILES, profile), '--metrics-port', '0'], { cwd: agentDir });
      children.push(child);
      const log = collect(child);
      const metrics = vi
        .waitFor(() => {
          const m = /metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(log());
          expect(m, log()).not.toBeNull();
          return m![1]!;
        }, { timeout: 30_000, interval: 50 })
        .then((url) => url);
      // Only the busy agent's is awaited, much later: handled now (that await still sees a rejection).
      void metrics.catch(() => undefined);
      return { name, child, log, metrics };
    });

    // All three agents report through the server: their hosts are up in the server's store.
    await vi.waitFor(
      async () => {
        const { json } = await api('/scheduler/v1/hosts');
        const up = (json.hosts as Array<{ name: string; status: string }>).filter((h) => h.status === 'up').map((h) => h.name);
        expect(up.sort(), agents.map((a) => a.log()).join('\n')).toEqual(HOSTS.map((h) => h.name).sort());
      },
      { timeout: 60_000, interval: 200 },
    );

    const disabled = await runErt(['host', 'disable', 'agent-numa', '--reason', 'maintenance'], { cwd: serverDir });
    expect(disabled.code, disabled.stderr).toBe(0);

    const before = [...(await select('small', 6)), ...(await select('pinned', 2))];
    expect(before).toHaveLength(8);
    for (const selection of before) expect(selection).toEqual(expect.objectContaining({ state: 'active' }));
    expect(new Set(before.map((s) => s.host)).has('agent-numa')).toBe(false);
    // Confirmed by the compute side: the pinned instances got CPUs from their host's vcpu plugin.
    for (const selection of before.slice(6)) {
      const { json } = await api(`/scheduler/v1/instances/${selection.uuid}`);
      expect(json.instance.state).toBe('active');
    }

    const serverMetrics = parseExposition(await (await fetch(`${origin}/metrics`)).text());
    expect(valueOf(serverMetrics, 'ert_scheduler_decisions_total', { outcome: 'placed' }) ?? 0).toBe(2); // one per request
    // The scheduler's plugin hooks, counted in the server: vcpu's filter judged hosts, memory's consumer read their stats.
    expect(valueOf(serverMetrics, 'ert_scheduler_hook_calls_total', { plugin: 'vcpu', hook: 'filter' }) ?? 0).toBeGreaterThan(0);
    expect(valueOf(serverMetrics, 'ert_scheduler_hook_calls_total', { plugin: 'memory', hook: 'consume' }) ?? 0).toBeGreaterThanOrEqual(3);
    const onHosts = new Set(before.map((s) => s.host));
    const busy = agents.find((a) => onHosts.has(a.name))!;
    const agentMetrics = parseExposition(await (await fetch(`${await busy.metrics}/metrics`)).text());
    expect(valueOf(agentMetrics, 'ert_plugin_hook_duration_seconds_count', { plugin: 'vcpu', hook: 'test' }) ?? 0).toBeGreaterThan(0);
    expect(valueOf(agentMetrics, 'ert_plugin_hook_duration_seconds_count', { plugin: 'llc', hook: 'discover' }) ?? 0).toBeGreaterThan(0);
    expect(valueOf(agentMetrics, 'ert_store_transaction_duration_seconds_count', { kind: 'write', operation: 'agent:writeAllocations', outcome: 'ok' }) ?? 0).toBeGreaterThan(0);

    // The server dies without a goodbye and stays away for a few of the agents' intervals.
    await stop(server, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    server = await startServer();

    // Nothing lost: every instance placed before is active with its allocations.
    for (const selection of before) {
      const { status, json } = await api(`/scheduler/v1/instances/${selection.uuid}`);
      expect(status).toBe(200);
      expect(json.instance).toEqual(expect.objectContaining({ host: selection.host, state: 'active' }));
      expect(Object.keys(json.instance.allocations).length).toBeGreaterThan(0);
    }
    // The agents came back by themselves: a new placement is confirmed on the compute side.
    const after = await select('small', 3);
    for (const selection of after) expect(selection).toEqual(expect.objectContaining({ state: 'active' }));
    expect(after.some((s) => s.host === 'agent-numa')).toBe(false);
    const listed = await api('/scheduler/v1/instances');
    expect((listed.json.instances as Array<{ state: string }>).filter((i) => i.state === 'active')).toHaveLength(11);

    // One line when the outage began and one when it ended, per agent; not one per retry.
    await vi.waitFor(() => {
      for (const agent of agents) expect(agent.log()).toMatch(/recovered: /);
    }, { timeout: 30_000, interval: 200 });
    for (const agent of agents) {
      expect(agent.log().match(/store unreachable/g) ?? [], agent.log()).toHaveLength(1);
      expect(agent.log().match(/recovered: /g) ?? []).toHaveLength(1);
    }
  }, 180_000);
});
