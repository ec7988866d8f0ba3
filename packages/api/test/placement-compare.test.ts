import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeInventory, type Flavor } from '@ert/plugin-api';
import type { Store } from '@ert/store';
import { backends, call, serveWorld, type Answer, type Served } from './world.js';

/**
 * ert against the real Placement 8.0.0: the answers Debian's placement-api gave to 155 read
 * requests on one world, then to a sequence of provider writes (providers, inventories,
 * aggregates, traits, resource classes; each answer depends on the ones before), recorded
 * by scripts/placement-api-compare.mjs into fixtures/placement-8.0.0-reads.json, replayed
 * in order against `ert serve` on the same world written through ert's store. Compared: status, error code, the headers clients read
 * (openstack-api-version, vary, allow, content-type, whether cache-control and
 * last-modified are sent, the request id's form) and the body, with these normalisations,
 * each one a documented difference (docs/api.md, "Compared with Placement 8.0.0"):
 * - generations (provider, consumer) are compared by presence: ert's store counts its own
 *   writes (a provider written in other steps, a consumer at 0 after its first write where
 *   Placement says 1);
 * - lists without a defined order (traits, providers, candidates) are compared as sets, and
 *   with `limit` (which keeps the first candidates of an undefined order) by their number;
 * - a 400's detail from Placement's JSON-schema validation goes on with jsonschema's dump
 *   of the schema: ert's detail must be its beginning.
 */

interface Recorded {
  method: string;
  path: string;
  mv: string | null;
  token?: string | null;
  requestHeaders?: Record<string, string>;
  /** The JSON body sent (writes), as sent. */
  requestBody?: string;
  status: number;
  headers: Record<string, string>;
  body: any;
}
interface Fixture {
  placementApi: string;
  world: {
    providers: Array<{ uuid: string; name: string; parentUuid: string | null; host?: boolean; inventories: Record<string, Record<string, number>>; traits: string[]; aggregates: string[] }>;
    consumers: Array<{ uuid: string; projectId: string; userId: string; type: string; host?: string; migration?: string; instance?: string; allocations: Record<string, Record<string, number>> }>;
  };
  answers: Recorded[];
}

const fixture = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures/placement-8.0.0-reads.json'), 'utf8')) as Fixture;

/** The recorded world, written through ert's store as the tracker and scheduler write theirs. */
async function loadWorld(store: Store): Promise<void> {
  const w = fixture.world;
  for (const p of w.providers) await store.createProvider({ uuid: p.uuid, name: p.name, ...(p.parentUuid ? { parentUuid: p.parentUuid } : {}) });
  for (const p of w.providers) {
    const inventories = Object.fromEntries(
      Object.entries(p.inventories).map(([rc, i]) => [
        rc,
        normalizeInventory({ total: i.total!, reserved: i.reserved!, minUnit: i.min_unit!, maxUnit: i.max_unit!, stepSize: i.step_size!, allocationRatio: i.allocation_ratio! }),
      ]),
    );
    await store.setInventories(p.uuid, undefined, inventories);
    if (p.traits.length > 0) await store.setTraits(p.uuid, undefined, p.traits);
    if (p.aggregates.length > 0) await store.setAggregates(p.uuid, undefined, p.aggregates);
    if (p.host) await store.upsertHost({ name: p.name, rootProviderUuid: p.uuid });
  }
  const flavor: Flavor = { name: 'f', vcpus: 1, memoryMb: 512, diskGb: 0, extraSpecs: {} };
  for (const c of w.consumers) {
    const allocations = Object.entries(c.allocations).flatMap(([providerUuid, resources]) => Object.entries(resources).map(([resourceClass, amount]) => ({ providerUuid, resourceClass, amount })));
    const instance =
      c.type === 'INSTANCE'
        ? { uuid: c.uuid, host: c.host!, projectId: c.projectId, userId: c.userId, flavor, state: c.migration ? ('resizing' as const) : ('active' as const), assignments: {}, ...(c.migration ? { migrationUuid: c.migration, previousFlavor: flavor } : {}) }
        : undefined;
    await store.writeAllocations([{ consumer: { uuid: c.uuid, projectId: c.projectId, userId: c.userId, generation: null }, allocations, ...(instance ? { instance } : {}) }]);
  }
}

/** A write as the recording sent it: the JSON body, as application/json unless the request headers name a type. */
async function callWithBody(base: string, path: string, opts: { mv: string | null; method: string; token?: string | null; headers?: Record<string, string> }, body: string): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(opts.headers ?? {}) };
  if (opts.token !== null) headers['x-auth-token'] = opts.token ?? 'admin';
  if (opts.mv !== null) headers['openstack-api-version'] = `placement ${opts.mv}`;
  const res = await fetch(base + path, { method: opts.method, headers, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : (JSON.parse(text) as unknown), text };
}

const GENERATION_KEYS = new Set(['generation', 'resource_provider_generation', 'consumer_generation']);

/** The body with per-store values normalised (see the header comment). */
function normalise(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) {
    const items = value.map((v) => normalise(v));
    // Lists without a defined order; `links` keeps its order.
    return key === 'links' ? items : items.map((v) => JSON.stringify(v)).sort().map((s) => JSON.parse(s) as unknown);
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value).sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (k === 'request_id') out[k] = typeof v === 'string' && /^req-[0-9a-f-]{36}$/.test(v) ? '<req-uuid>' : v;
      else if (GENERATION_KEYS.has(k)) out[k] = typeof v === 'number' ? '<gen>' : v;
      else out[k] = normalise(v, k);
    }
    return out;
  }
  return value;
}

describe.each(backends)(`ert serve on %s answers as Placement ${fixture.placementApi} did (${fixture.answers.length} recorded requests)`, (client) => {
  let s: Served;
  beforeAll(async () => {
    s = await serveWorld('', loadWorld, client);
  });
  afterAll(async () => {
    await s?.close();
  });

  it('recorded enough requests', () => {
    expect(fixture.answers.length).toBeGreaterThanOrEqual(150);
  });

  for (const [i, recorded] of fixture.answers.entries()) {
    const label = `#${i} ${recorded.method} ${recorded.path} at ${recorded.mv ?? '(none)'}${recorded.token !== undefined ? ` token ${recorded.token}` : ''}${recorded.requestHeaders ? ` ${JSON.stringify(recorded.requestHeaders)}` : ''} -> ${recorded.status}`;
    it(label, async () => {
      const options = {
        mv: recorded.mv,
        method: recorded.method,
        ...(recorded.token === undefined ? {} : { token: recorded.token }),
        ...(recorded.requestHeaders ? { headers: recorded.requestHeaders } : {}),
      };
      const got = recorded.requestBody === undefined ? await call(s.base, recorded.path, options) : await callWithBody(s.base, recorded.path, options, recorded.requestBody);
      expect(got.status, got.text).toBe(recorded.status);
      for (const header of ['openstack-api-version', 'vary', 'allow', 'content-type', 'cache-control']) {
        expect(got.headers.get(header) ?? undefined, header).toBe(recorded.headers[header]);
      }
      const location = got.headers.get('location');
      expect(location === null ? undefined : new URL(location).pathname, 'location').toBe(recorded.headers.location);
      // PUT /resource_providers/{u}: Placement sends the provider's previous updated_at, none
      // on its first update; ert keeps no timestamps and always sends one (docs/api.md, difference 2).
      const providerUpdate = recorded.method === 'PUT' && /^\/resource_providers\/[^/]+$/.test(recorded.path);
      if (!providerUpdate) expect(got.headers.get('last-modified') === null, 'last-modified sent or not').toBe(recorded.headers['last-modified'] === undefined);
      expect(got.headers.get('x-openstack-request-id')).toMatch(/^req-[0-9a-f-]{36}$/);

      const expected = recorded.body;
      if (expected?.errors) {
        const [want] = expected.errors;
        const [have] = got.body.errors;
        expect(have.code).toBe(want.code);
        expect(have.title).toBe(want.title);
        expect(have.status).toBe(want.status);
        expect(Object.keys(have).sort()).toEqual(Object.keys(want).sort());
        // Placement's schema errors go on with jsonschema's dump of the schema.
        const schemaError = (want.detail as string).includes('Failed validating');
        if (schemaError) expect((want.detail as string).startsWith((have.detail as string).trimEnd()), `ert: ${have.detail}\nPlacement: ${want.detail}`).toBe(true);
        else expect(have.detail).toBe(want.detail);
        if (want.min_version !== undefined) expect([have.min_version, have.max_version]).toEqual([want.min_version, want.max_version]);
        return;
      }
      if (/[?&]limit=/.test(recorded.path)) {
        // The order of candidates is undefined, so `limit` may keep different ones: the same
        // number, each summarised.
        expect(got.body.allocation_requests).toHaveLength(expected.allocation_requests.length);
        for (const c of got.body.allocation_requests) for (const uuid of Object.keys(c.allocations)) expect(got.body.provider_summaries).toHaveProperty(uuid);
        return;
      }
      expect(normalise(got.body)).toEqual(normalise(expected));
    });
  }
});

/**
 * The allocation writes (scripts/placement-api-compare.mjs ALLOCATION_WRITES: PUT, DELETE and
 * POST allocations, the reshaper, with their refusals), recorded on the same world before the
 * reads (the sequence leaves it as it found it) into fixtures/placement-8.0.0-allocation-writes.json,
 * replayed in order on a fresh world. As above, and consumer generations compared exactly:
 * ert counts them as Placement does.
 */
const allocationWrites = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures/placement-8.0.0-allocation-writes.json'), 'utf8')) as { answers: Recorded[] };

/** Every `consumer_generation` in a body, in order. */
function consumerGenerations(value: unknown): unknown[] {
  if (Array.isArray(value)) return value.flatMap(consumerGenerations);
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .flatMap(([k, v]) => (k === 'consumer_generation' ? [v] : consumerGenerations(v)));
}

describe.each(backends)(`ert serve on %s writes allocations as Placement ${fixture.placementApi} did (${allocationWrites.answers.length} recorded requests)`, (client) => {
  let s: Served;
  beforeAll(async () => {
    s = await serveWorld('', loadWorld, client);
  });
  afterAll(async () => {
    await s?.close();
  });

  for (const [i, recorded] of allocationWrites.answers.entries()) {
    it(`#${i} ${recorded.method} ${recorded.path} at ${recorded.mv ?? '(none)'}${recorded.token !== undefined ? ` token ${recorded.token}` : ''} -> ${recorded.status}`, async () => {
      const got = await call(s.base, recorded.path, {
        mv: recorded.mv,
        method: recorded.method,
        ...(recorded.token === undefined ? {} : { token: recorded.token }),
        ...(recorded.requestHeaders ? { headers: recorded.requestHeaders } : {}),
        ...(recorded.requestBody === undefined ? {} : { body: recorded.requestBody }),
      });
      expect(got.status, got.text).toBe(recorded.status);
      for (const header of ['openstack-api-version', 'vary', 'content-type', 'cache-control']) {
        expect(got.headers.get(header) ?? undefined, header).toBe(recorded.headers[header]);
      }
      expect(got.headers.get('last-modified') === null, 'last-modified sent or not').toBe(recorded.headers['last-modified'] === undefined);
      const expected = recorded.body;
      if (expected?.errors) {
        const [want] = expected.errors;
        const [have] = got.body.errors;
        expect([have.status, have.title, have.code]).toEqual([want.status, want.title, want.code]);
        const schemaError = (want.detail as string).includes('Failed validating');
        if (schemaError) expect((want.detail as string).startsWith((have.detail as string).trimEnd()), `ert: ${have.detail}\nPlacement: ${want.detail}`).toBe(true);
        else expect(have.detail).toBe(want.detail);
        return;
      }
      expect(consumerGenerations(got.body)).toEqual(consumerGenerations(expected));
      expect(normalise(got.body)).toEqual(normalise(expected));
    });
  }
});
