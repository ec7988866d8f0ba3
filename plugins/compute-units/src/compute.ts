/**
 * compute-units, compute side: CUSTOM_CU = CUs per core (by CPU model) x physical cores,
 * the original use case of Nova's extensible resource tracking.
 */
import { amountProblem, definePlugin, normalizeInventory, requestedAmount, type ClaimedInstance, type Discovery, type Inventory, type ResourceContext } from '@ert/plugin-api';
import { HostFs, describeFailure, readCpuInfo, readCpuTopology } from '@ert/sysfs';
import { CuError, CuErrorCodes } from './errors.js';
import { CU_CLASS, PLUGIN_NAME, extraSpecs, optionsSchema, statsSchema, type ComputeUnitsOptions, type ComputeUnitsStatsV1 } from './shared.js';

/** A model rule ready to test a model name. */
export interface CompiledRule {
  match: string;
  perCore: number;
  test(model: string): boolean;
}

/**
 * Compile `models` rules: `/regex/flags` as a regular expression, anything else as a
 * substring. Throws ERT_CU_INVALID_OPTION naming the rule whose regex does not compile.
 */
export function compileRules(plugin: string, rules: ComputeUnitsOptions['models']): CompiledRule[] {
  return rules.map((rule, index) => {
    const regex = /^\/(.+)\/([a-z]*)$/.exec(rule.match);
    if (!regex) return { ...rule, test: (model: string) => model.includes(rule.match) };
    try {
      const compiled = new RegExp(regex[1]!, regex[2]);
      return { ...rule, test: (model: string) => compiled.test(model) };
    } catch (err) {
      throw new CuError(
        CuErrorCodes.invalidOption,
        `plugin ${plugin}: option models[${index}].match "${rule.match}" is not a valid regular expression: ${(err as Error).message}`,
        { plugin, key: `models[${index}].match`, value: rule.match },
      );
    }
  });
}

type View = { available: true; inventory: Inventory; stats: ComputeUnitsStatsV1 } | { available: false; reason: string };

async function discoverView(ctx: ResourceContext<ComputeUnitsOptions>, rules: CompiledRule[]): Promise<View> {
  const fs = new HostFs(ctx.root);
  const [cpuinfo, topology] = await Promise.all([readCpuInfo(fs), readCpuTopology(fs)]);
  if (!cpuinfo.ok) return { available: false, reason: describeFailure(cpuinfo) };
  if (!topology.ok) return { available: false, reason: describeFailure(topology) };
  const model = cpuinfo.value[0]!.modelName ?? null;
  const rule = model === null ? undefined : rules.find((r) => r.test(model));
  const perCore = rule?.perCore ?? ctx.options.perCore;
  const cores = topology.value.cores;
  const total = perCore * cores;
  return {
    available: true,
    inventory: normalizeInventory({ total }),
    stats: { model, perCore, cores, total, matchedBy: rule?.match ?? null },
  };
}

function heldBy(instance: ClaimedInstance): number {
  if (instance.allocations.length === 0) return requestedAmount(instance.spec, CU_CLASS);
  return instance.allocations.filter((a) => a.resourceClass === CU_CLASS).reduce((sum, a) => sum + a.amount, 0);
}

export default definePlugin<ComputeUnitsOptions, ComputeUnitsStatsV1>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  resource(ctx) {
    const rules = compileRules(ctx.name, ctx.options.models);
    let view: View = { available: false, reason: 'the host has not been discovered yet' };
    const instances = new Map<string, number>();

    return {
      async discover(): Promise<Discovery> {
        view = await discoverView(ctx, rules);
        if (!view.available) {
          ctx.logger.warn({ reason: view.reason }, 'compute units unavailable');
          return { available: false, reason: view.reason };
        }
        return { available: true, host: { inventories: { [CU_CLASS]: { ...view.inventory } } } };
      },

      reset() {
        instances.clear();
      },

      test(request) {
        const units = requestedAmount(request.spec, CU_CLASS);
        if (units === 0) return undefined;
        if (!view.available) return `compute units are unavailable on this host: ${view.reason}`;
        // Everything in the view is held, a resize's old allocation included (until confirm or revert).
        let used = 0;
        for (const held of instances.values()) used += held;
        const problem = amountProblem(view.inventory, used, units);
        return problem ? `${CU_CLASS}: ${problem}` : undefined;
      },

      addInstance(instance) {
        instances.set(instance.uuid, heldBy(instance));
      },

      removeInstance(uuid) {
        instances.delete(uuid);
      },

      stats(): ComputeUnitsStatsV1 {
        if (!view.available) {
          throw new CuError(CuErrorCodes.unavailable, `plugin ${ctx.name} has no stats: ${view.reason}`, { plugin: ctx.name, reason: view.reason });
        }
        return view.stats;
      },
    };
  },
});
