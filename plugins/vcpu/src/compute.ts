/**
 * vcpu, compute side: discovers logical CPUs, sockets, cores, threads and NUMA nodes and
 * publishes VCPU (shared pool, overcommitted) and PCPU (dedicated CPUs) on the host. An
 * instance with PCPU is pinned to free dedicated CPUs (`ClaimGrant.cpus`), all on one NUMA
 * node when its flavor pins it (Nova's rule: `pinnedBy`, `oneNodeProblem` in shared.ts).
 */
import {
  amountProblem,
  definePlugin,
  normalizeInventory,
  requestedAmount,
  type ClaimRequest,
  type ClaimedInstance,
  type Discovery,
  type Inventory,
  type ResourceContext,
} from '@ert/plugin-api';
import { HostFs, commonFlags, describeFailure, formatCpuList, parseCpuList, readCpuInfo, readCpuTopology, readNumaNodes } from '@ert/sysfs';
import { VcpuError, VcpuErrorCodes } from './errors.js';
import { DEDICATED_ISOLATED, PLUGIN_NAME, dedicatedTakes, extraSpecs, oneNodeProblem, optionsSchema, pinnedBy, statsSchema, type VcpuOptions, type VcpuStats } from './shared.js';
import { guestCpuFlags } from './cpu-models.js';
import { cpuTraits } from './traits.js';

const CLASSES = ['VCPU', 'PCPU'] as const;
type CpuClass = (typeof CLASSES)[number];
type Amounts = Record<CpuClass, number>;

/** What the last discovery found: the inventories tests are checked against, the dedicated
 *  CPUs by NUMA node (pinning prefers one node), and the stats (without the free CPUs). */
type View =
  | { available: true; inventories: Partial<Record<CpuClass, Inventory>>; dedicatedByNode: number[][]; stats: Omit<VcpuStats, 'freeDedicatedCpus'> }
  | { available: false; reason: string };

/** What the view holds of one instance: its VCPU/PCPU amounts and the dedicated CPUs it is pinned to. */
interface Held {
  amounts: Amounts;
  cpus: number[];
}

/**
 * `count` CPUs of `free`, as many from each node as `dedicatedTakes` says: all on one NUMA node
 * when one has enough, else from the nodes with the most free first (only a PCPU amount no
 * flavor pins, a Placement-style request's, gets there: `test` refuses a pinned one,
 * `oneNodeProblem`). Lowest CPU numbers first within a node. Undefined when fewer than
 * `count` are free.
 */
export function chooseCpus(dedicatedByNode: readonly number[][], free: ReadonlySet<number>, count: number): number[] | undefined {
  const nodes = dedicatedByNode.map((cpus) => cpus.filter((cpu) => free.has(cpu)).sort((a, b) => a - b));
  const takes = dedicatedTakes(nodes.map((cpus) => cpus.length), count);
  return takes && nodes.flatMap((cpus, node) => cpus.slice(0, takes[node])).sort((a, b) => a - b);
}

/** The kernel's isolated CPUs (`isolcpus=`), the `dedicatedCpus: isolated` source. */
const ISOLATED_CPUS = '/sys/devices/system/cpu/isolated';

function optionCpus(ctx: ResourceContext<VcpuOptions>, key: 'reservedCpus' | 'dedicatedCpus'): Set<number> {
  const value = ctx.options[key];
  try {
    return new Set(parseCpuList(value));
  } catch (err) {
    throw new VcpuError(VcpuErrorCodes.invalidOption, `plugin ${ctx.name}: option ${key} "${value}" is not a CPU list: ${(err as Error).message}`, { plugin: ctx.name, key, value });
  }
}

/** Amounts of VCPU and PCPU an instance holds: its allocations, or its spec before any were written. */
function heldBy(instance: ClaimedInstance): Amounts {
  if (instance.allocations.length === 0) return { VCPU: requestedAmount(instance.spec, 'VCPU'), PCPU: requestedAmount(instance.spec, 'PCPU') };
  const held: Amounts = { VCPU: 0, PCPU: 0 };
  for (const a of instance.allocations) if (a.resourceClass === 'VCPU' || a.resourceClass === 'PCPU') held[a.resourceClass] += a.amount;
  return held;
}

async function discoverView(ctx: ResourceContext<VcpuOptions>, reserved: Set<number>, dedicated: Set<number>): Promise<{ view: View; traits: string[] }> {
  const fs = new HostFs(ctx.root);
  const [cpuinfo, topology, numa] = await Promise.all([readCpuInfo(fs), readCpuTopology(fs), readNumaNodes(fs)]);
  const unavailable = (reason: string) => ({ view: { available: false as const, reason }, traits: [] });
  if (!topology.ok) return unavailable(describeFailure(topology));
  if (!cpuinfo.ok) return unavailable(describeFailure(cpuinfo));
  if (!numa.ok) return unavailable(describeFailure(numa));

  const online = new Set(topology.value.online);
  const offline = [...dedicated].filter((cpu) => !online.has(cpu));
  if (offline.length > 0) {
    return unavailable(`option dedicatedCpus names CPUs ${formatCpuList(offline)} that are not online (online: ${formatCpuList(online)})`);
  }
  const shared = topology.value.online.filter((cpu) => !dedicated.has(cpu));
  const reservedShared = shared.filter((cpu) => reserved.has(cpu));
  const inventories: Partial<Record<CpuClass, Inventory>> = {};
  if (shared.length > 0) inventories.VCPU = normalizeInventory({ total: shared.length, reserved: reservedShared.length, allocationRatio: ctx.options.allocationRatio });
  if (dedicated.size > 0) inventories.PCPU = normalizeInventory({ total: dedicated.size, allocationRatio: 1 });

  const first = cpuinfo.value[0]!;
  // Dedicated CPUs by NUMA node; those no node lists (no NUMA information) form one more group.
  const dedicatedByNode = numa.value.map((node) => node.cpus.filter((cpu) => dedicated.has(cpu)));
  const unlisted = [...dedicated].filter((cpu) => !numa.value.some((node) => node.cpus.includes(cpu)));
  if (unlisted.length > 0) dedicatedByNode.push(unlisted);
  const stats: Omit<VcpuStats, 'freeDedicatedCpus'> = {
    model: first.modelName ?? null,
    vendor: first.vendorId ?? null,
    family: first.family ?? null,
    modelNumber: first.model ?? null,
    cpus: online.size,
    sockets: topology.value.sockets,
    cores: topology.value.cores,
    threadsPerCore: topology.value.threadsPerCore,
    numaNodes: numa.value.map((node) => {
      const cpus = node.cpus.filter((cpu) => online.has(cpu));
      return { id: node.id, cpus: formatCpuList(cpus), dedicatedCpus: cpus.filter((cpu) => dedicated.has(cpu)).length };
    }),
    sharedCpus: formatCpuList(shared),
    dedicatedCpus: formatCpuList(dedicated),
    reservedCpus: formatCpuList(reservedShared),
  };
  // Nova's cpu_models: the guest CPU's features, not the host's, make the CPU traits (cpu-models.ts).
  let flags = commonFlags(cpuinfo.value);
  if (ctx.options.cpuModels.length > 0) {
    const guest = guestCpuFlags(ctx.options.cpuModels, ctx.options.cpuModelExtraFlags, flags);
    if (guest.missing.length > 0) {
      return unavailable(`option cpuModels: this host's CPU cannot run ${guest.missing.map((m) => `${m.model} (lacks ${m.flags.join(', ')})`).join('; ')}`);
    }
    flags = guest.flags;
  } else if (ctx.options.cpuModelExtraFlags.length > 0) {
    return unavailable('option cpuModelExtraFlags needs cpuModels (Nova: cpu_model_extra_flags apply to cpu_mode = custom)');
  }
  return { view: { available: true, inventories, dedicatedByNode, stats }, traits: cpuTraits(flags, topology.value.threadsPerCore) };
}

export default definePlugin<VcpuOptions, VcpuStats>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  // Nova's cpu_allocation_ratio / initial_cpu_allocation_ratio (docs/ownership.md): written
  // options are enforced every sync, defaults only when VCPU is created. PCPU is never overcommitted.
  inventoryFields: {
    fromOptions: { allocationRatio: { VCPU: ['allocationRatio'] }, reservedCpus: { VCPU: ['reserved'] } },
    fixed: { PCPU: ['allocationRatio', 'reserved'] },
  },
  resource(ctx) {
    const reserved = optionCpus(ctx, 'reservedCpus');
    // `isolated`: the CPUs the kernel isolates (isolcpus=), read at each discovery.
    const fromKernel = ctx.options.dedicatedCpus.trim() === DEDICATED_ISOLATED;
    let dedicated = fromKernel ? new Set<number>() : optionCpus(ctx, 'dedicatedCpus');
    let view: View = { available: false, reason: 'the host has not been discovered yet' };
    const instances = new Map<string, Held>();
    /** Dedicated CPUs no instance in the view is pinned to. */
    const freeDedicated = (): Set<number> => {
      const free = new Set(dedicated);
      for (const held of instances.values()) for (const cpu of held.cpus) free.delete(cpu);
      return free;
    };

    return {
      async discover(): Promise<Discovery> {
        if (fromKernel) {
          // A kernel without isolated CPUs has an empty file; a host profile may have none: no dedicated CPUs.
          const text = await new HostFs(ctx.root).text(ISOLATED_CPUS);
          try {
            dedicated = new Set(parseCpuList(text ?? ''));
          } catch (err) {
            view = { available: false, reason: `${ISOLATED_CPUS} (dedicatedCpus: isolated) is not a CPU list: ${(err as Error).message}` };
            ctx.logger.warn({ reason: view.reason }, 'vcpu unavailable');
            return { available: false, reason: view.reason };
          }
        }
        const found = await discoverView(ctx, reserved, dedicated);
        view = found.view;
        if (!view.available) {
          ctx.logger.warn({ reason: view.reason }, 'vcpu unavailable');
          return { available: false, reason: view.reason };
        }
        return { available: true, host: { inventories: { ...view.inventories }, traits: found.traits } };
      },

      reset() {
        instances.clear();
      },

      test(request: ClaimRequest) {
        const wanted: Amounts = { VCPU: requestedAmount(request.spec, 'VCPU'), PCPU: requestedAmount(request.spec, 'PCPU') };
        if (wanted.VCPU === 0 && wanted.PCPU === 0) return undefined;
        if (!view.available) return `vcpu is unavailable on this host: ${view.reason}`;
        const reasons: string[] = [];
        for (const cls of CLASSES) {
          if (wanted[cls] === 0) continue;
          const inventory = view.inventories[cls];
          if (!inventory) {
            reasons.push(`${cls}: the host has no ${cls === 'PCPU' ? 'dedicated CPUs (dedicatedCpus is empty)' : 'shared CPUs'}`);
            continue;
          }
          // Everything in the view is held, a resize's old allocation included (until confirm or revert).
          let used = 0;
          for (const held of instances.values()) used += held.amounts[cls];
          const problem = amountProblem(inventory, used, wanted[cls]);
          if (problem) reasons.push(`${cls}: ${problem}`);
        }
        if (reasons.length > 0) return reasons.join('; ');
        if (wanted.PCPU === 0) return undefined; // shared vCPUs float: no pinning
        // A resize's new CPUs come beside the old ones, which stay pinned until it is confirmed.
        const free = freeDedicated();
        const cpus = chooseCpus(view.dedicatedByNode, free, wanted.PCPU);
        if (!cpus) return `PCPU: needs ${wanted.PCPU} dedicated CPUs to pin, ${free.size} free (${formatCpuList(free) || 'none'})`;
        // A pinned instance's CPUs come from one NUMA node (Nova), the rule the scheduler's filter applies too.
        const pinned = pinnedBy(request.spec);
        if (pinned !== undefined) {
          const largest = Math.max(0, ...view.dedicatedByNode.map((node) => node.filter((cpu) => free.has(cpu)).length));
          const problem = oneNodeProblem(wanted.PCPU, pinned, largest, ' free');
          if (problem !== undefined) return `PCPU: ${problem}`;
        }
        return { cpus };
      },

      addInstance(instance: ClaimedInstance) {
        instances.set(instance.uuid, { amounts: heldBy(instance), cpus: (instance.cpus ?? []).filter((cpu) => dedicated.has(cpu)) });
      },

      removeInstance(uuid: string) {
        instances.delete(uuid);
      },

      stats(): VcpuStats {
        if (!view.available) {
          throw new VcpuError(VcpuErrorCodes.unavailable, `plugin ${ctx.name} has no stats: ${view.reason}`, { plugin: ctx.name, reason: view.reason });
        }
        const { stats, dedicatedByNode } = view;
        const free = freeDedicated();
        return {
          ...stats,
          // dedicatedByNode lists the stats' nodes in the same order (then CPUs no node lists).
          numaNodes: stats.numaNodes.map((node, i) => ({ ...node, freeDedicated: (dedicatedByNode[i] ?? []).filter((cpu) => free.has(cpu)).length })),
          freeDedicatedCpus: formatCpuList(free),
        };
      },
    };
  },
});
