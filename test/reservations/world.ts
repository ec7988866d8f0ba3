// A store, compute hosts with real trackers and fixture plugins, and schedulers on the same
// SQLite file: the two sides of a reservation, meeting only in the store.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { configFromObject, type ErtConfig } from '@ert/core';
import type { Clock, Flavor } from '@ert/plugin-api';
import { createScheduler, type Scheduler } from '@ert/scheduler';
import { createStore, dropPostgresSchema, type Store, type StoreOptions } from '@ert/store';
import { createTracker, providerUuid, type Tracker } from '@ert/tracker';
// @ts-expect-error plain JS fixture
import { counting } from '../../packages/tracker/test/fixtures/plugins.mjs';
// @ts-expect-error plain JS fixture
import { disk } from '../../packages/tracker/test/fixtures/disk.mjs';

export interface HostDisk {
  /** DISK_GB inventory the host reports. */
  total: number;
  /** What is really free on its disk (the disk plugin's `test` refuses more). */
  free?: number;
}

export function flavor(name: string, vcpus: number, diskGb: number): Flavor {
  return { name, vcpus, memoryMb: 256, diskGb, extraSpecs: {} };
}

let seq = 0;
export function instance(): { uuid: string; projectId: string; userId: string } {
  seq += 1;
  return { uuid: `00000000-0000-4000-a000-${String(seq).padStart(12, '0')}`, projectId: 'p1', userId: 'u1' };
}

/** SQLite always; PostgreSQL too when ERT_TEST_PG_URL is set. */
export const BACKENDS: Array<'sqlite3' | 'pg'> = process.env['ERT_TEST_PG_URL'] ? ['sqlite3', 'pg'] : ['sqlite3'];

let schemas = 0;

export class World {
  dir = '';
  storeOptions!: StoreOptions;
  store!: Store;
  readonly journals = new Map<string, string[]>();
  private readonly cleanups: Array<() => Promise<unknown>> = [];

  constructor(private readonly backend: 'sqlite3' | 'pg' = 'sqlite3') {}

  async init(): Promise<void> {
    this.dir = await mkdtemp(path.join(os.tmpdir(), 'ert-reservations-'));
    this.cleanups.push(() => rm(this.dir, { recursive: true, force: true }));
    if (this.backend === 'pg') {
      const url = process.env['ERT_TEST_PG_URL']!;
      const schema = `reservations_${process.pid}_${++schemas}`;
      this.storeOptions = { client: 'pg', connection: url, schema };
      this.cleanups.push(() => dropPostgresSchema(url, schema));
    } else {
      this.storeOptions = { client: 'sqlite3', connection: path.join(this.dir, 'ert.db') };
    }
    this.store = await createStore(this.storeOptions);
    await this.store.migrate();
    this.cleanups.push(() => this.store.close());
  }

  config(hostName: string, reservations: { timeout?: string; pollInterval?: string } = {}, enforceUndo = false): ErtConfig {
    const enforcement = enforceUndo ? { enforce: ['cpu'], enforcementFailure: 'undo' } : {};
    return configFromObject(
      {
        store: this.storeOptions,
        log: { level: 'silent' },
        tracker: { hostName, root: path.join(this.dir, hostName), interval: '1h', hookTimeout: '2s', resources: this.plugins(hostName, enforceUndo), ...enforcement },
        scheduler: { filters: ['resources'], refreshInterval: 0, maxAttempts: 3 },
        reservations: { timeout: reservations.timeout ?? '30s', pollInterval: reservations.pollInterval ?? '20ms' },
      },
      { configDir: this.dir },
    );
  }

  /** With `enforceFails`, the cpu plugin's `enforce` throws. */
  private plugins(hostName: string, enforceFails = false): unknown[] {
    const journal: string[] = [];
    this.journals.set(hostName, journal);
    const faults = enforceFails ? { enforce: 'throw' } : {};
    return [counting({ name: 'cpu', resourceClass: 'VCPU', total: 16, journal, faults }), counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 8192 }), disk()];
  }

  /** A compute host with its disk files and a tracker (synced, or started: watching for reservations). */
  /** `enforceUndo`: cpu's enforcement is on and fails, under `enforcementFailure: undo`. */
  async host(name: string, diskGb: HostDisk, opts: { start?: boolean; clock?: Clock; timeout?: string; store?: Store; enforceUndo?: boolean } = {}): Promise<Tracker> {
    await mkdir(path.join(this.dir, name, 'disk'), { recursive: true });
    await writeFile(path.join(this.dir, name, 'disk', 'total_gb'), `${diskGb.total}\n`);
    if (diskGb.free !== undefined) await writeFile(path.join(this.dir, name, 'disk', 'free_gb'), `${diskGb.free}\n`);
    const tracker = await createTracker({ config: this.config(name, opts.timeout ? { timeout: opts.timeout } : {}, opts.enforceUndo ?? false), store: opts.store ?? this.store, ...(opts.clock ? { clock: opts.clock } : {}) });
    this.cleanups.push(() => tracker.stop());
    if (opts.start) await tracker.start();
    else await tracker.sync();
    return tracker;
  }

  async scheduler(opts: { clock?: Clock; timeout?: string; store?: Store } = {}): Promise<Scheduler> {
    const scheduler = await createScheduler({ config: this.config('scheduler', opts.timeout ? { timeout: opts.timeout } : {}), store: opts.store ?? this.store, ...(opts.clock ? { clock: opts.clock } : {}) });
    this.cleanups.push(() => scheduler.close());
    return scheduler;
  }

  /** The store, with some methods replaced (to hold one side at a chosen point of a race). */
  storeWith(overrides: Partial<Store>): Store {
    const store = this.store;
    return new Proxy(store, {
      get(target, key) {
        if (key in overrides) return overrides[key as keyof Store];
        const value = Reflect.get(target, key, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  async used(host: string, cls: string): Promise<number> {
    return (await this.store.getUsages(providerUuid(host)))[cls] ?? 0;
  }

  async close(): Promise<void> {
    for (const cleanup of this.cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  }
}
