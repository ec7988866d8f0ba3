/**
 * What both entries of the pstate plugin share: options, stats schema, extra-spec keys and
 * the one answer to "can this host do what the request asks". No hardware code here.
 */
import type { ExtraSpecKey, JsonSchema, RequestSpec, StatsSchema } from '@ert/plugin-api';

export const PLUGIN_NAME = 'pstate';
export const TRAIT_CONTROL = 'CUSTOM_PSTATE_CONTROL';
export const TRAIT_TURBO = 'CUSTOM_PSTATE_TURBO';
export const TRAIT_EPP = 'CUSTOM_PSTATE_EPP';
/** `CUSTOM_PSTATE_GOVERNOR_<NAME>` for each governor every policy offers. */
export function governorTrait(governor: string): string {
  return `CUSTOM_PSTATE_GOVERNOR_${governor.toUpperCase().replace(/[^A-Z0-9_]/g, '_')}`;
}

/** The plugin has no options yet; the schema refuses unknown keys so typos are caught. */
export type PstateOptions = Record<string, never>;
export const optionsSchema: JsonSchema = { type: 'object', additionalProperties: false, properties: {} };

/** One group of cpufreq policies with identical settings. Frequencies in MHz. */
export interface PolicyGroup {
  /** CPUs of the policies, in the kernel's list format. */
  cpus: string;
  driver: string;
  governor: string;
  minFreqMhz: number;
  maxFreqMhz: number;
  scalingMinMhz: number;
  scalingMaxMhz: number;
  epp: string | null;
}

/** Stats version 1. */
export interface PstateStats {
  available: boolean;
  reason?: string;
  /** scaling_driver of the policies (several names joined by `,` when they differ); null without cpufreq. */
  driver: string | null;
  /** intel_pstate's mode (`active`, `passive`, `off`) and no_turbo; null when the driver directory is absent. */
  intelPstate: null | { status: string; noTurbo: boolean | null };
  /** Whether governors can be set (a writable policy with a choice of governors, or intel_pstate active). */
  control: boolean;
  /** Governors every policy offers. */
  governors: string[];
  /** Lowest and highest hardware frequency reachable on every CPU (cpuinfo_min/max_freq). */
  minFreqMhz: number | null;
  maxFreqMhz: number | null;
  /** Guaranteed (base) frequency when the driver reports it. */
  baseFreqMhz: number | null;
  /** EPP values every policy offers, and the current ones; null without EPP. */
  epp: null | { available: string[]; current: string[] };
  /** Turbo/boost on; null when the host does not say. */
  turbo: boolean | null;
  policies: PolicyGroup[];
}

const mhz = { type: ['integer', 'null'], minimum: 0 };
const words = { type: 'array', items: { type: 'string' } };

export const statsSchema: StatsSchema = {
  version: 1,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['available', 'driver', 'intelPstate', 'control', 'governors', 'minFreqMhz', 'maxFreqMhz', 'baseFreqMhz', 'epp', 'turbo', 'policies'],
    properties: {
      available: { type: 'boolean' },
      reason: { type: 'string' },
      driver: { type: ['string', 'null'] },
      intelPstate: {
        oneOf: [
          { type: 'null' },
          {
            type: 'object',
            additionalProperties: false,
            required: ['status', 'noTurbo'],
            properties: { status: { type: 'string' }, noTurbo: { type: ['boolean', 'null'] } },
          },
        ],
      },
      control: { type: 'boolean' },
      governors: words,
      minFreqMhz: mhz,
      maxFreqMhz: mhz,
      baseFreqMhz: mhz,
      epp: {
        oneOf: [
          { type: 'null' },
          { type: 'object', additionalProperties: false, required: ['available', 'current'], properties: { available: words, current: words } },
        ],
      },
      turbo: { type: ['boolean', 'null'] },
      policies: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['cpus', 'driver', 'governor', 'minFreqMhz', 'maxFreqMhz', 'scalingMinMhz', 'scalingMaxMhz', 'epp'],
          properties: {
            cpus: { type: 'string' },
            driver: { type: 'string' },
            governor: { type: 'string' },
            minFreqMhz: { type: 'integer' },
            maxFreqMhz: { type: 'integer' },
            scalingMinMhz: { type: 'integer' },
            scalingMaxMhz: { type: 'integer' },
            epp: { type: ['string', 'null'] },
          },
        },
      },
    },
  },
};

const NAME = '^[a-z][a-z0-9_]*$';

export const governorKey: ExtraSpecKey<string> = {
  key: 'pstate:governor',
  description: 'cpufreq governor for the instance CPUs (e.g. performance); the host must offer it',
  schema: { type: 'string', pattern: NAME },
};
export const minFreqKey: ExtraSpecKey<number> = {
  key: 'pstate:min_freq_mhz',
  description: 'Lowest frequency (MHz) of the instance CPUs (scaling_min_freq); at most the host maximum',
  schema: { type: 'integer', minimum: 1 },
};
export const eppKey: ExtraSpecKey<string> = {
  key: 'pstate:epp',
  description: 'Energy-performance preference of the instance CPUs: a name the host offers, or 0-255',
  schema: { type: 'string', pattern: '^([a-z][a-z0-9_]*|25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})$' },
};

export const extraSpecs: readonly ExtraSpecKey<any>[] = [governorKey, minFreqKey, eppKey];

/** The P-state settings a request asks for (each optional). */
export interface PstateRequest {
  governor?: string;
  minFreqMhz?: number;
  epp?: string;
}

/** Read the pstate keys of a parsed request. */
export function pstateRequestOf(spec: RequestSpec): PstateRequest {
  const out: PstateRequest = {};
  const governor = spec.pluginSpecs[governorKey.key];
  const minFreq = spec.pluginSpecs[minFreqKey.key];
  const epp = spec.pluginSpecs[eppKey.key];
  if (typeof governor === 'string') out.governor = governor;
  if (typeof minFreq === 'number') out.minFreqMhz = minFreq;
  if (typeof epp === 'string') out.epp = epp;
  return out;
}

export function asksForPstate(request: PstateRequest): boolean {
  return request.governor !== undefined || request.minFreqMhz !== undefined || request.epp !== undefined;
}

/** What a host can do, as both sides see it (the stats carry all of it). */
export type PstateCapabilities = Pick<PstateStats, 'available' | 'reason' | 'intelPstate' | 'control' | 'governors' | 'maxFreqMhz' | 'epp'>;

/**
 * Why the host cannot apply the requested settings, or undefined when it can (or nothing
 * is asked). Every setting needs control over the policies; a governor must be offered by
 * every policy, the minimum frequency must not exceed the hardware maximum, and an EPP
 * must be one of the offered names (or a raw 0-255 value) on a host with EPP, and not a
 * non-zero one with the performance governor under intel_pstate (the kernel refuses it).
 */
export function pstateProblem(host: PstateCapabilities | undefined, request: PstateRequest): string | undefined {
  if (!asksForPstate(request)) return undefined;
  if (!host || !host.available) return `P-state settings unavailable: ${host?.reason ?? 'no pstate data for this host'}`;
  if (!host.control) return 'P-state settings unavailable: no writable cpufreq policy with a choice of governors';
  if (request.governor !== undefined && !host.governors.includes(request.governor)) {
    return `governor "${request.governor}" is not offered (available: ${host.governors.join(', ') || 'none'})`;
  }
  if (request.minFreqMhz !== undefined && (host.maxFreqMhz === null || request.minFreqMhz > host.maxFreqMhz)) {
    return `min_freq_mhz ${request.minFreqMhz} is above the maximum frequency ${host.maxFreqMhz ?? 'unknown'} MHz`;
  }
  if (request.epp !== undefined) {
    if (!host.epp) return `energy-performance preference "${request.epp}" asked, but the host has no EPP`;
    if (!/^\d+$/.test(request.epp) && !host.epp.available.includes(request.epp)) {
      return `energy-performance preference "${request.epp}" is not offered (available: ${host.epp.available.join(', ')})`;
    }
    // intel_pstate (active) answers EBUSY to any EPP but 0 ("performance") under the performance governor.
    const eppIsZero = request.epp === 'performance' || Number(request.epp) === 0;
    if (host.intelPstate?.status === 'active' && request.governor === 'performance' && !eppIsZero) {
      return `intel_pstate keeps EPP at "performance" under the performance governor; "${request.epp}" cannot be set with it`;
    }
  }
  return undefined;
}

/** Frequency headroom in MHz: the host maximum minus the requested minimum (0 without data). */
export function headroomMhz(host: PstateCapabilities | undefined, request: PstateRequest): number {
  if (!host || !host.available || host.maxFreqMhz === null) return 0;
  return Math.max(host.maxFreqMhz - (request.minFreqMhz ?? 0), 0);
}
