/**
 * compute-units, scheduler side: free CUs per host (kept current within a batch), a filter
 * and a weigher on them.
 */
import { definePlugin, requestedAmount, summaryName, type HostState } from '@ert/plugin-api';
import { CU_CLASS, PLUGIN_NAME, extraSpecs, optionsSchema, statsSchema, type ComputeUnitsOptions, type ComputeUnitsStatsV1 } from './shared.js';

/** This plugin's slot of a host state. */
export interface ComputeUnitsHostData {
  freeCu: number;
}

function dataOf(host: HostState): ComputeUnitsHostData {
  return host.pluginData<ComputeUnitsHostData>(PLUGIN_NAME) ?? { freeCu: host.free(CU_CLASS) };
}

export default definePlugin<ComputeUnitsOptions, ComputeUnitsStatsV1, ComputeUnitsHostData>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,

  consumer() {
    return {
      reads: [1],
      consume: (_stats, host) => ({ freeCu: host.free(CU_CLASS) }),
      /** compute-units.freeCu: the filter's bound and the weigher's score. */
      summarize: (data) => ({ freeCu: data.freeCu }),
      placed(data, placement) {
        const units = placement.allocations.filter((a) => a.resourceClass === CU_CLASS).reduce((sum, a) => sum + a.amount, 0);
        return { ...data, freeCu: data.freeCu - units };
      },
    };
  },

  filter() {
    return {
      appliesTo: (spec) => requestedAmount(spec, CU_CLASS) > 0,
      filter(host, spec) {
        const units = requestedAmount(spec, CU_CLASS);
        const { freeCu } = dataOf(host);
        return units > freeCu ? `needs ${units} ${CU_CLASS}, ${Math.max(freeCu, 0)} free` : undefined;
      },
      summaryBounds: (spec) => [{ summary: summaryName(PLUGIN_NAME, 'freeCu'), atLeast: requestedAmount(spec, CU_CLASS) }],
    };
  },

  weigher() {
    return {
      /** Free CUs: multiplier > 0 spreads, < 0 packs. */
      weigh: (host) => dataOf(host).freeCu,
      summaryScore: () => summaryName(PLUGIN_NAME, 'freeCu'),
    };
  },
});
