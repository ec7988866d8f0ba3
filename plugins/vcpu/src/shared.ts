/**
 * What both entries of the vcpu plugin share: options, stats schema and extra-spec keys.
 * Imports no hardware code, so the scheduler entry never loads sysfs readers.
 */
import type { ExtraSpecKey, JsonSchema, RequestSpec, StatsSchema } from '@ert/plugin-api';
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
  /**
   * NUMA nodes with their online CPUs, how many of those are dedicated (PCPU), and how many of
   * those no instance is pinned to (`freeDedicated`: absent in stats of older trackers).
   */
  numaNodes: Array<{ id: number; cpus: string; dedicatedCpus: number; freeDedicated?: number }>;
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
          properties: {
            id: { type: 'integer', minimum: 0 },
            cpus: { type: 'string' },
            dedicatedCpus: { type: 'integer', minimum: 0 },
            freeDedicated: { type: 'integer', minimum: 0 },
          },
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
 * `hw:cpu_policy=shared|dedicated` (Nova). `dedicated` asks the flavor's vcpus as PCPU in
 * the unnumbered group instead of VCPU, so the instance gets whole host CPUs; `shared`
 * changes nothing. Beside an
 * explicit `resources[N]:VCPU` or `resources[N]:PCPU` above 0 the flavor is refused when it
 * is parsed (ERT_SPEC_CONFLICT), as Nova's nova/virt/hardware.py `numa_get_constraints`
 * refuses it ("use one or the other"), whichever side parses it and whether the policy is
 * the flavor's or the image's `hw_cpu_policy`.
 */
export const cpuPolicyKey: ExtraSpecKey<CpuPolicy> = {
  key: 'hw:cpu_policy',
  description: 'shared: vCPUs float on the shared pool (VCPU); dedicated: each vCPU gets a whole host CPU (PCPU)',
  schema: { type: 'string', enum: ['shared', 'dedicated'] },
  applyResources(value, resources, extraSpecs, flavor) {
    const amounts = cpuAmounts(extraSpecs);
    if (amounts.length > 0) {
      return `conflicts with ${amounts.map(([key, amount]) => `${key}=${amount}`).join(', ')}: Nova refuses an explicit resources:VCPU or resources:PCPU beside a CPU policy; use one or the other`;
    }
    if (value !== 'dedicated') return undefined;
    // Nova's _translate_pinning_policies: PCPU = the flavor's vcpus, VCPU none, even where
    // `resources:VCPU=0` or `resources:PCPU=0` kept the flavor's VCPU out of the group.
    delete resources.VCPU;
    if (flavor.vcpus > 0) resources.PCPU = flavor.vcpus;
    else delete resources.PCPU;
    return undefined;
  },
};

export const extraSpecs: readonly ExtraSpecKey<any>[] = [cpuPolicyKey];

/** An explicit VCPU or PCPU amount of any group: `resources:VCPU`, `resources1:PCPU`. */
const CPU_AMOUNT_KEY = /^resources[a-zA-Z0-9_-]{0,64}:(VCPU|PCPU)$/;

/** The explicit VCPU and PCPU amounts above 0 of `extraSpecs`, as sorted `key=value` pairs (Nova's `_get_vcpu_pcpu_resources` counts those). */
function cpuAmounts(extraSpecs: Readonly<Record<string, string>>): Array<[key: string, value: string]> {
  return Object.entries(extraSpecs)
    .filter(([key, value]) => CPU_AMOUNT_KEY.test(key) && Number(value.trim()) > 0)
    .map(([key, value]): [string, string] => [key, value.trim()])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The request's CPU policy as `key=value`, naming the image property when the image set it; undefined without one. */
function policySource(spec: RequestSpec): string | undefined {
  const policy = spec.pluginSpecs[cpuPolicyKey.key] as CpuPolicy | undefined;
  if (policy === undefined) return undefined;
  return cpuPolicyKey.key in (spec.flavor.extraSpecs ?? {}) ? `${cpuPolicyKey.key}=${policy}` : `image hw_cpu_policy=${policy}`;
}

/**
 * What makes the request's CPUs pinned in Nova's sense, as `key=value`: `hw:cpu_policy=dedicated`
 * (or the image's), or an explicit PCPU amount without a policy (Nova reads it as dedicated).
 * Undefined when nothing does (no PCPU, or a PCPU amount of a Placement-style request).
 */
export function pinnedBy(spec: RequestSpec): string | undefined {
  const policy = policySource(spec);
  if (policy !== undefined) return spec.pluginSpecs[cpuPolicyKey.key] === 'dedicated' ? policy : undefined;
  const pcpu = cpuAmounts(spec.flavor.extraSpecs ?? {}).find(([key]) => key.endsWith(':PCPU'));
  return pcpu === undefined ? undefined : `${pcpu[0]}=${pcpu[1]}`;
}

/**
 * Nova's NUMA rule for pinned CPUs: an instance whose CPUs are pinned (`pinnedBy`) and that asks
 * for no NUMA topology gets one NUMA node (nova/virt/hardware.py `numa_get_constraints`:
 * `nodes or 1`), so all its dedicated CPUs come from one host NUMA node. The reason `count`
 * CPUs cannot be pinned when the node with the most free has `largest` (`unit`: the tracker
 * says ` free`; the scheduler reads the free counts its stats and `placed` keep), or
 * undefined. Both entries ask it.
 */
export function oneNodeProblem(count: number, pinned: string, largest: number, unit = ''): string | undefined {
  return count > largest ? `needs ${count} dedicated CPUs on one NUMA node (${pinned}), the largest node has ${largest}${unit}` : undefined;
}

/**
 * How many of `count` dedicated CPUs come from each NUMA node, given each node's free ones:
 * all from one node when one has enough (the node with the fewest free that still fits, the
 * lowest-numbered among equals, so larger runs stay whole), else from the nodes with the most
 * free first. The tracker pins by it (`chooseCpus`) and the scheduler's `placed` follows it,
 * so both sides agree on what each node has left. Undefined when fewer than `count` are free.
 */
export function dedicatedTakes(freeByNode: readonly number[], count: number): number[] | undefined {
  if (freeByNode.reduce((sum, free) => sum + free, 0) < count) return undefined;
  const takes = freeByNode.map(() => 0);
  let fits = -1;
  for (const [node, free] of freeByNode.entries()) if (free >= count && (fits < 0 || free < freeByNode[fits]!)) fits = node;
  if (fits >= 0) {
    takes[fits] = count;
    return takes;
  }
  let left = count;
  const mostFreeFirst = [...freeByNode.keys()].sort((a, b) => freeByNode[b]! - freeByNode[a]!);
  for (const node of mostFreeFirst) {
    takes[node] = Math.min(freeByNode[node]!, left);
    left -= takes[node]!;
  }
  return takes;
}
