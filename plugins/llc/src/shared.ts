/**
 * What both entries of the llc plugin share: options, stats schema, extra-spec keys and
 * the reading of a request. No hardware code here, so the scheduler entry stays free of
 * sysfs readers.
 */
import type { ExtraSpecKey, JsonSchema, RequestSpec, StatsSchema } from '@ert/plugin-api';

export const PLUGIN_NAME = 'llc';
export const LLC_WAYS = 'CUSTOM_LLC_WAYS';
export const TRAIT_CAT = 'CUSTOM_RDT_CAT';
export const TRAIT_CDP = 'CUSTOM_RDT_CDP';
/** Prefix of the resctrl groups ert creates (`ert-<instance uuid>`). */
export const GROUP_PREFIX = 'ert-';

export interface LlcOptions {
  /** Ways kept for the host (and every task outside ert's groups), from the low end of each domain's mask. */
  reservedWays: number;
}

export const optionsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    reservedWays: {
      type: 'integer',
      minimum: 0,
      default: 0,
      description: 'Cache ways per domain reserved for the host, taken from the low end of cbm_mask',
    },
  },
};

/** The key of a cache domain's child provider. */
export function domainKey(id: number): string {
  return `llc_${id}`;
}

/** The domain id of a provider name or key ending in `llc_<id>`, or undefined. */
export function domainOfProvider(name: string): number | undefined {
  const match = /(?:^|_)llc_(\d+)$/.exec(name);
  return match ? Number(match[1]) : undefined;
}

/** One instance's cache ways, as recorded in its assignment and in the stats. */
export interface WayAssignment {
  domain: number;
  /** Hex capacity bitmask as resctrl writes it. */
  mask: string;
  /** ert's class-of-service slot (1..num_closids-1); the kernel picks the hardware CLOSID. */
  closid: number;
}

/** Stats version 1. Masks are hex strings as the kernel prints them. */
export interface LlcStats {
  available: boolean;
  reason?: string;
  /** The last-level cache's geometry; null when the cache description could not be read. */
  cache: null | {
    level: number;
    sizeKiB: number;
    ways: number;
    domains: Array<{ id: number; cpus: string }>;
  };
  /** resctrl's L3 allocation facts; null when resctrl is not mounted or has no L3 CAT. */
  resctrl: null | {
    cdp: boolean;
    cbmMask: string;
    numClosids: number;
    minCbmBits: number;
    shareableBits: string;
    /** Groups not made by ert; each holds a CLOSID. */
    foreignGroups: number;
    /** num_closids - 1 (the default group) - foreign groups - ert's instances. */
    freeClosids: number;
  };
  /** Per cache domain with allocation (empty without resctrl). */
  domains: Array<{
    id: number;
    key: string;
    cbmMask: string;
    /** Usable ways: bits of cbm_mask minus the reserved ones. */
    ways: number;
    reservedMask: string;
    freeMask: string;
    largestFreeRun: number;
    instances: Array<{ uuid: string; mask: string; closid: number }>;
  }>;
}

const hexMask = { type: 'string', pattern: '^[0-9a-f]+$' };
const count = { type: 'integer', minimum: 0 };

export const statsSchema: StatsSchema = {
  version: 1,
  schema: {
    type: 'object',
    required: ['available', 'cache', 'resctrl', 'domains'],
    additionalProperties: false,
    properties: {
      available: { type: 'boolean' },
      reason: { type: 'string' },
      cache: {
        oneOf: [
          { type: 'null' },
          {
            type: 'object',
            required: ['level', 'sizeKiB', 'ways', 'domains'],
            additionalProperties: false,
            properties: {
              level: count,
              sizeKiB: count,
              ways: count,
              domains: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['id', 'cpus'],
                  additionalProperties: false,
                  properties: { id: count, cpus: { type: 'string' } },
                },
              },
            },
          },
        ],
      },
      resctrl: {
        oneOf: [
          { type: 'null' },
          {
            type: 'object',
            required: ['cdp', 'cbmMask', 'numClosids', 'minCbmBits', 'shareableBits', 'foreignGroups', 'freeClosids'],
            additionalProperties: false,
            properties: {
              cdp: { type: 'boolean' },
              cbmMask: hexMask,
              numClosids: count,
              minCbmBits: count,
              shareableBits: hexMask,
              foreignGroups: count,
              freeClosids: count,
            },
          },
        ],
      },
      domains: {
        type: 'array',
        items: {
          type: 'object',
          required: ['id', 'key', 'cbmMask', 'ways', 'reservedMask', 'freeMask', 'largestFreeRun', 'instances'],
          additionalProperties: false,
          properties: {
            id: count,
            key: { type: 'string', pattern: '^llc_[0-9]+$' },
            cbmMask: hexMask,
            ways: count,
            reservedMask: hexMask,
            freeMask: hexMask,
            largestFreeRun: count,
            instances: {
              type: 'array',
              items: {
                type: 'object',
                required: ['uuid', 'mask', 'closid'],
                additionalProperties: false,
                properties: { uuid: { type: 'string' }, mask: hexMask, closid: count },
              },
            },
          },
        },
      },
    },
  },
};

/**
 * `llc:ways=N`: N contiguous cache ways; sets CUSTOM_LLC_WAYS in the unnumbered group. A
 * flavor that also says `resources:CUSTOM_LLC_WAYS=M` must say the same amount: M != N is
 * refused (ERT_SPEC_CONFLICT naming both), as Nova refuses contradicting `hw:` specs, rather
 * than one of them silently winning. This is the one rule for both sides: the tracker and the
 * scheduler parse flavors with this key.
 */
export const waysKey: ExtraSpecKey<number> = {
  key: 'llc:ways',
  description: 'Contiguous last-level cache ways for the instance (sets resources:CUSTOM_LLC_WAYS)',
  schema: { type: 'integer', minimum: 1, maximum: 32 },
  applyResources(value, resources) {
    const asked = resources[LLC_WAYS];
    if (asked !== undefined && asked !== value) {
      return `conflicts with resources:${LLC_WAYS}=${asked}; give one of the two keys, or the same number of ways in both`;
    }
    resources[LLC_WAYS] = value;
    return undefined;
  },
};

export const extraSpecs: readonly ExtraSpecKey<any>[] = [waysKey];

/**
 * The cache ways a request asks for: CUSTOM_LLC_WAYS of its groups (after `llc:ways` was
 * applied). 0 when none. A request that asks in more than one group is refused with a
 * reason: an instance gets one class of service, hence one mask on one domain.
 */
export function requestedWays(spec: RequestSpec): number | string {
  const asking = spec.groups.filter((g) => (g.resources[LLC_WAYS] ?? 0) > 0);
  if (asking.length > 1) {
    const names = asking.map((g) => `resources${g.suffix}`).join(', ');
    return `${LLC_WAYS} requested in ${asking.length} groups (${names}); an instance gets one cache mask on one domain`;
  }
  return asking[0]?.resources[LLC_WAYS] ?? 0;
}
