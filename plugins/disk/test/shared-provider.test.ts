/**
 * Shared storage end to end, as docs/provider-config.md tells an operator to set it up: a
 * sharing provider holds DISK_GB (MISC_SHARES_VIA_AGGREGATE, in an aggregate with the host's
 * root provider), the disk plugin runs with `shared: true`, and a claim through a real
 * tracker takes its DISK_GB from the sharing provider, the plugin still refusing what the
 * storage cannot hold now.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { normalizeInventory, TRAIT_SHARING_PROVIDER } from '@ert/plugin-api';
import { configFromObject } from '@ert/core';
import { createStore, type Store } from '@ert/store';
import { createTracker, type Tracker } from '@ert/tracker';
import disk from '../src/compute.js';

const GIB_BLOCKS = 262144;
const AGGREGATE = '5a1e3c8e-0000-4000-8000-000000000001';
const SHARED = { uuid: '5a1e3c8e-0000-4000-8000-0000000000aa', name: 'nfs_instances' };

describe('disk with a sharing DISK_GB provider', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function world(): Promise<{ store: Store; tracker: Tracker }> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'ert-disk-shared-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    // The NFS export mounted at the instance path: 10 TB, 300 GB free right now.
    await mkdir(path.join(dir, 'root/.ert'), { recursive: true });
    const filesystems = [{ mountPoint: '/var/lib/nova/instances', device: 'nfs:/export/nova', blockSize: 4096, blocks: 10000 * GIB_BLOCKS, bfree: 300 * GIB_BLOCKS, bavail: 300 * GIB_BLOCKS }];
    await writeFile(path.join(dir, 'root/.ert/statfs.json'), JSON.stringify({ filesystems }));
    const store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'ert.db') });
    cleanups.push(() => store.close());
    await store.migrate();
    // What the operator does once, through the Placement API (docs/provider-config.md).
    const shared = await store.createProvider(SHARED);
    await store.setInventories(shared.uuid, undefined, { DISK_GB: normalizeInventory({ total: 10000 }) });
    await store.setTraits(shared.uuid, undefined, [TRAIT_SHARING_PROVIDER]);
    await store.setAggregates(shared.uuid, undefined, [AGGREGATE]);
    const config = configFromObject(
      { log: { level: 'silent' }, tracker: { hostName: 'compute-1', root: path.join(dir, 'root'), resources: [disk] }, plugins: { disk: { shared: true } } },
      { configDir: dir },
    );
    const tracker = await createTracker({ config, store });
    cleanups.push(() => tracker.stop());
    await tracker.sync();
    await store.setAggregates(tracker.rootUuid, undefined, [AGGREGATE]);
    return { store, tracker };
  }

  const request = (uuid: string, diskGb: number) => ({ uuid, projectId: 'p', userId: 'u', flavor: { name: `d${diskGb}`, vcpus: 0, memoryMb: 0, diskGb, extraSpecs: {} } });

  it('the host reports no DISK_GB; claims take it from the sharing provider; the storage refuses what it cannot hold', async () => {
    const { store, tracker } = await world();
    const host = (await store.listProviders({ rootUuid: tracker.rootUuid })).map((p) => p.name);
    expect(host).toEqual(['compute-1']);
    expect((await store.getInventories(tracker.rootUuid)).inventories).toEqual({});

    // The flavors ask for DISK_GB only (no other plugin runs here), which the sharing provider holds.
    const first = await tracker.claim(request('00000000-0000-4000-8000-000000000001', 200));
    expect(first.ok, JSON.stringify(first)).toBe(true);
    expect(await store.getUsages(SHARED.uuid)).toEqual({ DISK_GB: 200 });

    const second = await tracker.claim(request('00000000-0000-4000-8000-000000000002', 150));
    expect(second).toEqual({
      ok: false,
      reasons: [{ plugin: 'disk', reason: '/var/lib/nova/instances: needs 150 GB, 100 GB free now (statfs 300 GB free - 0 GB reserved - 200 GB claimed since the last reading)' }],
    });
    expect(await store.getUsages(SHARED.uuid)).toEqual({ DISK_GB: 200 });

    // A periodic update keeps the operator's aggregate on the host's root.
    await tracker.sync();
    expect(await store.getAggregates(tracker.rootUuid)).toEqual([AGGREGATE]);
  });
});
