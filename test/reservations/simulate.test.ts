// A simulated fleet has no trackers, so nothing confirms the scheduler's reservations; a
// simulation must not expire them mid-run (that would free capacity its workload still
// holds and change every figure after it). Same seed, a config whose reservations expire
// after 1 ms: the same placements as with the default timeout.
//
// Mutation seen caught: runSimulation passing the config's `reservations.timeout` on to the
// scheduler unchanged (52 of the 1 ms run's reservations expired during the run).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '@ert/core';
import { runSimulation } from '@ert/cli';
import { createStore, type Store } from '@ert/store';
import { REPO_ROOT } from '../build.js';

describe('ert simulate and reservations', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function simulate(expireAfter1ms: boolean) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ert-sim-reservations-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const loaded = await loadConfig({ path: path.join(REPO_ROOT, 'config/ert.config.yaml'), env: {} });
    const config = { ...loaded, log: { level: 'silent' as const }, scheduler: { ...loaded.scheduler, refreshInterval: 0 }, ...(expireAfter1ms ? { reservations: { timeout: 1, pollInterval: 1 } } : {}) };
    const store: Store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'sim.db') });
    cleanups.push(() => store.close());
    await store.migrate();
    const report = await runSimulation({ config, store, profilesDir: path.join(REPO_ROOT, 'config/hosts'), hosts: 4, requests: 60, seed: 7, meanLifetime: 1000 });
    return { report, scheduled: (await store.listInstances({ state: 'scheduled' })).length, expired: (await store.listInstances({ state: 'expired' })).length };
  }

  it('a reservations.timeout shorter than the run changes nothing: no reservation expires', async () => {
    const normal = await simulate(false);
    const short = await simulate(true);
    expect(normal.report.rejected).toBeGreaterThan(0); // the fleet fills up: expiring would let more in
    expect(short.expired).toBe(0);
    expect(short.scheduled).toBe(normal.scheduled);
    expect(short.report.placements).toEqual(normal.report.placements);
    expect(short.report.utilization).toEqual(normal.report.utilization);
  });
});
