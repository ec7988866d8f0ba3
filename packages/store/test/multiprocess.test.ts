import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capacityOf } from '@ert/plugin-api';
import type { Allocation, Store } from '@ert/store';
import { backends, inv, openStore } from './backends.js';
import { ensureStoreBuilt, storePackageDir } from './build.js';

const WORKERS = 4;
const ITERATIONS = 120;
const PROVIDERS = ['mp-a', 'mp-b', 'mp-c'];

interface WorkerResult {
  held: Record<string, Allocation[]>;
  counts: Record<string, number>;
}

/** Runs one hammer process with a clean node (no vitest loader flags) and parses its report. */
function runWorker(options: unknown, id: number): Promise<WorkerResult> {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const child = spawn(
    process.execPath,
    [path.join(storePackageDir, 'test', 'fixtures', 'hammer.mjs'), JSON.stringify(options), String(id), String(ITERATIONS), JSON.stringify(PROVIDERS)],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(JSON.parse(out) as WorkerResult);
      else reject(new Error(`hammer ${id} exited with ${String(code)}: ${err}`));
    });
  });
}

describe.each(backends)('several processes claiming on %s', (client) => {
  let store: Store;
  let options: unknown;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    ensureStoreBuilt();
    ({ store, options, cleanup } = await openStore(client, 'multiprocess'));
    for (const uuid of PROVIDERS) {
      await store.createProvider({ uuid, name: uuid });
      // Small capacities so the processes fight over them.
      await store.setInventories(uuid, undefined, { VCPU: inv(6, { allocationRatio: 2 }), MEMORY_MB: inv(2048) });
    }
  }, 120_000);
  afterAll(async () => {
    await cleanup?.();
  });

  it('never exceeds capacity and keeps every successful claim', { timeout: 300_000 }, async () => {
    // Capacities are fixed (the inventory rewrites keep them), so a watcher can compare each
    // usage it reads while the processes run with them: an over-commit that a later release
    // would hide is still caught.
    const capacities = new Map<string, Record<string, number>>();
    for (const uuid of PROVIDERS) {
      const { inventories } = await store.getInventories(uuid);
      capacities.set(uuid, Object.fromEntries(Object.entries(inventories).map(([rc, i]) => [rc, capacityOf(i)])));
    }
    const overCommits: string[] = [];
    let polls = 0;
    let running = true;
    const watcher = (async () => {
      while (running) {
        for (const uuid of PROVIDERS) {
          for (const [rc, used] of Object.entries(await store.getUsages(uuid))) {
            if (used > capacities.get(uuid)![rc]!) overCommits.push(`${uuid} ${rc}: ${used} > ${capacities.get(uuid)![rc]!}`);
          }
        }
        polls++;
      }
    })();
    const results = await Promise.all(Array.from({ length: WORKERS }, (_, id) => runWorker(options, id))).finally(() => (running = false));
    await watcher;
    expect(polls).toBeGreaterThan(0);
    expect(overCommits).toEqual([]);
    const claimed = results.reduce((n, r) => n + r.counts.claimed!, 0);
    const refused = results.reduce((n, r) => n + r.counts.capacity!, 0);
    // The test only means something if the processes both succeeded and collided.
    console.log(JSON.stringify(results.map((r) => r.counts)));
    expect(claimed).toBeGreaterThan(20);
    expect(refused).toBeGreaterThan(0);

    const expected = new Map<string, number>();
    for (const result of results) {
      for (const [consumer, allocations] of Object.entries(result.held)) {
        const stored = await store.getAllocations(consumer);
        expect(stored.allocations.sort(byKey)).toEqual([...allocations].sort(byKey));
        for (const a of allocations) expected.set(`${a.providerUuid}/${a.resourceClass}`, (expected.get(`${a.providerUuid}/${a.resourceClass}`) ?? 0) + a.amount);
      }
    }
    for (const uuid of PROVIDERS) {
      const { inventories } = await store.getInventories(uuid);
      const usages = await store.getUsages(uuid);
      for (const [rc, inventory] of Object.entries(inventories)) {
        expect(usages[rc] ?? 0).toBeLessThanOrEqual(capacityOf(inventory));
        // Nothing but the processes' held consumers uses the providers: released and
        // refused claims left nothing behind.
        expect(usages[rc] ?? 0).toBe(expected.get(`${uuid}/${rc}`) ?? 0);
      }
    }
  });
});

function byKey(a: Allocation, b: Allocation): number {
  return `${a.providerUuid}/${a.resourceClass}`.localeCompare(`${b.providerUuid}/${b.resourceClass}`);
}
