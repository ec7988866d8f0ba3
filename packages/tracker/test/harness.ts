import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { afterEach, beforeEach } from 'vitest';
import os from 'node:os';
import path from 'node:path';
import { configFromObject, type ErtConfig } from '@ert/core';
import { createStore, type Store, type StoreOptions } from '@ert/store';
import type { Flavor, InstanceRequest, Plugin } from '@ert/plugin-api';
import { createTracker, type ClaimResult, type Tracker } from '../src/index.js';

/** The backends every store-backed test runs against: SQLite always, PostgreSQL when ERT_TEST_PG_URL is set. */
export const BACKENDS: Array<'sqlite3' | 'pg'> = process.env['ERT_TEST_PG_URL'] ? ['sqlite3', 'pg'] : ['sqlite3'];

/** A temp directory, fresh stores (own SQLite file or own PostgreSQL schema) and cleanup; `init` again after `close` for the next test. */
export class Bench {
  private readonly cleanups: Array<() => Promise<void>> = [];
  private counter = 0;
  dir = '';

  constructor(readonly backend: 'sqlite3' | 'pg') {}

  async init(): Promise<void> {
    this.dir = await mkdtemp(path.join(os.tmpdir(), 'ert-tracker-'));
    this.cleanups.push(() => rm(this.dir, { recursive: true, force: true }));
  }

  /** Options of a new, empty store. */
  storeOptions(): StoreOptions {
    this.counter += 1;
    if (this.backend === 'sqlite3') return { client: 'sqlite3', connection: path.join(this.dir, `ert-${this.counter}.db`) };
    const schema = `tracker_${process.pid}_${Date.now().toString(36)}_${this.counter}`;
    this.cleanups.push(async () => {
      // pg ships no types here; only these three calls are used.
      type PgClient = { connect(): Promise<void>; query(sql: string): Promise<unknown>; end(): Promise<void> };
      const pg = (await import('pg' as string)) as { default: { Client: new (options: { connectionString?: string }) => PgClient } };
      const client = new pg.default.Client({ connectionString: process.env['ERT_TEST_PG_URL'] });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    });
    return { client: 'pg', connection: process.env['ERT_TEST_PG_URL']!, schema };
  }

  async openStore(options: StoreOptions): Promise<Store> {
    const store = await createStore(options);
    await store.migrate();
    this.cleanups.push(() => store.close().catch(() => undefined));
    return store;
  }

  config(options: {
    store: StoreOptions;
    resources: Plugin[];
    hostName?: string;
    providerConfigs?: string;
    enforce?: string[];
    enforcementFailure?: 'report' | 'undo';
    hookTimeout?: string;
    staleAfter?: string;
  }): ErtConfig {
    return configFromObject(
      {
        store: options.store,
        log: { level: 'silent' },
        tracker: {
          hostName: options.hostName ?? 'host1',
          root: this.dir,
          resources: options.resources,
          interval: '1h',
          staleAfter: options.staleAfter ?? '3m',
          hookTimeout: options.hookTimeout ?? '300ms',
          enforce: options.enforce ?? [],
          enforcementFailure: options.enforcementFailure ?? 'report',
          ...(options.providerConfigs ? { providerConfigs: options.providerConfigs } : {}),
        },
      },
      { configDir: this.dir },
    );
  }

  async providerDir(files: Record<string, string>): Promise<string> {
    this.counter += 1;
    const dir = path.join(this.dir, `providers-${this.counter}`);
    await mkdir(dir);
    for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
    return dir;
  }

  async tracker(config: ErtConfig, store?: Store, extra: { hostName?: string; clock?: { now(): number } } = {}): Promise<Tracker> {
    const tracker = await createTracker({ config, ...(store ? { store } : {}), ...extra });
    this.cleanups.push(() => tracker.stop());
    return tracker;
  }

  async close(): Promise<void> {
    for (const cleanup of this.cleanups.splice(0).reverse()) await cleanup();
  }
}

let seq = 0;
/** A request for a new instance with a flavor of `vcpus` VCPU and `memoryMb` MEMORY_MB. */
export function request(vcpus: number, memoryMb: number, extraSpecs: Record<string, string> = {}): InstanceRequest {
  seq += 1;
  const uuid = `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`;
  return { uuid, projectId: 'p1', userId: 'u1', flavor: flavor(vcpus, memoryMb, extraSpecs) };
}

export function flavor(vcpus: number, memoryMb: number, extraSpecs: Record<string, string> = {}): Flavor {
  return { name: `f${vcpus}x${memoryMb}`, vcpus, memoryMb, diskGb: 0, extraSpecs };
}

/**
 * `store` with each method call passed to `around(method, args, call)`: the test counts the
 * calls, holds one at a gate, injects a fault or another writer's change, then `call()`s the
 * store's own method (or does not). Other properties are the store's.
 */
export function interceptStore<S extends object>(store: S, around: (method: string, args: unknown[], call: () => unknown) => unknown): S {
  return new Proxy(store, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof value !== 'function' || typeof key !== 'string') return value;
      return (...args: unknown[]) => around(key, args, () => (value as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
}

/** A Bench for the tests of the enclosing describe: a new directory before each test, everything cleaned up after it. */
export function useBench(backend: 'sqlite3' | 'pg'): Bench {
  const bench = new Bench(backend);
  beforeEach(() => bench.init());
  afterEach(() => bench.close());
  return bench;
}

/** The error `fn` throws synchronously (fails the test when it returns). */
export function thrown(fn: () => unknown): { code: string; message: string; details: Record<string, unknown> } {
  try {
    fn();
  } catch (err) {
    return err as never;
  }
  throw new Error('expected a throw');
}

/** The accepted claim, or a throw naming the reasons it was refused. */
export function ok(result: ClaimResult): Extract<ClaimResult, { ok: true }> {
  if (!result.ok) throw new Error(`refused: ${JSON.stringify(result.reasons)}`);
  return result;
}

/** The reasons a claim was refused, or a throw when it was accepted. */
export function refused(result: ClaimResult): Array<{ plugin?: string; reason: string }> {
  if (result.ok) throw new Error(`claim ${result.instance.uuid} unexpectedly accepted: ${JSON.stringify(result.allocations)}`);
  return result.reasons;
}
