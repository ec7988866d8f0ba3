import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, serveWorld, U, type Served } from './world.js';

/**
 * The provider writes of the Placement API (providers, inventories, aggregates, traits,
 * resource classes) on a real HTTP server over the test world, at their microversion
 * boundaries. Statuses, codes and messages are Placement 8.0.0's (the recorded comparison,
 * placement-compare.test.ts, checks them against the real server); this suite adds what
 * the recording cannot: generated uuids, what the store holds after a refused write, and
 * what the tracker's side (hosts) sees.
 */

describe.each(backends)('the provider writes on %s', (client) => {
  let s: Served;
  beforeAll(async () => {
    s = await serveWorld('/placement', undefined, client);
  });
  afterAll(async () => {
    await s?.close();
  });

  async function req(method: string, path: string, mv: string, body?: unknown, headers: Record<string, string> = {}) {
    const h: Record<string, string> = { 'x-auth-token': 'admin', 'openstack-api-version': `placement ${mv}`, ...headers };
    if (body !== undefined) h['content-type'] ??= 'application/json';
    const res = await fetch(s.base + path, { method, headers: h, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) };
  }
  const P = 'eeee0001-0000-4000-8000-000000000001';

  it('POST /resource_providers: 201 with location before 1.20, 200 with the provider from 1.20; a generated uuid; 409 duplicate_name', async () => {
    const old = await req('POST', '/resource_providers', '1.19', { name: 'gen-old' });
    expect(old.status).toBe(201);
    expect(old.body).toBeUndefined();
    const location = old.headers.get('location')!;
    expect(location).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/placement\/resource_providers\/[0-9a-f-]{36}$/);
    const uuid = location.split('/').at(-1)!;
    expect(await s.store.getProvider(uuid)).toMatchObject({ name: 'gen-old', generation: 0 });

    const created = await req('POST', '/resource_providers', '1.20', { name: 'w-p', uuid: P.toUpperCase() });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ uuid: P, name: 'w-p', generation: 0, parent_provider_uuid: null, root_provider_uuid: P });
    expect(created.headers.get('location')).toMatch(new RegExp(`/placement/resource_providers/${P}$`));
    const dup = await req('POST', '/resource_providers', '1.23', { name: 'cn1' });
    expect(dup.status).toBe(409);
    expect(dup.body.errors[0].code).toBe('placement.duplicate_name');
    expect(dup.body.errors[0].detail).toContain('Conflicting resource provider name: cn1 already exists.');
  });

  it('a provider created through the API is not a host, and a child of a host is in its tree (the host is bumped)', async () => {
    const before = (await s.store.getHost('cn1'))!.generation;
    const child = await req('POST', '/resource_providers', '1.20', { name: 'cn1-extra', parent_provider_uuid: U.cn1 });
    expect(child.status).toBe(200);
    expect((await s.store.listHosts()).map((h) => h.name).sort()).toEqual(['cn1', 'cn2']);
    expect((await s.store.getHost('cn1'))!.generation).toBeGreaterThan(before);
    expect((await s.store.loadHosts(['cn1']))[0]!.providers.map((p) => p.name)).toContain('cn1-extra');
    expect((await req('DELETE', `/resource_providers/${child.body.uuid}`, '1.0')).status).toBe(204);
  });

  it('PUT /resource_providers/{u} cannot give a host\'s root a parent (ert: the tracker owns it), even at 1.37', async () => {
    const r = await req('PUT', `/resource_providers/${U.cn2}`, '1.37', { name: 'cn2', parent_provider_uuid: P });
    expect(r.status).toBe(400);
    expect(r.body.errors[0].detail).toContain('root provider of ert host cn2');
    expect(await s.store.getProvider(U.cn2)).not.toHaveProperty('parentUuid');
    const del = await req('DELETE', `/resource_providers/${U.cn2}`, '1.23');
    expect(del.body.errors[0].code).toBe('placement.resource_provider.inuse');
  });

  it('inventories: a stale generation is 409 concurrent_update and changes nothing; each write bumps the generation by one', async () => {
    const put = await req('PUT', `/resource_providers/${P}/inventories`, '1.26', { resource_provider_generation: 0, inventories: { VCPU: { total: 4 } } });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ resource_provider_generation: 1, inventories: { VCPU: { total: 4, reserved: 0, min_unit: 1, max_unit: 2147483647, step_size: 1, allocation_ratio: 1 } } });
    // Guards the generation check (drop it from setInventoriesHandler and this PUT succeeds and writes MEMORY_MB).
    const stale = await req('PUT', `/resource_providers/${P}/inventories`, '1.26', { resource_provider_generation: 0, inventories: { MEMORY_MB: { total: 4 } } });
    expect(stale.status).toBe(409);
    expect(stale.body.errors[0].code).toBe('placement.concurrent_update');
    expect(await s.store.getInventories(P)).toMatchObject({ generation: 1, inventories: { VCPU: { total: 4 } } });
    expect(Object.keys((await s.store.getInventories(P)).inventories)).toEqual(['VCPU']);
    const one = await req('PUT', `/resource_providers/${P}/inventories/VCPU`, '1.26', { resource_provider_generation: 0, total: 9 });
    expect(one.status).toBe(409);
    expect((await s.store.getInventories(P)).inventories.VCPU!.total).toBe(4);
    const added = await req('POST', `/resource_providers/${P}/inventories`, '1.26', { resource_class: 'DISK_GB', total: 10 });
    expect(added.status).toBe(201);
    expect(added.body.resource_provider_generation).toBe(2);
    expect(added.headers.get('location')).toMatch(new RegExp(`/placement/resource_providers/${P}/inventories/DISK_GB$`));
  });

  it('inventories in use: removing a used class is 409 inventory.inuse (DELETE one: concurrent_update), shrinking below usage is allowed', async () => {
    const { generation } = await s.store.getInventories(U.lonely);
    await s.store.writeAllocations([{ consumer: { uuid: 'eeee00c1-0000-4000-8000-000000000001', projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: U.lonely, resourceClass: 'VCPU', amount: 2 }] }]);
    const g = generation + 1;
    const removed = await req('PUT', `/resource_providers/${U.lonely}/inventories`, '1.26', { resource_provider_generation: g, inventories: {} });
    expect(removed.status).toBe(409);
    expect(removed.body.errors[0].code).toBe('placement.inventory.inuse');
    expect(removed.body.errors[0].detail).toContain(`update conflict: Inventory for 'VCPU' on resource provider '${U.lonely}' in use.`);
    const one = await req('DELETE', `/resource_providers/${U.lonely}/inventories/VCPU`, '1.26');
    expect(one.body.errors[0].code).toBe('placement.concurrent_update');
    expect(Object.keys((await s.store.getInventories(U.lonely)).inventories)).toEqual(['VCPU']);
    const shrunk = await req('PUT', `/resource_providers/${U.lonely}/inventories`, '1.26', { resource_provider_generation: g, inventories: { VCPU: { total: 1 } } });
    expect(shrunk.status).toBe(200);
    expect(await s.store.getUsages(U.lonely)).toEqual({ VCPU: 2 });
    const del = await req('DELETE', `/resource_providers/${U.lonely}`, '1.23');
    expect(del.body.errors[0].code).toBe('placement.resource_provider.inuse');
  });

  it("inventories in use: Placement's message names every class removed that is allocated, in its class id order", async () => {
    // Catches a message naming one class (ert named the store's first) or ordering them other
    // than Placement's ids (os-resource-classes' order: VCPU 0, DISK_GB 2, PCPU 14; custom after),
    // which Nova parses (_RE_INV_IN_USE). Seen red with the one-class message and with names sorted.
    const u = 'eeee0002-0000-4000-8000-000000000002';
    await s.store.createProvider({ uuid: u, name: 'w-inuse' });
    const inv = { total: 8, reserved: 0, minUnit: 1, maxUnit: 8, stepSize: 1, allocationRatio: 1 };
    await s.store.ensureResourceClasses(['CUSTOM_INUSE']);
    await s.store.setInventories(u, undefined, { PCPU: inv, MEMORY_MB: inv, CUSTOM_INUSE: inv, DISK_GB: inv, VCPU: inv });
    const consumer = { uuid: 'eeee00c2-0000-4000-8000-000000000002', projectId: 'p', userId: 'u', generation: null };
    await s.store.writeAllocations([{ consumer, allocations: ['CUSTOM_INUSE', 'PCPU', 'DISK_GB', 'VCPU'].map((resourceClass) => ({ providerUuid: u, resourceClass, amount: 1 })) }]);
    const classes = 'VCPU, DISK_GB, PCPU, CUSTOM_INUSE';
    const { generation } = await s.store.getInventories(u);
    const put = await req('PUT', `/resource_providers/${u}/inventories`, '1.26', { resource_provider_generation: generation, inventories: { MEMORY_MB: { total: 8 } } });
    expect(put.status).toBe(409);
    expect(put.body.errors[0].detail).toContain(`update conflict: Inventory for '${classes}' on resource provider '${u}' in use.`);
    const kept = await req('PUT', `/resource_providers/${u}/inventories`, '1.26', { resource_provider_generation: generation, inventories: { DISK_GB: { total: 8 }, VCPU: { total: 8 } } });
    expect(kept.body.errors[0].detail).toContain(`update conflict: Inventory for 'PCPU, CUSTOM_INUSE' on resource provider '${u}' in use.`);
    const all = await req('DELETE', `/resource_providers/${u}/inventories`, '1.5');
    expect(all.status).toBe(409);
    expect(all.body.errors[0].detail).toContain(`Inventory for '${classes}' on resource provider '${u}' in use.`);
    await s.store.deleteAllocations(consumer.uuid);
    expect((await req('DELETE', `/resource_providers/${u}`, '1.0')).status).toBe(204);
  });

  it('allocation_ratio 0: 400 below 1.26 (capacity 0), accepted from 1.26 with capacity 0 (nothing fits); negative ratios refused', async () => {
    // Catches the store's "allocationRatio must be a positive number" 400 at 1.26+, where
    // Placement stores 0 (schemas/inventory.py has no minimum), and a ratio of 0 that would
    // leave room. Seen red with the store's check without `zeroRatio` (400 at 1.26).
    const u = 'eeee0003-0000-4000-8000-000000000003';
    await s.store.createProvider({ uuid: u, name: 'w-ratio0' });
    const zero = { resource_provider_generation: 0, inventories: { VCPU: { total: 4, allocation_ratio: 0 } } };
    const old = await req('PUT', `/resource_providers/${u}/inventories`, '1.25', zero);
    expect(old.status).toBe(400);
    expect(old.body.errors[0].detail).toContain("Invalid inventory for 'VCPU' on resource provider");
    const put = await req('PUT', `/resource_providers/${u}/inventories`, '1.26', zero);
    expect(put.status).toBe(200);
    expect(put.body.inventories.VCPU.allocation_ratio).toBe(0);
    expect((await s.store.getInventories(u)).inventories.VCPU!.allocationRatio).toBe(0);
    expect((await req('POST', `/resource_providers/${u}/inventories`, '1.26', { resource_class: 'DISK_GB', total: 10, allocation_ratio: 0 })).status).toBe(201);
    expect((await req('PUT', `/resource_providers/${u}/inventories/DISK_GB`, '1.26', { resource_provider_generation: 2, total: 10, reserved: 10, allocation_ratio: 0 })).status).toBe(200);
    const claim = await req('PUT', '/allocations/eeee00c3-0000-4000-8000-000000000003', '1.28', { allocations: { [u]: { resources: { VCPU: 1 } } }, project_id: 'p', user_id: 'u', consumer_generation: null });
    expect(claim.status).toBe(409);
    expect(claim.body.errors[0].detail).toContain('The requested amount would exceed the capacity.');
    const listed = await req('GET', '/resource_providers?resources=VCPU:1', '1.26');
    expect(listed.body.resource_providers.map((p: { uuid: string }) => p.uuid)).not.toContain(u);
    const candidates = await req('GET', '/allocation_candidates?resources=VCPU:1', '1.26');
    expect(Object.keys(candidates.body.provider_summaries)).not.toContain(u);
    const negative = await req('PUT', `/resource_providers/${u}/inventories`, '1.39', { resource_provider_generation: 3, inventories: { VCPU: { total: 4, reserved: 4, allocation_ratio: -1 } } });
    expect(negative.status).toBe(400);
    expect(negative.body.errors[0].detail).toContain('allocationRatio must be a non-negative number, got -1');
    expect((await req('DELETE', `/resource_providers/${u}`, '1.0')).status).toBe(204);
  });

  it('aggregates: no generation before 1.19; from 1.19 a stale one is 409 and changes nothing', async () => {
    const agg = 'eeee00aa-0000-4000-8000-0000000000aa';
    const old = await req('PUT', `/resource_providers/${P}/aggregates`, '1.18', [agg]);
    expect(old.body).toEqual({ aggregates: [agg] });
    const { generation } = (await s.store.getProvider(P))!;
    const stale = await req('PUT', `/resource_providers/${P}/aggregates`, '1.19', { aggregates: [], resource_provider_generation: generation - 1 });
    expect(stale.status).toBe(409);
    expect(await s.store.getAggregates(P)).toEqual([agg]);
    const ok = await req('PUT', `/resource_providers/${P}/aggregates`, '1.19', { aggregates: [], resource_provider_generation: generation });
    expect(ok.body).toEqual({ aggregates: [], resource_provider_generation: generation + 1 });
  });

  it('traits: PUT /traits/{n} creates (201, then 204); unknown traits are 400 and change nothing; in-use traits cannot be deleted', async () => {
    expect((await req('PUT', '/traits/CUSTOM_NEWT', '1.6')).status).toBe(201);
    expect((await req('PUT', '/traits/CUSTOM_NEWT', '1.6')).status).toBe(204);
    expect((await req('GET', '/traits/CUSTOM_NEWT', '1.6')).status).toBe(204);
    const { generation } = (await s.store.getProvider(P))!;
    const unknown = await req('PUT', `/resource_providers/${P}/traits`, '1.6', { traits: ['CUSTOM_NEWT', 'CUSTOM_NOT_THERE'], resource_provider_generation: generation });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors[0].detail).toContain('No such trait CUSTOM_NOT_THERE');
    expect(await s.store.getTraits(P)).toEqual([]);
    // The store creates unknown valid traits itself: the API must refuse first.
    expect((await s.store.listTraits()).map((t) => t.name)).not.toContain('CUSTOM_NOT_THERE');
    const set = await req('PUT', `/resource_providers/${P}/traits`, '1.6', { traits: ['CUSTOM_NEWT'], resource_provider_generation: generation });
    expect(set.body).toEqual({ traits: ['CUSTOM_NEWT'], resource_provider_generation: generation + 1 });
    expect((await req('DELETE', '/traits/CUSTOM_NEWT', '1.6')).status).toBe(409);
    expect((await req('DELETE', `/resource_providers/${P}/traits`, '1.6')).status).toBe(204);
    expect((await req('DELETE', '/traits/CUSTOM_NEWT', '1.6')).status).toBe(204);
    expect((await req('GET', '/traits/CUSTOM_NEWT', '1.6')).status).toBe(404);
  });

  it('resource classes: POST, rename before 1.7, create-or-confirm from 1.7, delete; an inventory of a renamed class follows it', async () => {
    expect((await req('POST', '/resource_classes', '1.2', { name: 'CUSTOM_A1' })).status).toBe(201);
    await s.store.setInventories(P, undefined, { CUSTOM_A1: { total: 3, reserved: 0, minUnit: 1, maxUnit: 3, stepSize: 1, allocationRatio: 1 } });
    const renamed = await req('PUT', '/resource_classes/CUSTOM_A1', '1.6', { name: 'CUSTOM_A2' });
    expect(renamed.body).toEqual({ name: 'CUSTOM_A2', links: [{ rel: 'self', href: '/placement/resource_classes/CUSTOM_A2' }] });
    expect(Object.keys((await s.store.getInventories(P)).inventories)).toEqual(['CUSTOM_A2']);
    expect((await req('DELETE', '/resource_classes/CUSTOM_A2', '1.6')).status).toBe(409);
    expect((await req('PUT', '/resource_classes/CUSTOM_A3', '1.7')).status).toBe(201);
    const again = await req('PUT', '/resource_classes/CUSTOM_A3', '1.7');
    expect(again.status).toBe(204);
    expect(again.headers.get('location')).toMatch(/\/placement\/resource_classes\/CUSTOM_A3$/);
    expect((await req('DELETE', '/resource_classes/CUSTOM_A3', '1.7')).status).toBe(204);
    expect((await req('GET', '/resource_classes/CUSTOM_A3', '1.7')).status).toBe(404);
  });

  it('policy: every write needs admin (legacy defaults); a system-scoped reader is refused', async () => {
    for (const [method, path, body] of [
      ['POST', '/resource_providers', { name: 'x' }],
      ['PUT', `/resource_providers/${P}`, { name: 'x' }],
      ['DELETE', `/resource_providers/${P}`, undefined],
      ['PUT', '/traits/CUSTOM_Y', undefined],
      ['POST', '/resource_classes', { name: 'CUSTOM_Y' }],
    ] as const) {
      const r = await req(method, path, '1.23', body, { 'x-auth-token': 'bob', 'x-roles': 'reader', 'openstack-system-scope': 'all' });
      expect(r.status, `${method} ${path}`).toBe(403);
    }
    expect(await s.store.getProvider(P)).toMatchObject({ name: 'w-p' });
  });
});
