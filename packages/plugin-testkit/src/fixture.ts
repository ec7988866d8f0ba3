/**
 * Fixture roots: temporary directories laid out like a real machine's `/proc` and `/sys`
 * (the files `@ert/sysfs` and the first-party plugins read, in the kernel's formats, each
 * ending with a newline), for `ResourceContext.root`. CPU numbering follows the host
 * profiles of `config/hosts`: with S sockets of C cores and T threads per core, logical
 * CPU = thread x (S x C) + socket x C + core; NUMA node s holds socket s's CPUs.
 */
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { formatCpuList } from '@ert/sysfs';

/** The processor every CPU reports in /proc/cpuinfo. */
export interface CpuModel {
  /** `vendor_id` (default `GenuineIntel`). */
  vendorId: string;
  /** `cpu family`, decimal (default 6). */
  family: number;
  /** `model`, decimal (default 85). */
  model: number;
  /** `model name` (default a test Xeon). */
  modelName: string;
  /** The `flags` words. */
  flags: string[];
}

/** A huge page pool size and how many pages each NUMA node holds. */
export interface HugePagesInit {
  /** Page size in KiB (2048, 1048576); names the pool's directories (`hugepages-<size>kB`). */
  sizeKb: number;
  /** `nr_hugepages` per node. */
  perNode: number;
  /** `free_hugepages` per node (default: all of them). */
  freePerNode?: number;
}

/** resctrl's L3 cache allocation (mounted at /sys/fs/resctrl). */
export interface ResctrlInit {
  /** `info/L3/cbm_mask`, hex (`7ff` for 11 ways); default: every way of the L3. */
  cbmMask?: string;
  /** `info/L3/num_closids`: classes of service (default 16). */
  numClosids?: number;
  /** `info/L3/min_cbm_bits`: fewest ways a mask may have (default 1). */
  minCbmBits?: number;
  /** `info/L3/shareable_bits`, hex: ways other agents may use too (default `0`). */
  shareableBits?: string;
}

/** One filesystem for the disk plugin's statfs stand-in (`.ert/statfs.json`). */
export interface FilesystemInit {
  /** Where it is mounted (an absolute machine path). */
  mountPoint: string;
  /** `major:minor` of the device (default `8:<n>`, n counting from 1). */
  device?: string;
  /** Filesystem type (default `xfs`). */
  type?: string;
  /** Size in GiB. */
  sizeGb: number;
  /** Free (and available) space in GiB (default: all of `sizeGb`). */
  freeGb?: number;
}

/** A machine to lay out. Every field has a default: a 1-socket, 2-core, 2-thread, 8 GB box. */
export interface MachineInit {
  /** CPU sockets (default 1); each is one NUMA node unless `numa` is false. */
  sockets?: number;
  /** Cores per socket (default 2). */
  coresPerSocket?: number;
  /** Hardware threads per core (default 2; 1 for no SMT). */
  threadsPerCore?: number;
  /** CPUs present but not online (left out of `online`, their topology not written). */
  offline?: number[];
  /** Total memory in MB (`MemTotal`), split evenly over the NUMA nodes. */
  memoryMb?: number;
  /** One NUMA node per socket (default), or no node directories at all (a kernel without NUMA). */
  numa?: boolean;
  /** Huge page pools (default none): counted in `/proc/meminfo`, per node and in `/sys/kernel/mm/hugepages`. */
  hugePages?: HugePagesInit[];
  /** Fields of the processor to change from the default model. */
  cpu?: Partial<CpuModel>;
  /** L1/L2 per core and an L3 per socket (default 8 MB 16-way, id = socket), or none. */
  cache?: { l3SizeKb?: number; l3Ways?: number } | false;
  /** resctrl with L3 CAT (default: not mounted). */
  resctrl?: ResctrlInit | false;
  /** Filesystems for the disk plugin (default: none, so a real statfs would be used). */
  filesystems?: FilesystemInit[];
  /** More files at machine paths (`/sys/class/drm/card0/device/vendor`: `0x10de`). A newline is added when missing. */
  files?: Record<string, string>;
}

/** A written fixture root. */
export interface HostTree {
  /** The directory standing for `/`. */
  readonly root: string;
  /** Where CPUs and NUMA nodes are, as written. */
  readonly layout: { cpus: number[]; online: number[]; nodes: Array<{ id: number; cpus: number[]; memoryMb: number }> };
  /** Write (or overwrite) a file at a machine path; a newline is added when missing. */
  write(machinePath: string, text: string): Promise<void>;
  /** Remove a file or directory at a machine path (to test a missing file). */
  remove(machinePath: string): Promise<void>;
  /** The real location of a machine path. */
  resolve(machinePath: string): string;
  /** Remove the whole tree. */
  cleanup(): Promise<void>;
}

const DEFAULT_CPU: CpuModel = {
  vendorId: 'GenuineIntel',
  family: 6,
  model: 85,
  modelName: 'Intel(R) Xeon(R) Test CPU @ 2.00GHz',
  flags: ['fpu', 'vme', 'pse', 'tsc', 'msr', 'pae', 'cx8', 'apic', 'sse', 'sse2', 'ht', 'ssse3', 'fma', 'sse4_1', 'sse4_2', 'aes', 'avx', 'f16c', 'avx2', 'bmi1', 'bmi2'],
};

/** The kernel's comma-separated hex CPU mask (`00000003`), 32 bits per word. */
function cpuMask(cpus: readonly number[]): string {
  const max = Math.max(0, ...cpus);
  const words = new Array<number>(Math.floor(max / 32) + 1).fill(0);
  for (const cpu of cpus) words[Math.floor(cpu / 32)]! |= 1 << cpu % 32;
  return words.reverse().map((w) => (w >>> 0).toString(16).padStart(8, '0')).join(',');
}

function hexMask(bits: number): string {
  return (bits >= 32 ? 0xffffffff : (1 << bits) - 1 >>> 0).toString(16);
}

/** A temporary directory for a fixture (removed by the caller). */
export async function tempRoot(prefix = 'ert-fixture-'): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), prefix));
}

/**
 * Write a machine's `/proc` and `/sys` into `dir` (a new temporary directory by default):
 * `/proc/cpuinfo`, `/proc/meminfo`, `/sys/devices/system/cpu/{online,possible,present}`,
 * `cpuN/topology/*`, `cpuN/cache/indexM/*`, `/sys/devices/system/node/nodeN/{cpulist,cpumap,
 * meminfo,hugepages/*}`, `/sys/kernel/mm/hugepages/*`, `/sys/fs/resctrl/*`,
 * `.ert/statfs.json`, and any `files`.
 */
export async function writeHostTree(init: MachineInit = {}, dir?: string): Promise<HostTree> {
  const root = dir ?? (await tempRoot());
  const resolve = (machinePath: string) => path.join(root, machinePath);
  const write = async (machinePath: string, text: string | number) => {
    const file = resolve(machinePath);
    await mkdir(path.dirname(file), { recursive: true });
    const body = String(text);
    await writeFile(file, body.endsWith('\n') ? body : `${body}\n`);
  };

  const sockets = init.sockets ?? 1;
  const cores = init.coresPerSocket ?? 2;
  const threads = init.threadsPerCore ?? 2;
  const cpuCount = sockets * cores * threads;
  const cpus = Array.from({ length: cpuCount }, (_, i) => i);
  const offline = new Set(init.offline ?? []);
  const online = cpus.filter((c) => !offline.has(c));
  const place = (cpu: number) => ({ thread: Math.floor(cpu / (sockets * cores)), socket: Math.floor((cpu % (sockets * cores)) / cores), core: cpu % cores });
  const siblingsOf = (cpu: number) => {
    const { socket, core } = place(cpu);
    return Array.from({ length: threads }, (_, t) => t * sockets * cores + socket * cores + core);
  };
  const socketCpus = (socket: number) => cpus.filter((c) => place(c).socket === socket);
  const model = { ...DEFAULT_CPU, ...init.cpu };

  const files: Array<[string, string | number]> = [];
  const cpuDir = '/sys/devices/system/cpu';
  files.push([`${cpuDir}/online`, formatCpuList(online)], [`${cpuDir}/possible`, formatCpuList(cpus)], [`${cpuDir}/present`, formatCpuList(cpus)]);
  if (offline.size > 0) files.push([`${cpuDir}/offline`, formatCpuList(offline)]);
  const cache = init.cache === false ? undefined : { l3SizeKb: init.cache?.l3SizeKb ?? 8192, l3Ways: init.cache?.l3Ways ?? 16 };
  for (const cpu of online) {
    const { socket, core } = place(cpu);
    const siblings = siblingsOf(cpu);
    const pkg = socketCpus(socket);
    const topo = `${cpuDir}/cpu${cpu}/topology`;
    files.push(
      [`${topo}/physical_package_id`, socket],
      [`${topo}/core_id`, core],
      [`${topo}/die_id`, 0],
      [`${topo}/thread_siblings_list`, formatCpuList(siblings)],
      [`${topo}/thread_siblings`, cpuMask(siblings)],
      [`${topo}/core_cpus_list`, formatCpuList(siblings)],
      [`${topo}/core_cpus`, cpuMask(siblings)],
      [`${topo}/core_siblings_list`, formatCpuList(pkg)],
      [`${topo}/core_siblings`, cpuMask(pkg)],
      [`${topo}/package_cpus_list`, formatCpuList(pkg)],
      [`${topo}/package_cpus`, cpuMask(pkg)],
    );
    if (cache) {
      const indexes: Array<{ level: number; type: string; sizeKb: number; ways: number; shared: number[]; id: number }> = [
        { level: 1, type: 'Data', sizeKb: 32, ways: 8, shared: siblings, id: socket * cores + core },
        { level: 1, type: 'Instruction', sizeKb: 32, ways: 8, shared: siblings, id: socket * cores + core },
        { level: 2, type: 'Unified', sizeKb: 1024, ways: 16, shared: siblings, id: socket * cores + core },
        { level: 3, type: 'Unified', sizeKb: cache.l3SizeKb, ways: cache.l3Ways, shared: pkg, id: socket },
      ];
      for (const [i, idx] of indexes.entries()) {
        const d = `${cpuDir}/cpu${cpu}/cache/index${i}`;
        files.push(
          [`${d}/level`, idx.level],
          [`${d}/type`, idx.type],
          [`${d}/size`, `${idx.sizeKb}K`],
          [`${d}/ways_of_associativity`, idx.ways],
          [`${d}/shared_cpu_list`, formatCpuList(idx.shared)],
          [`${d}/shared_cpu_map`, cpuMask(idx.shared)],
          [`${d}/id`, idx.id],
          [`${d}/coherency_line_size`, 64],
          [`${d}/number_of_sets`, Math.max(1, (idx.sizeKb * 1024) / (64 * idx.ways))],
          [`${d}/physical_line_partition`, 1],
        );
      }
    }
  }

  const cpuinfo = online.map((cpu) => {
    const { socket, core } = place(cpu);
    return [
      `processor\t: ${cpu}`,
      `vendor_id\t: ${model.vendorId}`,
      `cpu family\t: ${model.family}`,
      `model\t\t: ${model.model}`,
      `model name\t: ${model.modelName}`,
      `physical id\t: ${socket}`,
      `siblings\t: ${cores * threads}`,
      `core id\t\t: ${core}`,
      `cpu cores\t: ${cores}`,
      `flags\t\t: ${model.flags.join(' ')}`,
      '',
    ].join('\n');
  });
  files.push(['/proc/cpuinfo', cpuinfo.join('\n')]);

  // Memory: MemTotal kB split evenly between nodes; MemFree is 90% of what huge pages leave.
  const memoryKb = (init.memoryMb ?? 8192) * 1024;
  const numa = init.numa ?? true;
  const nodeCount = numa ? sockets : 1;
  const pools = init.hugePages ?? [];
  const nodePagesKb = pools.reduce((kb, p) => kb + p.sizeKb * p.perNode, 0);
  const nodes = Array.from({ length: nodeCount }, (_, id) => ({ id, cpus: numa ? socketCpus(id).filter((c) => !offline.has(c)) : online, memoryMb: Math.floor(memoryKb / nodeCount / 1024) }));
  const freeKb = (totalKb: number, pagesKb: number) => Math.floor((totalKb - pagesKb) * 0.9);
  const defaultPool = pools.find((p) => p.sizeKb === 2048) ?? pools[0];
  const meminfo: Array<[string, number, boolean]> = [
    ['MemTotal', memoryKb, true],
    ['MemFree', freeKb(memoryKb, nodePagesKb * nodeCount), true],
    ['MemAvailable', freeKb(memoryKb, nodePagesKb * nodeCount), true],
    ['HugePages_Total', (defaultPool?.perNode ?? 0) * nodeCount, false],
    ['HugePages_Free', (defaultPool?.freePerNode ?? defaultPool?.perNode ?? 0) * nodeCount, false],
    ['HugePages_Rsvd', 0, false],
    ['HugePages_Surp', 0, false],
    ['Hugepagesize', defaultPool?.sizeKb ?? 2048, true],
  ];
  files.push(['/proc/meminfo', meminfo.map(([k, v, kb]) => `${`${k}:`.padEnd(16)}${String(v).padStart(10)}${kb ? ' kB' : ''}`).join('\n')]);
  for (const pool of pools) {
    const d = `/sys/kernel/mm/hugepages/hugepages-${pool.sizeKb}kB`;
    files.push(
      [`${d}/nr_hugepages`, pool.perNode * nodeCount],
      [`${d}/free_hugepages`, (pool.freePerNode ?? pool.perNode) * nodeCount],
      [`${d}/surplus_hugepages`, 0],
      [`${d}/resv_hugepages`, 0],
      [`${d}/nr_overcommit_hugepages`, 0],
    );
  }
  if (numa) {
    const nodeDir = '/sys/devices/system/node';
    const ids = formatCpuList(nodes.map((n) => n.id));
    files.push([`${nodeDir}/online`, ids], [`${nodeDir}/possible`, ids], [`${nodeDir}/has_cpu`, ids], [`${nodeDir}/has_memory`, ids]);
    for (const node of nodes) {
      const d = `${nodeDir}/node${node.id}`;
      const totalKb = Math.floor(memoryKb / nodeCount);
      const free = freeKb(totalKb, nodePagesKb);
      files.push(
        [`${d}/cpulist`, formatCpuList(node.cpus)],
        [`${d}/cpumap`, cpuMask(node.cpus)],
        [`${d}/distance`, nodes.map((other) => (other.id === node.id ? 10 : 21)).join(' ')],
        [
          `${d}/meminfo`,
          [
            `Node ${node.id} MemTotal:       ${totalKb} kB`,
            `Node ${node.id} MemFree:        ${free} kB`,
            `Node ${node.id} MemUsed:        ${totalKb - free} kB`,
            `Node ${node.id} HugePages_Total:     ${defaultPool?.perNode ?? 0}`,
            `Node ${node.id} HugePages_Free:      ${defaultPool?.freePerNode ?? defaultPool?.perNode ?? 0}`,
            `Node ${node.id} HugePages_Surp:      0`,
          ].join('\n'),
        ],
      );
      for (const pool of pools) {
        const p = `${d}/hugepages/hugepages-${pool.sizeKb}kB`;
        files.push([`${p}/nr_hugepages`, pool.perNode], [`${p}/free_hugepages`, pool.freePerNode ?? pool.perNode], [`${p}/surplus_hugepages`, 0]);
      }
    }
  }

  if (init.resctrl) {
    const ways = cache?.l3Ways ?? 16;
    const mask = init.resctrl.cbmMask ?? hexMask(ways);
    const d = '/sys/fs/resctrl';
    files.push(
      [`${d}/info/L3/cbm_mask`, mask],
      [`${d}/info/L3/min_cbm_bits`, init.resctrl.minCbmBits ?? 1],
      [`${d}/info/L3/num_closids`, init.resctrl.numClosids ?? 16],
      [`${d}/info/L3/shareable_bits`, init.resctrl.shareableBits ?? '0'],
      [`${d}/info/last_cmd_status`, 'ok'],
      [`${d}/schemata`, `L3:${Array.from({ length: sockets }, (_, s) => `${s}=${mask}`).join(';')}`],
      [`${d}/mode`, 'shareable'],
      [`${d}/cpus_list`, formatCpuList(online)],
      [`${d}/cpus`, cpuMask(online)],
      [`${d}/tasks`, ''],
    );
  }

  if (init.filesystems !== undefined) {
    const blockSize = 4096;
    const blocksOf = (gb: number) => Math.round((gb * 1024 ** 3) / blockSize);
    const list = init.filesystems.map((f, i) => ({
      mountPoint: f.mountPoint,
      device: f.device ?? `8:${i + 1}`,
      type: f.type ?? 'xfs',
      blockSize,
      blocks: blocksOf(f.sizeGb),
      bfree: blocksOf(f.freeGb ?? f.sizeGb),
      bavail: blocksOf(f.freeGb ?? f.sizeGb),
    }));
    files.push(['/.ert/statfs.json', JSON.stringify({ filesystems: list }, null, 2)]);
  }

  for (const [machinePath, text] of Object.entries(init.files ?? {})) files.push([machinePath, text]);
  for (const [machinePath, text] of files) await write(machinePath, text);

  return {
    root,
    layout: { cpus, online, nodes },
    write,
    remove: (machinePath) => rm(resolve(machinePath), { recursive: true, force: true }),
    resolve,
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
}

/**
 * A writable copy of an existing root (a host profile such as `config/hosts/cloud-vm`), to
 * garble or remove files in; `skip` leaves out the parts whose path matches (the profiles'
 * `cache`, `cpufreq` or `resctrl` trees hold thousands of files a test may not need).
 */
export async function copyRoot(source: string, init: { skip?: RegExp } = {}): Promise<Omit<HostTree, 'layout'>> {
  const root = await tempRoot(`ert-${path.basename(source)}-`);
  await cp(source, root, { recursive: true, filter: (file) => init.skip === undefined || !init.skip.test(file) });
  const resolve = (machinePath: string) => path.join(root, machinePath);
  return {
    root,
    resolve,
    async write(machinePath, text) {
      await mkdir(path.dirname(resolve(machinePath)), { recursive: true });
      await writeFile(resolve(machinePath), text.endsWith('\n') ? text : `${text}\n`);
    },
    remove: (machinePath) => rm(resolve(machinePath), { recursive: true, force: true }),
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
}
