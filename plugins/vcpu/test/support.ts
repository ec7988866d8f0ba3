/**
 * Test support shared by the vcpu, memory, compute-units and disk plugin tests: the host
 * profiles, and short names for @ert/plugin-testkit's builders (contexts, options with
 * defaults, request specs, synthetic host states, writable profile copies, stats checks).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HostState, Plugin, RequestSpec } from '@ert/plugin-api';
import {
  captureLogger,
  copyRoot,
  hostState as kitHostState,
  instanceRequest,
  optionsWithDefaults,
  requestSpec,
  resourceContext as kitResourceContext,
  serviceContainer,
  statsValidator,
  type CapturedLogger,
  type RequestSpecInit,
  type TestResourceContext,
} from '@ert/plugin-testkit';

export const HOSTS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts');
export const PROFILES = ['xeon-2s-cat', 'epyc-1s', 'cloud-vm', 'xeon-4s-numa'] as const;
export type Profile = (typeof PROFILES)[number];

export type RecordingLogger = CapturedLogger;
export const recordingLogger = (): RecordingLogger => captureLogger();
export const mapContainer = serviceContainer;

/** The options a host would pass: validated by the plugin's schema with its defaults applied; throws on invalid options. */
export function withDefaults<O>(plugin: Plugin<O>, options: Partial<O>): O {
  return optionsWithDefaults(plugin, options);
}

export function resourceContext<O>(plugin: Plugin<O>, root: string, options: Partial<O> = {}): TestResourceContext<O> {
  return kitResourceContext(plugin, root, { options });
}

export function profileRoot(profile: Profile): string {
  return path.join(HOSTS_DIR, profile);
}

/** A writable copy of a profile (to garble or remove files), without the parts these plugins never read; removed by `cleanup`. */
export function profileCopy(profile: Profile): Promise<{ root: string; cleanup(): Promise<void> }> {
  return copyRoot(profileRoot(profile), { skip: /[\\/](cache|cpufreq|intel_pstate|resctrl)$/ });
}

/** A request spec whose unnumbered group asks for `resources`. */
export function specOf(resources: Record<string, number>, options: RequestSpecInit = {}): RequestSpec {
  return requestSpec(resources, options);
}

export function instanceOf(uuid: string, spec: RequestSpec) {
  return instanceRequest(spec, uuid);
}

/** A one-provider host whose free amount of each class is `capacity - used`. */
export function hostState(
  name: string,
  inventories: Record<string, { total: number; reserved?: number; allocationRatio?: number }>,
  usages: Record<string, number> = {},
  pluginData: Record<string, unknown> = {},
): HostState {
  return kitHostState({ name, inventories, usages, pluginData });
}

/** Problems of stats against a stats schema, validated as the host's stats writer does (`/sockets must be >= 1`; [] when valid). */
export function schemaProblems(schema: object, data: unknown): string[] {
  const validate = statsValidator({ version: 1, schema: schema as Record<string, unknown> });
  return validate(data) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}`);
}
