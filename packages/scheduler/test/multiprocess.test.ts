import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPackage } from '../../../test/build.js';
import { startWorker, type Worker } from '../../../test/worker.js';
import { BACKENDS, hostImport, openStore, tempDir, uuidFor } from './helpers.js';

/*
 * Several scheduler processes (the built dist, built here if stale: the test never skips)
 * schedule at once against the same hosts in one store, each with several selects in flight
 * (overlapClaims). Their views are never refreshed on a timer and they rank the hosts alike, so
 * they go for the same hosts and must lose races: a claim refused by the store (capacity
 * exceeded, conflict) is retried on the next candidate by the scheduler itself. The test
 * asserts that this happened, that the processes really ran at the same time (a barrier, then
 * the wall-clock intervals of their selects), that every instance was placed exactly once and
 * that no host ever ended above capacity.
 *
 * Mutations seen caught:
 * - RETRY_ON_OTHER_HOST emptied in scheduler.ts (a lost race fails the select instead of
 *   trying the next candidate): 28 instances failed with ERT_STORE_CAPACITY_EXCEEDED;
 * - the workers run one after another (`go` sent to the next once the previous finished):
 *   the overlap assertion failed (a worker's first select started after another's last ended).
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const worker = path.join(here, 'fixtures', 'worker.mjs');

const WORKERS = 3;
const PER_WORKER = 25;
const LANES = 3;
const HOSTS = 12;
const VCPUS_PER_HOST = 8; // 96 slots for 75 instances: the fleet is nearly full at the end.

interface WorkerResult {
  workerId: string;
  placed: Array<{ uuid: string; host: string }>;
  failed: Array<{ uuid: string; code?: string; error: string }>;
  lostRaces: Array<{ host: string; instance: string; code: string }>;
  selects: Array<{ start: number; end: number }>;
}

/** Starts a worker; resolves `ready` once it has opened its scheduler, `done` with its report. */
function startSchedulerWorker(storeOptions: object, id: number): Worker<WorkerResult> {
  return startWorker<WorkerResult>(worker, [JSON.stringify(storeOptions), String(id), String(PER_WORKER), String(LANES)], `worker ${id}`);
}

beforeAll(() => {
  buildPackage(path.resolve(here, '..'));
}, 120_000);

describe.each(BACKENDS)('several scheduler processes on one %s store', (client) => {
  const tmp = tempDir('ert-multi-');
  afterAll(() => tmp.cleanup());

  it('lose races, retry them on other hosts, never exceed capacity and place every instance exactly once', { timeout: 120_000 }, async () => {
    const { store, options } = await openStore(client, tmp.dir, 'multi');
    try {
      const names = Array.from({ length: HOSTS }, (_, i) => `m${String(i).padStart(2, '0')}`);
      await store.importHosts(names.map((name) => hostImport({ name, inventories: { VCPU: VCPUS_PER_HOST, MEMORY_MB: 65536 } })));
      const workers = Array.from({ length: WORKERS }, (_, i) => startSchedulerWorker(options, i + 1));
      // The barrier: every worker has its scheduler loaded before any starts.
      await Promise.all(workers.map((w) => w.ready));
      for (const w of workers) w.child.stdin!.end('go\n');
      const results = await Promise.all(workers.map((w) => w.done));

      // They ran at the same time: some instant lies inside every worker's activity, and most
      // selects were in flight while a select of another worker was (run one after another,
      // hardly any would be).
      const first = results.map((r) => Math.min(...r.selects.map((s) => s.start)));
      const last = results.map((r) => Math.max(...r.selects.map((s) => s.end)));
      expect(Math.max(...first)).toBeLessThan(Math.min(...last));
      const overlapping = results.flatMap((r) =>
        r.selects.filter((s) => results.some((o) => o !== r && o.selects.some((t) => t.start < s.end && t.end > s.start))),
      ).length;
      expect(overlapping).toBeGreaterThan((WORKERS * PER_WORKER) / 2);

      const placed = results.flatMap((r) => r.placed);
      expect(results.flatMap((r) => r.failed)).toEqual([]);
      expect(placed).toHaveLength(WORKERS * PER_WORKER);
      expect(new Set(placed.map((p) => p.uuid)).size).toBe(placed.length);

      // The lost-race path ran: claims the store refused because another process had taken the
      // room, each retried by the scheduler on another host (the instance is placed above).
      const lost = results.flatMap((r) => r.lostRaces);
      console.log(`${client}: lost races per worker ${JSON.stringify(results.map((r) => r.lostRaces.length))}, selects overlapping another worker's ${overlapping}`);
      expect(lost.length).toBeGreaterThan(0);
      for (const race of lost) expect(['ERT_STORE_CAPACITY_EXCEEDED', 'ERT_STORE_CONFLICT', 'ERT_STORE_PROVIDER_GENERATION_CONFLICT']).toContain(race.code);
      const placedOn = new Map(placed.map((p) => [p.uuid, p.host]));
      for (const race of lost) expect(placedOn.get(race.instance), `${race.instance} lost on ${race.host}`).not.toBe(race.host);

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
