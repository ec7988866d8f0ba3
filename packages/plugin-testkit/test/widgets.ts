/**
 * A small plugin that honours the contract (the kit's own tests break it one rule at a
 * time): CUSTOM_WIDGET from `<root>/etc/widgets/count`, a test against its view, stats
 * `{ total, used }`, and a consumer, filter and weigher.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import {
  ErtError,
  amountProblem,
  definePlugin,
  normalizeInventory,
  requestedAmount,
  type ConsumerHooks,
  type FilterHooks,
  type PluginContext,
  type PluginDefinition,
  type ResourceContext,
  type ResourceHooks,
  type WeigherHooks,
} from '@ert/plugin-api';

export const CLASS = 'CUSTOM_WIDGET';
export interface WidgetOptions {
  reserved: number;
}
export interface WidgetStats {
  total: number;
  used: number;
}

const definition = {
  name: 'widgets',
  optionsSchema: { type: 'object', additionalProperties: false, properties: { reserved: { type: 'integer', minimum: 0, default: 0 } } },
  stats: {
    version: 1,
    schema: {
      type: 'object',
      additionalProperties: false,
      required: ['total', 'used'],
      properties: { total: { type: 'integer', minimum: 1 }, used: { type: 'integer', minimum: 0 } },
    },
  },
  extraSpecs: [
    {
      key: 'widgets:count',
      description: 'widgets the instance needs',
      schema: { type: 'integer', minimum: 1 },
      applyResources(value: number, resources: Record<string, number>) {
        resources[CLASS] = value;
      },
    },
  ],
} satisfies Partial<PluginDefinition<WidgetOptions, WidgetStats, { free: number }>>;

/** The good resource hooks, for broken variants to override one at a time. */
export function widgetHooks(ctx: ResourceContext<WidgetOptions>): ResourceHooks<WidgetStats> & { held: Map<string, number> } {
  let total: number | undefined;
  let reason = 'not discovered yet';
  const held = new Map<string, number>();
  const used = () => [...held.values()].reduce((a, b) => a + b, 0);
  return {
    held,
    async discover() {
      const file = path.join(ctx.root, 'etc/widgets/count');
      const text = await readFile(file, 'utf8').catch(() => undefined);
      total = text !== undefined && /^\d+\s*$/.test(text) ? Number(text) : undefined;
      if (total === undefined || total < 1) {
        reason = `${file}: missing or not a positive count`;
        total = undefined;
        return { available: false, reason };
      }
      return { available: true, host: { inventories: { [CLASS]: { total, reserved: Math.min(ctx.options.reserved, total) } } } };
    },
    test(request) {
      const wanted = requestedAmount(request.spec, CLASS);
      if (wanted === 0) return undefined;
      if (total === undefined) return `widgets unavailable: ${reason}`;
      return amountProblem(normalizeInventory({ total, reserved: ctx.options.reserved }), used(), wanted);
    },
    addInstance(instance) {
      const amount = instance.allocations.filter((a) => a.resourceClass === CLASS).reduce((n, a) => n + a.amount, 0);
      if (amount > 0) held.set(instance.uuid, amount);
    },
    removeInstance(uuid) {
      held.delete(uuid);
    },
    reset() {
      held.clear();
    },
    stats() {
      if (total === undefined) throw new ErtError('ERT_WIDGETS_UNAVAILABLE', `widgets has no stats: ${reason}`);
      return { total, used: used() };
    },
  };
}

export function widgetConsumer(): ConsumerHooks<WidgetStats, { free: number }> {
  return {
    reads: [1],
    consume: (stats) => ({ free: stats === undefined ? 0 : stats.total - stats.used }),
    placed: (data, placement) => ({ free: data.free - placement.allocations.filter((a) => a.resourceClass === CLASS).reduce((n, a) => n + a.amount, 0) }),
  };
}

export function widgetFilter(): FilterHooks {
  return {
    appliesTo: (spec) => requestedAmount(spec, CLASS) > 0,
    filter(host, spec) {
      const free = host.pluginData<{ free: number }>('widgets')?.free ?? 0;
      const wanted = requestedAmount(spec, CLASS);
      return wanted > free ? `needs ${wanted} widgets, ${free} free` : undefined;
    },
  };
}

export function widgetWeigher(): WeigherHooks {
  return { weigh: (host) => host.pluginData<{ free: number }>('widgets')?.free ?? 0 };
}

type Parts = Partial<Pick<PluginDefinition<WidgetOptions, WidgetStats, { free: number }>, 'resource' | 'consumer' | 'filter' | 'weigher' | 'stats' | 'extraSpecs' | 'name'>>;

/** The widgets plugin, with any part replaced. */
export function widgets(parts: Parts = {}) {
  return definePlugin<WidgetOptions, WidgetStats, { free: number }>({
    ...definition,
    resource: (ctx) => widgetHooks(ctx),
    consumer: () => widgetConsumer(),
    filter: () => widgetFilter(),
    weigher: () => widgetWeigher(),
    ...parts,
  });
}

export type WidgetContext = PluginContext<WidgetOptions>;
