import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeInventory } from '@ert/plugin-api';
import { backends, call, serveWorld, U, type Served } from './world.js';

/**
 * The allocation writes of the Placement API (issue 13): `PUT`/`DELETE /allocations/{c}`,
 * `POST /allocations` (1.13) and `POST /reshaper` (1.30), at each microversion boundary,
 * with Placement 8.0.0's status codes, error codes and messages (handlers/allocation.py,
 * handlers/reshaper.py), over the world of world.ts written through the store.
 *
 * "Changes nothing" tests compare everything a client can read before and after a refused
 * write. Seen red: with `if ('error' in outcome) throw outcome.error` removed from
 * `Store.reshape` (packages/store/src/allocations.ts) the reshape capacity case here and in
 * packages/store/test/consumers.test.ts fail; with `precheck` skipping the consumer
 * generation and the store's `checkConsumerGeneration` returning early, the stale-generation
 * case writes.
 */

const C = {
  a: 'aaaa0000-0000-4000-8000-000000000001',
  b: 'bbbb0000-0000-4000-8000-000000000002',
  c: 'cccc0000-0000-4000-8000-000000000003',
  d: 'dddd0000-0000-4000-8000-000000000004',
  child: '44444444-4444-4444-8444-4444444c4114',
} as const;

describe.each(backends)('the allocation writes on %s', (client) => {
  let s: Served;
  beforeAll(async () => {
    s = await serveWorld('/placement', undefined, client);
  });
  afterAll(async () => {
    await s?.close();
  });

  const req = (method: string, path: string, mv: string | null, body?: unknown, opts: Parameters<typeof call>[2] = {}) => call(s.base, path, { method, mv, ...(body === undefined ? {} : { body }), ...opts });
  const put = (consumer: string, mv: string, body: unknown, opts: Parameters<typeof call>[2] = {}) => req('PUT', `/allocations/${consumer}`, mv, body, opts);
  const get = async (consumer: string, mv = '1.38') => (await req('GET', `/allocations/${consumer}`, mv)).body;
  const error = (r: { body: any }) => r.body.errors[0];
  const dict = (rp: string, resources: Record<string, number>, extra: Record<string, unknown> = {}) => ({ allocations: { [rp]: { resources } }, project_id: 'p9', user_id: 'u9', ...extra });
  /** Everything a client reads that a refused write could change. */
  const world = async () => ({
    providers: (await req('GET', '/resource_providers', '1.14')).body,
    usages: await Promise.all([U.cn1, U.cn2, U.lonely, U.ss].map(async (u) => (await req('GET', `/resource_providers/${u}/usages`, '1.0')).body)),
    consumers: await Promise.all([U.i1, U.i2, U.m2, C.a, C.b, C.c, C.d].map((c) => get(c))),
    inventories: await Promise.all([U.lonely].map(async (u) => (await req('GET', `/resource_providers/${u}/inventories`, '1.0')).body)),
  });

  it('PUT 1.0-1.11: the list body; project and user required from 1.8, Placement\'s incomplete ids before', async () => {
    const r = await put(C.a, '1.0', { allocations: [{ resource_provider: { uuid: U.lonely }, resources: { VCPU: 1 } }] });
    expect(r.status).toBe(204);
    expect(r.text).toBe('');
    expect(r.headers.get('content-type')).toBeNull();
    expect(await get(C.a, '1.28')).toMatchObject({ project_id: '00000000-0000-0000-0000-000000000000', user_id: '00000000-0000-0000-0000-000000000000', consumer_generation: 1 });
    const missing = await put(C.a, '1.8', { allocations: [{ resource_provider: { uuid: U.lonely }, resources: { VCPU: 1 } }] });
    expect(missing.status).toBe(400);
    expect(missing.body.errors[0].detail).toContain("JSON does not validate: 'project_id' is a required property");
    expect((await put(C.a, '1.11', { allocations: [{ resource_provider: { uuid: U.lonely }, resources: { VCPU: 2 } }], project_id: 'p9', user_id: 'u9' })).status).toBe(204);
    expect(await get(C.a, '1.12')).toEqual({ allocations: { [U.lonely]: { resources: { VCPU: 2 }, generation: expect.any(Number) } }, project_id: 'p9', user_id: 'u9' });
    // The dict body is 1.12's; the list body is refused there.
    expect((await put(C.a, '1.11', dict(U.lonely, { VCPU: 1 }))).status).toBe(400);
    expect((await put(C.a, '1.12', { allocations: [{ resource_provider: { uuid: U.lonely }, resources: { VCPU: 1 } }], project_id: 'p', user_id: 'u' })).status).toBe(400);
    expect((await put(C.a, '1.12', dict(U.lonely, { VCPU: 1 }))).status).toBe(204);
    // allocations: {} is 1.28's.
    expect((await put(C.a, '1.27', dict(U.lonely, {}, {}))).status).toBe(400);
    expect((await put(C.a, '1.27', { allocations: {}, project_id: 'p', user_id: 'u' })).status).toBe(400);
    expect((await req('DELETE', `/allocations/${C.a}`, '1.0')).status).toBe(204);
  });

  it('PUT 1.28: consumer generations as Placement counts them (1 after the first write), 409 concurrent_update on a mismatch', async () => {
    expect(error(await put(C.b, '1.28', dict(U.lonely, { VCPU: 1 })))).toMatchObject({ status: 400, code: 'placement.undefined_code' });
    const notNew = await put(C.b, '1.28', dict(U.lonely, { VCPU: 1 }, { consumer_generation: 5 }));
    expect(notNew.status).toBe(409);
    expect(error(notNew)).toMatchObject({ code: 'placement.concurrent_update' });
    expect(error(notNew).detail).toContain('consumer generation conflict - expected null but got 5');
    expect((await put(C.b, '1.28', dict(U.lonely, { VCPU: 1 }, { consumer_generation: null }))).status).toBe(204);
    expect((await get(C.b)).consumer_generation).toBe(1);
    const before = await world();
    const stale = await put(C.b, '1.28', dict(U.lonely, { VCPU: 2 }, { consumer_generation: null }));
    expect(stale.status).toBe(409);
    expect(error(stale).code).toBe('placement.concurrent_update');
    expect(error(stale).detail).toContain('consumer generation conflict - expected 1 but got None');
    expect(error(await put(C.b, '1.28', dict(U.lonely, { VCPU: 2 }, { consumer_generation: 0 }))).detail).toContain('expected 1 but got 0');
    expect(await world()).toEqual(before);
    expect((await put(C.b, '1.28', dict(U.lonely, { VCPU: 2 }, { consumer_generation: 1 }))).status).toBe(204);
    expect(await get(C.b, '1.28')).toMatchObject({ consumer_generation: 2, allocations: { [U.lonely]: { resources: { VCPU: 2 } } } });
    // Empty allocations delete the consumer; the next write is a new consumer again.
    expect((await put(C.b, '1.28', { allocations: {}, project_id: 'p9', user_id: 'u9', consumer_generation: 2 })).status).toBe(204);
    expect(await get(C.b, '1.28')).toEqual({ allocations: {} });
    expect((await req('GET', `/resource_providers/${U.lonely}/usages`, '1.0')).body.usages).toEqual({ VCPU: 0 });
    expect((await put(C.b, '1.28', dict(U.lonely, { VCPU: 1 }, { consumer_generation: null }))).status).toBe(204);
    expect((await req('DELETE', `/allocations/${C.b}`, '1.28')).status).toBe(204);
  });

  it('PUT 1.34 takes mappings, 1.38 requires consumer_type, shown by GET and /usages', async () => {
    const mappings = { '': [U.cn1] };
    expect((await put(C.c, '1.33', dict(U.cn1, { VCPU: 1 }, { consumer_generation: null, mappings }))).status).toBe(400);
    expect((await put(C.c, '1.34', dict(U.cn1, { VCPU: 1 }, { consumer_generation: null, mappings }))).status).toBe(204);
    expect((await get(C.c)).consumer_type).toBe('unknown');
    expect(error(await put(C.c, '1.38', dict(U.cn1, { VCPU: 1 }, { consumer_generation: 1 }))).detail).toContain("'consumer_type' is a required property");
    expect((await put(C.c, '1.38', dict(U.cn1, { VCPU: 1 }, { consumer_generation: 1, consumer_type: 'bad-type' }))).status).toBe(400);
    expect((await put(C.c, '1.38', dict(U.cn1, { VCPU: 3, MEMORY_MB: 256 }, { consumer_generation: 1, consumer_type: 'BATCH' }))).status).toBe(204);
    expect(await get(C.c)).toEqual({
      allocations: { [U.cn1]: { resources: { MEMORY_MB: 256, VCPU: 3 }, generation: expect.any(Number) } },
      project_id: 'p9',
      user_id: 'u9',
      consumer_generation: 2,
      consumer_type: 'BATCH',
    });
    expect((await req('GET', '/usages?project_id=p9', '1.38')).body.usages).toEqual({ BATCH: { consumer_count: 1, MEMORY_MB: 256, VCPU: 3 } });
    // One store: the scheduler's snapshot sees the usage, and the provider's allocations list the consumer.
    const [cn1] = await s.store.loadHosts(['cn1']);
    expect(cn1!.providers.find((p) => p.uuid === U.cn1)!.usages).toEqual({ VCPU: 5, MEMORY_MB: 768 });
    const onCn1 = (await req('GET', `/resource_providers/${U.cn1}/allocations`, '1.28')).body;
    expect(onCn1.allocations[C.c]).toEqual({ resources: { MEMORY_MB: 256, VCPU: 3 }, consumer_generation: 2 });
    expect(Object.keys(onCn1.allocations).sort()).toEqual([U.i1, C.c].sort());
    expect((await req('DELETE', `/allocations/${C.c}`, '1.38')).status).toBe(204);
  });

  it('capacity, constraints, unknown providers and classes: Placement\'s statuses and messages, and nothing written', async () => {
    const before = await world();
    const at = async (body: unknown, mv = '1.28') => put(C.d, mv, body);
    // cn2: VCPU 4 (max_unit 4), 3 used.
    const full = await at(dict(U.cn2, { VCPU: 2 }, { consumer_generation: null }));
    expect(full.status).toBe(409);
    expect(error(full).code).toBe('placement.undefined_code');
    expect(error(full).detail).toContain(`Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource provider '${U.cn2}'. The requested amount would exceed the capacity.`);
    const overMax = await at(dict(U.lonely, { VCPU: 3 }, { consumer_generation: null }));
    expect(error(overMax).detail).toContain(`Unable to create allocation for 'VCPU' on resource provider '${U.lonely}'. The requested amount would violate inventory constraints.`);
    const noInventory = await at(dict(U.lonely, { DISK_GB: 1 }, { consumer_generation: null }));
    expect(noInventory.status).toBe(409);
    expect(error(noInventory).detail).toContain(`Unable to allocate inventory: Inventory for 'DISK_GB' on resource provider '${U.lonely}' invalid.`);
    const maxUnit = await at(dict(U.ss, { DISK_GB: 501 }, { consumer_generation: null }));
    expect(maxUnit.status).toBe(409);
    expect(error(maxUnit).detail).toContain(`Unable to create allocation for 'DISK_GB' on resource provider '${U.ss}'. The requested amount would violate inventory constraints.`);
    const unknownRp = await at(dict('99999999-9999-4999-8999-999999999999', { VCPU: 1 }, { consumer_generation: null }));
    expect(unknownRp.status).toBe(400);
    expect(error(unknownRp).detail).toContain("Allocation for resource provider '99999999-9999-4999-8999-999999999999' that does not exist.");
    const unknownRc = await at(dict(U.lonely, { CUSTOM_NOPE: 1 }, { consumer_generation: null }));
    expect(unknownRc.status).toBe(400);
    expect(error(unknownRc).detail).toContain(`Unable to allocate inventory for consumer ${C.d}: No such resource class CUSTOM_NOPE.`);
    // Two providers, the second full: the first is not written either.
    const partial = await at({ allocations: { [U.cn1]: { resources: { VCPU: 1 } }, [U.lonely]: { resources: { VCPU: 3 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    expect(partial.status).toBe(409);
    const malformed = await put('not-a-uuid', '1.28', dict(U.lonely, { VCPU: 1 }, { consumer_generation: null }));
    expect(malformed.status).toBe(400);
    expect(error(malformed).detail).toContain('Malformed consumer_uuid: not-a-uuid');
    expect((await put(C.d, '1.28', dict(U.lonely, { VCPU: 0 }, { consumer_generation: null }))).status).toBe(400);
    expect(await world()).toEqual(before);
  });

  it('several checks failing at once: Placement\'s order (consumer generation, providers, classes) before the store\'s own refusal', async () => {
    // The writes go to the store first and Placement's checks are read when it refuses
    // (allocation-writes.ts writeAllocations); the answer must still be Placement's first
    // failing check. Seen red with the checks not read after a refusal: the over-capacity
    // provider listed first answered 409 "Unable to allocate" instead of the unknown provider's 400.
    const before = await world();
    const E = 'eeee0000-0000-4000-8000-000000000005';
    const missing = '99999999-9999-4999-8999-999999999999';
    const both = (first: string, firstResources: Record<string, number>, second: string, secondResources: Record<string, number>, generation: number | null) => ({
      allocations: { [first]: { resources: firstResources }, [second]: { resources: secondResources } },
      project_id: 'p9',
      user_id: 'u9',
      consumer_generation: generation,
    });
    // A stale generation and an unknown provider: the generation's 409.
    const stale = await put(E, '1.28', both(U.lonely, { VCPU: 1 }, missing, { VCPU: 1 }, 3));
    expect(stale.status).toBe(409);
    expect(error(stale).code).toBe('placement.concurrent_update');
    expect(error(stale).detail).toContain('consumer generation conflict - expected null but got 3');
    // Over capacity on the first provider, the second unknown: the unknown provider's 400.
    const overThenMissing = await put(E, '1.28', both(U.cn2, { VCPU: 2 }, missing, { VCPU: 1 }, null));
    expect(overThenMissing.status).toBe(400);
    expect(error(overThenMissing).detail).toContain(`Allocation for resource provider '${missing}' that does not exist.`);
    // Over capacity and a class nobody created: the class's 400, and the class is not created.
    const overThenClass = await put(E, '1.28', both(U.cn2, { VCPU: 2 }, U.lonely, { CUSTOM_NOPE_TOO: 1 }, null));
    expect(overThenClass.status).toBe(400);
    expect(error(overThenClass).detail).toContain(`Unable to allocate inventory for consumer ${E}: No such resource class CUSTOM_NOPE_TOO.`);
    expect((await req('GET', '/resource_classes/CUSTOM_NOPE_TOO', '1.7')).status).toBe(404);
    // POST /allocations: the same order across consumers.
    const post = await req('POST', '/allocations', '1.28', {
      [E]: { allocations: { [U.cn2]: { resources: { VCPU: 2 } } }, project_id: 'p9', user_id: 'u9', consumer_generation: null },
      [C.d]: { allocations: { [missing]: { resources: { VCPU: 1 } } }, project_id: 'p9', user_id: 'u9', consumer_generation: null },
    });
    expect(post.status).toBe(400);
    expect(error(post).detail).toContain(`Allocation for resource provider '${missing}' that does not exist.`);
    expect(await world()).toEqual(before);
  });

  it('content type 415, policy 403 (placement:allocations:update, :delete, :manage, placement:reshaper:reshape)', async () => {
    const r = await put(C.d, '1.28', JSON.stringify(dict(U.lonely, { VCPU: 1 }, { consumer_generation: null })), { headers: { 'content-type': 'text/plain' } });
    expect(r.status).toBe(415);
    expect(error(r).detail).toContain('The media type text/plain is not supported, use application/json');
    const bob = { token: 'bob' };
    expect(error(await put(C.d, '1.28', dict(U.lonely, { VCPU: 1 }, { consumer_generation: null }), bob)).detail).toContain('Policy does not allow placement:allocations:update to be performed.');
    expect(error(await req('DELETE', `/allocations/${U.i1}`, '1.28', undefined, bob)).detail).toContain('placement:allocations:delete');
    expect(error(await req('POST', '/allocations', '1.28', {}, bob)).detail).toContain('placement:allocations:manage');
    expect(error(await req('POST', '/reshaper', '1.30', {}, bob)).detail).toContain('placement:reshaper:reshape');
    // A system-scoped reader may read, not write.
    const reader = { token: 'bob', headers: { 'x-roles': 'reader', 'openstack-system-scope': 'all' } };
    expect((await req('GET', `/allocations/${U.i1}`, '1.28', undefined, reader)).status).toBe(200);
    expect((await req('DELETE', `/allocations/${U.i1}`, '1.28', undefined, reader)).status).toBe(403);
  });

  it('DELETE: 204 (the consumer gone), 404 when it holds nothing', async () => {
    expect((await put(C.d, '1.28', dict(U.lonely, { VCPU: 1 }, { consumer_generation: null }))).status).toBe(204);
    const r = await req('DELETE', `/allocations/${C.d}`, '1.0');
    expect(r.status).toBe(204);
    expect(r.headers.get('content-type')).toBeNull();
    const again = await req('DELETE', `/allocations/${C.d}`, '1.23');
    expect(again.status).toBe(404);
    expect(error(again)).toMatchObject({ code: 'placement.undefined_code' });
    expect(error(again).detail).toContain(`No allocations for consumer '${C.d}'`);
  });

  it('POST /allocations (1.13): many consumers in one transaction, all or nothing; generations 1.28, mappings 1.34, type 1.38', async () => {
    const two = (extra: Record<string, unknown>, vcpuB = 1) => ({
      [C.a]: { allocations: { [U.lonely]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', ...extra },
      [C.b]: { allocations: { [U.lonely]: { resources: { VCPU: vcpuB } } }, project_id: 'p', user_id: 'u', ...extra },
    });
    expect((await req('POST', '/allocations', '1.12', two({}))).status).toBe(404);
    const before = await world();
    // lonely: VCPU 2; 1 + 2 do not fit.
    const tooMuch = await req('POST', '/allocations', '1.13', two({}, 2));
    expect(tooMuch.status).toBe(409);
    expect(error(tooMuch).detail).toContain(`Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource provider '${U.lonely}'. The requested amount would exceed the capacity.`);
    expect(await world()).toEqual(before);
    expect((await req('POST', '/allocations', '1.28', two({}))).status).toBe(400);
    expect((await req('POST', '/allocations', '1.28', two({ consumer_generation: null }))).status).toBe(204);
    expect((await get(C.a)).consumer_generation).toBe(1);
    // Moving C.b's VCPU to cn1 and emptying C.a in one request.
    const move = {
      [C.a]: { allocations: {}, project_id: 'p', user_id: 'u', consumer_generation: 1, consumer_type: 'INSTANCE' },
      [C.b]: { allocations: { [U.cn1]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', consumer_generation: 1, consumer_type: 'INSTANCE', mappings: { '': [U.cn1] } },
    };
    expect((await req('POST', '/allocations', '1.37', move)).status).toBe(400);
    expect((await req('POST', '/allocations', '1.38', move)).status).toBe(204);
    expect(await get(C.a)).toEqual({ allocations: {} });
    expect(await get(C.b)).toMatchObject({ consumer_generation: 2, consumer_type: 'INSTANCE', allocations: { [U.cn1]: { resources: { VCPU: 1 } } } });
    const stale = await req('POST', '/allocations', '1.38', { [C.b]: { ...move[C.b], consumer_generation: 1 } });
    expect(stale.status).toBe(409);
    expect(error(stale)).toMatchObject({ code: 'placement.concurrent_update' });
    const unknownRc = await req('POST', '/allocations', '1.13', { [C.d]: { allocations: { [U.lonely]: { resources: { CUSTOM_NOPE: 1 } } }, project_id: 'p', user_id: 'u' } });
    expect(error(unknownRc).detail).toContain('Unable to allocate inventory No such resource class CUSTOM_NOPE.');
    expect((await req('POST', '/allocations', '1.13', {})).status).toBe(400);
    expect((await req('DELETE', `/allocations/${C.b}`, '1.38')).status).toBe(204);
  });

  it('POST /reshaper (1.30): inventories and allocations of several providers at once; refusals change nothing', async () => {
    await s.store.createProvider({ uuid: C.child, name: 'lonely_child', parentUuid: U.lonely });
    expect((await put(C.a, '1.38', dict(U.lonely, { VCPU: 2 }, { consumer_generation: null, consumer_type: 'INSTANCE' }))).status).toBe(204);
    const gen = async (u: string) => (await req('GET', `/resource_providers/${u}`, '1.14')).body.generation as number;
    const vcpu = { total: 2, reserved: 0, min_unit: 1, max_unit: 2, step_size: 1, allocation_ratio: 1.0 };
    const body = async (extra: { allocations?: unknown; lonelyGen?: number } = {}) => ({
      inventories: {
        [U.lonely]: { resource_provider_generation: extra.lonelyGen ?? (await gen(U.lonely)), inventories: {} },
        [C.child]: { resource_provider_generation: await gen(C.child), inventories: { VCPU: vcpu } },
      },
      allocations: extra.allocations ?? { [C.a]: { allocations: { [C.child]: { resources: { VCPU: 2 } } }, project_id: 'p9', user_id: 'u9', consumer_generation: 1, consumer_type: 'INSTANCE' } },
    });
    expect((await req('POST', '/reshaper', '1.29', await body())).status).toBe(404);
    const before = await world();
    const stale = await req('POST', '/reshaper', '1.38', await body({ lonelyGen: 99 }));
    expect(stale.status).toBe(409);
    expect(error(stale)).toMatchObject({ code: 'placement.concurrent_update' });
    expect(error(stale).detail).toContain(`resource provider generation conflict for provider ${U.lonely}: actual: ${await gen(U.lonely)}, given: 99`);
    const inUse = await req('POST', '/reshaper', '1.38', await body({ allocations: {} }));
    expect(inUse.status).toBe(409);
    expect(error(inUse)).toMatchObject({ code: 'placement.inventory.inuse' });
    expect(error(inUse).detail).toContain(`update conflict: Inventory for 'VCPU' on resource provider '${U.lonely}' in use.`);
    const full = await req('POST', '/reshaper', '1.38', await body({ allocations: { [C.a]: { allocations: { [C.child]: { resources: { VCPU: 3 } } }, project_id: 'p9', user_id: 'u9', consumer_generation: 1, consumer_type: 'INSTANCE' } } }));
    expect(full.status).toBe(409);
    expect(error(full).detail).toContain('Unable to allocate inventory: ');
    const unknown = await req('POST', '/reshaper', '1.30', { inventories: { '99999999-9999-4999-8999-999999999999': { resource_provider_generation: 0, inventories: {} } }, allocations: {} });
    expect(unknown.status).toBe(400);
    expect(error(unknown)).toMatchObject({ code: 'placement.resource_provider.not_found' });
    expect((await req('POST', '/reshaper', '1.30', await body())).status).toBe(400); // consumer_type is 1.38's
    expect(await world()).toEqual(before);

    const r = await req('POST', '/reshaper', '1.38', await body());
    expect(r.status).toBe(204);
    expect((await req('GET', `/resource_providers/${U.lonely}/inventories`, '1.0')).body.inventories).toEqual({});
    expect((await req('GET', `/resource_providers/${C.child}/inventories`, '1.0')).body.inventories).toEqual({ VCPU: vcpu });
    expect(await get(C.a)).toMatchObject({ consumer_generation: 2, allocations: { [C.child]: { resources: { VCPU: 2 } } } });
    // Put the world back for the other cases.
    await s.store.deleteAllocations(C.a);
    await s.store.setInventories(U.lonely, undefined, { VCPU: normalizeInventory({ total: 2 }) });
  });

  it("POST /reshaper: the in-use message names every class still allocated once the reshape's allocations are written, in Placement's order; a ratio of 0 is accepted", async () => {
    // Catches a message naming the store's one class, or the classes allocated before the
    // reshape (VCPU moves away here, so Placement does not name it), or in another order than
    // Placement's class ids (MEMORY_MB 1 before DISK_GB 2). Seen red with each of those.
    const root = 'eeee0004-0000-4000-8000-000000000004';
    const child = 'eeee0005-0000-4000-8000-000000000005';
    await s.store.createProvider({ uuid: root, name: 'w-reshape' });
    await s.store.createProvider({ uuid: child, name: 'w-reshape-child', parentUuid: root });
    const inv = normalizeInventory({ total: 100 });
    await s.store.setInventories(root, undefined, { VCPU: inv, MEMORY_MB: inv, DISK_GB: inv });
    const consumer = (uuid: string) => ({ uuid, projectId: 'p9', userId: 'u9', generation: null });
    const on = (resources: Record<string, number>) => Object.entries(resources).map(([resourceClass, amount]) => ({ providerUuid: root, resourceClass, amount }));
    await s.store.writeAllocations([{ consumer: consumer(C.c), allocations: on({ VCPU: 1, MEMORY_MB: 10, DISK_GB: 10 }) }]);
    await s.store.writeAllocations([{ consumer: consumer(C.d), allocations: on({ DISK_GB: 5, MEMORY_MB: 5 }) }]);
    const gen = async (u: string) => (await req('GET', `/resource_providers/${u}`, '1.14')).body.generation as number;
    const reshape = async (childInventory: Record<string, unknown>, allocations: Record<string, unknown>) =>
      req('POST', '/reshaper', '1.30', {
        inventories: {
          [root]: { resource_provider_generation: await gen(root), inventories: {} },
          [child]: { resource_provider_generation: await gen(child), inventories: { VCPU: { total: 4, ...childInventory } } },
        },
        allocations,
      });
    const moved = { [C.c]: { allocations: { [child]: { resources: { VCPU: 1 } } }, project_id: 'p9', user_id: 'u9', consumer_generation: 1 } };
    const inUse = await reshape({}, moved);
    expect(inUse.status).toBe(409);
    expect(error(inUse).detail).toContain(`update conflict: Inventory for 'MEMORY_MB, DISK_GB' on resource provider '${root}' in use.`);
    // Placement's reshaper has no capacity check at all: a ratio of 0 is stored (1.30 > 1.26).
    await s.store.deleteAllocations(C.c);
    await s.store.deleteAllocations(C.d);
    expect((await reshape({ allocation_ratio: 0 }, {})).status).toBe(204);
    expect((await req('GET', `/resource_providers/${child}/inventories/VCPU`, '1.30')).body.allocation_ratio).toBe(0);
    await s.store.deleteProvider(child);
    await s.store.deleteProvider(root);
  });
});
