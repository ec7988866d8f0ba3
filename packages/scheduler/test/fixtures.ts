import { definePlugin, exclude, freeSummary } from '@ert/plugin-api';
import type { HostState } from '@ert/plugin-api';

/** Weigher: free MEMORY_MB over the tree (positive multiplier spreads, negative packs); its score is the built-in summary. */
export const freeRam = definePlugin({
  name: 'free-ram',
  weigher: () => ({ weigh: (host: HostState) => host.free('MEMORY_MB'), summaryScore: () => freeSummary('MEMORY_MB') }),
});

/** Weigher: free VCPU over the tree; its score is the built-in summary. */
export const freeVcpu = definePlugin({
  name: 'free-vcpu',
  weigher: () => ({ weigh: (host: HostState) => host.free('VCPU'), summaryScore: () => freeSummary('VCPU') }),
});

interface LevelData {
  level: number;
  placed: number;
}

/**
 * A plugin with stats (`{ level }`, schema version 2), a consumer that reads version 2 and counts
 * placements, a filter refusing hosts with `placed >= maxPerHost` (extra spec `level:max`), and a
 * weigher returning the level. `level < 0` makes the consumer exclude the host; a host named
 * `boom-*` makes it throw. It publishes summaries (`level.level`, `level.room`: placements
 * left) that its filter's bounds and its weigher's score name.
 */
export const level = definePlugin<{ maxPerHost: number }, { level: number }, LevelData>({
  name: 'level',
  optionsSchema: { type: 'object', properties: { maxPerHost: { type: 'integer', default: 1000 } }, additionalProperties: false },
  stats: { version: 2, schema: { type: 'object', properties: { level: { type: 'number' } }, required: ['level'] } },
  extraSpecs: [{ key: 'level:min', description: 'minimum level', schema: { type: 'integer', minimum: 0 } }],
  consumer: (ctx) => ({
    reads: [2],
    consume(stats, host) {
      if (host.name.startsWith('boom-')) throw new Error(`cannot read ${host.name}`);
      if (!stats) return exclude('no level stats');
      if (stats.level < 0) return exclude(`level ${stats.level} is negative`);
      return { level: stats.level, placed: 0 };
    },
    placed: (data) => ({ ...data, placed: data.placed + 1 }),
    summarize: (data) => ({ level: data.level, room: ctx.options.maxPerHost - data.placed }),
  }),
  filter: (ctx) => ({
    summaryBounds: (spec) => {
      const min = spec.pluginSpecs['level:min'] as number | undefined;
      return [{ summary: 'level.room', atLeast: 1 }, ...(min === undefined ? [] : [{ summary: 'level.level', atLeast: min }])];
    },
    filter(host, spec) {
      const data = host.pluginData<LevelData>('level');
      if (!data) return 'no level data';
      const min = spec.pluginSpecs['level:min'] as number | undefined;
      if (min !== undefined && data.level < min) return `level ${data.level} below ${min}`;
      if (data.placed >= ctx.options.maxPerHost) return `already ${data.placed} placed`;
      return undefined;
    },
  }),
  weigher: () => ({ weigh: (host) => host.pluginData<LevelData>('level')?.level ?? 0, summaryScore: () => 'level.level' }),
});

/** A filter that throws for hosts whose name contains `flaky`. */
export const flaky = definePlugin({
  name: 'flaky',
  filter: () => ({
    filter(host) {
      if (host.name.includes('flaky')) throw new Error('flaky filter exploded');
      return undefined;
    },
  }),
});
