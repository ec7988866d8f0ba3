import { normalizeInventory, type InventoryInput, type RequestGroup, type RequestSpec } from '@ert/plugin-api';
import type { FitProvider } from '@ert/placement';

export interface ProviderInput {
  parent?: string;
  inv?: Record<string, number | InventoryInput>;
  used?: Record<string, number>;
  traits?: string[];
  aggs?: string[];
}

/** A provider named `name` with uuid `uuid-<name>`; inventories given as a total or an InventoryInput. */
export function provider(name: string, input: ProviderInput = {}): FitProvider {
  const inventories = Object.fromEntries(
    Object.entries(input.inv ?? {}).map(([rc, v]) => [rc, normalizeInventory(typeof v === 'number' ? { total: v } : v)]),
  );
  return {
    uuid: `uuid-${name}`,
    name,
    parentUuid: input.parent === undefined ? undefined : `uuid-${input.parent}`,
    inventories,
    usages: input.used ?? {},
    traits: new Set(input.traits ?? []),
    aggregates: new Set(input.aggs ?? []),
  };
}

export function group(suffix: string, resources: Record<string, number>, more: Partial<Omit<RequestGroup, 'suffix' | 'resources'>> = {}): RequestGroup {
  return { suffix, resources, requiredTraits: more.requiredTraits ?? [], forbiddenTraits: more.forbiddenTraits ?? [], memberOf: more.memberOf ?? [] };
}

/** A RequestSpec with the given groups (groups[0] is the unnumbered one). */
export function spec(groups: RequestGroup[], groupPolicy: 'none' | 'isolate' = 'none'): RequestSpec {
  return {
    flavor: { name: 'test', vcpus: 0, memoryMb: 0, diskGb: 0, extraSpecs: {} },
    groups,
    groupPolicy,
    aggregateExtraSpecs: {},
    capabilities: [],
    pluginSpecs: {},
    hints: {},
  };
}
