/**
 * What both entries of the vcpu plugin share: options, stats schema and extra-spec keys.
 * Imports no hardware code, so the scheduler entry never loads sysfs readers.
 */
import type { ExtraSpecKey, JsonSchema, StatsSchema } from '@ert/plugin-api';
import { CPU_MODELS } from './cpu-models.js';

export const PLUGIN_NAME = 'vcpu';

export interface VcpuOptions {
  /** VCPU allocation ratio (overcommit), default 4.0. */
  allocationRatio: number;
  /** CPUs kept for the host, kernel list format (`0-1,40-41`); counted as VCPU `reserved`. */
  reservedCpus: string;
  /** CPUs handed out whole as PCPU (ratio 1); they leave the VCPU pool. */
  dedicatedCpus: string;
  /**
   * Nova's `[libvirt] cpu_models` (with `cpu_mode = custom`): the guest CPU models of this host.
   * When set, the CPU-feature traits reported are the models' (and `cpuModelExtraFlags`'), not
   * the host's: hosts of different generations configured alike report the same traits.
   */
  cpuModels: string[];
  /** Nova's `cpu_model_extra_flags`: cpuinfo flags added to the models' (`avx512_vnni`). Needs `cpuModels`. */
  cpuModelExtraFlags: string[];
}

/** `dedicatedCpus: isolated`: the dedicated CPUs are the kernel's isolated CPUs. */
export const DEDICATED_ISOLATED = 'isolated';

const CPU_LIST_PATTERN = '^\\s*(\\d+(-\\d+)?(\\s*,\\s*\\d+(-\\d+)?)*)?\\s*$';

export const optionsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    allocationRatio: { type: 'number', exclusiveMinimum: 0, default: 4.0 },
    reservedCpus: { type: 'string', pattern: CPU_LIST_PATTERN, default: '' },
    /** A CPU list, or `isolated`: the CPUs the kernel isolates (`/sys/devices/system/cpu/isolated`, from `isolcpus=`), as Nova's `cpu_dedicated_set` is usually set. */
    dedicatedCpus: { type: 'string', pattern: `^\\s*${DEDICATED_ISOLATED}\\s*$|${CPU_LIST_PATTERN}`, default: '' },
    /** Guest CPU models (Nova's cpu_models): the CPU-feature traits become theirs (cpu-models.ts). */
    cpuModels: { type: 'array', items: { type: 'string', enum: Object.keys(CPU_MODELS) }, uniqueItems: true, default: [] },
    /** cpuinfo flags added to the models' (Nova's cpu_model_extra_flags). */
    cpuModelExtraFlags: { type: 'array', items: { type: 'string', pattern: '^[a-z0-9_]+$' }, uniqueItems: true, default: [] },
  },
};

/**
 * Stats v2: the host's CPU topology as discovered, and the dedicated CPUs no instance is
 * pinned to. v1 was the same without `freeDedicatedCpus`.
 */
export interface VcpuStats {
  /** cpuinfo `model name` of processor 0 (null when cpuinfo has none, e.g. some ARM). */
  model: string | null;
  vendor: string | null;
  family: number | null;
  modelNumber: number | null;
  /** Online logical CPUs. */
  cpus: number;
  sockets: number;
  /** Physical cores over all sockets. */
  cores: number;
  threadsPerCore: number;
  /** NUMA nodes with their online CPUs and how many of those are dedicated (PCPU). */
  numaNodes: Array<{ id: number; cpus: string; dedicatedCpus: number }>;
  /** CPU lists (kernel format) of the VCPU pool, the PCPU pool and the host-reserved CPUs. */
  sharedCpus: string;
  dedicatedCpus: string;
  reservedCpus: string;
  /** Dedicated CPUs (kernel list format) no instance is pinned to. */
  freeDedicatedCpus: string;
}

/** What the scheduler side reads: v1 stats lack `freeDedicatedCpus`. */
export type VcpuStatsRead = Omit<VcpuStats, 'freeDedicatedCpus'> & { freeDedicatedCpus?: string };

export const statsSchema: StatsSchema = {
  version: 2,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['model', 'vendor', 'family', 'modelNumber', 'cpus', 'sockets', 'cores', 'threadsPerCore', 'numaNodes', 'sharedCpus', 'dedicatedCpus', 'reservedCpus', 'freeDedicatedCpus'],
    properties: {
      model: { type: ['string', 'null'] },
      vendor: { type: ['string', 'null'] },
      family: { type: ['integer', 'null'] },
      modelNumber: { type: ['integer', 'null'] },
      cpus: { type: 'integer', minimum: 1 },
      sockets: { type: 'integer', minimum: 1 },
      cores: { type: 'integer', minimum: 1 },
      threadsPerCore: { type: 'integer', minimum: 1 },
      numaNodes: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['id', 'cpus', 'dedicatedCpus'],
          properties: { id: { type: 'integer', minimum: 0 }, cpus: { type: 'string' }, dedicatedCpus: { type: 'integer', minimum: 0 } },
        },
      },
      sharedCpus: { type: 'string' },
      dedicatedCpus: { type: 'string' },
      reservedCpus: { type: 'string' },
      freeDedicatedCpus: { type: 'string' },
    },
  },
};

export type CpuPolicy = 'shared' | 'dedicated';

/**
 * `hw:cpu_policy=shared|dedicated` (Nova). `dedicated` moves the unnumbered group's VCPU
 * amount to PCPU, so the instance gets whole host CPUs; `shared` changes nothing.
 */
export const cpuPolicyKey: ExtraSpecKey<CpuPolicy> = {
  key: 'hw:cpu_policy',
  description: 'shared: vCPUs float on the shared pool (VCPU); dedicated: each vCPU gets a whole host CPU (PCPU)',
  schema: { type: 'string', enum: ['shared', 'dedicated'] },
  applyResources(value, resources) {
    if (value !== 'dedicated') return;
    const vcpus = resources.VCPU ?? 0;
    delete resources.VCPU;
    if (vcpus > 0) resources.PCPU = (resources.PCPU ?? 0) + vcpus;
  },
};

export const extraSpecs: readonly ExtraSpecKey<any>[] = [cpuPolicyKey];
