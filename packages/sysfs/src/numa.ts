import type { HostFs } from './fs.js';
import { readMemInfoFile } from './meminfo.js';
import { found, unreadable, type Reading } from './reading.js';

export const NODE_DIR = '/sys/devices/system/node';
export const HUGEPAGES_DIR = '/sys/kernel/mm/hugepages';

/** One huge page pool: pages of one size, on a node or system-wide. */
export interface HugePagePool {
  /** Page size in kB (2048, 1048576). */
  sizeKb: number;
  /** `nr_hugepages`: pages the pool holds. */
  total: number;
  /** `free_hugepages`: pages not in use. */
  free: number;
  /** `surplus_hugepages`: overcommitted pages above `total`. */
  surplus: number;
}

/** One NUMA node: its CPUs, memory and huge page pools. */
export interface NumaNode {
  id: number;
  /** `cpulist`, ascending (empty for a memory-only node). */
  cpus: number[];
  /** `MemTotal` of the node's meminfo, kB. */
  memTotalKb: number;
  /** `MemFree` of the node's meminfo, kB. */
  memFreeKb: number;
  /** Pools under `hugepages/`, ascending by size; empty when the kernel has none. */
  hugePages: HugePagePool[];
}

/**
 * Read every `node<N>` directory. A kernel built without NUMA has no node directory at
 * all: that reads as an empty list (one implicit node), not a failure. A node directory
 * whose `cpulist`, `meminfo` or huge page counts are missing or malformed fails, naming
 * the file.
 */
export async function readNumaNodes(fs: HostFs): Promise<Reading<NumaNode[]>> {
  const entries = await fs.list(NODE_DIR);
  if (entries === undefined) return found([]);
  const nodes: NumaNode[] = [];
  for (const entry of entries) {
    const match = /^node(\d+)$/.exec(entry);
    if (!match) continue;
    const id = Number(match[1]);
    const dir = `${NODE_DIR}/${entry}`;
    const cpus = await fs.cpuList(`${dir}/cpulist`);
    if (cpus === undefined) return unreadable(`${dir}/cpulist`, 'missing, unreadable or not a CPU list');
    const meminfo = await readMemInfoFile(fs, `${dir}/meminfo`, `Node ${id} `);
    if (!meminfo.ok) return meminfo;
    const memFreeKb = meminfo.value.MemFree;
    if (memFreeKb === undefined) return unreadable(`${dir}/meminfo`, 'no MemFree line');
    const hugePages = await readHugePagePools(fs, `${dir}/hugepages`);
    if (!hugePages.ok) return hugePages;
    nodes.push({ id, cpus, memTotalKb: meminfo.value.MemTotal!, memFreeKb, hugePages: hugePages.value });
  }
  return found(nodes);
}

/**
 * Read the `hugepages-<size>kB` directories under `machineDir` (a node's `hugepages` or
 * `/sys/kernel/mm/hugepages`). An absent directory means no huge page support: an empty
 * list. A pool directory whose counts are missing or malformed fails, naming the file.
 */
export async function readHugePagePools(fs: HostFs, machineDir: string = HUGEPAGES_DIR): Promise<Reading<HugePagePool[]>> {
  const entries = await fs.list(machineDir);
  if (entries === undefined) return found([]);
  const pools: HugePagePool[] = [];
  for (const entry of entries) {
    const match = /^hugepages-(\d+)kB$/.exec(entry);
    if (!match) continue;
    const dir = `${machineDir}/${entry}`;
    const counts: Partial<Record<'total' | 'free' | 'surplus', number>> = {};
    for (const [key, file] of [['total', 'nr_hugepages'], ['free', 'free_hugepages'], ['surplus', 'surplus_hugepages']] as const) {
      const value = await fs.int(`${dir}/${file}`);
      if (value === undefined) return unreadable(`${dir}/${file}`, 'missing, unreadable or not an integer');
      counts[key] = value;
    }
    pools.push({ sizeKb: Number(match[1]), total: counts.total!, free: counts.free!, surplus: counts.surplus! });
  }
  return found(pools.sort((a, b) => a.sizeKb - b.sizeKb));
}
