import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import {
  HostFs,
  commonFlags,
  formatCpuList,
  parseCpuInfo,
  parseMemInfo,
  readCpuInfo,
  readCpuTopology,
  readHugePagePools,
  readMemInfo,
  readNumaNodes,
} from '../src/index.js';

const hosts = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts');
const profile = (name: string) => new HostFs(path.join(hosts, name));

const temps: string[] = [];
afterEach(async () => {
  await Promise.all(temps.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});
async function tempRoot(files: Record<string, string>): Promise<HostFs> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ert-sysfs-'));
  temps.push(dir);
  for (const [file, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), content);
  }
  return new HostFs(dir);
}

describe('cpuinfo', () => {
  it('reads every processor record of xeon-2s-cat with its socket and core', async () => {
    const reading = await readCpuInfo(profile('xeon-2s-cat'));
    if (!reading.ok) throw new Error(reading.problem);
    expect(reading.value).toHaveLength(80);
    const cpu41 = reading.value[41]!;
    expect(cpu41).toMatchObject({
      processor: 41,
      vendorId: 'GenuineIntel',
      family: 6,
      model: 85,
      modelName: 'Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz',
      physicalId: 0,
      coreId: 1,
    });
    expect(cpu41.flags).toContain('avx512_vnni');
    expect(cpu41.fields['cpu cores']).toBe('20');
  });

  it('keeps only the flags every processor has', () => {
    const parsed = parseCpuInfo('processor : 0\nflags : a b c\n\nprocessor : 1\nflags : c a\n');
    expect(typeof parsed).not.toBe('string');
    expect(commonFlags(parsed as Exclude<typeof parsed, string>)).toEqual(['a', 'c']);
  });

  it('names the file and the problem for garbled or missing cpuinfo', async () => {
    expect(parseCpuInfo('garbage without colons')).toMatch(/record 1: line "garbage without colons"/);
    expect(parseCpuInfo('vendor_id : x\n')).toBe('record 1 has no numeric "processor" field');
    expect(parseCpuInfo('\n\n')).toBe('no processor records');
    expect(await readCpuInfo(await tempRoot({}))).toEqual({ ok: false, file: '/proc/cpuinfo', problem: 'missing or unreadable' });
  });
});

describe('meminfo', () => {
  it('reads kB values and huge page counts of xeon-4s-numa', async () => {
    const reading = await readMemInfo(profile('xeon-4s-numa'));
    if (!reading.ok) throw new Error(reading.problem);
    expect(reading.value.MemTotal).toBe(805306368);
    expect(reading.value.HugePages_Total).toBe(32768);
    expect(reading.value.HugePages_Free).toBe(24576);
    expect(reading.value.Hugepagesize).toBe(2048);
    expect(reading.value['Active(anon)']).toBeGreaterThan(0);
  });

  it('refuses lines that are not "Key: number [kB]" and text without MemTotal', async () => {
    expect(parseMemInfo('MemTotal: lots kB')).toMatch(/line "MemTotal: lots kB" is not/);
    expect(parseMemInfo('MemFree: 1 kB')).toBe('no MemTotal line');
    expect(parseMemInfo('Node 0 MemTotal: 4 kB', 'Node 1 ')).toMatch(/does not start with "Node 1 "/);
    const reading = await readMemInfo(await tempRoot({ 'proc/meminfo': 'MemTotal 12\n' }));
    expect(reading).toMatchObject({ ok: false, file: '/proc/meminfo' });
  });
});

describe('CPU topology', () => {
  it.each([
    ['xeon-2s-cat', 80, 2, 40, 2],
    ['epyc-1s', 64, 1, 32, 2],
    ['cloud-vm', 4, 1, 2, 2],
    ['xeon-4s-numa', 64, 4, 32, 2],
  ])('%s: %i CPUs, %i sockets, %i cores, %i threads per core', async (name, cpus, sockets, cores, threads) => {
    const reading = await readCpuTopology(profile(name));
    if (!reading.ok) throw new Error(reading.problem);
    expect(reading.value.online).toHaveLength(cpus);
    expect(reading.value).toMatchObject({ sockets, cores, threadsPerCore: threads });
  });

  it('places xeon-2s-cat cpu60 on socket 1 core 0 with sibling cpu20', async () => {
    const reading = await readCpuTopology(profile('xeon-2s-cat'));
    if (!reading.ok) throw new Error(reading.problem);
    expect(reading.value.cpus[60]).toEqual({ cpu: 60, packageId: 1, coreId: 0, threadSiblings: [20, 60], coreCpus: [20, 60] });
  });

  it('counts a core once per socket even when core ids repeat across sockets', async () => {
    const fs = await tempRoot({
      'sys/devices/system/cpu/online': '0-1\n',
      'sys/devices/system/cpu/cpu0/topology/physical_package_id': '0\n',
      'sys/devices/system/cpu/cpu0/topology/core_id': '0\n',
      'sys/devices/system/cpu/cpu0/topology/thread_siblings_list': '0\n',
      'sys/devices/system/cpu/cpu1/topology/physical_package_id': '1\n',
      'sys/devices/system/cpu/cpu1/topology/core_id': '0\n',
      'sys/devices/system/cpu/cpu1/topology/thread_siblings_list': '1\n',
    });
    const reading = await readCpuTopology(fs);
    if (!reading.ok) throw new Error(reading.problem);
    expect(reading.value).toMatchObject({ sockets: 2, cores: 2, threadsPerCore: 1 });
    expect(reading.value.cpus[0]!.coreCpus).toBeUndefined();
  });

  it('names the first missing or malformed topology file', async () => {
    expect(await readCpuTopology(await tempRoot({}))).toMatchObject({ ok: false, file: '/sys/devices/system/cpu/online' });
    const fs = await tempRoot({
      'sys/devices/system/cpu/online': '0\n',
      'sys/devices/system/cpu/cpu0/topology/physical_package_id': 'zero\n',
    });
    expect(await readCpuTopology(fs)).toMatchObject({ ok: false, file: '/sys/devices/system/cpu/cpu0/topology/physical_package_id' });
  });
});

describe('NUMA nodes and huge pages', () => {
  it('reads xeon-4s-numa nodes with their CPUs, memory and huge page pools', async () => {
    const reading = await readNumaNodes(profile('xeon-4s-numa'));
    if (!reading.ok) throw new Error(reading.problem);
    expect(reading.value.map((n) => n.id)).toEqual([0, 1, 2, 3]);
    const node2 = reading.value[2]!;
    expect(formatCpuList(node2.cpus)).toBe('16-23,48-55');
    expect(node2.memTotalKb).toBe(201326592);
    expect(node2.hugePages).toEqual([
      { sizeKb: 2048, total: 8192, free: 6144, surplus: 0 },
      { sizeKb: 1048576, total: 32, free: 32, surplus: 0 },
    ]);
  });

  it('reads the system-wide pools of /sys/kernel/mm/hugepages', async () => {
    const reading = await readHugePagePools(profile('xeon-4s-numa'));
    expect(reading).toEqual({
      ok: true,
      value: [
        { sizeKb: 2048, total: 32768, free: 24576, surplus: 0 },
        { sizeKb: 1048576, total: 128, free: 128, surplus: 0 },
      ],
    });
  });

  it('reads a kernel without NUMA (no node directory) as no nodes', async () => {
    expect(await readNumaNodes(await tempRoot({}))).toEqual({ ok: true, value: [] });
  });

  it('names the node file that is malformed', async () => {
    const fs = await tempRoot({
      'sys/devices/system/node/node0/cpulist': '0-3\n',
      'sys/devices/system/node/node0/meminfo': 'Node 0 MemTotal: 100 kB\nNode 0 MemFree: 50 kB\n',
      'sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages': '4\n',
      'sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages': 'x\n',
    });
    expect(await readNumaNodes(fs)).toMatchObject({
      ok: false,
      file: '/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages',
    });
    const noFree = await tempRoot({
      'sys/devices/system/node/node0/cpulist': '0-3\n',
      'sys/devices/system/node/node0/meminfo': 'Node 0 MemTotal: 100 kB\n',
    });
    expect(await readNumaNodes(noFree)).toEqual({ ok: false, file: '/sys/devices/system/node/node0/meminfo', problem: 'no MemFree line' });
  });
});
