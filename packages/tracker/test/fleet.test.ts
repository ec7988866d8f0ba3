import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configFromObject, loadConfig } from '@ert/core';
import { createStore } from '@ert/store';
import { buildFleet, createTracker, providerUuid, TrackerErrorCodes } from '../src/index.js';
// @ts-expect-error plain-JS fixtures
import { fileCpus } from './fixtures/plugins.mjs';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const PROFILES = path.join(REPO, 'config/hosts');
const DEFAULT_CONFIG = path.join(REPO, 'config/ert.config.yaml');

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'ert-fleet-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('buildFleet', () => {
  async function profiles(): Promise<string> {
    const root = path.join(dir, 'profiles');
    for (const [name, cpus] of [['big', 64], ['small', 8]] as const) {
      await mkdir(path.join(root, name, 'etc'), { recursive: true });
      await writeFile(path.join(root, name, 'etc/cpus'), `${cpus}\n`);
    }
    return root;
  }
  const config = () => configFromObject({ store: { client: 'sqlite3', connection: path.join(dir, 'unused.db') }, log: { level: 'silent' }, tracker: { resources: [fileCpus()] } }, { configDir: dir });

  it('clones each profile\u2019s real discovery into uniquely named hosts with name-derived uuids, importable as is', async () => {
    const fleet = await buildFleet({ config: config(), profilesDir: await profiles(), hosts: 5 });
    expect(fleet.map((h) => h.host.name)).toEqual(['sim-big-0', 'sim-small-1', 'sim-big-2', 'sim-small-3', 'sim-big-4']);
    const big = fleet[2]!;
    expect(big.providers.map((p) => [p.name, p.uuid, p.parentUuid])).toEqual([
      ['sim-big-2', providerUuid('sim-big-2'), undefined],
      ['sim-big-2_numa_0', providerUuid('sim-big-2_numa_0'), providerUuid('sim-big-2')],
    ]);
    expect(big.providers[0]!.inventories['VCPU']!.total).toBe(64);
    expect(fleet[1]!.providers[1]!.inventories['MEMORY_MB']!.total).toBe(8 * 1024);
    expect(big.stats).toEqual({ filecpus: { schemaVersion: 1, data: { cpus: 64 } } });
    // Stats are copies, not shared objects.
    expect(fleet[0]!.stats!['filecpus']).not.toBe(big.stats!['filecpus']);

    const store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'fleet.db') });
    try {
      await store.migrate();
      await store.importHosts(fleet);
      const [loaded] = await store.loadHosts(['sim-small-3']);
      expect(loaded!.providers.map((p) => p.name)).toEqual(['sim-small-3', 'sim-small-3_numa_0']);
      expect(loaded!.stats['filecpus']!.data).toEqual({ cpus: 8 });
    } finally {
      await store.close();
    }
  });

  it('is deterministic for a seed, and the seed decides the profile mix', async () => {
    const dirOf = await profiles();
    const a = await buildFleet({ config: config(), profilesDir: dirOf, hosts: 12, seed: 7 });
    const b = await buildFleet({ config: config(), profilesDir: dirOf, hosts: 12, seed: 7 });
    expect(a).toEqual(b);
    expect(new Set(a.map((h) => h.host.name)).size).toBe(12);
    const c = await buildFleet({ config: config(), profilesDir: dirOf, hosts: 12, seed: 8 });
    expect(c.map((h) => h.host.name)).not.toEqual(a.map((h) => h.host.name));
  });

  it('refuses a profiles directory without profiles', async () => {
    const empty = path.join(dir, 'empty');
    await mkdir(empty, { recursive: true });
    await expect(buildFleet({ config: config(), profilesDir: empty, hosts: 1 })).rejects.toMatchObject({ code: TrackerErrorCodes.FLEET });
  });
});

/** The shipped default config (all five first-party plugins), with enforcement off (the profiles are fixtures, not hardware) and no log output. */
async function defaultConfig() {
  const config = await loadConfig({ path: DEFAULT_CONFIG });
  return { ...config, log: { ...config.log, level: 'silent' as const }, tracker: { ...config.tracker, enforce: [] } };
}

describe('the first-party plugins on the host profiles', () => {
  it.each(['xeon-2s-cat', 'epyc-1s', 'xeon-4s-numa', 'cloud-vm'])('discovers %s with the default config, no problems', async (profile) => {
    const config = await defaultConfig();
    const tracker = await createTracker({ config, hostName: `real-${profile}`, root: path.join(PROFILES, profile) });
    try {
      const report = await tracker.discover();
      expect(report.problems).toEqual([]);
      // The example provider configs of config/providers.d apply to every host.
      expect(report.providers[0]!.inventories['CUSTOM_LICENSE_SLOTS']!.total).toBe(8);
      expect(report.providers.find((p) => p.name === `real-${profile}_fpga_pool`)!.inventories['CUSTOM_FPGA_SLOT']!.total).toBe(2);
      expect(report.plugins.find((p) => p.plugin === 'vcpu')!.available).toBe(true);
      expect(report.providers[0]!.inventories['VCPU']!.total).toBeGreaterThan(0);
      expect(report.providers[0]!.inventories['MEMORY_MB']!.total).toBeGreaterThan(0);
      expect(report.plugins.map((p) => p.plugin)).toEqual(['vcpu', 'memory', 'compute-units', 'llc', 'pstate']);
      for (const plugin of report.plugins) if (plugin.available) expect(plugin.stats, plugin.plugin).toBeDefined();
    } finally {
      await tracker.stop();
    }
  });

  it('builds a fleet from every profile with the real plugins, ready for importHosts', async () => {
    const fleet = await buildFleet({ config: await defaultConfig(), profilesDir: PROFILES, hosts: 8, seed: 1 });
    expect(fleet).toHaveLength(8);
    const store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'real-fleet.db') });
    try {
      await store.migrate();
      await store.importHosts(fleet);
      const loaded = await store.loadHosts();
      expect(loaded.map((h) => h.host.name).sort()).toEqual(fleet.map((h) => h.host.name).sort());
      for (const host of loaded) expect(host.providers[0]!.inventories['VCPU']!.total).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });

  it('claims with LLC ways on xeon-2s-cat through the real plugins and the real store', async () => {
    const config = await defaultConfig();
    const store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'real.db') });
    await store.migrate();
    const tracker = await createTracker({ config, store, hostName: 'xeon', root: path.join(PROFILES, 'xeon-2s-cat') });
    try {
      const report = await tracker.start();
      expect(report.problems).toEqual([]);
      expect(report.discovery.providers.map((p) => p.name)).toEqual(expect.arrayContaining(['xeon', 'xeon_llc_0', 'xeon_llc_1']));
      const llcBefore = (await store.readStats('xeon'))['llc']!.data;
      const claims = [];
      for (let i = 0; i < 3; i++) {
        const result = await tracker.claim({
          uuid: `10000000-0000-4000-8000-00000000000${i}`,
          projectId: 'p',
          userId: 'u',
          flavor: { name: 'llc.gold', vcpus: 4, memoryMb: 8192, diskGb: 0, extraSpecs: { 'llc:ways': '4', 'cu:units': '40' } },
        });
        if (!result.ok) throw new Error(JSON.stringify(result.reasons));
        claims.push(result);
      }
      for (const claim of claims) {
        const ways = claim.allocations.filter((a) => a.resourceClass === 'CUSTOM_LLC_WAYS');
        expect(ways).toHaveLength(1);
        expect([providerUuid('xeon_llc_0'), providerUuid('xeon_llc_1')]).toContain(ways[0]!.providerUuid);
        expect(ways[0]!.amount).toBe(4);
        expect(claim.record.assignments['llc']).toBeDefined();
        expect(claim.allocations).toContainEqual({ providerUuid: providerUuid('xeon'), resourceClass: 'CUSTOM_CU', amount: 40 });
      }
      expect((await store.readStats('xeon'))['llc']!.data).not.toEqual(llcBefore);
      // A second tracker on the same host and store rebuilds the same views: nothing to write.
      await tracker.stop();
      const again = await createTracker({ config, store, hostName: 'xeon', root: path.join(PROFILES, 'xeon-2s-cat') });
      try {
        const rebuilt = await again.start();
        expect(rebuilt.problems).toEqual([]);
        expect(rebuilt.changes).toEqual([]);
        expect(rebuilt.instances).toBe(3);
      } finally {
        await again.stop();
      }
    } finally {
      await tracker.stop();
      await store.close();
    }
  });
});
