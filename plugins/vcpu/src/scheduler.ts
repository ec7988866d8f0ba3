/**
 * vcpu, scheduler side: free VCPU/PCPU per host (kept current within a batch), a filter
 * that checks that a pinned instance's CPUs fit on one NUMA node (`oneNodeProblem`, as the
 * tracker pins them), and a weigher on free CPUs.
 */
import { definePlugin, requestedAmount, summaryName, type HostState, type Placement, type RequestSpec } from '@ert/plugin-api';
import { PLUGIN_NAME, dedicatedTakes, extraSpecs, oneNodeProblem, optionsSchema, pinnedBy, statsSchema, type VcpuOptions, type VcpuStatsRead } from './shared.js';

/** This plugin's slot of a host state. */
export interface VcpuHostData {
  freeVcpu: number;
  freePcpu: number;
  /**
   * Free dedicated CPUs per NUMA node (the stats' `freeDedicated`; the node's dedicated CPUs
   * in stats of older trackers), kept current by `placed`; null when the host reported no
   * NUMA nodes or no stats.
   */
  freeDedicatedByNode: number[] | null;
  /** The most of `freeDedicatedByNode` (what one pinned instance can still get); null as it is. */
  largestDedicatedNode: number | null;
}

function asksForCpus(spec: RequestSpec): boolean {
  return requestedAmount(spec, 'VCPU') > 0 || requestedAmount(spec, 'PCPU') > 0;
}

/** This plugin's data for a host; recomputed from the host's free counts when missing. */
function dataOf(host: HostState): VcpuHostData {
  return host.pluginData<VcpuHostData>(PLUGIN_NAME) ?? { freeVcpu: host.free('VCPU'), freePcpu: host.free('PCPU'), freeDedicatedByNode: null, largestDedicatedNode: null };
}

export default definePlugin<VcpuOptions, VcpuStatsRead, VcpuHostData>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,

  consumer() {
    return {
      reads: [1, 2],
      consume(stats, host) {
        const nodes = stats?.numaNodes ?? [];
        const byNode = nodes.length > 0 ? nodes.map((n) => n.freeDedicated ?? n.dedicatedCpus) : null;
        return { freeVcpu: host.free('VCPU'), freePcpu: host.free('PCPU'), freeDedicatedByNode: byNode, largestDedicatedNode: byNode && Math.max(...byNode) };
      },
      /** vcpu.freeVcpu, vcpu.freePcpu and (with NUMA stats) vcpu.largestDedicatedNode, which the filter's bounds and the weigher's score name. */
      summarize: (data) => ({
        freeVcpu: data.freeVcpu,
        freePcpu: data.freePcpu,
        ...(data.largestDedicatedNode === null ? {} : { largestDedicatedNode: data.largestDedicatedNode }),
      }),
      placed(data, placement: Placement) {
        let vcpu = 0;
        let pcpu = 0;
        for (const a of placement.allocations) {
          if (a.resourceClass === 'VCPU') vcpu += a.amount;
          else if (a.resourceClass === 'PCPU') pcpu += a.amount;
        }
        // The CPUs come from the nodes the tracker will pin them on (dedicatedTakes, as chooseCpus).
        const takes = pcpu > 0 && data.freeDedicatedByNode ? dedicatedTakes(data.freeDedicatedByNode, pcpu) : undefined;
        const byNode = takes ? data.freeDedicatedByNode!.map((free, node) => free - takes[node]!) : data.freeDedicatedByNode;
        return { freeVcpu: data.freeVcpu - vcpu, freePcpu: data.freePcpu - pcpu, freeDedicatedByNode: byNode, largestDedicatedNode: byNode && Math.max(...byNode) };
      },
    };
  },

  filter() {
    return {
      appliesTo: asksForCpus,
      filter(host, spec) {
        const data = dataOf(host);
        const vcpu = requestedAmount(spec, 'VCPU');
        const pcpu = requestedAmount(spec, 'PCPU');
        if (vcpu > data.freeVcpu) return `needs ${vcpu} VCPU, ${Math.max(data.freeVcpu, 0)} free`;
        if (pcpu > data.freePcpu) return `needs ${pcpu} PCPU, ${Math.max(data.freePcpu, 0)} free`;
        // A pinned instance without a NUMA topology of its own lives on one node (Nova), as the tracker pins it.
        if (pcpu === 0 || data.largestDedicatedNode === null) return undefined;
        const pinned = pinnedBy(spec);
        return pinned === undefined ? undefined : oneNodeProblem(pcpu, pinned, data.largestDedicatedNode);
      },
      /** What `filter` rejects below, read from the summaries (a host without this plugin's data has none: never pruned). */
      summaryBounds(spec) {
        const vcpu = requestedAmount(spec, 'VCPU');
        const pcpu = requestedAmount(spec, 'PCPU');
        return [
          ...(vcpu > 0 ? [{ summary: summaryName(PLUGIN_NAME, 'freeVcpu'), atLeast: vcpu }] : []),
          ...(pcpu > 0 ? [{ summary: summaryName(PLUGIN_NAME, 'freePcpu'), atLeast: pcpu }] : []),
          ...(pcpu > 0 && pinnedBy(spec) !== undefined ? [{ summary: summaryName(PLUGIN_NAME, 'largestDedicatedNode'), atLeast: pcpu }] : []),
        ];
      },
    };
  },

  weigher() {
    return {
      appliesTo: asksForCpus,
      /** Free PCPU for dedicated requests, free VCPU otherwise: multiplier > 0 spreads, < 0 packs. */
      weigh(host, spec) {
        const data = dataOf(host);
        return requestedAmount(spec, 'PCPU') > 0 ? data.freePcpu : data.freeVcpu;
      },
      summaryScore: (spec) => summaryName(PLUGIN_NAME, requestedAmount(spec, 'PCPU') > 0 ? 'freePcpu' : 'freeVcpu'),
    };
  },
});
