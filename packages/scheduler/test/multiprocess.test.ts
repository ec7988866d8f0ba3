import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { BACKENDS, hostImport, openStore, tempDir, uuidFor } from './helpers.js';

/*
 * Several scheduler processes (the built dist) schedule at once against the same hosts in one
 * store. Whatever races they lose, no provider may end above capacity and every instance must
 * be placed exactly once (one allocation set, one instance record, on the host reported).
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const worker = path.join(here, 'fixtures', 'worker.mjs');
const dist = path.resolve(here, '..', 'dist', 'index.js');

const WORKERS = 3;
const PER_WORKER = 25;
const HOSTS = 12;
const VCPUS_PER_HOST = 8; // 96 slots for 75 instances: the fleet is nearly full at the end.

interface WorkerResult {
  workerId: string;
  placed: Array<{ uuid: string; host: string }>;
  failed: Array<{ uuid: string; error: string }>;
  retries: number;
}

function runWorker(storeOptions: object, id: number): Promise<WorkerResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, JSON.stringify(storeOptions), String(id), String(PER_WORKER), String(id * 7919)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`worker ${id} exited with ${code}: ${err}`));
      else resolve(JSON.parse(out.trim().split('\n').pop()!) as WorkerResult);
    });
  });
}

describe.skipIf(!existsSync(dist)).each(BACKENDS)('several scheduler processes on one %s store', (client) => {
  const tmp = tempDir('ert-multi-');
  afterAll(() => tmp.cleanup());

  it('never exceed capacity and place every instance exactly once', { timeout: 120_000 }, async () => {
    const { store, options } = await openStore(client, tmp.dir, 'multi');
    try {
      const names = Array.from({ length: HOSTS }, (_, i) => `m${i}`);
      await store.importHosts(names.map((name) => hostImport({ name, inventories: { VCPU: VCPUS_PER_HOST, MEMORY_MB: 65536 } })));
      const results = await Promise.all(Array.from({ length: WORKERS }, (_, i) => runWorker(options, i + 1)));

      const placed = results.flatMap((r) => r.placed);
      expect(results.flatMap((r) => r.failed)).toEqual([]);
      expect(placed).toHaveLength(WORKERS * PER_WORKER);
      expect(new Set(placed.map((p) => p.uuid)).size).toBe(placed.length);
      for (const { uuid, host } of placed) {
        const allocations = await store.getAllocations(uuid);
        expect(allocations.allocations).toEqual(expect.arrayContaining([{ providerUuid: uuidFor(host), resourceClass: 'VCPU', amount: 1 }]));
        expect((await store.getInstance(uuid))?.host).toBe(host);
      }
      let used = 0;
      for (const name of names) {
        const usages = await store.getUsages(uuidFor(name));
        expect(usages.VCPU ?? 0).toBeLessThanOrEqual(VCPUS_PER_HOST);
        used += usages.VCPU ?? 0;
      }
      expect(used).toBe(WORKERS * PER_WORKER);
      expect((await store.listInstances()).length).toBe(WORKERS * PER_WORKER);
    } finally {
      await store.close();
    }
  });
});
