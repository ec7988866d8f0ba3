/**
 * What both entries of the compute-units plugin share: options, stats schema and the
 * `cu:units` key. Imports no hardware code, so the scheduler entry never loads sysfs readers.
 */
import type { ExtraSpecKey, JsonSchema, StatsSchema } from '@ert/plugin-api';

export const PLUGIN_NAME = 'compute-units';
export const CU_CLASS = 'CUSTOM_CU';

/** CUs per physical core for CPU models whose cpuinfo `model name` matches. */
export interface ModelRule {
  /** A substring of the model name, or `/regex/flags`. */
  match: string;
  perCore: number;
}

export interface ComputeUnitsOptions {
  /** CUs per core when no rule matches, default 10 (a reference core). */
  perCore: number;
  /** Rules tried in order; the first match wins. */
  models: ModelRule[];
}

export const optionsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    perCore: { type: 'integer', minimum: 1, default: 10 },
    models: {
      type: 'array',
      default: [],
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['match', 'perCore'],
        properties: { match: { type: 'string', minLength: 1 }, perCore: { type: 'integer', minimum: 1 } },
      },
    },
  },
};

/** Stats v1: how the host's CU capacity was derived. */
export interface ComputeUnitsStatsV1 {
  /** cpuinfo `model name` (null when cpuinfo has none). */
  model: string | null;
  perCore: number;
  /** Physical cores. */
  cores: number;
  /** perCore x cores: the CUSTOM_CU total. */
  total: number;
  /** The `match` of the rule that applied; null when the default `perCore` did. */
  matchedBy: string | null;
}

export const statsSchema: StatsSchema = {
  version: 1,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['model', 'perCore', 'cores', 'total', 'matchedBy'],
    properties: {
      model: { type: ['string', 'null'] },
      perCore: { type: 'integer', minimum: 1 },
      cores: { type: 'integer', minimum: 1 },
      total: { type: 'integer', minimum: 1 },
      matchedBy: { type: ['string', 'null'] },
    },
  },
};

/**
 * `cu:units=N`: the instance needs N compute units. Sets the unnumbered group's CUSTOM_CU;
 * when the flavor also says `resources:CUSTOM_CU=M`, the larger of the two is asked for.
 */
export const unitsKey: ExtraSpecKey<number> = {
  key: 'cu:units',
  description: 'compute units the instance needs (CUSTOM_CU; a reference core is 10)',
  schema: { type: 'integer', minimum: 1 },
  // A flavor that also says resources:CUSTOM_CU=M must say the same amount (as llc:ways):
  // M != N is refused naming both rather than one of them silently winning.
  applyResources(value, resources) {
    const asked = resources[CU_CLASS];
    if (asked !== undefined && asked !== value) return `conflicts with resources:${CU_CLASS}=${asked}; give one of the two keys, or the same number of units in both`;
    resources[CU_CLASS] = value;
    return undefined;
  },
};

export const extraSpecs: readonly ExtraSpecKey<any>[] = [unitsKey];
