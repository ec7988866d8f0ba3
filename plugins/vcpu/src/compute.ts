/**
 * vcpu, compute side: discovers logical CPUs, sockets, cores, threads and NUMA nodes and
 * publishes VCPU (shared pool, overcommitted) and PCPU (dedicated CPUs) on the host.
 */
import {
  amountProblem,
  definePlugin,
  normalizeInventory,
  type ClaimRequest,
  type ClaimedInstance,
  type Discovery,
  type Inventory,
  type ResourceContext,
} from '@ert/plugin-api';
import { HostFs, commonFlags, describeFailure, formatCpuList, parseCpuList, readCpuInfo, readCpuTopology, readNumaNodes } from '@ert/sysfs';
import { VcpuError, VcpuErrorCodes } from './errors.js';
import { PLUGIN_NAME, extraSpecs, optionsSchema, requestedAmount, statsSchema, type VcpuOptions, type VcpuStatsV1 } from './shared.js';
import { cpuTraits } from './traits.js';

const CLASSES = ['VCPU', 'PCPU'] as const;
type CpuClass = (typeof CLASSES)[number];
type Amounts = Record<CpuClass, number>;

/** What the last discovery found: the inventories tests are checked against, and the stats. */
type View = { available: true; inventories: Partial<Record<CpuClass, Inventory>>; stats: VcpuStatsV1 } | { available: false; reason: string };

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
  const stats: VcpuStatsV1 = {
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
  return { view: { available: true, inventories, stats }, traits: cpuTraits(commonFlags(cpuinfo.value), topology.value.threadsPerCore) };
}

export default definePlugin<VcpuOptions, VcpuStatsV1>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  resource(ctx) {
    const reserved = optionCpus(ctx, 'reservedCpus');
    const dedicated = optionCpus(ctx, 'dedicatedCpus');
    let view: View = { available: false, reason: 'the host has not been discovered yet' };
    const instances = new Map<string, Amounts>();

    return {
      async discover(): Promise<Discovery> {
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
          let used = 0;
          for (const [uuid, held] of instances) if (!(request.kind === 'resize' && uuid === request.instance.uuid)) used += held[cls];
          const problem = amountProblem(inventory, used, wanted[cls]);
          if (problem) reasons.push(`${cls}: ${problem}`);
        }
        return reasons.length > 0 ? reasons.join('; ') : undefined;
      },

      addInstance(instance: ClaimedInstance) {
        instances.set(instance.uuid, heldBy(instance));
      },

      removeInstance(uuid: string) {
        instances.delete(uuid);
      },

      stats(): VcpuStatsV1 {
        if (!view.available) {
          throw new VcpuError(VcpuErrorCodes.unavailable, `plugin ${ctx.name} has no stats: ${view.reason}`, { plugin: ctx.name, reason: view.reason });
        }
        return view.stats;
      },
    };
  },
});
