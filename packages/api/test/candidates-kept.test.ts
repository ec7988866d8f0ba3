import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApi } from '@ert/api';
import { createStore, type Store } from '@ert/store';
import { backends, call, serveWorld, type Served } from './world.js';

/**
 * GET /allocation_candidates keeps its model and search index between requests (the store's
 * ProviderModel; the route's index, re-indexing only the trees a write changed). After every
 * kind of write, through the API or straight into the store by another store instance (as
 * another process would), its answer equals the answer of a second API over a store that has
 * never read (a full read and a full index).
 *
 * Mutation seen red: the route reusing its index whenever the provider count is unchanged
 * (the claim's usage not seen: the exhausted provider still offered).
 */

const A = 'a1a1a1a1-0000-4000-8000-000000000001';
const B = 'b2b2b2b2-0000-4000-8000-000000000002';
const SHARED = 'c3c3c3c3-0000-4000-8000-000000000003';
const AGG = 'a9a9a9a9-0000-4000-8000-000000000009';

describe.each(backends)('candidates after writes, with the model kept (%s)', (client) => {
  let s: Served;
  beforeAll(async () => {
    s = await serveWorld('', async () => undefined, client);
  });
  afterAll(async () => {
    await s?.close();
  });

  /** The same request to a second API over a new store on the same database: nothing kept. */
  async function fresh(path: string): Promise<unknown> {
    const store: Store = await createStore(s.options);
    const app = await createApi({ store, auth: 'noauth2', prefix: '' });
    try {
      const res = await app.inject({ method: 'GET', url: path, headers: { 'x-auth-token': 'admin', 'openstack-api-version': 'placement 1.39' } });
      return res.json();
    } finally {
      await app.close();
      await store.close();
    }
  }

  const req = (method: string, path: string, body?: unknown) => call(s.base, path, { method, mv: '1.39', ...(body === undefined ? {} : { body }) });
  const candidates = async (query: string) => {
    const path = `/allocation_candidates?${query}`;
    const got = await req('GET', path);
    expect(got.status).toBe(200);
    expect(got.body, query).toEqual(await fresh(path));
    return got.body as { allocation_requests: Array<{ allocations: Record<string, unknown> }> };
  };
  const providersOf = (answer: { allocation_requests: Array<{ allocations: Record<string, unknown> }> }) => answer.allocation_requests.map((r) => Object.keys(r.allocations).sort().join('+')).sort();

  it('answers as a full read after claims, inventory, trait and aggregate writes, by the API or another store', async () => {
    for (const [uuid, name] of [[A, 'a'], [B, 'b'], [SHARED, 'shared']] as const) expect((await req('POST', '/resource_providers', { uuid, name })).status).toBe(200);
    await req('PUT', `/resource_providers/${A}/inventories`, { resource_provider_generation: 0, inventories: { VCPU: { total: 4 }, DISK_GB: { total: 10 } } });
    await req('PUT', `/resource_providers/${B}/inventories`, { resource_provider_generation: 0, inventories: { VCPU: { total: 4 } } });
    await req('PUT', `/resource_providers/${SHARED}/inventories`, { resource_provider_generation: 0, inventories: { DISK_GB: { total: 100 } } });
    await req('PUT', `/resource_providers/${SHARED}/traits`, { resource_provider_generation: 1, traits: ['MISC_SHARES_VIA_AGGREGATE'] });
    expect(providersOf(await candidates('resources=VCPU:3'))).toEqual([A, B]);

    // A claim through the API: A has 1 VCPU left.
    expect((await req('PUT', '/allocations/c0c0c0c0-0000-4000-8000-000000000001', { allocations: { [A]: { resources: { VCPU: 3 } } }, project_id: 'p', user_id: 'u', consumer_generation: null, consumer_type: 'INSTANCE' })).status).toBe(204);
    expect(providersOf(await candidates('resources=VCPU:3'))).toEqual([B]);

    // A claim by another store (another process): B is full too.
    const other = await createStore(s.options);
    try {
      await other.writeAllocations([{ consumer: { uuid: 'c0c0c0c0-0000-4000-8000-000000000002', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: B, resourceClass: 'VCPU', amount: 4 }] }]);
      expect(providersOf(await candidates('resources=VCPU:1'))).toEqual([A]);
      // Aggregates: B joins the sharing provider's aggregate (another store), then A (the API).
      await other.setAggregates(B, undefined, [AGG]);
      await other.setAggregates(SHARED, undefined, [AGG]);
      await other.deleteAllocations('c0c0c0c0-0000-4000-8000-000000000002');
      expect(providersOf(await candidates('resources=VCPU:1,DISK_GB:20'))).toEqual([`${B}+${SHARED}`].map((x) => x.split('+').sort().join('+')));
    } finally {
      await other.close();
    }
    const a = (await req('GET', `/resource_providers/${A}`)).body as { generation: number };
    expect((await req('PUT', `/resource_providers/${A}/aggregates`, { resource_provider_generation: a.generation, aggregates: [AGG] })).status).toBe(200);
    expect(providersOf(await candidates('resources=VCPU:1,DISK_GB:20'))).toEqual([`${A}+${SHARED}`, `${B}+${SHARED}`].map((x) => x.split('+').sort().join('+')).sort());
    // Traits and inventories through the API.
    const b = (await req('GET', `/resource_providers/${B}`)).body as { generation: number };
    expect((await req('PUT', '/traits/CUSTOM_FAST')).status).toBe(201);
    expect((await req('PUT', `/resource_providers/${B}/traits`, { resource_provider_generation: b.generation, traits: ['CUSTOM_FAST'] })).status).toBe(200);
    expect(providersOf(await candidates('resources=VCPU:1&required=CUSTOM_FAST'))).toEqual([B]);
    expect((await req('PUT', `/resource_providers/${B}/inventories`, { resource_provider_generation: b.generation + 1, inventories: { VCPU: { total: 8 } } })).status).toBe(200);
    expect(providersOf(await candidates('resources=VCPU:6'))).toEqual([B]);
  });
});
