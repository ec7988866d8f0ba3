import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createApi } from '@ert/api';
import { configFromObject } from '@ert/core';
import { definePlugin } from '@ert/plugin-api';
import { createStore, dropPostgresSchema, type StoreOptions } from '@ert/store';
import { createTracker, providerUuid } from '@ert/tracker';

/*
 * Issue 20, point 1, through `ert serve` (docs/ownership.md): an operator's trait, a child
 * provider another service creates under the host's root with its inventory, and an
 * allocation against it, all written with Placement's REST API, survive three syncs of the
 * host's tracker, which keeps its own traits and rewrites its own inventory meanwhile. On
 * SQLite, and on PostgreSQL when ERT_TEST_PG_URL is set.
 *
 * Seen red with tracker.ts's retireProviders not filtering on owner (the NIC provider was
 * emptied: its allocation made the sync report ERT_STORE_INVENTORY_IN_USE) and with the
 * tracker's setTraits called without { owner } (CUSTOM_OPERATOR_GOLD gone).
 */

const backends: Array<'sqlite3' | 'pg'> = process.env['ERT_TEST_PG_URL'] ? ['sqlite3', 'pg'] : ['sqlite3'];
const ROOT = providerUuid('host1');
const NIC = '7a9d1e04-0000-4000-8000-00000000b00d';
const PORT = '7a9d1e04-0000-4000-8000-0000000c0a5e';

describe.each(backends)('ownership through ert serve (%s)', (client) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it("an operator's trait and Neutron's provider, inventory and allocation survive three syncs", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ert-own-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const schema = `t_own_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const options: StoreOptions = client === 'pg' ? { client, connection: process.env['ERT_TEST_PG_URL']!, schema } : { client, connection: path.join(dir, 'ert.db') };
    if (client === 'pg') cleanups.push(() => dropPostgresSchema(options.connection, schema));
    const store = await createStore(options);
    await store.migrate();
    cleanups.push(() => store.close());

    let vcpus = 8;
    const cpu = definePlugin({
      name: 'cpu',
      resource: () => ({
        discover: () => ({ available: true, host: { inventories: { VCPU: { total: vcpus }, MEMORY_MB: { total: 4096 } }, traits: ['HW_CPU_X86_AVX2'] } }),
        test: () => undefined,
        reset: () => undefined,
        addInstance: () => undefined,
        removeInstance: () => undefined,
      }),
    });
    const config = configFromObject(
      { store: options, log: { level: 'silent' }, tracker: { hostName: 'host1', root: dir, resources: [cpu], interval: '1h' } },
      { configDir: dir },
    );
    const tracker = await createTracker({ config, store });
    cleanups.push(() => tracker.stop());
    expect((await tracker.sync()).problems).toEqual([]);

    const app = await createApi({ store, prefix: '', auth: 'noauth2' });
    await app.listen({ host: '127.0.0.1', port: 0 });
    cleanups.push(() => app.close());
    const address = app.server.address();
    const base = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    const req = async (method: string, url: string, body?: unknown, mv = '1.39') => {
      const headers: Record<string, string> = { 'x-auth-token': 'admin', 'openstack-api-version': `placement ${mv}` };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(base + url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      const text = await res.text();
      return { status: res.status, body: text === '' ? undefined : JSON.parse(text) };
    };

    // `openstack trait create`, then `openstack resource provider trait set --trait ... <root>`:
    // the whole set, read first.
    expect((await req('PUT', '/traits/CUSTOM_OPERATOR_GOLD')).status).toBe(201);
    const traits = await req('GET', `/resource_providers/${ROOT}/traits`);
    const gold = await req('PUT', `/resource_providers/${ROOT}/traits`, {
      resource_provider_generation: traits.body.resource_provider_generation,
      traits: [...traits.body.traits, 'CUSTOM_OPERATOR_GOLD'],
    });
    expect(gold.status).toBe(200);
    // Neutron: its agent's provider under the compute host's, its bandwidth, a port's allocation.
    expect((await req('POST', '/resource_providers', { uuid: NIC, name: 'host1:NIC Switch agent', parent_provider_uuid: ROOT })).status).toBe(200);
    const nicInventory = await req('PUT', `/resource_providers/${NIC}/inventories`, {
      resource_provider_generation: 0,
      inventories: { NET_BW_EGR_KILOBIT_PER_SEC: { total: 10_000_000 } },
    });
    expect(nicInventory.status).toBe(200);
    const allocation = await req(
      'PUT',
      `/allocations/${PORT}`,
      { allocations: { [NIC]: { resources: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 } } }, project_id: 'neutron', user_id: 'port', consumer_generation: null },
      '1.28',
    );
    expect(allocation.status).toBe(204);

    for (const total of [8, 16, 12]) {
      vcpus = total;
      const report = await tracker.sync();
      expect(report.problems).toEqual([]);
      expect((await req('GET', `/resource_providers/${ROOT}/traits`)).body.traits.sort()).toEqual(['CUSTOM_OPERATOR_GOLD', 'HW_CPU_X86_AVX2']);
      expect((await req('GET', `/resource_providers/${ROOT}/inventories`)).body.inventories.VCPU.total).toBe(total);
      expect((await req('GET', `/resource_providers/${NIC}`)).body).toMatchObject({ name: 'host1:NIC Switch agent', parent_provider_uuid: ROOT, root_provider_uuid: ROOT });
      expect((await req('GET', `/resource_providers/${NIC}/inventories`)).body.inventories.NET_BW_EGR_KILOBIT_PER_SEC.total).toBe(10_000_000);
      expect((await req('GET', `/resource_providers/${NIC}/usages`)).body.usages).toEqual({ NET_BW_EGR_KILOBIT_PER_SEC: 1000 });
      expect((await req('GET', `/allocations/${PORT}`)).body.allocations[NIC].resources).toEqual({ NET_BW_EGR_KILOBIT_PER_SEC: 1000 });
    }
  });
});
