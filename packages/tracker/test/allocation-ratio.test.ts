/*
 * Issue 20, point 1 (allocation ratio and reserved; docs/ownership.md): the config value
 * applies when the tracker creates a class on its provider; a later write by another writer
 * (an operator's `openstack resource provider inventory set --allocation-ratio` through
 * `ert serve`) persists across syncs, unless the config sets the value explicitly (an option
 * written in `plugins.<name>`, Nova's `cpu_allocation_ratio` rather than
 * `initial_cpu_allocation_ratio`), in which case every sync writes the config's value again.
 * Total, min/max unit and step are always the tracker's. With the real vcpu and memory
 * plugins on the cloud-vm host profile (4 CPUs).
 *
 * Seen red with the code guarded broken: with reconcile.ts's `keepTunedFields` returning
 * `wanted` as it is (the tracker's values always written), both tests failed at the first
 * sync after the outside write (the first one wrote MEMORY_MB's ratio back too; the second
 * wrote VCPU's reserved back to 0 though reservedCpus is not written); with `explicitFields`
 * returning `{}` (nothing explicit), the second failed there (nothing written back: VCPU's
 * ratio stayed 2.5 where the config says 3, PCPU's 2, MEMORY_MB's reserved 2048).
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFromObject } from '@ert/core';
import type { Inventory } from '@ert/plugin-api';
import memory from '@ert/plugin-memory/compute';
import vcpu from '@ert/plugin-vcpu/compute';
import type { Store } from '@ert/store';
import { providerUuid } from '../src/index.js';
import { BACKENDS, useBench } from './harness.js';
import { PROFILES } from './real-host.js';

const ROOT = providerUuid('host1');

/** What the Placement API does: read-modify-write of the whole set, no owner. */
async function setOutside(store: Store, changes: Record<string, Partial<Inventory>>): Promise<void> {
  const { generation, inventories } = await store.getInventories(ROOT);
  const next = { ...inventories };
  for (const [resourceClass, fields] of Object.entries(changes)) next[resourceClass] = { ...inventories[resourceClass]!, ...fields };
  await store.setInventories(ROOT, generation, next);
}

describe.each(BACKENDS)('allocation ratio and reserved: initial unless set explicitly (%s)', (backend) => {
  const bench = useBench(backend);

  async function host(plugins: Record<string, unknown>) {
    const options = bench.storeOptions();
    const store = await bench.openStore(options);
    const config = configFromObject(
      {
        store: options,
        log: { level: 'silent' },
        tracker: { hostName: 'host1', root: path.join(PROFILES, 'cloud-vm'), resources: [vcpu, memory], interval: '1h' },
        plugins,
      },
      { configDir: bench.dir },
    );
    const tracker = await bench.tracker(config, store);
    const inventories = async () => (await store.getInventories(ROOT, { owner: 'tracker' })).inventories;
    return { store, tracker, inventories };
  }

  it("keeps another writer's allocation ratio and reserved across three syncs when the config leaves them to defaults; totals stay the tracker's", async () => {
    // Only dedicatedCpus is written: VCPU's and MEMORY_MB's ratio and reserved are defaults.
    const { store, tracker, inventories } = await host({ vcpu: { dedicatedCpus: '3' } });
    expect((await tracker.sync()).problems).toEqual([]);
    expect((await inventories())['VCPU']).toMatchObject({ total: 3, reserved: 0, allocationRatio: 4 });
    expect((await inventories())['MEMORY_MB']).toMatchObject({ reserved: 512, allocationRatio: 1 });
    const memoryBefore = (await inventories())['MEMORY_MB'];

    await setOutside(store, { VCPU: { allocationRatio: 2.5, reserved: 1, total: 99, maxUnit: 99 }, MEMORY_MB: { allocationRatio: 1.5 } });
    for (let i = 0; i < 3; i++) {
      const report = await tracker.sync();
      expect(report.problems).toEqual([]);
      // The first sync writes the tracker's total back; the next two have nothing to write.
      expect(report.changes.filter((c) => c.startsWith('inventories of'))).toEqual(i === 0 ? ['inventories of host1: VCPU'] : []);
      const now = await inventories();
      expect(now['VCPU']).toEqual({ total: 3, reserved: 1, minUnit: 1, maxUnit: 3, stepSize: 1, allocationRatio: 2.5 });
      expect(now['MEMORY_MB']).toEqual({ ...memoryBefore, allocationRatio: 1.5 });
    }
  });

  it('writes the explicitly configured values again at the next sync; the unset ones stay as written; PCPU stays 1', async () => {
    // allocationRatio written (Nova's cpu_allocation_ratio), reservedCpus not; memory's reservedMb written.
    const { store, tracker, inventories } = await host({ vcpu: { dedicatedCpus: '3', allocationRatio: 3 }, memory: { reservedMb: 1024 } });
    expect((await tracker.sync()).problems).toEqual([]);
    expect((await inventories())['VCPU']).toMatchObject({ total: 3, reserved: 0, allocationRatio: 3 });

    await setOutside(store, { VCPU: { allocationRatio: 2.5, reserved: 1 }, PCPU: { allocationRatio: 2 }, MEMORY_MB: { reserved: 2048, allocationRatio: 1.5 } });
    for (let i = 0; i < 3; i++) {
      const report = await tracker.sync();
      expect(report.problems).toEqual([]);
      expect(report.changes.filter((c) => c.startsWith('inventories of'))).toEqual(i === 0 ? ['inventories of host1: MEMORY_MB, PCPU, VCPU'] : []);
      const now = await inventories();
      expect(now['VCPU']).toMatchObject({ total: 3, reserved: 1, allocationRatio: 3 });
      expect(now['PCPU']).toMatchObject({ total: 1, reserved: 0, allocationRatio: 1 });
      expect(now['MEMORY_MB']).toMatchObject({ reserved: 1024, allocationRatio: 1.5 });
    }
  });
});
