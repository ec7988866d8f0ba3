import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { configFromObject } from '@ert/core';
import { normalizeInventory, type Flavor } from '@ert/plugin-api';
import { createScheduler, effectiveStatus } from '@ert/scheduler';
import { createStore, type Store } from '@ert/store';
import { createApi, createMetrics, SCHEDULER_PREFIX, SCHEDULER_ROUTES, schedulerOpenApi, type ErtMetrics } from '@ert/api';

/**
 * The scheduler API (/scheduler/v1) through Fastify's inject, over a real scheduler and a
 * SQLite store with two hosts: big (VCPU 4) and small (VCPU 2).
 */

const REPO = path.resolve(import.meta.dirname, '../../..');
const FLAVORS: Flavor[] = [
  { name: 'two', vcpus: 2, memoryMb: 1024, diskGb: 0, extraSpecs: {} },
  { name: 'four', vcpus: 4, memoryMb: 1024, diskGb: 0, extraSpecs: {} },
];
const ADMIN = { 'x-auth-token': 'admin', 'content-type': 'application/json' };
const BIG = '0b000000-0000-4000-8000-000000000001';
const SMALL = '0b000000-0000-4000-8000-000000000002';
/** The aggregate the availability-zone test puts small in. */
const RACK = '0a000000-0000-4000-8000-0000000000a1';
/** A flavor claiming memory only (vcpus from 1, as Nova's; its VCPU dropped as Nova drops it): it fits whatever the other tests placed. */
const ONE = { name: 'one', vcpus: 1, memory_mb: 1, extra_specs: { 'resources:VCPU': '0' } };

let dir: string;
let store: Store;
let app: FastifyInstance;
let metrics: ErtMetrics;
const routes: Array<{ method: string; url: string }> = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'ert-sched-api-'));
  store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'ert.db') });
  await store.migrate();
  const host = (name: string, uuid: string, vcpu: number) => ({
    host: { name, status: 'up' as const, lastUpdate: Date.now() },
    providers: [{ uuid, name, inventories: { VCPU: normalizeInventory({ total: vcpu }), MEMORY_MB: normalizeInventory({ total: 8192 }) }, traits: [], aggregates: [] }],
  });
  await store.importHosts([host('big', BIG, 4), host('small', SMALL, 2)]);
  const config = configFromObject({ store: { client: 'sqlite3', connection: path.join(dir, 'ert.db') }, log: { level: 'silent' }, scheduler: { filters: ['status', 'resources'], refreshInterval: 0 } }, { configDir: dir });
  metrics = createMetrics({ defaultMetrics: false });
  app = await createApi({
    store,
    auth: 'noauth2',
    setup: (a) =>
      a.addHook('onRoute', (r) => {
        for (const method of [r.method].flat()) routes.push({ method, url: r.url });
      }),
    scheduler: { createScheduler: () => createScheduler({ config, store, overlapClaims: true }), flavors: FLAVORS, effectiveStatus, staleAfter: 0, onDecision: metrics.observeDecision },
  });
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const post = (url: string, body: unknown, headers: Record<string, string> = ADMIN) => app.inject({ method: 'POST', url: `${SCHEDULER_PREFIX}${url}`, headers, payload: JSON.stringify(body) });
const get = (url: string, headers: Record<string, string> = ADMIN) => app.inject({ method: 'GET', url: `${SCHEDULER_PREFIX}${url}`, headers });

describe('the scheduler API', () => {
  it('POST /select places and claims: the store holds the reservations and their allocations', async () => {
    const res = await post('/select', { flavor: 'two', count: 2 });
    expect(res.statusCode, res.body).toBe(200);
    const { instances } = res.json() as { instances: Array<{ uuid: string; host: string; alternates: string[]; allocations: Record<string, { resources: Record<string, number> }>; state: string }> };
    expect(instances).toHaveLength(2);
    for (const i of instances) {
      expect(i.state).toBe('scheduled');
      const record = await store.getInstance(i.uuid);
      expect(record).toMatchObject({ host: i.host, state: 'scheduled', projectId: 'admin', userId: 'admin' });
      const { allocations } = await store.getAllocations(i.uuid);
      const provider = i.host === 'big' ? BIG : SMALL;
      expect(i.allocations).toEqual({ [provider]: { resources: { VCPU: 2, MEMORY_MB: 1024 } } });
      expect(allocations.map((a) => [a.providerUuid, a.resourceClass, a.amount]).sort()).toEqual([[provider, 'MEMORY_MB', 1024], [provider, 'VCPU', 2]]);
    }
  });

  it('answers no valid host with 409 and ERT_SCHEDULER_NO_VALID_HOST, its explanation in details', async () => {
    const res = await post('/select', { flavor: { name: 'eight', vcpus: 8, memory_mb: 512 } });
    expect(res.statusCode).toBe(409);
    const { error } = res.json() as { error: { code: string; message: string; details: { summary: { hosts: number; passed: number } } } };
    expect(error.code).toBe('ERT_SCHEDULER_NO_VALID_HOST');
    expect(error.message).toContain('no valid host');
    expect(error.details.summary).toMatchObject({ hosts: 2, passed: 0 });
    const exposition = (await metrics.expose()).body;
    expect(exposition).toMatch(/ert_scheduler_decisions_total\{outcome="placed"\} 1/);
    expect(exposition).toMatch(/ert_scheduler_decisions_total\{outcome="no_valid_host"\} 1/);
    expect(exposition).toMatch(/ert_scheduler_decision_duration_seconds_count\{outcome="placed"\} 1/);
  });

  it('refuses an unknown flavor (404), a bad extra spec and a bad body (400), a non-JSON body (415)', async () => {
    const unknown = await post('/select', { flavor: 'nope' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error).toMatchObject({ code: 'ERT_API_UNKNOWN_FLAVOR', details: { flavor: 'nope', known: ['two', 'four'] } });
    const spec = await post('/select', { flavor: { name: 'x', vcpus: 1, memory_mb: 1, extra_specs: { 'bogus:key': '1' } } });
    expect(spec.statusCode).toBe(400);
    expect(spec.json().error.code).toMatch(/^ERT_SPEC_/);
    const body = await post('/select', { flavor: 'two', count: 0 });
    expect(body.statusCode).toBe(400);
    expect(body.json().error).toMatchObject({ code: 'ERT_API_BAD_REQUEST' });
    expect(body.json().error.message).toContain('/count');
    const extra = await post('/explain', { flavor: 'two', colour: 'red' });
    expect(extra.json().error.message).toContain('unknown property "colour"');
    const text = await app.inject({ method: 'POST', url: `${SCHEDULER_PREFIX}/select`, headers: { 'x-auth-token': 'admin', 'content-type': 'text/plain' }, payload: '{}' });
    expect(text.statusCode).toBe(415);
    expect((await get('/nothing')).json().error.code).toBe('ERT_API_NOT_FOUND');
  });

  it('POST /explain says per host and filter why not, and weighs the rest', async () => {
    const res = await post('/explain', { flavor: 'four' });
    expect(res.statusCode, res.body).toBe(200);
    const explanation = res.json() as { hosts: number; passed: number; filters: Array<{ filter: string; removed: number }> };
    expect(explanation.hosts).toBe(2);
    // big has 2 VCPU left (one 'two' on each host, or both on big) and small at most 0: no host takes 4.
    expect(explanation.filters.find((f) => f.filter === 'resources')!.removed).toBeGreaterThan(0);
    expect(JSON.stringify(explanation)).toContain('VCPU');
  });

  it('GET /hosts, /instances, /instances/{uuid}, /flavors', async () => {
    const hosts = (await get('/hosts')).json() as { hosts: Array<{ name: string; status: string; resources: Record<string, { capacity: number; used: number; free: number }>; stats: unknown[] }> };
    expect(hosts.hosts.map((h) => [h.name, h.status, h.resources.VCPU!.capacity])).toEqual([['big', 'up', 4], ['small', 'up', 2]]);
    expect(hosts.hosts.reduce((n, h) => n + h.resources.VCPU!.used, 0)).toBe(4);
    const listed = (await get('/instances?state=scheduled')).json() as { instances: Array<{ uuid: string; state: string; flavor: string }> };
    expect(listed.instances).toHaveLength(2);
    expect(listed.instances.every((i) => i.state === 'scheduled' && i.flavor === 'two')).toBe(true);
    expect((await get('/instances?state=active')).json()).toEqual({ instances: [] });
    expect((await get('/instances?state=bogus')).statusCode).toBe(400);
    const one = await get(`/instances/${listed.instances[0]!.uuid}`);
    expect(one.statusCode).toBe(200);
    expect(Object.keys(one.json().instance.allocations)).toHaveLength(1);
    expect((await get('/instances/00000000-0000-4000-8000-00000000dead')).json().error.code).toBe('ERT_API_UNKNOWN_INSTANCE');
    expect((await get('/flavors')).json()).toEqual({ flavors: [{ name: 'two', vcpus: 2, memory_mb: 1024, disk_gb: 0, extra_specs: {} }, { name: 'four', vcpus: 4, memory_mb: 1024, disk_gb: 0, extra_specs: {} }] });
  });

  it('DELETE /instances/{uuid} releases a reservation in one write; an active instance is its tracker to release (409)', async () => {
    const listed = (await get('/instances?state=scheduled')).json() as { instances: Array<{ uuid: string }> };
    const [first, second] = listed.instances.map((i) => i.uuid);
    const del = await app.inject({ method: 'DELETE', url: `${SCHEDULER_PREFIX}/instances/${first}`, headers: ADMIN });
    expect(del.statusCode, del.body).toBe(204);
    expect(await store.getInstance(first!)).toBeUndefined();
    expect((await store.getAllocations(first!)).allocations).toEqual([]);
    const record = (await store.getInstance(second!))!;
    await store.upsertInstance({ ...record, state: 'active' });
    const refused = await app.inject({ method: 'DELETE', url: `${SCHEDULER_PREFIX}/instances/${second}`, headers: ADMIN });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error).toMatchObject({ code: 'ERT_API_INSTANCE_NOT_RELEASABLE', details: { state: 'active', host: record.host } });
    expect((await store.getAllocations(second!)).allocations).not.toEqual([]);
    // The released capacity is placeable again.
    expect((await post('/select', { flavor: 'two' })).statusCode).toBe(200);
  });

  it("authenticates as the Placement API does (401) and applies the policy's base rules (403)", async () => {
    const none = await post('/select', { flavor: 'two' }, { 'content-type': 'application/json' });
    expect(none.statusCode).toBe(401);
    expect(none.json().error.code).toBe('ERT_API_UNAUTHORIZED');
    const reader = { 'x-auth-token': 'bob', 'x-roles': 'reader', 'openstack-system-scope': 'all', 'content-type': 'application/json' };
    expect((await get('/hosts', reader)).statusCode).toBe(200);
    expect((await post('/explain', { flavor: 'two' }, reader)).statusCode).toBe(200);
    const write = await post('/select', { flavor: 'two' }, reader);
    expect(write.statusCode).toBe(403);
    expect(write.json().error).toMatchObject({ code: 'ERT_API_FORBIDDEN', details: { rule: 'system_admin_api' } });
    expect((await get('/hosts', { 'x-auth-token': 'bob' })).statusCode).toBe(403);
    expect((await get('/openapi.json', {})).statusCode).toBe(200);
  });

  it('sits beside a Placement API mounted at the root (--prefix "")', async () => {
    const root = await createApi({ store, auth: 'noauth2', prefix: '', scheduler: { createScheduler: () => Promise.reject(new Error('not needed')), flavors: FLAVORS, effectiveStatus, staleAfter: 0 } });
    try {
      expect((await root.inject({ method: 'GET', url: `${SCHEDULER_PREFIX}/flavors`, headers: ADMIN })).json().flavors).toHaveLength(2);
      expect((await root.inject({ method: 'GET', url: `${SCHEDULER_PREFIX}/nothing`, headers: ADMIN })).json().error.code).toBe('ERT_API_NOT_FOUND');
      expect((await root.inject({ method: 'GET', url: '/resource_providers', headers: ADMIN })).json()).toHaveProperty('resource_providers');
    } finally {
      await root.close();
    }
  });

  it('serves its OpenAPI document, checked in as docs/scheduler-openapi.json, naming every route and only those', async () => {
    const served = (await get('/openapi.json', {})).json() as { openapi: string; paths: Record<string, Record<string, unknown>> };
    expect(served).toEqual(schedulerOpenApi());
    expect(served.openapi).toMatch(/^3\./);
    const file = path.join(REPO, 'docs/scheduler-openapi.json');
    // After a change to the routes: ERT_UPDATE_OPENAPI=1 npx vitest run packages/api/test/scheduler-api.test.ts
    if (process.env.ERT_UPDATE_OPENAPI === '1') writeFileSync(file, `${JSON.stringify(served, null, 2)}\n`);
    expect(JSON.parse(readFileSync(file, 'utf8')), 'docs/scheduler-openapi.json is out of date: ERT_UPDATE_OPENAPI=1 regenerates it').toEqual(served);
    const documented = Object.entries(served.paths)
      .flatMap(([p, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${SCHEDULER_PREFIX}${p.replaceAll(/\{(\w+)\}/g, ':$1')}`))
      .sort();
    const registered = routes
      .filter((r) => r.url.startsWith(SCHEDULER_PREFIX))
      .map((r) => `${r.method} ${r.url}`)
      .sort();
    expect(registered).toEqual(documented);
    expect(documented).toHaveLength(SCHEDULER_ROUTES.length);
  });

  // Issue 20, point 2: zones through the API. Seen red with scheduleRequest dropping
  // availability_zone (explain weighed both hosts) and with the route listing no hosts.
  it('GET /availability-zones lists zones with their hosts; select and explain take availability_zone and forbidden_aggregates', async () => {
    expect((await get('/availability-zones')).json()).toEqual({ zones: [], hosts_without_zone: ['big', 'small'] });
    const zone = RACK;
    await store.upsertAggregate({ uuid: zone, name: 'rack-small', metadata: { availability_zone: 'az-small' } });
    await store.setAggregates(SMALL, (await store.getProvider(SMALL))!.generation, [zone]);
    expect((await get('/availability-zones')).json()).toEqual({ zones: [{ name: 'az-small', aggregates: [zone], hosts: ['small'] }], hosts_without_zone: ['big'] });

    const explained = (await post('/explain', { flavor: ONE, availability_zone: 'az-small' })).json() as {
      filters: Array<{ filter: string; stage?: string; query?: string; removed: number }>;
      weighed: Array<{ host: string }>;
    };
    expect(explained.filters[0]).toMatchObject({ filter: 'availability-zone', stage: 'request-filter', query: `member_of=in:${zone}`, removed: 1 });
    expect(explained.weighed.map((w) => w.host)).toEqual(['small']);
    const forbidden = (await post('/explain', { flavor: ONE, forbidden_aggregates: ['rack-small'] })).json() as { weighed: Array<{ host: string }> };
    expect(forbidden.weighed.map((w) => w.host)).toEqual(['big']);

    const placed = await post('/select', { flavor: ONE, availability_zone: 'az-small' });
    expect(placed.statusCode, placed.body).toBe(200);
    expect(placed.json().instances[0].host).toBe('small');
    const nowhere = await post('/select', { flavor: 'two', availability_zone: 'az-none' });
    expect(nowhere.statusCode).toBe(409);
    expect(nowhere.json().error.details.summary.filters[0]).toMatchObject({ filter: 'availability-zone', removed: 2 });
    expect((await post('/select', { flavor: 'two', availability_zone: '' })).statusCode).toBe(400);
  });

  // Issue 20, point 3: an image's properties in the body, as `image.properties` or
  // `image_properties`. Seen red with scheduleRequest dropping the image (explain weighed both
  // hosts; the conflict was placed, 200) and with image_properties not read (both weighed).
  it('POST /select and /explain take an image: its traits narrow the hosts, a conflict with the flavor is 400 naming both', async () => {
    await store.setTraits(BIG, (await store.getProvider(BIG))!.generation, ['CUSTOM_GOLD']);
    try {
      const one = ONE;
      const explained = (await post('/explain', { flavor: one, image: { properties: { 'trait:CUSTOM_GOLD': 'required' } } })).json() as { weighed: Array<{ host: string }> };
      expect(explained.weighed.map((w) => w.host)).toEqual(['big']);
      const short = (await post('/explain', { flavor: one, image_properties: { 'trait:CUSTOM_GOLD': 'forbidden' } })).json() as { weighed: Array<{ host: string }> };
      expect(short.weighed.map((w) => w.host)).toEqual(['small']);
      const placed = await post('/select', { flavor: one, image_properties: { 'trait:CUSTOM_GOLD': 'required' } });
      expect(placed.statusCode, placed.body).toBe(200);
      const uuid = placed.json().instances[0].uuid as string;
      expect(await store.getInstance(uuid)).toMatchObject({ host: 'big', flavor: { name: 'one', image: { properties: { 'trait:CUSTOM_GOLD': 'required' } } } });

      const conflict = await post('/select', { flavor: { ...one, extra_specs: { 'trait:CUSTOM_GOLD': 'forbidden' } }, image: { properties: { 'trait:CUSTOM_GOLD': 'required' } } });
      expect(conflict.statusCode).toBe(400);
      expect(conflict.json().error).toMatchObject({ code: 'ERT_SPEC_CONFLICT', message: 'flavor trait:CUSTOM_GOLD=forbidden conflicts with image trait:CUSTOM_GOLD=required: a trait cannot be both required and forbidden' });
      expect((await post('/select', { flavor: one, image: { properties: {} }, image_properties: {} })).statusCode).toBe(400);
      expect((await post('/select', { flavor: one, image: { properties: { os_distro: 'ubuntu' } } })).json().error.code).toBe('ERT_SPEC_UNKNOWN_KEY');
    } finally {
      await store.setTraits(BIG, (await store.getProvider(BIG))!.generation, []);
    }
  });

  // Issue 20, point 4: a port's request group in the body, claimed with the flavor. Seen red
  // with scheduleRequest dropping request_groups (both hosts weighed, no bandwidth claimed)
  // and with the selection's mappings left out of the answer.
  it('POST /select takes request_groups: the port lands on the host with the bridge, the answer maps it to the provider, and a malformed group is 400 naming the field', async () => {
    const BRIDGE = '0b000000-0000-4000-8000-0000000000b1';
    await store.createProvider({ uuid: BRIDGE, name: 'big:br-ex', parentUuid: BIG });
    await store.setInventories(BRIDGE, 0, { NET_BW_EGR_KILOBIT_PER_SEC: normalizeInventory({ total: 1000 }) });
    await store.setTraits(BRIDGE, undefined, ['CUSTOM_PHYSNET_PUBLIC']);
    const placed: string[] = [];
    try {
      const one = ONE;
      const port = { requester_id: 'port-1', resources: { NET_BW_EGR_KILOBIT_PER_SEC: 600 }, required: ['CUSTOM_PHYSNET_PUBLIC'] };
      const explained = (await post('/explain', { flavor: one, request_groups: [port] })).json() as { weighed: Array<{ host: string }> };
      expect(explained.weighed.map((w) => w.host)).toEqual(['big']);
      const res = await post('/select', { flavor: one, request_groups: [port] });
      expect(res.statusCode, res.body).toBe(200);
      const [selection] = res.json().instances as Array<{ uuid: string; host: string; allocations: Record<string, { resources: Record<string, number> }>; mappings: Record<string, string[]> }>;
      placed.push(selection!.uuid);
      expect(selection!.host).toBe('big');
      expect(selection!.mappings).toEqual({ 'port-1': [BRIDGE] });
      expect(selection!.allocations[BRIDGE]).toEqual({ resources: { NET_BW_EGR_KILOBIT_PER_SEC: 600 } });
      expect((await store.getInstance(selection!.uuid))?.flavor.requestGroups).toEqual([{ requester: 'port-1', resources: { NET_BW_EGR_KILOBIT_PER_SEC: 600 }, required: ['CUSTOM_PHYSNET_PUBLIC'], provider: BRIDGE }]);
      // 400 left on the bridge: a second port of 600 fits nowhere.
      expect((await post('/select', { flavor: one, request_groups: [port] })).json().error.code).toBe('ERT_SCHEDULER_NO_VALID_HOST');

      const badName = await post('/select', { flavor: one, request_groups: [{ ...port, requester_id: 'a port' }] });
      expect(badName.statusCode).toBe(400);
      expect(badName.json().error.message).toContain('request_groups/0/requester_id');
      const badClass = await post('/select', { flavor: one, request_groups: [{ ...port, resources: { bandwidth: 5 } }] });
      expect(badClass.statusCode).toBe(400);
      expect(badClass.json().error).toMatchObject({ code: 'ERT_SPEC_INVALID_VALUE', details: { key: 'requestGroups[0].resources.bandwidth' } });
    } finally {
      for (const uuid of placed) await store.writeAllocations([{ consumer: { uuid, projectId: 'admin', userId: 'admin' }, allocations: [], removeInstance: true }]);
      await store.deleteProvider(BRIDGE);
    }
  });

  // Issue 14: "or a Placement-style request instead of the flavor" (after the zone test above:
  // small is in the aggregate RACK). Seen red with scheduleRequest ignoring `placement` (400:
  // neither flavor nor placement) and with the parsed query's member_of dropped (explain
  // weighed both hosts).
  it('POST /select and /explain take a Placement-style request instead of a flavor: a query string or an object', async () => {
    const query = await post('/select', { placement: `resources=MEMORY_MB:1&member_of=!${RACK}` });
    expect(query.statusCode, query.body).toBe(200);
    const [byQuery] = query.json().instances as Array<{ uuid: string; host: string; allocations: unknown }>;
    expect(byQuery!.host).toBe('big');
    expect(byQuery!.allocations).toEqual({ [BIG]: { resources: { MEMORY_MB: 1 } } });
    expect(await store.getInstance(byQuery!.uuid)).toMatchObject({ host: 'big', flavor: expect.objectContaining({ name: 'placement-request' }) });

    const object = await post('/select', { placement: { groups: [{ resources: { MEMORY_MB: 1 }, memberOf: [[RACK]] }] } });
    expect(object.statusCode, object.body).toBe(200);
    expect(object.json().instances[0].host).toBe('small');

    const explainedRes = await post('/explain', { placement: `resources=MEMORY_MB:1&member_of=${RACK}` });
    expect(explainedRes.statusCode, explainedRes.body).toBe(200);
    const explained = explainedRes.json() as { weighed: Array<{ host: string }> };
    expect(explained.weighed.map((w) => w.host)).toEqual(['small']);
    const nowhere = await post('/select', { placement: 'resources=MEMORY_MB:1&member_of=0a000000-0000-4000-8000-0000000000ff' });
    expect(nowhere.statusCode).toBe(409);
    expect(nowhere.json().error.code).toBe('ERT_SCHEDULER_NO_VALID_HOST');
  });

  it('refuses a Placement-style request that is malformed, comes with a flavor, or asks for a limit, naming the field', async () => {
    const bad = await post('/select', { placement: 'resources=VCPU:0' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatchObject({ code: 'ERT_API_BAD_REQUEST', details: { field: 'placement', placementCode: expect.stringMatching(/^placement\./) } });
    expect(bad.json().error.message).toMatch(/^placement: /);
    const badObject = await post('/select', { placement: { groups: [{ resources: { VCPU: -1 } }] } });
    expect(badObject.statusCode).toBe(400);
    expect(badObject.json().error.code).toBe('ERT_SPEC_INVALID_VALUE');
    expect(badObject.json().error.message).toContain('groups[0].resources');
    // What an instance record cannot carry (its flavor spelling has no in_tree) is refused up front.
    const inTree = await post('/select', { placement: `resources=MEMORY_MB:1&in_tree=${SMALL}` });
    expect(inTree.statusCode).toBe(400);
    expect(inTree.json().error.details).toMatchObject({ key: 'groups[0].inTree' });
    const both = await post('/select', { flavor: 'two', placement: 'resources=VCPU:1' });
    expect(both.statusCode).toBe(400);
    expect((await post('/select', { count: 1 })).statusCode).toBe(400);
    const limited = await post('/select', { placement: 'resources=VCPU:1&limit=1' });
    expect(limited.statusCode).toBe(400);
    expect(limited.json().error.message).toContain('limit');
  });
});

// The web view's host page (docs/ui.md). Seen red with the stats' data left out of the
// answer, and with holdsView dropped from the instances (no assignments, no cpus).
describe('GET /hosts/{name}', () => {
  it("answers the host's tree with inventories and usage, every plugin's stats with their data and age, and its instances with allocations and assignments", async () => {
    const llc = { domains: [{ id: 0, cbmMask: '7ff', instances: [{ uuid: '0c000000-0000-4000-8000-000000000001', mask: 'f', closid: 1 }] }] };
    await store.writeStats('big', 'llc', 1, llc);
    const uuid = '0c000000-0000-4000-8000-000000000001';
    await store.upsertInstance({ uuid, host: 'big', projectId: 'p', userId: 'u', flavor: FLAVORS[0]!, state: 'active', assignments: { llc: { domain: 0, mask: 'f', closid: 1 } }, cpus: [2, 3] });
    try {
      const res = await get('/hosts/big');
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as {
        host: { name: string; generation: number; instances: number };
        providers: Array<{ uuid: string; parent_provider_uuid: string | null; inventories: Record<string, { total: number; capacity: number; used: number }> }>;
        stats: Array<{ plugin: string; data: unknown; age_ms: number; stale: boolean }>;
        instances: Array<{ uuid: string; assignments: Record<string, unknown>; cpus?: number[]; allocations: Record<string, { resources: Record<string, number> }> }>;
      };
      const [snapshot] = await store.loadHosts(['big']);
      expect(body.host).toMatchObject({ name: 'big', generation: snapshot!.host.generation, instances: snapshot!.instances.length });
      expect(body.providers.map((p) => [p.uuid, p.parent_provider_uuid])).toEqual([[BIG, null]]);
      expect(body.providers[0]!.inventories.VCPU).toMatchObject({ total: 4, capacity: 4, used: snapshot!.providers[0]!.usages.VCPU ?? 0 });
      const stats = body.stats.find((s) => s.plugin === 'llc')!;
      expect(stats.data).toEqual(llc);
      expect(stats.age_ms).toBeGreaterThanOrEqual(0);
      const records = await store.listInstances({ host: 'big' });
      expect(body.instances.map((i) => i.uuid).sort()).toEqual(records.map((r) => r.uuid).sort());
      const pinned = body.instances.find((i) => i.uuid === uuid)!;
      expect(pinned).toMatchObject({ assignments: { llc: { domain: 0, mask: 'f', closid: 1 } }, cpus: [2, 3], allocations: {} });
      for (const i of body.instances.filter((x) => x.uuid !== uuid)) {
        const { allocations } = await store.getAllocations(i.uuid);
        expect(Object.values(i.allocations).flatMap((a) => Object.values(a.resources)).reduce((n, v) => n + v, 0)).toBe(allocations.reduce((n, a) => n + a.amount, 0));
      }
      expect((await get(`/instances/${uuid}`)).json().instance).toMatchObject({ assignments: { llc: { mask: 'f' } }, cpus: [2, 3] });
      const unknown = await get('/hosts/nowhere');
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().error).toMatchObject({ code: 'ERT_API_UNKNOWN_HOST', details: { host: 'nowhere' } });
      expect((await get('/hosts/big', { 'x-auth-token': 'bob' })).statusCode).toBe(403);
    } finally {
      await store.deleteInstance(uuid);
      await store.deleteStats('big', 'llc');
    }
  });
});
