/**
 * Scheduler entry of the pstate plugin: keeps each host's P-state capabilities from its
 * stats, filters hosts that cannot apply the requested governor, EPP or minimum frequency,
 * and prefers hosts with more frequency headroom above the requested minimum.
 */
import { definePlugin, summaryName, type ConsumerHooks, type FilterHooks, type SummaryBound, type WeigherHooks } from '@ert/plugin-api';
import {
  PLUGIN_NAME,
  asksForPstate,
  extraSpecs,
  headroomMhz,
  optionsSchema,
  pstateProblem,
  pstateRequestOf,
  statsSchema,
  type PstateCapabilities,
  type PstateOptions,
  type PstateRequest,
  type PstateStats,
} from './shared.js';

/** The pstate slot of a host state: what the host can do (P-states are not used up, so `placed` is not needed). */
export type PstateHostData = PstateCapabilities;

/** Keep only what filters and weighers read; a host without stats has no P-state control. */
export function consume(stats: PstateStats | undefined): PstateHostData {
  if (!stats) {
    return { available: false, reason: 'the host reports no pstate stats', intelPstate: null, control: false, governors: [], maxFreqMhz: null, epp: null };
  }
  const { available, intelPstate, control, governors, maxFreqMhz, epp } = stats;
  return { available, ...(stats.reason === undefined ? {} : { reason: stats.reason }), intelPstate, control, governors, maxFreqMhz, epp };
}

/** Governors whose summary is published on every host (0 where not offered), so the filter's bound can prune on them. */
const GOVERNORS = ['performance', 'powersave', 'ondemand', 'conservative', 'schedutil', 'userspace'];

/**
 * The pstate summaries, for the filter's bounds: `control` (1 when settings can be applied at
 * all), `governor.<name>` (1 when offered; the usual names on every host, 0 where not offered),
 * `maxFreqMhz` (-1 when unknown) and `epp` (1 when the host has EPP).
 */
export function summarize(data: PstateHostData): Record<string, number> {
  const control = data.available && data.control;
  const summaries: Record<string, number> = { control: control ? 1 : 0, maxFreqMhz: control && data.maxFreqMhz !== null ? data.maxFreqMhz : -1, epp: control && data.epp ? 1 : 0 };
  for (const governor of GOVERNORS) summaries[`governor.${governor}`] = 0;
  if (control) for (const governor of data.governors) summaries[`governor.${governor}`] = 1;
  return summaries;
}

/** What `pstateProblem` refuses, as bounds on the summaries. */
export function pstateBounds(request: PstateRequest, plugin: string): SummaryBound[] | undefined {
  if (!asksForPstate(request)) return undefined;
  return [
    { summary: summaryName(plugin, 'control'), atLeast: 1 },
    ...(request.governor !== undefined ? [{ summary: summaryName(plugin, `governor.${request.governor}`), atLeast: 1 }] : []),
    ...(request.minFreqMhz !== undefined ? [{ summary: summaryName(plugin, 'maxFreqMhz'), atLeast: request.minFreqMhz }] : []),
    ...(request.epp !== undefined ? [{ summary: summaryName(plugin, 'epp'), atLeast: 1 }] : []),
  ];
}

/** The pstate plugin's scheduler entry. The weigher applies to every request: it prefers faster hosts. */
export default definePlugin<PstateOptions, PstateStats, PstateHostData>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  consumer: (): ConsumerHooks<PstateStats, PstateHostData> => ({ reads: [statsSchema.version], consume, summarize }),
  filter: (ctx): FilterHooks => ({
    appliesTo: (spec) => asksForPstate(pstateRequestOf(spec)),
    filter: (host, spec) => pstateProblem(host.pluginData<PstateHostData>(ctx.name), pstateRequestOf(spec)),
    summaryBounds: (spec) => pstateBounds(pstateRequestOf(spec), ctx.name),
  }),
  weigher: (ctx): WeigherHooks => ({
    weigh: (host, spec) => headroomMhz(host.pluginData<PstateHostData>(ctx.name), pstateRequestOf(spec)),
  }),
});
