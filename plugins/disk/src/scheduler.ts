/**
 * disk, scheduler side: what each filesystem of a host can take now (from the stats, kept
 * current within a batch) and a filter that keeps hosts whose disks cannot hold a request's
 * DISK_GB out, with the same numbers the compute side's `test` would refuse it with.
 */
import { definePlugin, requestedAmount, summaryName, type HostState, type Placement } from '@ert/plugin-api';
import { PLUGIN_NAME, RESOURCE_CLASS, optionsSchema, statsSchema, type DiskOptions, type DiskStatsV1 } from './shared.js';

/** This plugin's slot of a host state: per filesystem, GB a new instance can have now. */
export interface DiskHostData {
  filesystems: Array<{ provider: string | null; paths: string[]; availableGb: number }>;
}

/** The filesystem a placement's DISK_GB went to: its child provider, else the first one. */
function filesystemIndex(data: DiskHostData, host: HostState, providerUuid: string): number {
  const name = host.providers.find((p) => p.uuid === providerUuid)?.name;
  const index = data.filesystems.findIndex((fs) => fs.provider !== null && name === `${host.name}_${fs.provider}`);
  return index >= 0 ? index : 0;
}

export default definePlugin<DiskOptions, DiskStatsV1, DiskHostData>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,

  consumer() {
    return {
      reads: [1],
      consume(stats) {
        return { filesystems: (stats?.filesystems ?? []).map((fs) => ({ provider: fs.provider, paths: fs.paths, availableGb: fs.availableGb })) };
      },
      /** disk.largestAvailableGb, the filter's bound (none without filesystems: the filter then lets the host pass). */
      summarize: (data): Record<string, number> => (data.filesystems.length === 0 ? {} : { largestAvailableGb: Math.max(...data.filesystems.map((fs) => fs.availableGb)) }),
      placed(data, placement: Placement, host) {
        if (data.filesystems.length === 0) return data;
        const filesystems = data.filesystems.map((fs) => ({ ...fs }));
        for (const a of placement.allocations) {
          if (a.resourceClass !== RESOURCE_CLASS) continue;
          const fs = filesystems[filesystemIndex(data, host, a.providerUuid)]!;
          fs.availableGb = Math.max(0, fs.availableGb - a.amount);
        }
        return { filesystems };
      },
    };
  },

  filter() {
    return {
      appliesTo: (spec) => requestedAmount(spec, RESOURCE_CLASS) > 0,
      filter(host, spec) {
        const data = host.pluginData<DiskHostData>(PLUGIN_NAME);
        // No stats: the plugin is unavailable there and reports no DISK_GB; the resources
        // filter judges whatever DISK_GB the host has (a sharing provider's, say).
        if (data === undefined || data.filesystems.length === 0) return undefined;
        const amount = requestedAmount(spec, RESOURCE_CLASS);
        if (data.filesystems.some((fs) => fs.availableGb >= amount)) return undefined;
        return `disk: needs ${amount} GB, ${data.filesystems.map((fs) => `${fs.paths.join(', ')}: ${fs.availableGb} GB free now`).join('; ')}`;
      },
      summaryBounds: (spec) => [{ summary: summaryName(PLUGIN_NAME, 'largestAvailableGb'), atLeast: requestedAmount(spec, RESOURCE_CLASS) }],
    };
  },
});
