import { mkdir, mkdtemp, rm, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClaimGrant, ClaimedInstance, ResourceHooks } from '@ert/plugin-api';
import disk from '../src/compute.js';
import { DiskErrorCodes } from '../src/errors.js';
import type { DiskOptions, DiskStatsV1 } from '../src/shared.js';
import { instanceOf, profileRoot, resourceContext, schemaProblems, specOf, type Profile } from '../../vcpu/test/support.js';

const GIB_BLOCKS = 262144; // 4 KiB blocks per GiB

async function hooksFor(root: string, options: Partial<DiskOptions> = {}): Promise<ResourceHooks<DiskStatsV1>> {
  return disk.resource!(resourceContext(disk, root, options));
}

const roots: string[] = [];
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

interface FakeFs {
  mountPoint: string;
  device?: string;
  totalGb: number;
  freeGb: number;
  bfreeGb?: number;
}

/** A temporary root whose `.ert/statfs.json` describes `filesystems` (4 KiB blocks). */
async function fixture(filesystems: FakeFs[] | string): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'ert-disk-'));
  roots.push(root);
  await mkdir(path.join(root, '.ert'));
  const body =
    typeof filesystems === 'string'
      ? filesystems
      : JSON.stringify({
          filesystems: filesystems.map((f) => ({
            mountPoint: f.mountPoint,
            ...(f.device ? { device: f.device } : {}),
            blockSize: 4096,
            blocks: f.totalGb * GIB_BLOCKS,
            bfree: (f.bfreeGb ?? f.freeGb) * GIB_BLOCKS,
            bavail: f.freeGb * GIB_BLOCKS,
          })),
        });
  await writeFile(path.join(root, '.ert/statfs.json'), body);
  return root;
}

const inventory = (total: number, reserved = 0, allocationRatio = 1) => ({ total, reserved, minUnit: 1, maxUnit: total, stepSize: 1, allocationRatio });

const request = (uuid: string, diskGb: number, kind: 'claim' | 'resize' = 'claim') => {
  const spec = specOf({ VCPU: 1, DISK_GB: diskGb });
  return { instance: instanceOf(uuid, spec), spec, kind };
};

/** The instance the tracker would add after writing `req` (DISK_GB on `providerName`). */
const claimed = (req: ReturnType<typeof request>, providerName = 'compute-1'): ClaimedInstance => ({
  uuid: req.instance.uuid,
  request: req.instance,
  spec: req.spec,
  allocations: [{ providerName, resourceClass: 'DISK_GB', amount: req.spec.groups[0]!.resources.DISK_GB! }],
});

describe('disk discovery on the host profiles (default options: /var/lib/nova/instances)', () => {
  // The figures of config/hosts/README.md: GB = floor(blocks x 4096 / GiB), free = bavail.
  const expected: Record<Profile, { filesystem: string; totalGb: number; freeGb: number }> = {
    'xeon-2s-cat': { filesystem: '8:2', totalGb: 1788, freeGb: 1600 },
    'epyc-1s': { filesystem: '259:1', totalGb: 3576, freeGb: 3400 },
    'cloud-vm': { filesystem: '259:1', totalGb: 96, freeGb: 75 },
    'xeon-4s-numa': { filesystem: '253:0', totalGb: 7152, freeGb: 7000 },
  };

  it.each(Object.keys(expected) as Profile[])('%s', async (profile) => {
    const hooks = await hooksFor(profileRoot(profile));
    const { filesystem, totalGb, freeGb } = expected[profile];
    expect(await hooks.discover()).toEqual({ available: true, host: { inventories: { DISK_GB: inventory(totalGb) } } });
    const stats = await hooks.stats!();
    const at = '/var/lib/nova/instances';
    expect(stats).toEqual({
      shared: false,
      paths: [{ path: at, filesystem, totalGb, freeGb, reservedGb: 0 }],
      filesystems: [{ filesystem, provider: null, paths: [at], totalGb, freeGb, reservedGb: 0, heldGb: 0, pendingGb: 0, availableGb: freeGb }],
    });
    expect(schemaProblems(disk.stats!.schema, stats)).toEqual([]);
  });
});

describe('disk discovery from a statfs file', () => {
  it('counts a filesystem once however many paths are on it; their reservations add up; ratio applies', async () => {
    const root = await fixture([{ mountPoint: '/', device: '8:1', totalGb: 500, freeGb: 400 }]);
    const hooks = await hooksFor(root, {
      paths: [
        { path: '/var/lib/nova/instances', reservedGb: 20 },
        { path: '/srv/images/', reservedGb: 10 },
      ],
      allocationRatio: 1.5,
    });
    expect(await hooks.discover()).toEqual({ available: true, host: { inventories: { DISK_GB: inventory(500, 30, 1.5) } } });
    const stats = await hooks.stats!();
    expect(stats.paths).toEqual([
      { path: '/var/lib/nova/instances', filesystem: '8:1', totalGb: 500, freeGb: 400, reservedGb: 20 },
      { path: '/srv/images', filesystem: '8:1', totalGb: 500, freeGb: 400, reservedGb: 10 },
    ]);
    expect(stats.filesystems).toEqual([
      { filesystem: '8:1', provider: null, paths: ['/var/lib/nova/instances', '/srv/images'], totalGb: 500, freeGb: 400, reservedGb: 30, heldGb: 0, pendingGb: 0, availableGb: 370 },
    ]);
    expect(schemaProblems(disk.stats!.schema, stats)).toEqual([]);
  });

  it('several filesystems: one child provider each (disk_<name>), paths matched to the longest mount point', async () => {
    const root = await fixture([
      { mountPoint: '/', device: '8:1', totalGb: 100, freeGb: 80 },
      { mountPoint: '/var/lib/nova', device: '259:0', totalGb: 2000, freeGb: 1900 },
      { mountPoint: '/mnt/scratch', totalGb: 300, freeGb: 300 },
    ]);
    const hooks = await hooksFor(root, {
      paths: [
        { path: '/var/lib/nova/instances', reservedGb: 0 },
        { path: '/mnt/scratch', reservedGb: 0, name: 'scratch' },
        { path: '/var/lib/nova/backups', reservedGb: 5 },
      ],
    });
    expect(await hooks.discover()).toEqual({
      available: true,
      children: [
        { key: 'disk_var_lib_nova_instances', inventories: { DISK_GB: inventory(2000, 5) } },
        { key: 'disk_scratch', inventories: { DISK_GB: inventory(300) } },
      ],
    });
    const stats = await hooks.stats!();
    expect(stats.filesystems.map((f) => [f.filesystem, f.provider, f.paths])).toEqual([
      ['259:0', 'disk_var_lib_nova_instances', ['/var/lib/nova/instances', '/var/lib/nova/backups']],
      ['mount /mnt/scratch', 'disk_scratch', ['/mnt/scratch']],
    ]);
    expect(schemaProblems(disk.stats!.schema, stats)).toEqual([]);
  });

  it('reads the real filesystem with statfs when the root has no statfs file', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'ert-disk-real-'));
    roots.push(root);
    await mkdir(path.join(root, 'instances'));
    const real = await statfs(path.join(root, 'instances'), { bigint: true });
    const gib = 1024n ** 3n;
    const totalGb = Number((real.blocks * real.bsize) / gib);
    const hooks = await hooksFor(root, { paths: [{ path: '/instances', reservedGb: 0 }] });
    expect(await hooks.discover()).toEqual({ available: true, host: { inventories: { DISK_GB: inventory(totalGb) } } });
    const [fs] = (await hooks.stats!()).filesystems;
    expect(fs!.filesystem).toMatch(/^\d+:\d+$/);
    // Free space moves with other writers; it stays within what statfs says around the reading.
    expect(fs!.freeGb).toBeLessThanOrEqual(totalGb);
    expect(Math.abs(fs!.freeGb - Number((real.bavail * real.bsize) / gib))).toBeLessThanOrEqual(1);
  });
});

describe('disk is unavailable, never throws, naming the path or file', () => {
  it('a missing path (real statfs)', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'ert-disk-real-'));
    roots.push(root);
    const hooks = await hooksFor(root, { paths: [{ path: '/var/lib/nova/instances', reservedGb: 0 }] });
    expect(await hooks.discover()).toEqual({ available: false, reason: '/var/lib/nova/instances: statfs failed (ENOENT)' });
    await expect(async () => hooks.stats!()).rejects.toMatchObject({ code: DiskErrorCodes.unavailable });
    expect(await hooks.test!(request('a', 10))).toBe('disk is unavailable on this host: /var/lib/nova/instances: statfs failed (ENOENT)');
  });

  it('a path no filesystem of the statfs file holds', async () => {
    const root = await fixture([{ mountPoint: '/data', totalGb: 100, freeGb: 50 }]);
    expect(await (await hooksFor(root)).discover()).toEqual({ available: false, reason: '/var/lib/nova/instances: no filesystem of /.ert/statfs.json holds it' });
  });

  it('a malformed statfs file', async () => {
    expect(await (await hooksFor(await fixture('{ "filesystems": '))).discover()).toMatchObject({ available: false, reason: expect.stringMatching(/^\/\.ert\/statfs\.json: not JSON/) });
    const inconsistent = JSON.stringify({ filesystems: [{ mountPoint: '/', blockSize: 4096, blocks: 10, bfree: 20, bavail: 5 }] });
    expect(await (await hooksFor(await fixture(inconsistent))).discover()).toEqual({
      available: false,
      reason: '/.ert/statfs.json: filesystems[0]: expected bavail <= bfree <= blocks, got 5, 20, 10',
    });
  });

  it('reservations larger than the filesystem', async () => {
    const root = await fixture([{ mountPoint: '/', device: '8:1', totalGb: 100, freeGb: 50 }]);
    const hooks = await hooksFor(root, { paths: [{ path: '/a', reservedGb: 60 }, { path: '/b', reservedGb: 50 }] });
    expect(await hooks.discover()).toEqual({ available: false, reason: '/a, /b: reservedGb 110 exceeds the 100 GB of filesystem 8:1' });
  });

  it('a filesystem below 1 GB', async () => {
    const root = await fixture([{ mountPoint: '/', device: '8:1', totalGb: 0, freeGb: 0 }]);
    expect(await (await hooksFor(root)).discover()).toEqual({ available: false, reason: '/var/lib/nova/instances: its filesystem 8:1 holds less than 1 GB' });
  });
});

describe('disk claims', () => {
  it('refuses what the filesystem cannot hold now: statfs free minus reserved (cloud-vm: 75 GB free)', async () => {
    const hooks = await hooksFor(profileRoot('cloud-vm'), { paths: [{ path: '/var/lib/nova/instances', reservedGb: 5 }] });
    await hooks.discover();
    expect(await hooks.test!(request('a', 0))).toBeUndefined();
    expect(await hooks.test!(request('a', 70))).toBeUndefined();
    expect(await hooks.test!(request('a', 71))).toBe(
      '/var/lib/nova/instances: needs 71 GB, 70 GB free now (statfs 75 GB free - 5 GB reserved - 0 GB claimed since the last reading)',
    );
  });

  it('counts the instances claimed since the last reading; a new reading (or a rebuilt view) does not count them twice', async () => {
    const hooks = await hooksFor(profileRoot('cloud-vm'));
    await hooks.discover();
    const first = request('a', 50);
    expect(await hooks.test!(first)).toBeUndefined();
    await hooks.addInstance!(claimed(first));
    expect(await hooks.test!(request('b', 30))).toBe(
      '/var/lib/nova/instances: needs 30 GB, 25 GB free now (statfs 75 GB free - 0 GB reserved - 50 GB claimed since the last reading)',
    );
    expect((await hooks.stats!()).filesystems[0]).toMatchObject({ heldGb: 50, pendingGb: 50, availableGb: 25 });
    // The next reading sees the instance's disk in statfs' free space.
    await hooks.discover();
    expect(await hooks.test!(request('b', 30))).toBeUndefined();
    // A restart: the tracker resets the view and re-adds the live instances after discovery.
    await hooks.reset!();
    await hooks.addInstance!(claimed(first));
    expect((await hooks.stats!()).filesystems[0]).toMatchObject({ heldGb: 50, pendingGb: 0, availableGb: 75 });
    await hooks.removeInstance!('a');
    expect((await hooks.stats!()).filesystems[0]).toMatchObject({ heldGb: 0, pendingGb: 0 });
  });

  it('refuses beyond the inventory beside the instances in the view; allocationRatio raises it', async () => {
    // cloud-vm: DISK_GB total 96; 90 GB of instances from before the reading, statfs 75 GB free.
    for (const [ratio, outcome] of [
      [1, 'DISK_GB on /var/lib/nova/instances: needs 10, 6 free of capacity 96'],
      [2, undefined],
    ] as const) {
      const hooks = await hooksFor(profileRoot('cloud-vm'), { allocationRatio: ratio });
      await hooks.discover();
      await hooks.reset!();
      await hooks.addInstance!(claimed(request('old', 90)));
      expect(await hooks.test!(request('new', 10))).toBe(outcome);
    }
  });

  it('several filesystems: grants DISK_GB on the first that can hold it, refuses naming each when none can', async () => {
    const root = await fixture([
      { mountPoint: '/', device: '8:1', totalGb: 100, freeGb: 40 },
      { mountPoint: '/mnt/fast', device: '259:0', totalGb: 200, freeGb: 150 },
    ]);
    const hooks = await hooksFor(root, { paths: [{ path: '/var/lib/nova/instances', reservedGb: 0 }, { path: '/mnt/fast', reservedGb: 0, name: 'fast' }] });
    await hooks.discover();
    expect(await hooks.test!(request('a', 30))).toEqual({ allocations: [{ provider: 'disk_var_lib_nova_instances', resourceClass: 'DISK_GB', amount: 30 }] });
    const big = request('b', 120);
    const grant = (await hooks.test!(big)) as ClaimGrant;
    expect(grant).toEqual({ allocations: [{ provider: 'disk_fast', resourceClass: 'DISK_GB', amount: 120 }] });
    await hooks.addInstance!(claimed(big, 'compute-1_disk_fast'));
    expect((await hooks.stats!()).filesystems.map((f) => f.pendingGb)).toEqual([0, 120]);
    expect(await hooks.test!(request('c', 50))).toBe(
      '/var/lib/nova/instances: needs 50 GB, 40 GB free now (statfs 40 GB free - 0 GB reserved - 0 GB claimed since the last reading); ' +
        '/mnt/fast: needs 50 GB, 30 GB free now (statfs 150 GB free - 0 GB reserved - 120 GB claimed since the last reading)',
    );
  });
});

describe('disk in shared mode', () => {
  it('reports no DISK_GB (a sharing provider supplies it) and still refuses what the storage cannot hold now', async () => {
    const root = await fixture([{ mountPoint: '/var/lib/nova/instances', device: 'nfs:/export/nova', totalGb: 10000, freeGb: 120 }]);
    const hooks = await hooksFor(root, { shared: true });
    expect(await hooks.discover()).toEqual({ available: true });
    expect(await hooks.test!(request('a', 100))).toBeUndefined();
    expect(await hooks.test!(request('a', 121))).toBe(
      '/var/lib/nova/instances: needs 121 GB, 120 GB free now (statfs 120 GB free - 0 GB reserved - 0 GB claimed since the last reading)',
    );
    // Its DISK_GB is allocated on the sharing provider; it still counts against the storage.
    const first = request('a', 100);
    await hooks.addInstance!(claimed(first, 'shared_storage'));
    const stats = await hooks.stats!();
    expect(stats).toMatchObject({ shared: true, filesystems: [{ provider: null, heldGb: 100, pendingGb: 100, availableGb: 20 }] });
    expect(schemaProblems(disk.stats!.schema, stats)).toEqual([]);
  });
});
