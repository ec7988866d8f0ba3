/**
 * Reading the last-level cache and resctrl's cache allocation from sysfs (compute side
 * only). Readers never throw for a missing or garbled file: they return `{ problem }`
 * naming the file, and discovery turns that into "unavailable, because ...".
 */
import { stat } from 'node:fs/promises';
import { HostFs, formatCpuList } from '@ert/sysfs';
import { GROUP_PREFIX } from './shared.js';
import { bitCount, isContiguous, parseMask } from './ways.js';

export const CPU_DIR = '/sys/devices/system/cpu';
export const RESCTRL_DIR = '/sys/fs/resctrl';

/**
 * A reading: the value, or the problem naming the file. `absent` marks a problem that is a
 * feature the host lacks (resctrl not mounted, no L3 allocation), not a broken file.
 */
export type Read<T> = { value: T; problem?: undefined } | { value?: undefined; problem: string; absent?: boolean };

export interface CacheDomain {
  id: number;
  cpus: number[];
}

/** The highest-level unified cache and its sharing domains. */
export interface LastLevelCache {
  level: number;
  sizeKiB: number;
  ways: number;
  domains: CacheDomain[];
}

/** resctrl's L3 allocation resource (`info/L3`, or `info/L3CODE` + `info/L3DATA` with CDP). */
export interface ResctrlL3 {
  cdp: boolean;
  cbmMask: number;
  numClosids: number;
  minCbmBits: number;
  shareableBits: number;
  /** Domain ids listed in the root group's schemata. */
  domainIds: number[];
  /** Groups other than the root, ert's own and monitoring directories. */
  foreignGroups: string[];
}

interface CacheIndex {
  level: number;
  type: string;
  dir: string;
}

/** Find the last-level cache: the highest-level Unified cache described under cpuN/cache/indexM/. */
export async function readLastLevelCache(fs: HostFs): Promise<Read<LastLevelCache>> {
  const entries = await fs.list(CPU_DIR);
  if (!entries) return { problem: `cannot list ${CPU_DIR}` };
  const cpus = entries.filter((e) => /^cpu\d+$/.test(e)).map((e) => Number(e.slice(3)));
  if (cpus.length === 0) return { problem: `no cpuN directories in ${CPU_DIR}` };

  // Per CPU, the unified cache of the highest level. CPUs are read concurrently; the first
  // problem in CPU order is reported, so the reason does not depend on timing.
  const perCpu: Array<{ cpu: number; index: CacheIndex }> = [];
  for (const read of await Promise.all(cpus.map((cpu) => topUnifiedCache(fs, cpu)))) {
    if (read.problem !== undefined) return read;
    if (read.value) perCpu.push(read.value);
  }
  if (perCpu.length === 0) return { problem: `no Unified cache described under ${CPU_DIR}/cpuN/cache/indexM/type` };
  const level = Math.max(...perCpu.map((p) => p.index.level));

  const described = await Promise.all(perCpu.filter((p) => p.index.level === level).map((p) => describeCache(fs, p.index.dir)));
  const domains = new Map<number, CacheDomain>();
  let geometry: { sizeKiB: number; ways: number; dir: string } | undefined;
  for (const read of described) {
    if (read.problem !== undefined) return read;
    const { id, sizeKiB, ways, shared, dir } = read.value;
    if (!geometry) geometry = { sizeKiB, ways, dir };
    else if (geometry.sizeKiB !== sizeKiB || geometry.ways !== ways) {
      return { problem: `${dir} describes a ${sizeKiB}K ${ways}-way cache, ${geometry.dir} a ${geometry.sizeKiB}K ${geometry.ways}-way one` };
    }
    const domain = domains.get(id) ?? { id, cpus: [] };
    domain.cpus = [...new Set([...domain.cpus, ...shared])].sort((a, b) => a - b);
    domains.set(id, domain);
  }
  return {
    value: {
      level,
      sizeKiB: geometry!.sizeKiB,
      ways: geometry!.ways,
      domains: [...domains.values()].sort((a, b) => a.id - b.id),
    },
  };
}

/** The highest-level Unified cache of one CPU; undefined value for a CPU without cache description (offline). */
async function topUnifiedCache(fs: HostFs, cpu: number): Promise<Read<{ cpu: number; index: CacheIndex } | undefined>> {
  const cacheDir = `${CPU_DIR}/cpu${cpu}/cache`;
  const indexes = (await fs.list(cacheDir))?.filter((e) => /^index\d+$/.test(e));
  if (!indexes || indexes.length === 0) return { value: undefined };
  let top: CacheIndex | undefined;
  for (const name of indexes) {
    const dir = `${cacheDir}/${name}`;
    const [level, type] = await Promise.all([fs.int(`${dir}/level`), fs.text(`${dir}/type`)]);
    if (level === undefined) return { problem: `${dir}/level is missing or not an integer` };
    if (type === undefined) return { problem: `${dir}/type is missing` };
    if (type.trim() === 'Unified' && (!top || level > top.level)) top = { level, type, dir };
  }
  return { value: top && { cpu, index: top } };
}

/** Size, ways, sharing CPUs and id of one cache index directory. */
async function describeCache(fs: HostFs, dir: string): Promise<Read<{ id: number; sizeKiB: number; ways: number; shared: number[]; dir: string }>> {
  const [sizeText, ways, shared, id] = await Promise.all([
    fs.text(`${dir}/size`),
    fs.int(`${dir}/ways_of_associativity`),
    fs.cpuList(`${dir}/shared_cpu_list`),
    fs.int(`${dir}/id`),
  ]);
  const sizeMatch = sizeText === undefined ? null : /^(\d+)K$/.exec(sizeText.trim());
  if (!sizeMatch) return { problem: `${dir}/size is missing or not "<n>K" (got ${JSON.stringify(sizeText)})` };
  if (ways === undefined || ways < 1) return { problem: `${dir}/ways_of_associativity is missing or not a positive integer` };
  if (!shared || shared.length === 0) return { problem: `${dir}/shared_cpu_list is missing or malformed` };
  // Kernels before 4.14 have no `id`: the lowest CPU sharing the cache names the domain then.
  return { value: { id: id ?? Math.min(...shared), sizeKiB: Number(sizeMatch[1]), ways, shared, dir } };
}

/** Read resctrl's L3 allocation. A problem when resctrl is not mounted, lacks L3 CAT, or a file is garbled. */
export async function readResctrl(fs: HostFs): Promise<Read<ResctrlL3>> {
  const info = await fs.list(`${RESCTRL_DIR}/info`);
  if (!info) return { problem: `resctrl is not mounted (no ${RESCTRL_DIR}/info)`, absent: true };
  const cdp = info.includes('L3CODE') && info.includes('L3DATA');
  if (!cdp && !info.includes('L3')) return { problem: `no L3 cache allocation in ${RESCTRL_DIR}/info (has ${info.join(', ') || 'nothing'})`, absent: true };
  const names = cdp ? ['L3CODE', 'L3DATA'] : ['L3'];

  const resources: Array<Omit<ResctrlL3, 'cdp' | 'domainIds' | 'foreignGroups'>> = [];
  for (const name of names) {
    const dir = `${RESCTRL_DIR}/info/${name}`;
    const maskText = await fs.text(`${dir}/cbm_mask`);
    const cbmMask = maskText === undefined ? undefined : parseMask(maskText);
    if (cbmMask === undefined || !isContiguous(cbmMask)) {
      return { problem: `${dir}/cbm_mask is missing or not a contiguous hex mask (got ${JSON.stringify(maskText)})` };
    }
    const numClosids = await fs.int(`${dir}/num_closids`);
    if (numClosids === undefined || numClosids < 1) return { problem: `${dir}/num_closids is missing or not a positive integer` };
    const minCbmBits = await fs.int(`${dir}/min_cbm_bits`);
    if (minCbmBits === undefined || minCbmBits < 1 || minCbmBits > bitCount(cbmMask)) {
      return { problem: `${dir}/min_cbm_bits is missing or not between 1 and the ${bitCount(cbmMask)} bits of cbm_mask` };
    }
    // shareable_bits appeared in Linux 4.18; absent means none.
    const shareText = await fs.text(`${dir}/shareable_bits`);
    const shareableBits = shareText === undefined ? 0 : parseMask(shareText);
    if (shareableBits === undefined) return { problem: `${dir}/shareable_bits is not a hex mask (got ${JSON.stringify(shareText)})` };
    resources.push({ cbmMask, numClosids, minCbmBits, shareableBits });
  }
  const [first, second] = resources as [(typeof resources)[0], (typeof resources)[0] | undefined];
  if (second && second.cbmMask !== first.cbmMask) {
    return { problem: `${RESCTRL_DIR}/info/L3CODE/cbm_mask and L3DATA/cbm_mask differ` };
  }

  const schemata = await fs.text(`${RESCTRL_DIR}/schemata`);
  const line = schemata?.split('\n').map((l) => l.trim()).find((l) => l.startsWith(`${names[0]}:`));
  const domainIds = line?.slice(names[0]!.length + 1).split(';').map((part) => /^(\d+)=[0-9a-fA-F]+$/.exec(part.trim())?.[1]);
  if (!domainIds || domainIds.length === 0 || domainIds.some((id) => id === undefined)) {
    return { problem: `${RESCTRL_DIR}/schemata has no well-formed ${names[0]} line (got ${JSON.stringify(schemata)})` };
  }

  return {
    value: {
      cdp,
      cbmMask: first.cbmMask,
      numClosids: Math.min(...resources.map((r) => r.numClosids)),
      minCbmBits: Math.max(...resources.map((r) => r.minCbmBits)),
      shareableBits: resources.reduce((m, r) => (m | r.shareableBits) >>> 0, 0),
      domainIds: domainIds.map(Number),
      foreignGroups: await foreignGroups(fs),
    },
  };
}

/** Control groups in resctrl that ert did not make; each holds a CLOSID. */
async function foreignGroups(fs: HostFs): Promise<string[]> {
  const names = (await fs.list(RESCTRL_DIR)) ?? [];
  const groups: string[] = [];
  for (const name of names) {
    if (name === 'info' || name === 'mon_groups' || name === 'mon_data' || name.startsWith(GROUP_PREFIX)) continue;
    const isDir = await stat(fs.resolve(`${RESCTRL_DIR}/${name}`)).then((s) => s.isDirectory(), () => false);
    if (isDir) groups.push(name);
  }
  return groups;
}

/** The CPU list of a domain in the kernel's format, for the stats. */
export function domainCpus(domain: CacheDomain): string {
  return formatCpuList(domain.cpus);
}
