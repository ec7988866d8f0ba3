/**
 * Scheduler entry of the llc plugin: reads the per-domain free-way bitmaps and free
 * CLOSIDs from the stats, filters hosts without a contiguous run for the request, and
 * prefers hosts that keep the longest contiguous free run.
 */
import {
  definePlugin,
  summaryName,
  type ConsumerHooks,
  type FilterHooks,
  type HostState,
  type Placement,
  type RequestSpec,
  type WeigherHooks,
} from '@ert/plugin-api';
import { LLC_WAYS, PLUGIN_NAME, domainOfProvider, extraSpecs, optionsSchema, requestedWays, statsSchema, type LlcOptions, type LlcStats } from './shared.js';
import { chooseWays, largestRun, parseMask, type WayView } from './ways.js';

/** The llc slot of a host state. */
export interface LlcHostData extends WayView {
  available: boolean;
  /** Why the host offers no cache ways (when `available` is false). */
  reason?: string;
}

/** Build the host data from stats v1. A host without llc stats offers no cache ways. */
export function consume(stats: LlcStats | undefined): LlcHostData {
  if (!stats) return { available: false, reason: 'the host reports no llc stats', minCbmBits: 1, freeClosids: 0, domains: [] };
  if (!stats.available || !stats.resctrl) {
    return { available: false, reason: stats.reason ?? 'no cache allocation', minCbmBits: 1, freeClosids: 0, domains: [] };
  }
  return {
    available: true,
    minCbmBits: stats.resctrl.minCbmBits,
    freeClosids: stats.resctrl.freeClosids,
    domains: stats.domains.map((d) => ({ id: d.id, free: parseMask(d.freeMask) ?? 0 })),
  };
}

/** Why the host cannot take the request's ways, or undefined when it can (or none are asked). */
export function llcProblem(data: LlcHostData | undefined, spec: RequestSpec): string | undefined {
  const ways = requestedWays(spec);
  if (typeof ways === 'string') return ways;
  if (ways === 0) return undefined;
  if (!data || !data.available) return `no cache ways on this host: ${data?.reason ?? 'no llc data'}`;
  const choice = chooseWays(data, ways);
  return typeof choice === 'string' ? choice : undefined;
}

/**
 * The host data once the scheduler placed an instance: its ways are taken where the
 * compute side will take them (best fit on the domain its CUSTOM_LLC_WAYS went to, or on
 * any domain when the allocation names none) and one CLOSID is used.
 */
export function placed(data: LlcHostData, placement: Placement, host: HostState): LlcHostData {
  const ways = requestedWays(placement.spec);
  if (!data.available || typeof ways === 'string' || ways === 0) return data;
  const allocation = placement.allocations.find((a) => a.resourceClass === LLC_WAYS);
  const provider = allocation && host.providers.find((p) => p.uuid === allocation.providerUuid);
  const domain = provider ? domainOfProvider(provider.name) : undefined;
  const view = domain === undefined ? data : { ...data, domains: data.domains.filter((d) => d.id === domain) };
  const choice = chooseWays(view, ways);
  if (typeof choice === 'string') return { ...data, freeClosids: Math.max(data.freeClosids - 1, 0) };
  return {
    ...data,
    freeClosids: data.freeClosids - 1,
    domains: data.domains.map((d) => (d.id === choice.domain ? { id: d.id, free: (d.free & ~choice.mask) >>> 0 } : d)),
  };
}

/** Weight: the host's longest contiguous free run once the request is placed (best fit). */
export function weigh(data: LlcHostData | undefined, spec: RequestSpec): number {
  if (!data || !data.available) return 0;
  const ways = requestedWays(spec);
  if (typeof ways === 'string' || ways === 0) return data.domains.reduce((m, d) => Math.max(m, largestRun(d.free)), 0);
  const choice = chooseWays(data, ways);
  return typeof choice === 'string' ? 0 : choice.largestRunAfter;
}

/**
 * The llc summaries: `largestRun` (longest contiguous free run over the domains), `freeClosids`,
 * and `after.<n>` for n = 1 .. largestRun: what `weigh` gives a request of n ways (the
 * weigher's score; larger requests fail the filter's bound on largestRun).
 */
export function summarize(data: LlcHostData): Record<string, number> {
  if (!data.available) return { largestRun: 0, freeClosids: 0 };
  const run = data.domains.reduce((m, d) => Math.max(m, largestRun(d.free)), 0);
  const summaries: Record<string, number> = { largestRun: run, freeClosids: data.freeClosids };
  for (let ways = 1; ways <= run; ways++) {
    const choice = chooseWays(data, ways);
    summaries[`after.${ways}`] = typeof choice === 'string' ? 0 : choice.largestRunAfter;
  }
  return summaries;
}

function asksForWays(spec: RequestSpec): boolean {
  const ways = requestedWays(spec);
  return typeof ways === 'string' || ways > 0;
}

/** The llc plugin's scheduler entry. */
export default definePlugin<LlcOptions, LlcStats, LlcHostData>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  consumer: (): ConsumerHooks<LlcStats, LlcHostData> => ({ reads: [statsSchema.version], consume, placed, summarize }),
  filter: (ctx): FilterHooks => ({
    appliesTo: asksForWays,
    filter: (host, spec) => llcProblem(host.pluginData<LlcHostData>(ctx.name), spec),
    // A host without a free CLOSID or a run of the request's ways is one llcProblem rejects.
    summaryBounds: (spec) => {
      const ways = requestedWays(spec);
      return typeof ways === 'number' && ways > 0
        ? [
            { summary: summaryName(ctx.name, 'largestRun'), atLeast: ways },
            { summary: summaryName(ctx.name, 'freeClosids'), atLeast: 1 },
          ]
        : undefined;
    },
  }),
  weigher: (ctx): WeigherHooks => ({
    appliesTo: asksForWays,
    weigh: (host, spec) => weigh(host.pluginData<LlcHostData>(ctx.name), spec),
    summaryScore: (spec) => {
      const ways = requestedWays(spec);
      return typeof ways === 'number' && ways > 0 ? summaryName(ctx.name, `after.${ways}`) : undefined;
    },
  }),
});
