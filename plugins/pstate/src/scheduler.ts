/**
 * Scheduler entry of the pstate plugin: keeps each host's P-state capabilities from its
 * stats, filters hosts that cannot apply the requested governor, EPP or minimum frequency,
 * and prefers hosts with more frequency headroom above the requested minimum.
 */
import { definePlugin, type ConsumerHooks, type FilterHooks, type WeigherHooks } from '@ert/plugin-api';
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

/** The pstate plugin's scheduler entry. The weigher applies to every request: it prefers faster hosts. */
export default definePlugin<PstateOptions, PstateStats, PstateHostData>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  consumer: (): ConsumerHooks<PstateStats, PstateHostData> => ({ reads: [statsSchema.version], consume }),
  filter: (ctx): FilterHooks => ({
    appliesTo: (spec) => asksForPstate(pstateRequestOf(spec)),
    filter: (host, spec) => pstateProblem(host.pluginData<PstateHostData>(ctx.name), pstateRequestOf(spec)),
  }),
  weigher: (ctx): WeigherHooks => ({
    weigh: (host, spec) => headroomMhz(host.pluginData<PstateHostData>(ctx.name), pstateRequestOf(spec)),
  }),
});
