/**
 * memory, scheduler side: free RAM and huge pages available per NUMA node (kept current
 * within a batch), a filter honouring `hw:mem_page_size`, and a weigher on free RAM.
 */
import { definePlugin, type HostState } from '@ert/plugin-api';
import {
  PLUGIN_NAME,
  PAGE_SIZE_KEY,
  availablePages,
  choosePages,
  extraSpecs,
  guestMemoryMb,
  optionsSchema,
  pageSizeOf,
  statsSchema,
  withoutPages,
  type MemoryOptions,
  type MemoryStatsV1,
  type PageNode,
} from './shared.js';

/** This plugin's slot of a host state. */
export interface MemoryHostData {
  freeMb: number;
  /** Huge pages an instance can still take, per node and size; empty without stats. */
  nodes: PageNode[];
}

function dataOf(host: HostState): MemoryHostData {
  return host.pluginData<MemoryHostData>(PLUGIN_NAME) ?? { freeMb: host.free('MEMORY_MB'), nodes: [] };
}

export default definePlugin<MemoryOptions, MemoryStatsV1, MemoryHostData>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,

  consumer() {
    return {
      reads: [1],
      consume(stats, host) {
        return {
          freeMb: host.free('MEMORY_MB'),
          nodes: (stats?.numaNodes ?? []).map((n) => ({ id: n.id, pools: n.hugePages.map((p) => ({ sizeKb: p.sizeKb, available: availablePages(p) })) })),
        };
      },
      placed(data, placement) {
        const memoryMb = placement.allocations.filter((a) => a.resourceClass === 'MEMORY_MB').reduce((sum, a) => sum + a.amount, 0);
        const choice = choosePages(data.nodes, pageSizeOf(placement.spec), guestMemoryMb(placement.spec));
        return {
          freeMb: data.freeMb - memoryMb,
          nodes: choice !== null && typeof choice === 'object' ? withoutPages(data.nodes, choice) : data.nodes,
        };
      },
    };
  },

  filter() {
    return {
      appliesTo: (spec) => PAGE_SIZE_KEY in spec.pluginSpecs,
      filter(host, spec) {
        const choice = choosePages(dataOf(host).nodes, pageSizeOf(spec), guestMemoryMb(spec));
        return typeof choice === 'string' ? choice : undefined;
      },
    };
  },

  weigher() {
    return {
      /** Free MEMORY_MB: multiplier > 0 spreads, < 0 packs. */
      weigh: (host) => dataOf(host).freeMb,
    };
  },
});
