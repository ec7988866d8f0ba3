import { hostname } from 'node:os';
import type { DependencyContainer } from 'tsyringe';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import {
  CoreServices,
  type Clock,
  type ConsumerHooks,
  type ExtraSpecKey,
  type FilterHooks,
  type Logger,
  type Plugin,
  type PluginContext,
  type PluginKind,
  type ResourceContext,
  type ResourceHooks,
  type ServiceContainer,
  type ServiceToken,
  type WeigherHooks,
} from '@ert/plugin-api';
import { unusedPluginOptionsAfterLoad, type ErtConfig, type PluginRef, type WeigherRef } from './config.js';
import type { Isolation } from './config-schema.js';
import { ConfigError, CoreErrorCodes, PluginLoadError, describeValue } from './errors.js';
import { createDispatcher, type Dispatcher, type DispatcherOptions } from './dispatcher.js';
import { createLogger } from './logger.js';
import { resolvePlugin, type PluginSide, type ResolvedPlugin } from './loader.js';
import { compileSchema, formatProblem, lazyAjv, problemsFromAjv } from './schema.js';
import { loadWorkerResource } from './isolation/host.js';
import { lazyRequire } from './lazy-require.js';

const reflectMetadata = lazyRequire<unknown>('reflect-metadata');
const tsyringe = lazyRequire<typeof import('tsyringe')>('tsyringe');

/**
 * tsyringe's global container, loaded (after the reflect-metadata polyfill it needs) when the
 * first runtime is built rather than at import: a command that loads no plugin does not pay
 * for it.
 */
function tsyringeContainer(): DependencyContainer {
  reflectMetadata();
  return tsyringe().container;
}

/** Tokens of the host's root tsyringe container (explicit tokens; no decorator metadata). */
export const TOKENS = {
  Config: Symbol.for('ert.core.Config'),
  Logger: Symbol.for('ert.core.Logger'),
  Dispatcher: Symbol.for('ert.core.Dispatcher'),
  Clock: Symbol.for('ert.core.Clock'),
} as const;

/** The system clock. */
export const systemClock: Clock = { now: () => Date.now() };

/**
 * A plugin's `ServiceContainer`, backed by its own tsyringe child container: what it
 * registers stays in it; lookups fall back to the host's root container.
 */
export class PluginServices implements ServiceContainer {
  constructor(readonly container: DependencyContainer) {}

  resolve<T>(token: ServiceToken<T>): T {
    if (!this.container.isRegistered(token.id, true)) {
      throw new Error(`No service registered for "${token.description}"`);
    }
    return this.container.resolve<T>(token.id);
  }

  isRegistered<T>(token: ServiceToken<T>): boolean {
    return this.container.isRegistered(token.id, true);
  }

  register<T>(token: ServiceToken<T>, value: T): void {
    this.container.register<T>(token.id, { useValue: value });
  }
}

/** One configured use of a plugin, with the hooks its factory returned. */
export interface ActivePlugin<Hooks> {
  /** The name it is called by (logger binding, options key, stats key, dispatcher tag). */
  name: string;
  plugin: Plugin;
  hooks: Hooks;
  resolved: ResolvedPlugin;
  /** `plugins.<name>` validated, defaults applied. */
  options: unknown;
  /** Child logger bound to `{ plugin: name }`. */
  logger: Logger;
  /** The plugin's own container. */
  services: ServiceContainer;
}

export interface ActiveResource extends ActivePlugin<ResourceHooks> {
  /** Whether `tracker.enforce` names this plugin. */
  enforce: boolean;
  /** Where its hooks run: `worker`, a worker thread of its own (docs/plugins.md, "Isolation"). */
  isolation: Isolation;
}
export type ActiveConsumer = ActivePlugin<ConsumerHooks>;
export type ActiveFilter = ActivePlugin<FilterHooks>;
export interface ActiveWeigher extends ActivePlugin<WeigherHooks> {
  multiplier: number;
}

/** The plugins of one side, loaded and instantiated in config order. */
export interface PluginRuntime {
  side: PluginSide;
  config: ErtConfig;
  logger: Logger;
  dispatcher: Dispatcher;
  /** Root tsyringe container holding TOKENS.Config, Logger, Dispatcher, Clock. */
  container: DependencyContainer;
  /** Extra-spec keys of every loaded plugin (each key owned by exactly one). */
  extraSpecKeys: ExtraSpecKey[];
  /** Compute side: `tracker.resources`, in order (empty on the scheduler side). */
  resources: ActiveResource[];
  /** Scheduler side (empty on the compute side). */
  consumers: ActiveConsumer[];
  filters: ActiveFilter[];
  weighers: ActiveWeigher[];
}

/** Options of `createPluginRuntime`. */
export interface PluginRuntimeOptions {
  config: ErtConfig;
  side: PluginSide;
  /** Parent logger; default `createLogger({ level: config.log.level })`. */
  logger?: Logger;
  /** Plugins known by name before packages are searched (the scheduler's own filters/weighers). */
  builtins?: Readonly<Record<string, Plugin>>;
  /** Compute side: the host name; default config.tracker.hostName, then os.hostname(). */
  hostName?: string;
  /** Compute side: directory standing for `/`; default config.tracker.root. */
  root?: string;
  clock?: Clock;
  /** Export conditions for plugin entries (see `defaultConditions`). */
  conditions?: readonly string[];
  /** The dispatcher's observer of every hook call (`DispatcherOptions.onCall`): metrics. */
  onHookCall?: DispatcherOptions['onCall'];
}

interface Use {
  ref: PluginRef;
  kind: PluginKind;
  list: string;
  multiplier?: number;
}

function usesOf(config: ErtConfig, side: PluginSide): Use[] {
  if (side === 'compute') return config.tracker.resources.map((ref) => ({ ref, kind: 'resource' as const, list: 'tracker.resources' }));
  return [
    ...config.scheduler.consumers.map((ref) => ({ ref, kind: 'consumer' as const, list: 'scheduler.consumers' })),
    ...config.scheduler.filters.map((ref) => ({ ref, kind: 'filter' as const, list: 'scheduler.filters' })),
    ...config.scheduler.weighers.map((ref: WeigherRef) => ({ ref, kind: 'weigher' as const, list: 'scheduler.weighers', multiplier: ref.multiplier })),
  ];
}

const optionsAjv = lazyAjv({ strict: false, useDefaults: true, optimize: false });
const optionValidators = new WeakMap<Plugin, ValidateFunction>();

/** Deep copy of JSON-like data, so defaults applied to options never touch the config. */
function cloneJson(value: unknown): unknown {
  return value === undefined ? undefined : structuredClone(value);
}

/**
 * `plugins.<name>` validated against the plugin's optionsSchema with its defaults applied
 * (absent options count as `{}`). Without a schema the options are passed through.
 * Throws PluginLoadError ERT_PLUGIN_OPTIONS_INVALID naming plugin, key path and value.
 */
export function validatePluginOptions(name: string, plugin: Plugin, raw: unknown, configFile?: string): unknown {
  const options = cloneJson(raw) ?? {};
  if (plugin.optionsSchema === undefined) return options;
  let validate = optionValidators.get(plugin);
  if (validate === undefined) {
    validate = compileSchema(optionsAjv(), plugin.optionsSchema, `plugin "${plugin.name}" options`);
    optionValidators.set(plugin, validate);
  }
  if (validate(options)) return options;
  const problems = problemsFromAjv(validate.errors, `plugins.${name}`);
  const where = configFile === undefined ? '' : ` in ${configFile}`;
  throw new PluginLoadError(
    CoreErrorCodes.PLUGIN_OPTIONS_INVALID,
    `Plugin "${name}" options${where} are invalid:\n${problems.map((p) => `${configFile ?? 'config'}: ${formatProblem(p)}`).join('\n')}`,
    { plugin: name, file: configFile, problems },
  );
}

/**
 * `plugins.<name>` without ert's own `isolation` key, which the plugin's options schema
 * never sees (the config schema checked its value).
 */
function pluginOptionsOf(config: ErtConfig, name: string): unknown {
  const raw = config.plugins[name];
  if (typeof raw !== 'object' || raw === null || !('isolation' in raw)) return raw;
  const { isolation: _isolation, ...options } = raw as Record<string, unknown>;
  return options;
}

/** Where resource plugin `name` runs: `plugins.<name>.isolation`, else `tracker.isolation`. */
export function isolationOf(config: ErtConfig, name: string): Isolation {
  const own = (config.plugins[name] as { isolation?: Isolation } | undefined)?.isolation;
  return own ?? config.tracker.isolation;
}

const HOOK_SHAPES: Record<PluginKind, { functions: string[] }> = {
  resource: { functions: ['discover'] },
  consumer: { functions: ['consume'] },
  filter: { functions: ['filter'] },
  weigher: { functions: ['weigh'] },
};

/** Why a factory's result is not a usable hooks object of `kind`, or undefined. */
function hooksProblem(kind: PluginKind, hooks: unknown): string | undefined {
  if (typeof hooks !== 'object' || hooks === null) return `expected a hooks object, got ${describeValue(hooks)}`;
  for (const fn of HOOK_SHAPES[kind].functions) {
    if (typeof (hooks as Record<string, unknown>)[fn] !== 'function') return `the ${kind} hooks have no "${fn}" function`;
  }
  if (kind === 'consumer') {
    const reads = (hooks as { reads?: unknown }).reads;
    if (!Array.isArray(reads) || reads.some((v) => !Number.isInteger(v))) return `consumer "reads" must be a list of stats schema versions, got ${describeValue(reads)}`;
  }
  return undefined;
}

/**
 * The ref a worker loads the plugin by. A plugin object (from a JS config) or a builtin has
 * no module a worker could import: ConfigError naming the key that asked for a worker.
 */
function isolatableRef(config: ErtConfig, name: string, ref: PluginRef, resolved: ResolvedPlugin): { name: string; use?: string } {
  if (resolved.source === 'object' || resolved.source === 'builtin' || ref.plugin !== undefined) {
    const file = config.configFile ?? '<config object>';
    const key = (config.plugins[name] as { isolation?: unknown } | undefined)?.isolation !== undefined ? `plugins.${name}.isolation` : 'tracker.isolation';
    throw new ConfigError(
      CoreErrorCodes.CONFIG_INVALID,
      `Invalid config ${file}: ${key} is "worker", but plugin "${name}" is ${resolved.source === 'builtin' ? 'a builtin' : 'a plugin object given in the config'}, which a worker thread cannot load; name it by path or package, or set plugins.${name}.isolation: inprocess`,
      { file, problems: [{ path: key, value: 'worker', expected: `inprocess for plugin "${name}" (a plugin object or builtin)` }] },
    );
  }
  return { name: ref.name, ...(ref.use === undefined ? {} : { use: ref.use }) };
}

interface PluginSlot {
  plugin: Plugin;
  resolved: ResolvedPlugin;
  options: unknown;
  logger: Logger;
  services: PluginServices;
}

/**
 * Load every plugin the config names for `side` (compute: tracker.resources; scheduler:
 * consumers, filters, weighers; one package may serve several kinds), validate each
 * plugin's options, give each its own child logger and child container (with
 * CoreServices.clock), and call each kind's factory through the dispatcher (hook name =
 * the kind). Also collects extra-spec keys (a key owned by two plugins is refused) and
 * checks that `tracker.enforce` names loaded resource plugins.
 * Throws PluginLoadError (loader and option codes), PluginHookError (a factory failed),
 * ConfigError (enforce names an unknown plugin). Each call builds fresh instances.
 */
export async function createPluginRuntime(options: PluginRuntimeOptions): Promise<PluginRuntime> {
  const workers: ResourceHooks[] = [];
  try {
    return await buildPluginRuntime(options, workers);
  } catch (err) {
    // The worker threads of the plugins started before the failure go with it.
    await Promise.all(workers.map(async (hooks) => hooks.close?.()).map((p) => p.catch(() => undefined)));
    throw err;
  }
}

async function buildPluginRuntime(options: PluginRuntimeOptions, workers: ResourceHooks[]): Promise<PluginRuntime> {
  const { config, side } = options;
  const logger = options.logger ?? createLogger({ level: config.log.level });
  const clock = options.clock ?? systemClock;
  const hookTimeout = side === 'compute' ? config.tracker.hookTimeout : config.scheduler.hookTimeout;
  const dispatcher = createDispatcher({ defaultTimeoutMs: hookTimeout, logger, ...(options.onHookCall ? { onCall: options.onHookCall } : {}) });
  const root = tsyringeContainer().createChildContainer();
  root.register(TOKENS.Config, { useValue: config });
  root.register(TOKENS.Logger, { useValue: logger });
  root.register(TOKENS.Dispatcher, { useValue: dispatcher });
  root.register(TOKENS.Clock, { useValue: clock });

  const runtime: PluginRuntime = {
    side,
    config,
    logger,
    dispatcher,
    container: root,
    extraSpecKeys: [],
    resources: [],
    consumers: [],
    filters: [],
    weighers: [],
  };
  const slots = new Map<string, PluginSlot>();
  const usedIn = new Set<string>();
  /** Each ref as written -> the name of the plugin it loaded (for the `plugins.<name>` check). */
  const loadedNames = new Map<string, string>();
  const hostName = options.hostName ?? config.tracker.hostName ?? hostname();
  const fsRoot = options.root ?? config.tracker.root;

  for (const use of usesOf(config, side)) {
    const resolved = await resolvePlugin({
      ref: use.ref,
      side,
      kinds: [use.kind],
      fromDir: config.configDir,
      ...(options.builtins === undefined ? {} : { builtins: options.builtins }),
      ...(options.conditions === undefined ? {} : { conditions: options.conditions }),
    });
    const name = resolved.name;
    loadedNames.set(use.ref.name, name);
    if (usedIn.has(`${use.list}\u0000${name}`)) {
      throw new PluginLoadError(CoreErrorCodes.PLUGIN_NAME_CONFLICT, `Plugin "${name}" is listed twice in ${use.list}`, { plugin: name, list: use.list });
    }
    usedIn.add(`${use.list}\u0000${name}`);
    let slot = slots.get(name);
    if (slot !== undefined && slot.plugin !== resolved.plugin) {
      throw new PluginLoadError(
        CoreErrorCodes.PLUGIN_NAME_CONFLICT,
        `Two different plugins are configured under the name "${name}" (${slot.resolved.file ?? slot.resolved.specifier} and ${resolved.file ?? resolved.specifier}); give one another name with { name, use }`,
        { plugin: name },
      );
    }
    if (slot === undefined) {
      const services = new PluginServices(root.createChildContainer());
      services.register(CoreServices.clock, clock);
      slot = {
        plugin: resolved.plugin,
        resolved,
        options: validatePluginOptions(name, resolved.plugin, pluginOptionsOf(config, name), config.configFile),
        logger: logger.child({ plugin: name }),
        services,
      };
      slots.set(name, slot);
    }
    const base: PluginContext<unknown> = { name, options: slot.options, logger: slot.logger, services: slot.services };
    const plugin = slot.plugin;
    const validate = (hooks: unknown) => hooksProblem(use.kind, hooks);
    const entry = { name, plugin, resolved: slot.resolved, options: slot.options, logger: slot.logger, services: slot.services };
    switch (use.kind) {
      case 'resource': {
        const enforce = config.tracker.enforce.includes(name);
        const isolation = isolationOf(config, name);
        let hooks: ResourceHooks;
        if (isolation === 'worker') {
          const ref = isolatableRef(config, name, use.ref, slot.resolved);
          // The thread's start and the import are not the factory's time: only `start` is timed.
          const loaded = await loadWorkerResource({
            name,
            ref,
            fromDir: config.configDir,
            ...(options.conditions === undefined ? {} : { conditions: options.conditions }),
            options: slot.options,
            hostName,
            root: fsRoot,
            enforce,
            logger: slot.logger,
            hookTimeoutMs: config.tracker.hookTimeout,
          });
          hooks = await dispatcher.call(name, 'resource', () => loaded.start(), { validate });
          workers.push(hooks);
        } else {
          const ctx: ResourceContext<unknown> = { ...base, hostName, root: fsRoot, enforce };
          hooks = await dispatcher.call(name, 'resource', () => plugin.resource!(ctx), { validate });
        }
        runtime.resources.push({ ...entry, hooks, enforce, isolation });
        break;
      }
      case 'consumer':
        runtime.consumers.push({ ...entry, hooks: await dispatcher.call(name, 'consumer', () => plugin.consumer!(base), { validate }) });
        break;
      case 'filter':
        runtime.filters.push({ ...entry, hooks: await dispatcher.call(name, 'filter', () => plugin.filter!(base), { validate }) });
        break;
      case 'weigher':
        runtime.weighers.push({
          ...entry,
          hooks: await dispatcher.call(name, 'weigher', () => plugin.weigher!(base), { validate }),
          multiplier: use.multiplier ?? 1,
        });
        break;
    }
  }

  if (side === 'compute') {
    const unknown = config.tracker.enforce.filter((n) => !slots.has(n));
    if (unknown.length > 0) {
      const file = config.configFile ?? '<config object>';
      throw new ConfigError(
        CoreErrorCodes.CONFIG_INVALID,
        `Invalid config ${file}: tracker.enforce names ${unknown.map((n) => `"${n}"`).join(', ')}, expected names of tracker.resources plugins (${[...slots.keys()].join(', ') || 'none loaded'})`,
        { file, problems: unknown.map((n) => ({ path: 'tracker.enforce', value: n, expected: 'a loaded resource plugin' })) },
      );
    }
  }

  const misnamed = unusedPluginOptionsAfterLoad(config, loadedNames);
  if (misnamed.length > 0) {
    const file = config.configFile ?? '<config object>';
    throw new ConfigError(
      CoreErrorCodes.CONFIG_INVALID,
      `Invalid config ${file}: ${misnamed.map((p) => `${p.path}: expected ${p.expected}`).join('; ')}`,
      { file, problems: misnamed },
    );
  }

  const owners = new Map<string, string>();
  for (const [name, slot] of slots) {
    for (const key of slot.plugin.extraSpecs ?? []) {
      const owner = owners.get(key.key);
      if (owner !== undefined) {
        throw new PluginLoadError(
          CoreErrorCodes.PLUGIN_EXTRA_SPEC_CONFLICT,
          `Extra-spec key "${key.key}" is owned by two plugins: "${owner}" and "${name}"`,
          { key: key.key, plugins: [owner, name] },
        );
      }
      owners.set(key.key, name);
      runtime.extraSpecKeys.push(key);
    }
  }
  return runtime;
}
