import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@ert/core';
import type { ErtConfig } from '@ert/core';
import { buildFleet } from '@ert/tracker';
import { createScheduler, NoValidHostError } from '../src/index.js';
import { flavor, instances, openStore, tempDir } from './helpers.js';

/*
 * The scheduler with the five first-party plugins (consumers, filters, weighers as in
 * config/ert.config.yaml) over a fleet built by the tracker's real discovery of the host
 * profiles in config/hosts.
 */
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

describe('scheduling with the first-party plugins', () => {
  const tmp = tempDir('ert-first-party-');
  afterAll(() => tmp.cleanup());

  it('places plugin flavors only on hosts whose hardware can take them', { timeout: 120_000 }, async () => {
    const base = await loadConfig({ path: path.join(repoRoot, 'config', 'ert.config.yaml'), env: {} });
    const { store, options } = await openStore('sqlite3', tmp.dir, 'first-party');
    const config: ErtConfig = { ...base, store: options, log: { level: 'silent' }, scheduler: { ...base.scheduler, refreshInterval: 0 } };
    try {
      // Round-robin over the 4 profiles: 2 hosts each.
      await store.importHosts(await buildFleet({ config, profilesDir: path.join(repoRoot, 'config', 'hosts'), hosts: 8 }));
      const scheduler = await createScheduler({ config, store });
      expect(scheduler.hostCount).toBe(8);

      // LLC ways need resctrl (xeon-2s-cat, xeon-4s-numa): never the EPYC or the cloud VM.
      const llc = await scheduler.select({ flavor: flavor('llc', 2, 2048, { 'llc:ways': '2' }), instances: instances(3) });
      for (const selection of llc) {
        expect(selection.host).toMatch(/^sim-xeon-/);
        const ways = selection.allocations.filter((a) => a.resourceClass === 'CUSTOM_LLC_WAYS');
        expect(ways).toHaveLength(1);
        expect(ways[0]!.amount).toBe(2);
        const provider = scheduler.host(selection.host)!.providers.find((p) => p.uuid === ways[0]!.providerUuid)!;
        expect(provider.parentUuid).toBe(scheduler.host(selection.host)!.rootUuid);
      }
      const explanation = await scheduler.explain({ flavor: flavor('llc', 2, 2048, { 'llc:ways': '2' }), instances: instances(1) });
      const rejectedHosts = explanation.rejected.map((r) => r.host).sort();
      expect(rejectedHosts).toEqual(expect.arrayContaining(['sim-cloud-vm-0', 'sim-epyc-1s-1']));
      expect(explanation.weighed.every((w) => w.host.startsWith('sim-xeon-'))).toBe(true);

      // Compute units: every profile has them; the request lands and claims CUSTOM_CU.
      const [cu] = await scheduler.select({ flavor: flavor('cu', 2, 2048, { 'cu:units': '20' }), instances: instances(1) });
      expect(cu!.allocations).toEqual(expect.arrayContaining([expect.objectContaining({ resourceClass: 'CUSTOM_CU', amount: 20 })]));

      // A host profile without cpufreq (the cloud VM) cannot promise a governor.
      const turbo = await scheduler.explain({ flavor: flavor('turbo', 1, 1024, { 'pstate:governor': 'performance' }), instances: instances(1) });
      expect(turbo.rejected.map((r) => r.host)).toEqual(expect.arrayContaining(['sim-cloud-vm-0', 'sim-cloud-vm-4']));

      // More vCPUs than any host has: no valid host, with the reason counted.
      const error = await scheduler.select({ flavor: flavor('huge', 4096, 1024), instances: instances(1) }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(NoValidHostError);
      await scheduler.close();
    } finally {
      await store.close();
    }
  });
});
