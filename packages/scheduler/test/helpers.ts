import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { configFromObject } from '@ert/core';
import type { ErtConfig } from '@ert/core';
import { normalizeInventory } from '@ert/plugin-api';
import type { Flavor, HostStatus, Inventory, InventoryInput, JsonValue, Plugin } from '@ert/plugin-api';
import { createStore } from '@ert/store';
import type { HostImport, Store, StoreOptions } from '@ert/store';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '@ert/core';
import { createTracker, type Tracker } from '@ert/tracker';
import { afterAll, beforeAll } from 'vitest';
import { createScheduler, type Scheduler } from '../src/index.js';

/** A temp directory removed by `cleanup`. */
export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

let storeCounter = 0;

/** Store backends the suites run against: SQLite always, PostgreSQL when ERT_TEST_PG_URL is set. */
export const BACKENDS: Array<'sqlite3' | 'pg'> = process.env.ERT_TEST_PG_URL ? ['sqlite3', 'pg'] : ['sqlite3'];

/** A migrated store in a fresh SQLite file or a fresh PostgreSQL schema. */
export async function openStore(client: 'sqlite3' | 'pg', dir: string, label: string): Promise<{ store: Store; options: StoreOptions }> {
  storeCounter++;
  const options: StoreOptions =
    client === 'pg'
      ? { client: 'pg', connection: process.env.ERT_TEST_PG_URL!, schema: `sched_${label}_${process.pid}_${storeCounter}`.toLowerCase().replace(/[^a-z0-9_]/g, '_') }
      : { client: 'sqlite3', connection: path.join(dir, `${label}-${storeCounter}.db`) };
  const store = await createStore(options);
  await store.migrate();
  return { store, options };
}

export function inventories(input: Record<string, InventoryInput | number>): Record<string, Inventory> {
  return Object.fromEntries(
    Object.entries(input).map(([rc, v]) => [rc, normalizeInventory(typeof v === 'number' ? { total: v } : v)]),
  );
}

export interface HostSpec {
  name: string;
  status?: HostStatus;
  lastUpdate?: number;
  inventories?: Record<string, InventoryInput | number>;
  traits?: string[];
  aggregates?: string[];
  stats?: Record<string, { schemaVersion: number; data: JsonValue }>;
  children?: Array<{ key: string; inventories?: Record<string, InventoryInput | number>; traits?: string[] }>;
}

/** A deterministic uuid (v5 layout) from a name. */
export function uuidFor(name: string): string {
  const h = createHash('sha1').update(`ert-test:${name}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export function hostImport(spec: HostSpec): HostImport {
  const rootUuid = uuidFor(spec.name);
  return {
    host: { name: spec.name, status: spec.status ?? 'up', lastUpdate: spec.lastUpdate ?? Date.now() },
    providers: [
      { uuid: rootUuid, name: spec.name, inventories: inventories(spec.inventories ?? {}), traits: spec.traits ?? [], aggregates: spec.aggregates ?? [] },
      ...(spec.children ?? []).map((child) => ({
        uuid: uuidFor(`${spec.name}_${child.key}`),
        name: `${spec.name}_${child.key}`,
        parentUuid: rootUuid,
        inventories: inventories(child.inventories ?? {}),
        traits: child.traits ?? [],
        aggregates: [],
      })),
    ],
    stats: spec.stats,
  };
}

export function flavor(name: string, vcpus: number, memoryMb: number, extraSpecs: Record<string, string> = {}, diskGb = 0): Flavor {
  return { name, vcpus, memoryMb, diskGb, extraSpecs };
}

type PluginItem = string | Plugin | { name: string; multiplier?: number; plugin?: Plugin };

/** A validated config for a scheduler with the given plugins and built-in filters. */
export function schedulerConfig(
  storeOptions: StoreOptions,
  dir: string,
  scheduler: { consumers?: PluginItem[]; filters?: PluginItem[]; weighers?: PluginItem[]; maxAttempts?: number; hostSubsetSize?: number; refreshInterval?: number | string; requestFilters?: string[] },
  extra: { plugins?: Record<string, unknown>; staleAfter?: string } = {},
): ErtConfig {
  return configFromObject(
    {
      store: storeOptions,
      log: { level: 'silent' },
      tracker: extra.staleAfter ? { staleAfter: extra.staleAfter } : {},
      scheduler: { refreshInterval: 0, ...scheduler },
      plugins: extra.plugins ?? {},
    },
    { configDir: dir },
  );
}

/** `n` new instances (random uuids). */
export function instances(n: number): Array<{ uuid: string; projectId: string; userId: string }> {
  return Array.from({ length: n }, () => ({ uuid: randomUUID(), projectId: 'p1', userId: 'u1' }));
}

/**
 * Stores and schedulers for one describe block, all closed after its tests: `fleet` opens a
 * migrated store (a SQLite file or a PostgreSQL schema) holding `hosts`; `scheduler` creates
 * a scheduler on a store with `schedulerConfig`.
 */
export function useFleets(client: 'sqlite3' | 'pg', prefix: string) {
  const tmp = tempDir(prefix);
  const opened: Store[] = [];
  const schedulers: Scheduler[] = [];
  afterAll(async () => {
    for (const s of schedulers) await s.close();
    for (const s of opened) await s.close();
    tmp.cleanup();
  });
  return {
    async fleet(label: string, hosts: HostSpec[]): Promise<{ store: Store; options: StoreOptions }> {
      const result = await openStore(client, tmp.dir, label);
      opened.push(result.store);
      await result.store.importHosts(hosts.map(hostImport));
      return result;
    },
    async scheduler(
      options: StoreOptions,
      store: Store,
      sched: Parameters<typeof schedulerConfig>[2],
      extra: Parameters<typeof schedulerConfig>[3] = {},
      more: { random?: () => number; clock?: { now(): number }; overlapClaims?: boolean } = {},
    ): Promise<Scheduler> {
      const s = await createScheduler({ config: schedulerConfig(options, tmp.dir, sched, extra), store, ...more });
      schedulers.push(s);
      return s;
    },
  };
}

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** The fixture tree of one of config/hosts' profiles, standing for `/` on that host. */
export function profileRoot(profile: string): string {
  return path.join(REPO_ROOT, 'config', 'hosts', profile);
}

/**
 * For one describe block: a migrated store holding one host per profile of config/hosts,
 * each synced by its real tracker with config/ert.config.yaml's plugins (hosts named after
 * their profiles), and a scheduler on it refreshing at every decision; `setup(store)` runs
 * after the syncs, before the scheduler starts. Everything is closed after the block's tests.
 * Read the fields inside tests (they are set in a beforeAll).
 */
export function useProfileHosts(client: 'sqlite3' | 'pg', label: string, profiles: readonly string[], setup?: (store: Store) => Promise<void>) {
  const tmp = tempDir(`ert-${label}-`);
  const world = { store: undefined as unknown as Store, scheduler: undefined as unknown as Scheduler, trackers: new Map<string, Tracker>(), config: undefined as unknown as ErtConfig };
  beforeAll(async () => {
    const base = await loadConfig({ path: path.join(REPO_ROOT, 'config', 'ert.config.yaml'), env: {} });
    const opened = await openStore(client, tmp.dir, label);
    world.store = opened.store;
    world.config = { ...base, store: opened.options, log: { level: 'silent' }, scheduler: { ...base.scheduler, refreshInterval: 0 } };
    for (const profile of profiles) {
      const tracker = await createTracker({ config: world.config, store: world.store, hostName: profile, root: profileRoot(profile) });
      await tracker.sync();
      world.trackers.set(profile, tracker);
    }
    await setup?.(world.store);
    world.scheduler = await createScheduler({ config: world.config, store: world.store });
  }, 120_000);
  afterAll(async () => {
    await world.scheduler?.close();
    for (const tracker of world.trackers.values()) await tracker.stop();
    await world.store?.close();
    tmp.cleanup();
  });
  return world;
}
