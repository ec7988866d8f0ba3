// Shared by the end-to-end tests that run real `ert` processes for one host, `xeon-1`, built
// from the xeon-2s-cat profile with the vcpu, memory and llc plugins: the backends, the root,
// the flavors, and the scratch project with its store (a SQLite file, or a fresh PostgreSQL
// schema when ERT_TEST_PG_URL is set).
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { expect } from 'vitest';
import { dropPostgresSchema, type StoreOptions } from '@ert/store';
import { PROFILES, runErt, scratchDir } from '../cli/helpers.js';

export const BACKENDS: Array<'sqlite3' | 'pg'> = process.env['ERT_TEST_PG_URL'] ? ['sqlite3', 'pg'] : ['sqlite3'];
export const ROOT = join(PROFILES, 'xeon-2s-cat');
export const FLAVORS = [
  { name: 'ways', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: { 'llc:ways': '3' } },
  { name: 'pinned', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: { 'hw:cpu_policy': 'dedicated' } },
];

let schemas = 0;

/**
 * A scratch directory whose ert.config.yaml tracks `xeon-1` on `backend`, its store migrated
 * (`ert db migrate`); the directory is removed, and a PostgreSQL schema dropped, by functions
 * pushed on `cleanups`.
 */
export async function xeonProject(backend: 'sqlite3' | 'pg', label: string, cleanups: Array<() => Promise<unknown>>): Promise<{ dir: string; storeOptions: StoreOptions }> {
  const dir = await scratchDir(`ert-${label}-`);
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  let storeOptions: StoreOptions = { client: 'sqlite3', connection: join(dir, 'ert.db') };
  if (backend === 'pg') {
    const schema = `${label}_e2e_${process.pid}_${++schemas}`;
    storeOptions = { client: 'pg', connection: process.env['ERT_TEST_PG_URL']!, schema };
    cleanups.push(() => dropPostgresSchema(process.env['ERT_TEST_PG_URL']!, schema));
  }
  const config = {
    store: storeOptions,
    log: { level: 'info' },
    tracker: { hostName: 'xeon-1', root: ROOT, resources: ['vcpu', 'memory', 'llc'], interval: '1h' },
    scheduler: { consumers: ['vcpu', 'memory', 'llc'], filters: ['resources', 'llc'], refreshInterval: 0 },
    reservations: { timeout: '30s', pollInterval: '50ms' },
    plugins: { vcpu: { allocationRatio: 1, dedicatedCpus: '20-27,40' } },
    flavors: FLAVORS,
  };
  await writeFile(join(dir, 'ert.config.yaml'), stringify(config));
  expect((await runErt(['db', 'migrate'], { cwd: dir })).code).toBe(0);
  return { dir, storeOptions };
}
