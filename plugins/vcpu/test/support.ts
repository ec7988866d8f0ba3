/**
 * Test support shared by the vcpu, memory and compute-units plugin tests: a plugin
 * context built by hand (core's runtime is not used here), request specs, synthetic host
 * states and temporary copies of host profiles.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { Ajv2020 } from 'ajv/dist/2020.js';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type {
  HostState,
  Inventory,
  Logger,
  Plugin,
  ProviderState,
  RequestSpec,
  ResourceContext,
  ServiceContainer,
  ServiceToken,
} from '@ert/plugin-api';
import { capacityOf } from '@ert/plugin-api';

export const HOSTS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts');
export const PROFILES = ['xeon-2s-cat', 'epyc-1s', 'cloud-vm', 'xeon-4s-numa'] as const;
export type Profile = (typeof PROFILES)[number];

export interface RecordingLogger extends Logger {
  records: Array<{ level: string; obj: object | string; msg?: string }>;
}

export function recordingLogger(): RecordingLogger {
  const records: RecordingLogger['records'] = [];
  const at = (level: string) => (obj: object | string, msg?: string) => void records.push({ level, obj, msg });
  const logger: RecordingLogger = {
    records,
    trace: at('trace'),
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => logger,
  };
  return logger;
}

export function mapContainer(): ServiceContainer {
  const values = new Map<symbol, unknown>();
  return {
    resolve<T>(token: ServiceToken<T>): T {
      if (!values.has(token.id)) throw new Error(`no service ${token.description}`);
      return values.get(token.id) as T;
    },
    isRegistered: (token) => values.has(token.id),
    register: (token, value) => void values.set(token.id, value),
  };
}

/** The options a host would pass: `options` validated by the plugin's schema with its
 *  defaults applied (as core does with Ajv's useDefaults); throws on invalid options. */
export function withDefaults<O>(plugin: Plugin<O>, options: Partial<O>): O {
  const data = structuredClone(options) as Record<string, unknown>;
  const problems = schemaProblems(plugin.optionsSchema ?? {}, data, optionsAjv);
  if (problems.length > 0) throw new Error(`invalid options for ${plugin.name}: ${problems.join('; ')}`);
  return data as O;
}

export function resourceContext<O>(plugin: Plugin<O>, root: string, options: Partial<O> = {}): ResourceContext<O> & { logger: RecordingLogger } {
  return {
    name: plugin.name,
    options: withDefaults(plugin, options),
    logger: recordingLogger(),
    services: mapContainer(),
    hostName: 'compute-1',
    root,
    enforce: false,
  };
}

export function profileRoot(profile: Profile): string {
  return path.join(HOSTS_DIR, profile);
}

/** Parts of a profile these plugins never read (thousands of files): left out of copies. */
const NOT_READ_HERE = /[\\/](cache|cpufreq|intel_pstate|resctrl)$/;

/** A writable copy of a profile (to garble or remove files); removed by `cleanup`. */
export async function profileCopy(profile: Profile): Promise<{ root: string; cleanup(): Promise<void> }> {
  const root = await mkdtemp(path.join(os.tmpdir(), `ert-${profile}-`));
  await cp(profileRoot(profile), root, { recursive: true, filter: (source) => !NOT_READ_HERE.test(source) });
  return { root, cleanup: () => rm(root, { recursive: true, force: true }) };
}

/** A request spec whose unnumbered group asks for `resources`. */
export function specOf(resources: Record<string, number>, options: { memoryMb?: number; pluginSpecs?: Record<string, unknown>; extraGroups?: Array<Record<string, number>> } = {}): RequestSpec {
  const group = (suffix: string, r: Record<string, number>) => ({ suffix, resources: r, requiredTraits: [], forbiddenTraits: [], memberOf: [] });
  return {
    flavor: { name: 'test', vcpus: resources.VCPU ?? resources.PCPU ?? 0, memoryMb: options.memoryMb ?? resources.MEMORY_MB ?? 0, diskGb: 0, extraSpecs: {} },
    groups: [group('', resources), ...(options.extraGroups ?? []).map((r, i) => group(String(i + 1), r))],
    groupPolicy: 'none',
    aggregateExtraSpecs: {},
    capabilities: [],
    pluginSpecs: options.pluginSpecs ?? {},
    hints: {},
  };
}

export function instanceOf(uuid: string, spec: RequestSpec) {
  return { uuid, projectId: 'p', userId: 'u', flavor: spec.flavor };
}

/** A one-provider host whose free amount of each class is `capacity - used`. */
export function hostState(
  name: string,
  inventories: Record<string, { total: number; reserved?: number; allocationRatio?: number }>,
  usages: Record<string, number> = {},
  pluginData: Record<string, unknown> = {},
): HostState {
  const full: Record<string, Inventory> = {};
  for (const [cls, inv] of Object.entries(inventories)) {
    full[cls] = { total: inv.total, reserved: inv.reserved ?? 0, minUnit: 1, maxUnit: inv.total, stepSize: 1, allocationRatio: inv.allocationRatio ?? 1 };
  }
  const root: ProviderState = { uuid: `${name}-uuid`, name, parentUuid: undefined, generation: 1, inventories: full, usages, traits: new Set(), aggregates: new Set() };
  return {
    name,
    rootUuid: root.uuid,
    status: 'up',
    generation: 1,
    providers: [root],
    sharingProviders: [],
    aggregateMetadata: {},
    capabilities: {},
    instances: new Set(),
    free: (cls) => (full[cls] ? capacityOf(full[cls]) - (usages[cls] ?? 0) : 0),
    pluginData: <T>(plugin: string) => pluginData[plugin] as T | undefined,
  };
}

const statsAjv = new Ajv2020({ strict: false, allowUnionTypes: true, allErrors: true });
const optionsAjv = new Ajv2020({ strict: false, allowUnionTypes: true, allErrors: true, useDefaults: true });

/** Problems of `data` against a JSON Schema, as core's validation would see them ([] when valid). */
export function schemaProblems(schema: object, data: unknown, ajv: Ajv2020 = statsAjv): string[] {
  const validate = ajv.compile(schema);
  return validate(data) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}`);
}
