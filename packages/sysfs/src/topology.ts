import type { HostFs } from './fs.js';
import { found, unreadable, type Reading } from './reading.js';

export const CPU_DIR = '/sys/devices/system/cpu';
export const CPU_ONLINE_PATH = `${CPU_DIR}/online`;

/** Where one logical CPU sits: its socket, its core, and the CPUs sharing the core. */
export interface CpuPlacement {
  cpu: number;
  /** `topology/physical_package_id`: the socket. */
  packageId: number;
  /** `topology/core_id`: unique within the package only. */
  coreId: number;
  /** `topology/thread_siblings_list`: hardware threads of this core, including `cpu`. */
  threadSiblings: number[];
  /** `topology/core_cpus_list` (kernels >= 5.7); undefined on older kernels. */
  coreCpus?: number[];
}

/** The online CPUs of a host and how they group into sockets and cores. */
export interface CpuTopology {
  /** Online CPU numbers, ascending. */
  online: number[];
  /** One entry per online CPU, in `online` order. */
  cpus: CpuPlacement[];
  /** Distinct packages. */
  sockets: number;
  /** Distinct physical cores (package, core id) over all sockets. */
  cores: number;
  /** Hardware threads per core (the largest sibling group; 1 without SMT). */
  threadsPerCore: number;
}

/**
 * Read the online CPUs and each one's topology directory. Fails naming the first file
 * that is missing or malformed (`online`, `physical_package_id`, `core_id`,
 * `thread_siblings_list`); `core_cpus_list` is optional.
 */
export async function readCpuTopology(fs: HostFs): Promise<Reading<CpuTopology>> {
  const online = await fs.cpuList(CPU_ONLINE_PATH);
  if (online === undefined) return unreadable(CPU_ONLINE_PATH, 'missing, unreadable or not a CPU list');
  if (online.length === 0) return unreadable(CPU_ONLINE_PATH, 'lists no CPUs');
  const cpus: CpuPlacement[] = [];
  for (const cpu of online) {
    const dir = `${CPU_DIR}/cpu${cpu}/topology`;
    const packageId = await fs.int(`${dir}/physical_package_id`);
    if (packageId === undefined) return unreadable(`${dir}/physical_package_id`, 'missing, unreadable or not an integer');
    const coreId = await fs.int(`${dir}/core_id`);
    if (coreId === undefined) return unreadable(`${dir}/core_id`, 'missing, unreadable or not an integer');
    const threadSiblings = await fs.cpuList(`${dir}/thread_siblings_list`);
    if (threadSiblings === undefined || !threadSiblings.includes(cpu)) {
      return unreadable(`${dir}/thread_siblings_list`, `missing, unreadable or not a CPU list containing ${cpu}`);
    }
    const coreCpus = await fs.cpuList(`${dir}/core_cpus_list`);
    cpus.push({ cpu, packageId, coreId, threadSiblings, ...(coreCpus === undefined ? {} : { coreCpus }) });
  }
  return found(summarizeTopology(online, cpus));
}

/** Count sockets, cores and threads per core from per-CPU placements. */
export function summarizeTopology(online: number[], cpus: CpuPlacement[]): CpuTopology {
  const sockets = new Set(cpus.map((c) => c.packageId)).size;
  const cores = new Set(cpus.map((c) => `${c.packageId}:${c.coreId}`)).size;
  const threadsPerCore = Math.max(1, ...cpus.map((c) => (c.coreCpus ?? c.threadSiblings).length));
  return { online, cpus, sockets, cores, threadsPerCore };
}
