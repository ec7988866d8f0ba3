/*
 * A host belongs to the machine it was registered from (issue 11, point 11): a tracker that
 * reads another machine (another /etc/machine-id, or another --root) refuses to sync it and
 * writes nothing, so `ert claim --host X` on the wrong machine cannot rewrite X's inventory.
 *
 * Mutations seen caught: the check in syncLocked removed (the second tracker rewrote VCPU and
 * retired the LLC providers); the machine not written by upsertHost (nothing recorded, the
 * check never fires); machineIdentity ignoring etc/machine-id (two roots with the same id
 * refused).
 */
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFromObject } from '@ert/core';
import { TrackerError, buildFleet } from '../src/index.js';
import { machineIdentity } from '../src/machine.js';
import { BACKENDS, useBench } from './harness.js';
import { PROFILES } from './real-host.js';
import vcpu from '@ert/plugin-vcpu/compute';
import memory from '@ert/plugin-memory/compute';
import llc from '@ert/plugin-llc/compute';

describe.each(BACKENDS)('the machine a host was registered from, on %s', (backend) => {
  const bench = useBench(backend);

  function config(root: string, hostName: string) {
    return configFromObject(
      { store: bench.storeOptions(), log: { level: 'silent' }, tracker: { hostName, root, resources: [vcpu, memory, llc], interval: '1h' } },
      { configDir: bench.dir },
    );
  }

  async function inventorySummary(store: Awaited<ReturnType<typeof bench.openStore>>, hostName: string) {
    const [snapshot] = await store.loadHosts([hostName]);
    return snapshot!.providers.map((p) => ({ name: p.name, inventories: Object.fromEntries(Object.entries(p.inventories).map(([c, inv]) => [c, inv.total])) }));
  }

  it('a tracker on another root refuses to sync the host and writes nothing; its own root syncs again', async () => {
    const options = bench.storeOptions();
    const store = await bench.openStore(options);
    const own = await bench.tracker(config(path.join(PROFILES, 'xeon-2s-cat'), 'xeon-1'), store);
    await own.sync();
    expect((await store.getHost('xeon-1'))!.machine).toBe(await machineIdentity(path.join(PROFILES, 'xeon-2s-cat')));
    const before = await inventorySummary(store, 'xeon-1');
    const generation = (await store.getHost('xeon-1'))!.generation;

    const other = await bench.tracker(config(path.join(PROFILES, 'cloud-vm'), 'xeon-1'), store);
    const error = await other.sync().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TrackerError);
    expect((error as TrackerError).code).toBe('ERT_TRACKER_HOST_MACHINE_MISMATCH');
    expect((error as TrackerError).message).toMatch(/host "xeon-1" was registered from root:.*xeon-2s-cat, but this tracker reads root:.*cloud-vm: refusing to write its inventory/);
    expect(await inventorySummary(store, 'xeon-1')).toEqual(before);
    expect((await store.getHost('xeon-1'))!.generation).toBe(generation);
    await expect(own.sync()).resolves.toBeDefined();
  });

  it('the same /etc/machine-id under two roots is one machine; a host without a recorded machine is adopted', async () => {
    const work = await mkdtemp(path.join(tmpdir(), 'ert-machine-'));
    try {
      const a = path.join(work, 'a');
      const b = path.join(work, 'b');
      for (const root of [a, b]) {
        await cp(path.join(PROFILES, 'cloud-vm'), root, { recursive: true });
        await mkdir(path.join(root, 'etc'), { recursive: true });
        await writeFile(path.join(root, 'etc', 'machine-id'), '0123456789ABCDEF0123456789abcdef\n');
      }
      expect(await machineIdentity(a)).toBe('machine-id:0123456789abcdef0123456789abcdef');
      const options = bench.storeOptions();
      const store = await bench.openStore(options);
      await (await bench.tracker(config(a, 'vm-1'), store)).sync();
      await expect((await bench.tracker(config(b, 'vm-1'), store)).sync()).resolves.toBeDefined();

      // A simulated fleet records the profile each host was read from.
      const [simulated] = await buildFleet({ config: config(a, 'unused'), profilesDir: PROFILES, hosts: 1, seed: 1 });
      expect(simulated!.host.machine).toBe(await machineIdentity(path.join(PROFILES, simulated!.host.name.replace(/^sim-(.*)-\d+$/, '$1'))));
      // A host imported without one (or registered before schema 0005) is adopted by its next sync.
      const { machine: _dropped, ...bare } = simulated!.host;
      await store.importHosts([{ ...simulated!, host: bare }]);
      expect((await store.getHost(bare.name))!.machine).toBeUndefined();
      await (await bench.tracker(config(a, bare.name), store)).sync();
      expect((await store.getHost(bare.name))!.machine).toBe('machine-id:0123456789abcdef0123456789abcdef');
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
});
