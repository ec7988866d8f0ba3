/**
 * writeHostTree: what it writes is what @ert/sysfs reads back, and the first-party plugins
 * discover a machine written by it as they discover the host profiles.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostFs, readCpuInfo, readCpuTopology, readHugePagePools, readMemInfo, readNumaNodes } from '@ert/sysfs';
import vcpu from '@ert/plugin-vcpu/compute';
import memory from '@ert/plugin-memory/compute';
import llc from '@ert/plugin-llc/compute';
import computeUnits from '@ert/plugin-compute-units/compute';
import disk from '@ert/plugin-disk/compute';
import { resourceContext, writeHostTree, type HostTree } from '../src/index.js';

let tree: HostTree;
beforeAll(async () => {
  tree = await writeHostTree({
    sockets: 2,
    coresPerSocket: 4,
    threadsPerCore: 2,
    offline: [15],
    memoryMb: 65536,
    hugePages: [{ sizeKb: 2048, perNode: 512, freePerNode: 500 }, { sizeKb: 1048576, perNode: 4 }],
    cache: { l3SizeKb: 16384, l3Ways: 11 },
    resctrl: { numClosids: 8 },
    filesystems: [{ mountPoint: '/', sizeGb: 100, freeGb: 60 }],
    files: { '/sys/class/drm/card0/device/vendor': '0x10de' },
  });
});
afterAll(() => tree.cleanup());

describe('writeHostTree, read back by @ert/sysfs', () => {
  it('CPUs: online list without the offline CPU, topology numbered as the host profiles are', async () => {
    const fs = new HostFs(tree.root);
    const topo = await readCpuTopology(fs);
    expect(topo.ok && topo.value).toMatchObject({ sockets: 2, cores: 8, threadsPerCore: 2 });
    if (!topo.ok) return;
    expect(topo.value.online).toEqual([...Array(15).keys()]);
    // logical CPU = thread x (S x C) + socket x C + core: cpu 5 is socket 1 core 1, its sibling 13.
    expect(topo.value.cpus.find((c) => c.cpu === 5)).toMatchObject({ packageId: 1, coreId: 1, threadSiblings: [5, 13] });
    expect(await fs.text('/sys/devices/system/cpu/present')).toBe('0-15');
    expect(tree.layout.nodes.map((n) => n.cpus)).toEqual([[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14]]);
  });

  it('cpuinfo, meminfo, NUMA nodes and huge page pools', async () => {
    const fs = new HostFs(tree.root);
    const cpuinfo = await readCpuInfo(fs);
    expect(cpuinfo.ok && cpuinfo.value.length).toBe(15);
    const meminfo = await readMemInfo(fs);
    expect(meminfo.ok && meminfo.value.MemTotal).toBe(65536 * 1024);
    const nodes = await readNumaNodes(fs);
    expect(nodes.ok && nodes.value.map((n) => [n.id, n.memTotalKb, n.hugePages.map((p) => [p.sizeKb, p.total, p.free])])).toEqual([
      [0, 32768 * 1024, [[2048, 512, 500], [1048576, 4, 4]]],
      [1, 32768 * 1024, [[2048, 512, 500], [1048576, 4, 4]]],
    ]);
    const pools = await readHugePagePools(fs);
    expect(pools.ok && pools.value.map((p) => p.total)).toEqual([1024, 8]);
    expect(await fs.text('/sys/class/drm/card0/device/vendor')).toBe('0x10de');
  });

  it('write and remove change single files at machine paths', async () => {
    const own = await writeHostTree();
    try {
      await own.write('/sys/devices/system/cpu/online', 'garbage');
      expect((await readCpuTopology(new HostFs(own.root))).ok).toBe(false);
      await own.remove('/proc/meminfo');
      expect(await readMemInfo(new HostFs(own.root))).toEqual({ ok: false, file: '/proc/meminfo', problem: 'missing or unreadable' });
    } finally {
      await own.cleanup();
    }
  });
});

describe('the first-party plugins on a written machine', () => {
  const discover = async (plugin: any) => (await plugin.resource(resourceContext(plugin, tree.root))).discover();

  it('vcpu, memory, compute-units: VCPU 15, MEMORY_MB 65536 (512 reserved), 8 cores of CUSTOM_CU', async () => {
    expect((await discover(vcpu)).host.inventories.VCPU).toMatchObject({ total: 15, allocationRatio: 4 });
    expect((await discover(memory)).host.inventories.MEMORY_MB).toMatchObject({ total: 65536, reserved: 512 });
    expect((await discover(computeUnits)).host.inventories.CUSTOM_CU).toMatchObject({ total: 80 });
  });

  it('llc: a cache domain per socket with the 11 ways resctrl offers', async () => {
    const found = await discover(llc);
    expect(found.available).toBe(true);
    expect(found.children.map((c: { key: string; inventories: Record<string, { total: number }> }) => [c.key, c.inventories.CUSTOM_LLC_WAYS!.total])).toEqual([
      ['llc_0', 11],
      ['llc_1', 11],
    ]);
  });

  it('disk: DISK_GB from the statfs stand-in', async () => {
    expect((await discover(disk)).host.inventories.DISK_GB).toMatchObject({ total: 100 });
  });
});
