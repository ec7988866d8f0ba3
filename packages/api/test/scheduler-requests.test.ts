import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { configFromObject } from '@ert/core';
import { normalizeInventory, type Flavor } from '@ert/plugin-api';
import { createScheduler, effectiveStatus } from '@ert/scheduler';
import { createStore, type Store } from '@ert/store';
import { createApi, createMetrics, SCHEDULER_PREFIX, type ErtMetrics } from '@ert/api';
import type { Decision } from '../src/decisions.js';

/**
 * What the scheduler API makes of a `select` or `explain` request before the scheduler decides
 * anything: an instance uuid in any spelling is one instance; a uuid the store holds is in use;
 * a request refused as such is no decision (neither counted nor listed); a refusal names what
 * is wrong. Over real HTTP on 127.0.0.1, against a real scheduler and a SQLite store of two
 * hosts: big (VCPU 4) and small (VCPU 2, in the aggregate RACK).
 *
 * Each test says which defect it catches and how it was seen red (the fix undone, the test run).
 */

const FLAVORS: Flavor[] = [{ name: 'two', vcpus: 2, memoryMb: 1024, diskGb: 0, extraSpecs: {} }];
/** An inline flavor claiming memory only (Nova's `resources:VCPU=0`): it fits whatever the other tests placed. */
const MEM = { name: 'mem', vcpus: 1, memory_mb: 64, extra_specs: { 'resources:VCPU': '0' } };
const ADMIN = { 'x-auth-token': 'admin', 'content-type': 'application/json' };
const BIG = '0b100000-0000-4000-8000-000000000001';
const SMALL = '0b100000-0000-4000-8000-000000000002';
const RACK = '0a100000-0000-4000-8000-0000000000a1';

let dir: string;
let store: Store;
let app: FastifyInstance;
let metrics: ErtMetrics;
let origin: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'ert-sched-requests-'));
  store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'ert.db') });
  await store.migrate();
  const host = (name: string, uuid: string, vcpu: number, aggregates: string[]) => ({
    host: { name, status: 'up' as const, lastUpdate: Date.now() },
    providers: [{ uuid, name, inventories: { VCPU: normalizeInventory({ total: vcpu }), MEMORY_MB: normalizeInventory({ total: 8192 }) }, traits: [], aggregates }],
  });
  await store.importHosts([host('big', BIG, 4, []), host('small', SMALL, 2, [RACK])]);
  const config = configFromObject(
    {
      store: { client: 'sqlite3', connection: path.join(dir, 'ert.db') },
      log: { level: 'silent' },
      scheduler: { filters: ['status', 'resources', 'same-host', 'different-host', 'affinity', 'anti-affinity'], refreshInterval: 0 },
    },
    { configDir: dir },
  );
  metrics = createMetrics({ defaultMetrics: false });
  app = await createApi({
    store,
    auth: 'noauth2',
    scheduler: { createScheduler: () => createScheduler({ config, store, overlapClaims: true }), flavors: FLAVORS, effectiveStatus, staleAfter: 0, onDecision: metrics.observeDecision },
  });
  origin = await app.listen({ host: '127.0.0.1', port: 0 });
});

afterAll(async () => {
  await app?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  body: {
    instances?: Array<{ uuid: string; host: string; allocations: Record<string, { resources: Record<string, number> }> }>;
    weighed?: Array<{ host: string }>;
    error?: { code: string; message: string; details: Record<string, unknown> };
  };
}

async function send(method: string, url: string, body?: string, headers: Record<string, string> = ADMIN): Promise<Answer> {
  const res = await fetch(`${origin}${SCHEDULER_PREFIX}${url}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}
const post = (url: string, body: unknown) => send('POST', url, JSON.stringify(body));

/** `ert_scheduler_decisions_total` by outcome, and what `GET /decisions` recorded. */
async function decisionsSoFar(): Promise<{ counted: Record<string, number>; recorded: number; latest: Decision | undefined }> {
  const values = (await metrics.registry.getSingleMetric('ert_scheduler_decisions_total')!.get()).values;
  const listed = (await send('GET', '/decisions?limit=1')).body as unknown as { recorded: number; decisions: Decision[] };
  return { counted: Object.fromEntries(values.map((v) => [v.labels.outcome, v.value])), recorded: listed.recorded, latest: listed.decisions[0] };
}

const uuid = (n: number) => `0c100000-0000-4000-8000-${String(n).padStart(12, '0')}`;
/** The same uuid spelled otherwise: upper case, and without dashes. */
const upper = (u: string) => u.toUpperCase();
const undashed = (u: string) => u.replaceAll('-', '').toUpperCase();

describe('instance uuids in any spelling are one instance (audit A)', () => {
  // Caught: the pattern took upper case and undashed uuids and nothing normalised them, so one
  // uuid in two spellings was two reservations (200), and spelled otherwise later was placed
  // again. Seen red with checkedBody's `canonical` the identity: 200 with two instances.
  it('refuses one uuid twice in a request however spelled; spelled otherwise later, it is in use', async () => {
    const twice = await post('/select', { flavor: MEM, count: 2, instance_uuids: [uuid(1), upper(uuid(1))] });
    expect(twice.status, JSON.stringify(twice.body)).toBe(400);
    expect(twice.body.error).toMatchObject({ code: 'ERT_API_BAD_REQUEST', details: { field: 'instance_uuids/1', uuid: uuid(1) } });
    expect(twice.body.error!.message).toContain('instance_uuids/1');
    expect(await store.getInstance(uuid(1))).toBeUndefined();

    const first = await post('/select', { flavor: MEM, instance_uuids: [undashed(uuid(2))] });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.instances![0]!.uuid).toBe(uuid(2));
    expect(await store.getInstance(uuid(2))).toMatchObject({ uuid: uuid(2), state: 'scheduled' });
    for (const spelling of [uuid(2), upper(uuid(2)), undashed(uuid(2))]) {
      const again = await post('/select', { flavor: MEM, instance_uuids: [spelling] });
      expect(again.status, spelling).toBe(409);
      expect(again.body.error).toMatchObject({ code: 'ERT_SCHEDULER_INSTANCE_EXISTS', details: { instanceUuid: uuid(2) } });
    }
    expect((await store.listInstances()).filter((r) => r.uuid.toLowerCase().replaceAll('-', '') === uuid(2).replaceAll('-', ''))).toHaveLength(1);
  });

  // Caught: GET and DELETE /instances/{uuid} looked the path's uuid up as spelled, so an
  // instance placed as an upper-case uuid (stored canonical) was 404 by that spelling. Seen red
  // with the handlers' `canonical` removed: the GET was 404.
  it('GET and DELETE /instances/{uuid} take the uuid in any spelling', async () => {
    const placed = await post('/select', { flavor: MEM, instance_uuids: [upper(uuid(40))] });
    expect(placed.status, JSON.stringify(placed.body)).toBe(200);
    const shown = (await send('GET', `/instances/${upper(uuid(40))}`)) as unknown as { status: number; body: { instance: { uuid: string } } };
    expect(shown.status).toBe(200);
    expect(shown.body.instance.uuid).toBe(uuid(40));
    const removed = await fetch(`${origin}${SCHEDULER_PREFIX}/instances/${undashed(uuid(40))}`, { method: 'DELETE', headers: { 'x-auth-token': 'admin' } });
    expect(removed.status).toBe(204);
    expect(await store.getInstance(uuid(40))).toBeUndefined();
  });

  // Caught: the hints' and forbidden_aggregates' uuids were passed on as spelled, so an upper
  // case or undashed one named no instance or aggregate. Seen red with the hints and
  // forbidden_aggregates left as sent in checkedBody: each explanation weighed both hosts.
  it("takes the hints' uuids and forbidden_aggregates' uuids in any spelling", async () => {
    const placed = await post('/select', { flavor: MEM, instance_uuids: [uuid(3)] });
    expect(placed.status, JSON.stringify(placed.body)).toBe(200);
    const host = placed.body.instances![0]!.host;
    const other = host === 'big' ? 'small' : 'big';
    const weighed = async (body: Record<string, unknown>) => {
      const res = await post('/explain', { flavor: MEM, ...body });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.weighed!.map((w) => w.host).sort();
    };
    expect(await weighed({ hints: { same_host: [upper(uuid(3))] } })).toEqual([host]);
    expect(await weighed({ hints: { different_host: [undashed(uuid(3))] } })).toEqual([other]);
    expect(await weighed({ hints: { server_group: { uuid: upper('0e100000-0000-4000-8000-000000000001'), policy: 'affinity', members: [undashed(uuid(3))] } } })).toEqual([host]);
    expect(await weighed({ forbidden_aggregates: [upper(RACK)] })).toEqual(['big']);
  });

  // Caught: ERT_SCHEDULER_INSTANCE_EXISTS was decided on allocations only, so a uuid whose
  // record holds none (an instance that claimed nothing, a record written by hand) was placed
  // again and its record silently rewritten. Seen red with the select handler's refuseTaken
  // call removed: 200, and the record's flavor became "two".
  it('refuses a uuid whose record the store holds without allocations; a refused one may be placed again', async () => {
    const held = uuid(4);
    await store.upsertInstance({ uuid: held, host: 'big', projectId: 'p', userId: 'u', flavor: { name: 'bare', vcpus: 1, memoryMb: 1, diskGb: 0, extraSpecs: {} }, state: 'active', assignments: {} });
    const res = await post('/select', { flavor: 'two', instance_uuids: [upper(held)] });
    expect(res.status, JSON.stringify(res.body)).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'ERT_SCHEDULER_INSTANCE_EXISTS', details: { instanceUuid: held, host: 'big', state: 'active' } });
    expect(await store.getInstance(held)).toMatchObject({ state: 'active', flavor: { name: 'bare' } });
    expect((await store.getAllocations(held)).allocations).toEqual([]);

    // A refused reservation holds nothing: its uuid may be placed again (as Nova reschedules one).
    const refused = uuid(5);
    await store.upsertInstance({ uuid: refused, host: 'small', projectId: 'p', userId: 'u', flavor: { name: 'mem', vcpus: 1, memoryMb: 64, diskGb: 0, extraSpecs: {} }, state: 'refused', reason: 'test', assignments: {} });
    const again = await post('/select', { flavor: MEM, instance_uuids: [refused] });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(await store.getInstance(refused)).toMatchObject({ state: 'scheduled' });
  });

  // Caught: an inline flavor of vcpus 0 and memory_mb 0 claimed nothing (200, allocations {}),
  // so nothing stopped its uuid from being placed again. Seen red with the schema's minimum 0:
  // 200 with no allocations.
  it('refuses an inline flavor without vcpus or memory, as Nova refuses such a flavor', async () => {
    for (const [flavor, field] of [
      [{ name: 'zero', vcpus: 0, memory_mb: 0 }, '/flavor/vcpus'],
      [{ name: 'zero', vcpus: 1, memory_mb: 0 }, '/flavor/memory_mb'],
    ] as const) {
      for (const route of ['/select', '/explain']) {
        const res = await post(route, { flavor, instance_uuids: [uuid(6)] });
        expect(res.status, `${route} ${JSON.stringify(res.body)}`).toBe(400);
        expect(res.body.error!.message).toBe(`invalid body: ${field} must be >= 1`);
      }
    }
    expect(await store.getInstance(uuid(6))).toBeUndefined();
  });

  // The audit's race.mjs, over HTTP: 30 selects of one uuid at once (in three spellings) place it
  // once; the others are 409 and no decision. Seen red with `canonical` the identity (three
  // placed) and with track's notADecision and decide's uuidInUse ignored (9 of the 29 counted as
  // `error` in that run: how many reach the scheduler's claim rather than refuseTaken depends on
  // timing, so the test below checks that path deterministically).
  it('places one uuid once when 30 selects of it race, and counts only that one', async () => {
    const before = await decisionsSoFar();
    const spellings = [uuid(7), upper(uuid(7)), undashed(uuid(7))];
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => post('/select', { flavor: MEM, instance_uuids: [spellings[i % 3]] })));
    const placed = answers.filter((a) => a.status === 200);
    expect(placed).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409 && a.body.error?.code === 'ERT_SCHEDULER_INSTANCE_EXISTS')).toHaveLength(29);
    const { allocations } = await store.getAllocations(uuid(7));
    expect(allocations.map((a) => [a.resourceClass, a.amount])).toEqual([['MEMORY_MB', 64]]);
    const after = await decisionsSoFar();
    expect(after.counted.placed).toBe((before.counted.placed ?? 0) + 1);
    expect(after.counted.error ?? 0).toBe(before.counted.error ?? 0);
    expect(after.recorded).toBe(before.recorded + 1);
  });
});

describe('a request refused as such is no decision (audit B)', () => {
  // Caught: the checks after the schema ran inside the tracked handler, so a bad request and an
  // instance uuid in use were counted as `error` and listed. Seen red with checkedBody and
  // refuseTaken called inside `decide` (as before the fix): the 6 refusals counted as `error`;
  // and, for the uuid the scheduler's claim finds in use (a consumer holding allocations, no
  // record), with track's notADecision and decide's uuidInUse ignored: 1 counted.
  it('neither counts nor lists a bad request or a uuid in use; an unknown flavor stays an error', async () => {
    const inUse = uuid(8);
    expect((await post('/select', { flavor: MEM, instance_uuids: [inUse] })).status).toBe(200);
    // A consumer of the Placement API: allocations, no instance record (the store's claim refuses it).
    const consumer = uuid(10);
    await store.writeAllocations([{ consumer: { uuid: consumer, projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: BIG, resourceClass: 'MEMORY_MB', amount: 1 }] }]);
    const before = await decisionsSoFar();
    const refusals: Array<[unknown, number, string]> = [
      [{ flavor: MEM, count: 2, instance_uuids: [uuid(9)] }, 400, 'ERT_API_BAD_REQUEST'],
      [{ flavor: MEM, image: { properties: {} }, image_properties: {} }, 400, 'ERT_API_BAD_REQUEST'],
      [{ placement: 'resources=VCPU' }, 400, 'ERT_API_BAD_REQUEST'],
      [{ flavor: MEM, count: 2, instance_uuids: [uuid(9), undashed(uuid(9))] }, 400, 'ERT_API_BAD_REQUEST'],
      [{ flavor: MEM, instance_uuids: [inUse] }, 409, 'ERT_SCHEDULER_INSTANCE_EXISTS'],
      [{ flavor: MEM, instance_uuids: [upper(consumer)] }, 409, 'ERT_SCHEDULER_INSTANCE_EXISTS'],
    ];
    for (const [body, status, code] of refusals) {
      const res = await post('/select', body);
      expect([res.status, res.body.error?.code], JSON.stringify(body)).toEqual([status, code]);
    }
    const after = await decisionsSoFar();
    expect(after.counted).toEqual(before.counted);
    expect(after.recorded).toBe(before.recorded);

    expect((await post('/select', { flavor: 'nope' })).status).toBe(404);
    const unknown = await decisionsSoFar();
    expect(unknown.counted.error).toBe((before.counted.error ?? 0) + 1);
    expect(unknown.latest).toMatchObject({ outcome: 'error', error: { code: 'ERT_API_UNKNOWN_FLAVOR' } });
  });

  // Caught: the decision's `request`, documented as the body as sent, held the defaults the
  // server filled in (count, wait). Seen red with `sent` the body after the schema: count 1
  // and wait false in the record.
  it('records the request as sent, without the defaults the server filled in', async () => {
    expect((await post('/select', { flavor: MEM })).status).toBe(200);
    expect((await decisionsSoFar()).latest).toMatchObject({ outcome: 'placed', request: { flavor: MEM } });
    expect(Object.keys((await decisionsSoFar()).latest!.request)).toEqual(['flavor']);
  });
});

describe('refusals name what is wrong (audit C)', () => {
  // Caught: Ajv's "body must match exactly one schema in oneOf", naming no field. Seen red
  // without the route's bodyCheck and the object check: that message.
  it('says to send one of flavor and placement, and that the body is an object', async () => {
    expect((await post('/select', { flavor: 'two', placement: 'resources=VCPU:1' })).body.error!.message).toBe('invalid body: give flavor or placement, not both');
    expect((await post('/explain', { count: 1 })).body.error!.message).toMatch(/^invalid body: give flavor \(.*\) or placement/);
    for (const [body, what] of [
      ['null', 'null'],
      ['[]', 'an array'],
      ['"x"', 'a string'],
      ['1', 'a number'],
    ]) {
      const res = await send('POST', '/select', body);
      expect([res.status, res.body.error?.code, res.body.error?.message]).toEqual([400, 'ERT_API_BAD_REQUEST', `invalid body: the body must be a JSON object, not ${what}`]);
    }
  });

  // Caught: "/flavor must be string" (the first branch of the flavor's oneOf) for an inline
  // flavor's bad field, and ERT_SPEC_INVALID_VALUE `extra spec "memoryMb=..."` for an oversized
  // one. Seen red with schemaProblem taking Ajv's first error (`/flavor must be string`) and
  // without the schema's maximum (2^31: 409 no valid host; 2^53 + 1: that ERT_SPEC_INVALID_VALUE).
  it("names the inline flavor's field at fault, and bounds its numbers as Nova does", async () => {
    // As JSON text: 2^53 + 1 is no JavaScript number.
    for (const memory of ['2147483648', '9007199254740993']) {
      const big = await send('POST', '/select', `{"flavor": {"name": "huge", "vcpus": 1, "memory_mb": ${memory}}}`);
      expect([big.status, big.body.error?.code, big.body.error?.message]).toEqual([400, 'ERT_API_BAD_REQUEST', 'invalid body: /flavor/memory_mb must be <= 2147483647']);
    }
    expect((await post('/explain', { flavor: { name: 'half', vcpus: 1 } })).body.error!.message).toBe("invalid body: /flavor must have required property 'memory_mb'");
    expect((await post('/explain', { placement: 5 })).body.error!.message).toBe('invalid body: /placement must be string or object');
  });

  // Caught: `invalid query: body: unknown property "foo"` (the query called the body). Seen red
  // with the query's schemaProblem called without 'query'.
  it('names a query parameter as one', async () => {
    const res = await send('GET', '/decisions?foo=1');
    expect([res.status, res.body.error?.message]).toEqual([400, 'invalid query: unknown parameter "foo"']);
    expect((await send('GET', '/decisions?limit=0')).body.error!.message).toMatch(/^invalid query: parameter limit must match pattern/);
  });

  // Caught: 413 answered with ERT_API_BAD_REQUEST, a code of 400s. Seen red without
  // useErtErrors' 413 branch: that code.
  it('answers a body over 1 MiB with 413 ERT_API_BODY_TOO_LARGE', async () => {
    const res = await send('POST', '/select', JSON.stringify({ flavor: 'two', padding: 'x'.repeat(1024 * 1024) }));
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: 'ERT_API_BODY_TOO_LARGE', details: { limit: 1024 * 1024 } });
    expect(res.body.error!.message).toBe('request body is too large: over 1048576 bytes, the limit of the scheduler API');
  });
});
