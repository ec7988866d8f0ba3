import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { normalizeInventory } from '@ert/plugin-api';
import { effectiveStatus } from '@ert/scheduler';
import { createStore, type Store } from '@ert/store';
import { createApi, SCHEDULER_PREFIX } from '@ert/api';
import { HostChangeFeed, type HostChange } from '../src/events.js';

/**
 * GET /scheduler/v1/events (the web view's live updates, docs/ui.md): the shared feed that
 * polls the store's host generations, and the event stream of a real server.
 * Mutation-checked: with the generation comparison in HostChangeFeed.poll made `false` no
 * change is told and both tests fail; with the per-poll coalescing removed (one listener call
 * per changed host) "three hosts in one poll" fails.
 */

describe('HostChangeFeed', () => {
  it('polls only while listened to, tells the hosts changed, added and removed in one change per poll', async () => {
    let generations = new Map([['a', 1], ['b', 1], ['c', 1]]);
    let polls = 0;
    const summaryCalls: string[][] = [];
    const feed = new HostChangeFeed({
      snapshots: async () => {
        polls++;
        return [...generations].map(([name, generation]) => ({ host: { name, generation } }));
      },
      summaries: (snapshots) => {
        summaryCalls.push(snapshots.map((s) => s.host.name));
        return snapshots.map((s) => ({ name: s.host.name, generation: s.host.generation }));
      },
      intervalMs: 10,
    });
    const changes: HostChange[] = [];
    const stop = await feed.subscribe((c) => changes.push(c));
    await new Promise((r) => setTimeout(r, 50));
    expect(changes).toEqual([]);
    // Three hosts in one poll: one change, one read of the three.
    generations = new Map([['a', 2], ['b', 2], ['c', 1], ['d', 1]]);
    await expect.poll(() => changes.length).toBe(1);
    expect(changes[0]!.hosts.map((h) => h.name).sort()).toEqual(['a', 'b', 'd']);
    expect(summaryCalls).toEqual([['a', 'b', 'd']]);
    generations = new Map([['a', 2], ['b', 2], ['d', 1]]);
    await expect.poll(() => changes.length).toBe(2);
    expect(changes[1]).toEqual({ hosts: [], removed: ['c'] });
    stop();
    expect(feed.size).toBe(0);
    const after = polls;
    await new Promise((r) => setTimeout(r, 50));
    expect(polls).toBe(after);
  });
});

describe('GET /scheduler/v1/events on a server', () => {
  let dir: string;
  let store: Store;
  let app: FastifyInstance;
  let origin: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ert-events-'));
    store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'ert.db') });
    await store.migrate();
    const host = (name: string, uuid: string) => ({
      host: { name, status: 'up' as const, lastUpdate: Date.now() },
      providers: [{ uuid, name, inventories: { VCPU: normalizeInventory({ total: 4 }) }, traits: [], aggregates: [] }],
    });
    await store.importHosts([host('one', '0e000000-0000-4000-8000-000000000001'), host('two', '0e000000-0000-4000-8000-000000000002')]);
    app = await createApi({
      store,
      auth: 'noauth2',
      scheduler: { createScheduler: () => Promise.reject(new Error('not needed')), flavors: [], effectiveStatus, staleAfter: 0, eventsIntervalMs: 50 },
    });
    origin = await app.listen({ host: '127.0.0.1', port: 0 });
  });

  afterAll(async () => {
    await app?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('streams ready, then the summaries of the hosts whose generation changed; needs a token; the server closes with streams open', async () => {
    expect((await app.inject({ method: 'GET', url: `${SCHEDULER_PREFIX}/events` })).statusCode).toBe(401);
    const aborter = new AbortController();
    const res = await fetch(`${origin}${SCHEDULER_PREFIX}/events`, { headers: { 'x-auth-token': 'admin' }, signal: aborter.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    /** The next event (name and data), skipping comments. */
    const next = async (): Promise<{ event: string; data: unknown }> => {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n').filter((l) => !l.startsWith(':'));
          if (lines.length === 0) continue;
          const field = (f: string) => lines.find((l) => l.startsWith(`${f}: `))?.slice(f.length + 2);
          return { event: field('event')!, data: JSON.parse(field('data')!) };
        }
        const { value, done } = await reader.read();
        if (done) throw new Error('stream ended');
        buffer += value;
      }
    };
    expect((await next()).event).toBe('ready');
    await store.writeStats('two', 'probe', 1, { n: 1 });
    const change = await next();
    expect(change.event).toBe('hosts');
    const data = change.data as HostChange;
    const [snapshot] = await store.loadHosts(['two']);
    expect(data.removed).toEqual([]);
    expect(data.hosts).toHaveLength(1);
    expect(data.hosts[0]).toMatchObject({ name: 'two', generation: snapshot!.host.generation, stats: [expect.objectContaining({ plugin: 'probe' })] });
    // Closing the server ends the open stream instead of waiting for it.
    const closed = app.close().then(() => 'closed');
    expect(await Promise.race([closed, new Promise((r) => setTimeout(() => r('timeout'), 5000))])).toBe('closed');
    aborter.abort();
  });
});

describe('one reader of the store for GET /hosts and the live feed (HostSnapshots), warmed when the server listens', () => {
  let dir: string;
  let store: Store;
  let app: FastifyInstance;
  let origin: string;
  /** The hosts each `loadHosts` call asked for (undefined: all). */
  const loads: Array<string[] | undefined> = [];
  /** What onHostSnapshotsRead was told (ert serve's readiness check waits for it). */
  const warmed: unknown[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ert-events-'));
    store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'ert.db') });
    await store.migrate();
    const host = (name: string, uuid: string) => ({
      host: { name, status: 'up' as const, lastUpdate: Date.now() },
      providers: [{ uuid, name, inventories: { VCPU: normalizeInventory({ total: 4 }) }, traits: [], aggregates: [] }],
    });
    await store.importHosts([host('one', '0e000000-0000-4000-8000-000000000011'), host('two', '0e000000-0000-4000-8000-000000000012'), host('three', '0e000000-0000-4000-8000-000000000013')]);
    // The store as the server sees it, with its loadHosts calls counted.
    const counted = new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as unknown;
        if (property === 'loadHosts') {
          return (names?: string[]) => {
            loads.push(names === undefined ? undefined : [...names].sort());
            return target.loadHosts(names);
          };
        }
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    app = await createApi({
      store: counted,
      auth: 'noauth2',
      scheduler: {
        createScheduler: () => Promise.reject(new Error('not needed')),
        flavors: [],
        effectiveStatus,
        staleAfter: 0,
        eventsIntervalMs: 50,
        warmHostSnapshots: true,
        onHostSnapshotsRead: (outcome) => warmed.push(outcome),
      },
    });
    origin = await app.listen({ host: '127.0.0.1', port: 0 });
  });

  afterAll(async () => {
    await app?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Mutations seen red: without the warm-up (the onListen hook removed) no host is read before
   * the first GET /hosts; with the feed reading the changed hosts itself (its own
   * `loadHosts(names)`, as before HostSnapshots) the changed host is loaded twice.
   */
  it('reads every host once at listen; a change is loaded once, and the stream sends what GET /hosts answers', async () => {
    // Warmed without any request: every host read once (one read of all, no list of names).
    await expect.poll(() => loads.length).toBe(1);
    expect(loads[0]).toBeUndefined();
    await expect.poll(() => warmed.length).toBe(1);
    expect(warmed[0]).toMatchObject({ hosts: 3 });
    const list = async () => ((await (await fetch(`${origin}${SCHEDULER_PREFIX}/hosts`, { headers: { 'x-auth-token': 'admin' } })).json()) as { hosts: HostChange['hosts'] }).hosts;
    expect((await list()).map((h) => h.name)).toEqual(['one', 'three', 'two']);
    expect(loads).toHaveLength(1);

    const aborter = new AbortController();
    const res = await fetch(`${origin}${SCHEDULER_PREFIX}/events`, { headers: { 'x-auth-token': 'admin' }, signal: aborter.signal });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    const nextEvent = async (name: string): Promise<unknown> => {
      for (;;) {
        const match = new RegExp(`event: ${name}\\ndata: (.*)\\n\\n`).exec(buffer);
        if (match) {
          buffer = buffer.slice(match.index + match[0].length);
          return JSON.parse(match[1]!);
        }
        const { value, done } = await reader.read();
        if (done) throw new Error('stream ended');
        buffer += value;
      }
    };
    await nextEvent('ready');
    await store.writeStats('three', 'probe', 1, { n: 1 });
    const change = (await nextEvent('hosts')) as HostChange;
    expect(change.hosts.map((h) => h.name)).toEqual(['three']);
    // Several polls of the feed and a GET /hosts later: the changed host was loaded once.
    await new Promise((r) => setTimeout(r, 200));
    const listed = (await list()).find((h) => h.name === 'three')!;
    expect(loads.slice(1)).toEqual([['three']]);
    const withoutAge = (h: Record<string, unknown>) => ({ ...h, stats: (h.stats as Array<Record<string, unknown>>).map(({ age_ms: _age, ...rest }) => rest) });
    expect(withoutAge(change.hosts[0]!)).toEqual(withoutAge(listed));
    aborter.abort();
  });
});
