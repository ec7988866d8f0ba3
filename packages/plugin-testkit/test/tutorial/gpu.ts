import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { definePlugin, requestedAmount, type ExtraSpecKey } from '@ert/plugin-api';

export interface GpuOptions {
  vendors: string[];
}
export interface GpuStats {
  cards: Array<{ card: string; vendor: string }>;
}

const countKey: ExtraSpecKey<number> = {
  key: 'gpu:count',
  description: 'Whole GPUs the instance needs',
  schema: { type: 'integer', minimum: 1, maximum: 8 },
  applyResources(value, resources) {
    resources.CUSTOM_GPU = value;
  },
};

export default definePlugin<GpuOptions, GpuStats, { gpus: number }>({
  name: 'gpu',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: { vendors: { type: 'array', items: { type: 'string' }, default: ['0x10de'] } },
  },
  stats: {
    version: 1,
    schema: {
      type: 'object',
      additionalProperties: false,
      required: ['cards'],
      properties: {
        cards: {
          type: 'array',
          items: { type: 'object', required: ['card', 'vendor'], properties: { card: { type: 'string' }, vendor: { type: 'string' } } },
        },
      },
    },
  },
  extraSpecs: [countKey],

  // Compute side: CUSTOM_GPU = the cards under /sys/class/drm whose vendor is configured.
  resource(ctx) {
    let cards: GpuStats['cards'] = [];
    return {
      async discover() {
        const dir = join(ctx.root, 'sys/class/drm');
        const names = await readdir(dir).catch(() => undefined);
        cards = [];
        if (names === undefined) return { available: false, reason: `cannot read ${dir}` };
        for (const card of names.filter((n) => /^card\d+$/.test(n)).sort()) {
          const vendor = (await readFile(join(dir, card, 'device/vendor'), 'utf8').catch(() => '')).trim();
          if (ctx.options.vendors.includes(vendor)) cards.push({ card, vendor });
        }
        if (cards.length === 0) return { available: false, reason: `no GPU of ${ctx.options.vendors.join(', ')} under ${dir}` };
        return { available: true, host: { inventories: { CUSTOM_GPU: { total: cards.length } } } };
      },
      stats: () => ({ cards }),
    };
  },

  // Scheduler side: synchronous and pure; free GPUs come from the host state's usage.
  consumer: () => ({
    reads: [1],
    consume: (stats) => ({ gpus: stats?.cards.length ?? 0 }),
  }),
  filter: () => ({
    appliesTo: (spec) => requestedAmount(spec, 'CUSTOM_GPU') > 0,
    filter(host, spec) {
      const wanted = requestedAmount(spec, 'CUSTOM_GPU');
      const free = host.free('CUSTOM_GPU');
      return wanted > free ? `gpu: needs ${wanted}, ${free} free` : undefined;
    },
  }),
});
