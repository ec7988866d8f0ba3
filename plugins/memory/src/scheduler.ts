/**
 * memory, scheduler side: free RAM and huge pages available per NUMA node (kept current
 * within a batch), a filter honouring `hw:mem_page_size`, and a weigher on free RAM.
 */
import { definePlugin, summaryName, type HostState, type RequestSpec, type SummaryBound } from '@ert/plugin-api';
import {
  PLUGIN_NAME,
  PAGE_SIZE_KEY,
  SMALL_PAGE_KB,
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

/** Huge page sizes whose summary is published on every host (0 where absent), so the filter's bound can prune on them. */
const COMMON_HUGE_KB = [2048, 1024 * 1024];

/**
 * The memory summaries: `freeMb` (the weigher's score); `largestHugeKb`, the most guest memory
 * one huge page pool of one node can still take (in KB, any huge size), and `hugeKb.<sizeKb>`,
 * the same for one size (2 MB and 1 GB on every host, 0 where absent; other sizes where present):
 * the filter's bounds for `hw:mem_page_size` large and sizes.
 */
export function summarize(data: MemoryHostData): Record<string, number> {
  const summaries: Record<string, number> = { freeMb: data.freeMb, largestHugeKb: 0 };
  for (const sizeKb of COMMON_HUGE_KB) summaries[`hugeKb.${sizeKb}`] = 0;
  for (const node of data.nodes) {
    for (const pool of node.pools) {
      if (pool.sizeKb <= SMALL_PAGE_KB) continue;
      const kb = pool.available * pool.sizeKb;
      summaries.largestHugeKb = Math.max(summaries.largestHugeKb!, kb);
      summaries[`hugeKb.${pool.sizeKb}`] = Math.max(summaries[`hugeKb.${pool.sizeKb}`] ?? 0, kb);
    }
  }
  return summaries;
}

/** What `choosePages` refuses for lack of pages, as bounds on the summaries (none for small or any). */
function pageBounds(spec: RequestSpec): SummaryBound[] | undefined {
  const request = pageSizeOf(spec);
  const memoryKb = guestMemoryMb(spec) * 1024;
  if (request?.kind === 'large') return [{ summary: summaryName(PLUGIN_NAME, 'largestHugeKb'), atLeast: memoryKb }];
  if (request?.kind === 'size') return [{ summary: summaryName(PLUGIN_NAME, `hugeKb.${request.sizeKb}`), atLeast: memoryKb }];
  return undefined;
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
      summarize,
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
      summaryBounds: pageBounds,
    };
  },

  weigher() {
    return {
      /** Free MEMORY_MB: multiplier > 0 spreads, < 0 packs. */
      weigh: (host) => dataOf(host).freeMb,
      summaryScore: () => summaryName(PLUGIN_NAME, 'freeMb'),
    };
  },
});
