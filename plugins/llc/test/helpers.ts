import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type {
  HostState,
  Logger,
  Plugin,
  ProviderState,
  RequestGroup,
  RequestSpec,
  ResourceContext,
  ResourceHooks,
  ServiceContainer,
  ServiceToken,
} from '@ert/plugin-api';

export const HOSTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts');

export const silentLogger: Logger = {
  trace() {},
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silentLogger;
  },
};

export function services(): ServiceContainer {
  const values = new Map<symbol, unknown>();
  return {
    resolve<T>(token: ServiceToken<T>): T {
      if (!values.has(token.id)) throw new Error(`no ${token.description}`);
      return values.get(token.id) as T;
    },
    isRegistered: (token) => values.has(token.id),
    register: (token, value) => void values.set(token.id, value),
  };
}

/** Validate options against the plugin's schema with its defaults applied, as core's loader does (Ajv, draft 2020-12). */
export function withDefaults<O>(plugin: Plugin<O, any, any>, options: Partial<O> = {}): O {
  const copy = structuredClone(options) as O;
  const validate = new Ajv2020({ allErrors: true, strict: false, useDefaults: true }).compile(plugin.optionsSchema ?? {});
  if (!validate(copy)) throw new Error(`invalid ${plugin.name} options: ${JSON.stringify(validate.errors)}`);
  return copy;
}

export async function resourceOf<O, S>(
  plugin: Plugin<O, S, any>,
  root: string,
  opts: { options?: Partial<O>; enforce?: boolean; logger?: Logger } = {},
): Promise<ResourceHooks<S>> {
  const ctx: ResourceContext<O> = {
    name: plugin.name,
    options: withDefaults(plugin, opts.options),
    logger: opts.logger ?? silentLogger,
    services: services(),
    hostName: 'host1',
    root,
    enforce: opts.enforce ?? false,
  };
  return plugin.resource!(ctx);
}

/**
 * A temp root for a test that changes files: the `copy` parts of a host profile are copied
 * (the test may write there), the `link` parts are symlinks to the fixture (read only).
 * Only those parts: the trees hold thousands of files and copying them is slow.
 */
export async function tempProfile(profile: string, parts: { copy: readonly string[]; link?: readonly string[] }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `ert-${profile}-`));
  const source = path.join(HOSTS, profile);
  for (const part of parts.link ?? []) {
    await mkdir(path.dirname(path.join(dir, part)), { recursive: true });
    await symlink(path.join(source, part), path.join(dir, part));
  }
  for (const part of parts.copy) {
    await cp(path.join(source, part), path.join(dir, part), { recursive: true }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }
  return dir;
}

export async function removeTemp(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** Every file below `dir` with its content, to prove nothing was written. */
export async function snapshot(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  for (const e of entries) {
    const full = path.join(e.parentPath, e.name);
    out.set(full, e.isFile() ? await readFile(full, 'utf8') : '<dir>');
  }
  return out;
}

export function validator(schema: object): (data: unknown) => string | undefined {
  const validate = new Ajv2020({ allErrors: true, strict: false }).compile(schema);
  return (data) => (validate(data) ? undefined : JSON.stringify(validate.errors));
}

export function group(suffix: string, resources: Record<string, number>): RequestGroup {
  return { suffix, resources, requiredTraits: [], forbiddenTraits: [], memberOf: [] };
}

/** A request spec with the given groups and plugin specs (as the parser would produce). */
export function specOf(groups: RequestGroup[], pluginSpecs: Record<string, unknown> = {}): RequestSpec {
  return {
    flavor: { name: 'f', vcpus: 2, memoryMb: 1024, diskGb: 0, extraSpecs: {} },
    groups: groups.length > 0 && groups[0]!.suffix === '' ? groups : [group('', {}), ...groups],
    groupPolicy: 'none',
    aggregateExtraSpecs: {},
    capabilities: [],
    pluginSpecs,
    hints: {},
  };
}

export function provider(uuid: string, name: string, parentUuid?: string): ProviderState {
  return { uuid, name, parentUuid, generation: 1, inventories: {}, usages: {}, traits: new Set(), aggregates: new Set() };
}

/** A synthetic host state carrying one plugin's data. */
export function hostState(name: string, plugin: string, data: unknown, providers: ProviderState[] = []): HostState {
  return {
    name,
    rootUuid: `${name}-root`,
    status: 'up',
    generation: 1,
    providers: [provider(`${name}-root`, name), ...providers],
    sharingProviders: [],
    aggregateMetadata: {},
    capabilities: {},
    instances: new Set(),
    free: () => 0,
    pluginData: <T>(p: string) => (p === plugin ? (data as T) : undefined),
  };
}
