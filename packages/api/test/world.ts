import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { normalizeInventory, type Flavor, type InventoryInput } from '@ert/plugin-api';
import { createStore, dropPostgresSchema, type InstanceRecord, type Store, type StoreOptions } from '@ert/store';
import type { FastifyInstance } from 'fastify';
import { createApi } from '@ert/api';

/** Fixed uuids of the test world. */
export const U = {
  cn1: '11111111-1111-4111-8111-111111111111',
  numa0: '11111111-1111-4111-8111-11111111aaaa',
  numa1: '11111111-1111-4111-8111-11111111bbbb',
  cn2: '22222222-2222-4222-8222-222222222222',
  ss: '33333333-3333-4333-8333-333333333333',
  lonely: '44444444-4444-4444-8444-444444444444',
  aggA: 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa',
  aggB: 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb',
  i1: 'c1c1c1c1-0000-4000-8000-000000000001',
  i2: 'c2c2c2c2-0000-4000-8000-000000000002',
  m2: 'eeeeeeee-0000-4000-8000-000000000002',
  i3: 'c3c3c3c3-0000-4000-8000-000000000003',
} as const;

const inv = (input: InventoryInput) => normalizeInventory(input);
const flavor = (vcpus: number): Flavor => ({ name: `f${vcpus}`, vcpus, memoryMb: 512, diskGb: 0, extraSpecs: {} });

function instance(uuid: string, host: string, projectId: string, userId: string, extra: Partial<InstanceRecord> = {}): InstanceRecord {
  return { uuid, host, projectId, userId, flavor: flavor(1), state: 'active', assignments: {}, ...extra };
}

/**
 * A world written through the real store API, as the tracker and scheduler write it:
 * - host cn1: root (VCPU 8 x4 with max_unit 32, MEMORY_MB 4096, trait HW_CPU_X86_AVX2, aggregate A) with two
 *   NUMA children (CUSTOM_LLC_WAYS 11 each; numa0 has CUSTOM_FAST);
 * - host cn2: root (VCPU 4, MEMORY_MB 2048, aggregate B);
 * - ss: a sharing provider (DISK_GB 1000, MISC_SHARES_VIA_AGGREGATE, aggregate A), no host;
 * - lonely: a provider outside every host (VCPU 2, CUSTOM_LONELY);
 * - instances: i1 on cn1 (project p1, user u1: VCPU 2, MEMORY_MB 512, DISK_GB 10 on ss),
 *   i2 on cn2 resizing (project p1, user u2: VCPU 1; its migration m2 holds VCPU 2 on cn2),
 *   i3 on cn1 (project p2: CUSTOM_LLC_WAYS 3 on numa0).
 */
export async function buildWorld(store: Store): Promise<void> {
  await store.createProvider({ uuid: U.cn1, name: 'cn1' });
  await store.createProvider({ uuid: U.numa0, name: 'cn1_numa0', parentUuid: U.cn1 });
  await store.createProvider({ uuid: U.numa1, name: 'cn1_numa1', parentUuid: U.cn1 });
  await store.createProvider({ uuid: U.cn2, name: 'cn2' });
  await store.createProvider({ uuid: U.ss, name: 'shared-disk' });
  await store.createProvider({ uuid: U.lonely, name: 'lonely' });
  await store.setInventories(U.cn1, undefined, { VCPU: inv({ total: 8, allocationRatio: 4, maxUnit: 32 }), MEMORY_MB: inv({ total: 4096 }) });
  await store.setInventories(U.numa0, undefined, { CUSTOM_LLC_WAYS: inv({ total: 11 }) });
  await store.setInventories(U.numa1, undefined, { CUSTOM_LLC_WAYS: inv({ total: 11 }) });
  await store.setInventories(U.cn2, undefined, { VCPU: inv({ total: 4 }), MEMORY_MB: inv({ total: 2048 }) });
  await store.setInventories(U.ss, undefined, { DISK_GB: inv({ total: 1000, maxUnit: 500 }) });
  await store.setInventories(U.lonely, undefined, { VCPU: inv({ total: 2 }) });
  await store.setTraits(U.cn1, undefined, ['HW_CPU_X86_AVX2']);
  await store.setTraits(U.numa0, undefined, ['CUSTOM_FAST']);
  await store.setTraits(U.ss, undefined, ['MISC_SHARES_VIA_AGGREGATE']);
  await store.setTraits(U.lonely, undefined, ['CUSTOM_LONELY']);
  await store.setAggregates(U.cn1, undefined, [U.aggA]);
  await store.setAggregates(U.ss, undefined, [U.aggA]);
  await store.setAggregates(U.cn2, undefined, [U.aggB]);
  await store.upsertHost({ name: 'cn1', rootProviderUuid: U.cn1 });
  await store.upsertHost({ name: 'cn2', rootProviderUuid: U.cn2 });
  const consumer = (uuid: string, projectId: string, userId: string) => ({ uuid, projectId, userId, generation: null });
  await store.writeAllocations([
    {
      consumer: consumer(U.i1, 'p1', 'u1'),
      allocations: [
        { providerUuid: U.cn1, resourceClass: 'VCPU', amount: 2 },
        { providerUuid: U.cn1, resourceClass: 'MEMORY_MB', amount: 512 },
        { providerUuid: U.ss, resourceClass: 'DISK_GB', amount: 10 },
      ],
      instance: instance(U.i1, 'cn1', 'p1', 'u1'),
    },
  ]);
  await store.writeAllocations([
    { consumer: consumer(U.m2, 'p1', 'u2'), allocations: [{ providerUuid: U.cn2, resourceClass: 'VCPU', amount: 2 }] },
    {
      consumer: consumer(U.i2, 'p1', 'u2'),
      allocations: [{ providerUuid: U.cn2, resourceClass: 'VCPU', amount: 1 }],
      instance: instance(U.i2, 'cn2', 'p1', 'u2', { state: 'resizing', migrationUuid: U.m2, previousFlavor: flavor(2) }),
    },
  ]);
  await store.writeAllocations([
    {
      consumer: consumer(U.i3, 'p2', 'u3'),
      allocations: [{ providerUuid: U.numa0, resourceClass: 'CUSTOM_LLC_WAYS', amount: 3 }],
      instance: instance(U.i3, 'cn1', 'p2', 'u3'),
    },
  ]);
}

export interface Served {
  store: Store;
  /** Where the store is (to open a second store on it). */
  options: StoreOptions;
  app: FastifyInstance;
  base: string;
  close(): Promise<void>;
}

/** The stores the API suites run on: SQLite always, PostgreSQL when ERT_TEST_PG_URL is set (as the store suites). */
export const backends: Array<'sqlite3' | 'pg'> = process.env.ERT_TEST_PG_URL ? ['sqlite3', 'pg'] : ['sqlite3'];

/**
 * A migrated store (a SQLite file in a temp directory, or a fresh PostgreSQL schema) with the
 * world, and the API on 127.0.0.1 (a real HTTP server) at `prefix`.
 */
export async function serveWorld(prefix = '', build: (store: Store) => Promise<void> = buildWorld, client: 'sqlite3' | 'pg' = 'sqlite3'): Promise<Served> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ert-api-'));
  const schema = `t_api_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const options: StoreOptions =
    client === 'pg' ? { client, connection: process.env.ERT_TEST_PG_URL!, schema } : { client, connection: path.join(dir, 'ert.db') };
  const store = await createStore(options);
  await store.migrate();
  await build(store);
  const app = await createApi({ store, prefix, auth: 'noauth2' });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    store,
    options,
    app,
    base: `http://127.0.0.1:${port}${prefix}`,
    async close() {
      await app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      if (client === 'pg') await dropPostgresSchema(options.connection, schema);
    },
  };
}

export interface Answer {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

/** GET (or another method) with the admin token and `placement <mv>` unless told otherwise. */
export async function call(
  base: string,
  path: string,
  opts: { mv?: string | null; token?: string | null; method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token !== null) headers['x-auth-token'] = opts.token ?? 'admin';
  if (opts.mv !== null && opts.mv !== undefined) headers['openstack-api-version'] = `placement ${opts.mv}`;
  // A body (JSON unless a string) goes as application/json unless the headers name a type.
  if (opts.body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  const sent = opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  const res = await fetch(base + path, { method: opts.method ?? 'GET', headers, ...(sent === undefined ? {} : { body: sent }) });
  const text = await res.text();
  let body: any;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}
