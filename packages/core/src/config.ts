import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import type { ErrorObject } from 'ajv/dist/2020.js';
import { cosmiconfig, type Loader } from 'cosmiconfig';
import { parse as parseYaml } from 'yaml';
import { isPlugin, type Flavor, type Plugin } from '@ert/plugin-api';
import type { StoreOptions } from '@ert/store';
import { ConfigError, CoreErrorCodes, messageOf, type ConfigProblem } from './errors.js';
import { parseDuration } from './duration.js';
import type { Isolation, LogLevel, RequestFilterName } from './config-schema.js';
import * as generated from './config-validators.generated.js';
import { formatProblem, problemsFromAjv } from './schema.js';

/** An Ajv standalone validator: true when the data is valid, the last call's errors on `errors`. */
type GeneratedValidator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };
const validateConfigSchema = generated.validateConfig as GeneratedValidator;
const validateFlavorListSchema = generated.validateFlavorList as GeneratedValidator;

/**
 * How the config names a plugin. `name` is what the plugin is called (its `plugins.<name>`
 * options, its logger binding, its stats key); `use` is where to load it from when that
 * differs from the name (a path, already absolute, or a package name); `plugin` is a plugin
 * object given directly by a JS/TS config. A string ref (`vcpu`, `./plugins/gpu.js`,
 * `@acme/ert-foo`) becomes `{ name: <the string> }`; for a path or scoped name the runtime
 * then calls the plugin by its own `name`.
 */
export interface PluginRef {
  name: string;
  use?: string;
  plugin?: Plugin;
}

/** A weigher ref: its normalised score is multiplied by `multiplier` (default 1.0). */
export interface WeigherRef extends PluginRef {
  multiplier: number;
}

/** The validated config with defaults applied, durations in ms and paths absolute. See docs/config.md. */
export interface ErtConfig {
  /** Absolute path of the file it came from (absent for `configFromObject` without one). */
  configFile?: string;
  /** Directory relative paths were resolved from (the config file's directory). */
  configDir: string;
  /** Store connection; a sqlite file path is absolute (`:memory:` stays as is). */
  store: StoreOptions;
  log: { level: LogLevel };
  tracker: {
    hostName?: string;
    /** Absolute directory standing for `/` when plugins read /proc and /sys. */
    root: string;
    resources: PluginRef[];
    /** Periodic update interval, ms. */
    interval: number;
    /** A host not updated for this long is stale, ms (default 3 x interval). */
    staleAfter: number;
    /** Absolute directory of provider config files. */
    providerConfigs?: string;
    /** Per-call timeout of compute hooks, ms. */
    hookTimeout: number;
    /** Names of resource plugins whose `enforce` hook is enabled. */
    enforce: string[];
    /** On an enforce failure: only report it, or also undo the claim. */
    enforcementFailure: 'report' | 'undo';
    /** Where resource plugins run unless `plugins.<name>.isolation` says otherwise (docs/plugins.md, "Isolation"). */
    isolation: Isolation;
  };
  scheduler: {
    consumers: PluginRef[];
    filters: PluginRef[];
    weighers: WeigherRef[];
    /** Hosts tried per instance before giving up. */
    maxAttempts: number;
    /** Pick randomly among the best N hosts (Nova's host_subset_size). */
    hostSubsetSize: number;
    /** How often host states are refreshed from the store, ms. */
    refreshInterval: number;
    /** Per-call timeout of async scheduler hooks, ms. */
    hookTimeout: number;
    /**
     * Step budget of the Placement-rules search per host (`@ert/placement`'s fitRequest):
     * a request that needs more is refused for that host with a reason naming the limit.
     */
    placementSearchBudget: number;
    /**
     * Request filters (docs/request-filters.md), run in this order before any host is looked
     * at: each narrows the candidate hosts by aggregate membership (Placement's `member_of` /
     * `!member_of`). Default `DEFAULT_REQUEST_FILTERS`.
     */
    requestFilters: RequestFilterName[];
  };
  /** Reservations: a scheduled instance until its host's tracker confirms it (ARCHITECTURE.md, "Reservations"). */
  reservations: {
    /** A reservation not confirmed within this long is expired (released) by any tracker or scheduler that sees it, ms. */
    timeout: number;
    /** How often a tracker looks for reservations on its host, and a scheduler waiting for a confirmation looks at the store, ms. */
    pollInterval: number;
  };
  /** `ert serve` (docs/api.md); absent when the config has no `api` section. */
  api?: {
    /** The auth mode chosen explicitly (required to serve beyond loopback); `--auth` and ERT_API_AUTH take precedence. */
    auth?: 'noauth2' | 'token-file' | 'trusted-headers';
    /** The token-file mode's file (absolute: resolved from the config's directory); `--token-file` takes precedence. */
    tokenFile?: string;
    /** Placement's policy defaults: `legacy` (8.0.0's) or `secure` (enforce_new_defaults and enforce_scope); `--policy-defaults` takes precedence. */
    policyDefaults?: 'legacy' | 'secure';
    /** A policy file overriding rules by name (absolute: resolved from the config's directory); `--policy-file` takes precedence. */
    policyFile?: string;
    /** Worker processes of `ert serve` (node:cluster); `--workers` takes precedence. */
    workers?: number;
  };
  /** Raw per-plugin options, by plugin name; validated by each plugin's schema at load. */
  plugins: Record<string, unknown>;
  flavors: Flavor[];
  /** The file the flavors were read from (`flavors: <path>`); absent when they are inline in the config. */
  flavorsFile?: string;
}

/**
 * Longest duration accepted: 2^31-1 ms (about 24.8 days). Node's timers hold no more; a
 * longer delay fires after 1 ms, so `interval: 700h` would sync in a tight loop.
 */
export const MAX_DURATION_MS = 2_147_483_647;

/**
 * Shortest `tracker.hookTimeout` and `scheduler.hookTimeout` accepted, after rounding to whole
 * ms: the dispatcher reads 0 as "no limit", so a hook timeout cannot be turned off by config.
 */
export const MIN_HOOK_TIMEOUT_MS = 1;

/**
 * Shortest `tracker.interval`, `tracker.staleAfter`, `reservations.timeout` and
 * `reservations.pollInterval` accepted, after rounding to whole ms: at 0 a period is a tight
 * loop and a deadline has always passed.
 */
export const MIN_PERIOD_MS = 1;

// The validators are Ajv standalone code generated from config-schema.ts (see
// scripts/gen-config-validators.mjs): compiling the schema here cost every process 100-150 ms.
function validateConfig(data: unknown): ConfigProblem[] {
  return validateConfigSchema(data) ? [] : problemsFromAjv(validateConfigSchema.errors);
}

function validateFlavorList(list: unknown): ConfigProblem[] {
  return validateFlavorListSchema(list) ? [] : problemsFromAjv(validateFlavorListSchema.errors, 'flavors');
}

/** Options of `configFromObject`. */
export interface ConfigSource {
  /** Directory relative paths resolve from (the config file's directory). */
  configDir: string;
  /** The file the object came from; named in every error. */
  configFile?: string;
  /** Environment for overrides (`ERT_STORE_CONNECTION`); none are applied when absent. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Directory a relative `ERT_STORE_CONNECTION` path resolves from; default process.cwd(). */
  cwd?: string;
}

const POSTGRES_URL = /^postgres(ql)?:\/\//;

/**
 * `text` with the password of every URL in it masked: `postgres://ert:***@db/ert`, also when a
 * path resolution collapsed the `//` (`/srv/postgres:/ert:***@db/ert`) and in a `password=`
 * query parameter. A store's connection is shown only this way, in messages and their details.
 */
export function maskPasswords(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/{0,2}[^\s:/?#@"'`]*):[^\s/?#"'`]*@/gi, '$1:***@').replace(/([?&]password=)[^&#\s"'`]*/gi, '$1***');
}

/**
 * The key path of the first value that contains itself (a recursive YAML alias such as
 * `a: &a [*a]`, or a circular object from a JS config), or undefined. Plugin objects are
 * not walked.
 */
export function findCycle(value: unknown, path = '', ancestors: Set<unknown> = new Set()): string | undefined {
  if (typeof value !== 'object' || value === null || isPlugin(value)) return undefined;
  if (ancestors.has(value)) return path === '' ? '(top level)' : path;
  ancestors.add(value);
  try {
    const entries: Array<[string, unknown]> = Array.isArray(value)
      ? value.map((v, i) => [`${path}[${i}]`, v])
      : Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null
        ? Object.entries(value).map(([k, v]) => [path === '' ? k : `${path}.${k}`, v])
        : [];
    for (const [at, child] of entries) {
      const found = findCycle(child, at, ancestors);
      if (found !== undefined) return found;
    }
    return undefined;
  } finally {
    ancestors.delete(value);
  }
}

function refuseCycle(value: unknown, file: string): void {
  const at = findCycle(value);
  if (at !== undefined) {
    throw new ConfigError(
      CoreErrorCodes.CONFIG_PARSE,
      `Config file ${file} cannot be used: ${at} contains itself (a recursive YAML alias or a circular object)`,
      { file, path: at },
    );
  }
}

/** Deep copy of plain objects and arrays; anything else (plugin objects) is kept by reference. */
function clonePlain(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(clonePlain);
  if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype && !isPlugin(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clonePlain(v)]));
  }
  return value;
}

function configError(file: string, problems: ConfigProblem[]): ConfigError {
  const lines = problems.map((p) => `${file}: ${formatProblem(p)}`);
  return new ConfigError(
    CoreErrorCodes.CONFIG_INVALID,
    `Invalid config ${file} (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${lines.join('\n')}`,
    { file, problems },
  );
}

/** A plugin object put directly in a list becomes `{ plugin }` so the schema sees a ref object. */
function wrapPluginObjects(section: unknown, keys: string[]): void {
  if (typeof section !== 'object' || section === null) return;
  for (const key of keys) {
    const list = (section as Record<string, unknown>)[key];
    if (!Array.isArray(list)) continue;
    list.forEach((item, i) => {
      if (isPlugin(item)) list[i] = { plugin: item };
    });
  }
}

type RawRef = string | { name?: string; use?: string; plugin?: unknown; multiplier?: number };

function toRef(raw: RawRef, path: string, configDir: string, problems: ConfigProblem[]): PluginRef {
  if (typeof raw === 'string') return { name: raw };
  const ref: PluginRef = { name: raw.name ?? '' };
  if (raw.plugin !== undefined) {
    if (!isPlugin(raw.plugin)) {
      problems.push({ path: `${path}.plugin`, value: raw.plugin, expected: 'a plugin object made by definePlugin' });
    } else {
      ref.plugin = raw.plugin;
      if (ref.name === '') ref.name = raw.plugin.name;
    }
  }
  if (raw.use !== undefined) ref.use = raw.use.startsWith('.') ? resolve(configDir, raw.use) : raw.use;
  return ref;
}

function toFlavor(raw: { name: string; vcpus: number; memory_mb: number; disk_gb: number; extra_specs: Record<string, unknown> }): Flavor {
  return {
    name: raw.name,
    vcpus: raw.vcpus,
    memoryMb: raw.memory_mb,
    diskGb: raw.disk_gb,
    extraSpecs: Object.fromEntries(Object.entries(raw.extra_specs).map(([k, v]) => [k, String(v)])),
  };
}

/** Flavors from a YAML (or JSON) file holding a list or `{ flavors: [...] }`. Errors name that file. */
function loadFlavorFile(file: string): unknown[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(CoreErrorCodes.CONFIG_NOT_FOUND, `Flavors file ${file} cannot be read: ${messageOf(err)}`, { path: file }, { cause: err });
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    throw new ConfigError(CoreErrorCodes.CONFIG_PARSE, `Flavors file ${file} is not valid YAML: ${messageOf(err)}`, { file }, { cause: err });
  }
  refuseCycle(data, file);
  const list = typeof data === 'object' && data !== null && !Array.isArray(data) && 'flavors' in data ? (data as { flavors: unknown }).flavors : data;
  const problems = validateFlavorList(list);
  if (problems.length > 0) throw configError(file, problems);
  return list as unknown[];
}

/** A flavor name used twice: the later one is the problem, naming the earlier one's index. */
function duplicateFlavorProblems(flavors: Flavor[]): ConfigProblem[] {
  const seen = new Map<string, number>();
  const problems: ConfigProblem[] = [];
  flavors.forEach((f, i) => {
    const first = seen.get(f.name);
    if (first !== undefined) problems.push({ path: `flavors[${i}].name`, value: f.name, expected: `a flavor name not used by an earlier flavor (flavors[${first}] is ${JSON.stringify(f.name)})` });
    else seen.set(f.name, i);
  });
  return problems;
}

/**
 * Whether a ref's plugin name is known before loading: a builtin or bare name, `{ name, use }`,
 * or a plugin object. A path (`./ert-plugin-nvme`) or package specifier (`@acme/x`,
 * `ert-plugin-x`) is known by the name its `definePlugin` gives, once loaded.
 */
export function refNameKnown(ref: PluginRef): boolean {
  return ref.plugin !== undefined || ref.use !== undefined || (/^[a-z0-9][a-z0-9_-]*$/i.test(ref.name) && !ref.name.startsWith('ert-plugin-'));
}

/**
 * The `plugins.<name>` check of a config with path or package refs, once one side's plugins
 * are loaded: `loaded` maps each ref loaded (as written) to its plugin's name. No verdict (no
 * problem) while a ref of the other side has a name this process cannot know.
 */
export function unusedPluginOptionsAfterLoad(config: ErtConfig, loaded: ReadonlyMap<string, string>): ConfigProblem[] {
  const refs = [...config.tracker.resources, ...config.scheduler.consumers, ...config.scheduler.filters, ...config.scheduler.weighers];
  if (refs.every(refNameKnown)) return [];
  const names = new Set<string>();
  for (const ref of refs) {
    if (refNameKnown(ref)) names.add(ref.name);
    else if (loaded.has(ref.name)) names.add(loaded.get(ref.name)!);
    else return [];
  }
  return unusedPluginOptionProblems(config.plugins, names);
}

/**
 * `plugins.<name>` must name a plugin the config uses (a resource, consumer, filter or
 * weigher): options under a mistyped name would otherwise be ignored silently.
 */
function unusedPluginOptionProblems(plugins: Record<string, unknown>, used: ReadonlySet<string>): ConfigProblem[] {
  return Object.keys(plugins)
    .filter((name) => !used.has(name))
    .map((name) => ({
      path: `plugins.${name}`,
      value: plugins[name],
      expected: `options of a configured plugin; no plugin named ${JSON.stringify(name)} is in tracker.resources or scheduler.consumers, filters or weighers (configured: ${[...used].join(', ') || 'none'})`,
    }));
}

/**
 * Validate a config object (as a config file would hold it) and build the `ErtConfig`:
 * defaults applied, durations converted to ms, relative paths resolved from `configDir`,
 * a flavors file read. `input` is not modified. A postgres:// (or postgresql://)
 * `store.connection` selects client pg when `store.client` is not given, and is a problem
 * with `client: sqlite3`. With `env`, `ERT_STORE_CONNECTION` overrides `store.connection` (a
 * postgres:// URL selects client pg, anything else is a sqlite3 path resolved from `cwd`). Throws ConfigError ERT_CONFIG_INVALID listing every
 * problem, one line each, naming the file, key path, value and what was expected.
 */
export function configFromObject(input: unknown, source: ConfigSource): ErtConfig {
  const file = source.configFile ?? '<config object>';
  const configDir = resolve(source.configDir);
  refuseCycle(input, file);
  const raw = clonePlain(input ?? {});
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw configError(file, [{ path: '', value: raw, expected: 'an object (the config)' }]);
  }
  const data = raw as Record<string, any>;
  const envConnection = source.env?.ERT_STORE_CONNECTION;
  if (envConnection !== undefined && envConnection !== '') {
    const store = typeof data.store === 'object' && data.store !== null ? data.store : {};
    const pg = POSTGRES_URL.test(envConnection);
    data.store = {
      ...store,
      client: pg ? 'pg' : 'sqlite3',
      connection: pg || envConnection === ':memory:' ? envConnection : resolve(source.cwd ?? process.cwd(), envConnection),
    };
  }
  wrapPluginObjects(data.tracker, ['resources']);
  wrapPluginObjects(data.scheduler, ['consumers', 'filters', 'weighers']);
  // Before the schema's default (sqlite3) fills it in: whether the file chose the client.
  const clientGiven = typeof data.store === 'object' && data.store !== null && (data.store as Record<string, unknown>).client !== undefined;

  const problems = validateConfig(data);
  if (problems.length > 0) throw configError(file, problems);

  // A PostgreSQL URL selects pg, as it does in ERT_STORE_CONNECTION; with sqlite3 chosen
  // explicitly it would be taken as a file path (and its password printed in the error).
  if (typeof data.store.connection === 'string' && POSTGRES_URL.test(data.store.connection)) {
    if (!clientGiven) data.store.client = 'pg';
    else if (data.store.client === 'sqlite3') {
      problems.push({
        path: 'store.client',
        value: 'sqlite3',
        expected: `pg: store.connection is a PostgreSQL URL (${maskPasswords(data.store.connection)}); set client: pg, or give store.connection a SQLite file path`,
      });
    }
  }

  if (data.store.client === 'pg' && data.store.connection === undefined) {
    problems.push({ path: 'store.connection', value: undefined, expected: 'a postgres:// URL (required with client pg)' });
  }
  const refs = (list: RawRef[], path: string) => list.map((r, i) => toRef(r, `${path}[${i}]`, configDir, problems));
  const resources = refs(data.tracker.resources, 'tracker.resources');
  const consumers = refs(data.scheduler.consumers, 'scheduler.consumers');
  const filters = refs(data.scheduler.filters, 'scheduler.filters');
  const weighers = (data.scheduler.weighers as RawRef[]).map((r, i) => ({
    ...toRef(r, `scheduler.weighers[${i}]`, configDir, problems),
    multiplier: typeof r === 'string' ? 1 : (r.multiplier ?? 1),
  }));

  // A path or package ref's plugin name is known only once loaded: then the runtime checks (unusedPluginOptionsAfterLoad).
  const allRefs = [...resources, ...consumers, ...filters, ...weighers];
  if (allRefs.every(refNameKnown)) problems.push(...unusedPluginOptionProblems(data.plugins, new Set(allRefs.map((r) => r.name))));
  if (problems.length > 0) throw configError(file, problems);

  let flavors: Flavor[] = [];
  const flavorsFile = typeof data.flavors === 'string' ? resolve(configDir, data.flavors) : undefined;
  if (flavorsFile !== undefined) {
    flavors = loadFlavorFile(flavorsFile).map((f) => toFlavor(f as never));
  } else {
    flavors = (data.flavors as never[]).map(toFlavor);
  }
  // A duplicate name is a problem of the file that holds the flavors.
  const duplicates = duplicateFlavorProblems(flavors);
  if (duplicates.length > 0) throw configError(flavorsFile ?? file, duplicates);

  // Durations become ms; one that a timer cannot hold is a problem naming its key.
  const durationAt = (path: string, value: string | number): number => {
    const ms = parseDuration(value);
    if (ms > MAX_DURATION_MS) {
      problems.push({ path, value, expected: `a duration of at most ${MAX_DURATION_MS} ms (about 24.8 days; ${ms} ms is longer)` });
    }
    return ms;
  };
  // A hook timeout of 0 ms would be "no limit" to the dispatcher: a hook that hangs would hold
  // every claim and stop() forever. Checked after rounding, so `0.4ms` is refused too.
  const hookTimeoutAt = (path: string, value: string | number): number => {
    const ms = durationAt(path, value);
    if (ms < MIN_HOOK_TIMEOUT_MS) {
      problems.push({ path, value, expected: `a duration of at least ${MIN_HOOK_TIMEOUT_MS} ms (a hook timeout cannot be turned off: 0 would let a hanging hook hold the tracker forever)` });
    }
    return ms;
  };
  // A period or a deadline of 0 ms is meaningless (MIN_PERIOD_MS): checked after rounding, so
  // `0.4ms` is refused too. `store.busyTimeout` (0: do not wait for a lock) and
  // `scheduler.refreshInterval` (0: read before every decision) take 0.
  const positiveDurationAt = (path: string, value: string | number, why: string): number => {
    const ms = durationAt(path, value);
    if (ms < MIN_PERIOD_MS) problems.push({ path, value, expected: `a duration of at least ${MIN_PERIOD_MS} ms (${why})` });
    return ms;
  };
  const t = data.tracker;
  const s = data.scheduler;
  const { busyTimeout, ...storeRest } = data.store as Record<string, unknown> & { busyTimeout: string | number };
  const busyTimeoutMs = durationAt('store.busyTimeout', busyTimeout);
  const interval = positiveDurationAt('tracker.interval', t.interval, 'the tracker would update the store in a tight loop');
  const staleAfter =
    t.staleAfter === undefined ? Math.min(3 * interval, MAX_DURATION_MS) : positiveDurationAt('tracker.staleAfter', t.staleAfter, 'every host would be stale, and each tracker would mark all the others stale at every update');
  const hookTimeout = hookTimeoutAt('tracker.hookTimeout', t.hookTimeout);
  const refreshInterval = durationAt('scheduler.refreshInterval', s.refreshInterval);
  const schedulerHookTimeout = hookTimeoutAt('scheduler.hookTimeout', s.hookTimeout);
  const reservationTimeout = positiveDurationAt('reservations.timeout', data.reservations.timeout, 'every reservation would expire as soon as it is made');
  const reservationPoll = positiveDurationAt('reservations.pollInterval', data.reservations.pollInterval, 'the tracker and a waiting scheduler would read the store in a tight loop');
  if (problems.length > 0) throw configError(file, problems);

  const store = { ...storeRest, connection: (storeRest.connection as string | undefined) ?? './ert.db', busyTimeoutMs } as StoreOptions;
  if (store.client === 'sqlite3' && store.connection !== ':memory:') store.connection = resolve(configDir, store.connection);
  return {
    ...(source.configFile === undefined ? {} : { configFile: resolve(source.configFile) }),
    configDir,
    store,
    log: { level: data.log.level },
    tracker: {
      ...(t.hostName === undefined ? {} : { hostName: t.hostName }),
      root: resolve(configDir, t.root),
      resources,
      interval,
      staleAfter,
      ...(t.providerConfigs === undefined ? {} : { providerConfigs: resolve(configDir, t.providerConfigs) }),
      hookTimeout,
      enforce: t.enforce,
      enforcementFailure: t.enforcementFailure,
      isolation: t.isolation,
    },
    scheduler: {
      consumers,
      filters,
      weighers,
      maxAttempts: s.maxAttempts,
      hostSubsetSize: s.hostSubsetSize,
      refreshInterval,
      hookTimeout: schedulerHookTimeout,
      placementSearchBudget: s.placementSearchBudget,
      requestFilters: s.requestFilters,
    },
    reservations: { timeout: reservationTimeout, pollInterval: reservationPoll },
    ...(data.api === undefined
      ? {}
      : {
          api: {
            ...(data.api.auth === undefined ? {} : { auth: data.api.auth }),
            ...(data.api.tokenFile === undefined ? {} : { tokenFile: resolve(configDir, data.api.tokenFile) }),
            ...(data.api.policyDefaults === undefined ? {} : { policyDefaults: data.api.policyDefaults }),
            ...(data.api.policyFile === undefined ? {} : { policyFile: resolve(configDir, data.api.policyFile) }),
            ...(data.api.workers === undefined ? {} : { workers: data.api.workers }),
          },
        }),
    plugins: data.plugins,
    flavors,
    ...(flavorsFile === undefined ? {} : { flavorsFile }),
  };
}

/** Where cosmiconfig looks, in order, in the start directory. */
export const CONFIG_SEARCH_PLACES = [
  'package.json',
  '.ertrc',
  '.ertrc.json',
  '.ertrc.yaml',
  '.ertrc.yml',
  'ert.config.ts',
  'ert.config.mjs',
  'ert.config.js',
  'ert.config.json',
  'ert.config.yaml',
  'ert.config.yml',
];

const loadYaml: Loader = (_file, content) => parseYaml(content);

/** Options of `loadConfig`. */
export interface LoadConfigOptions {
  /** Explicit config file (relative to `cwd`); overrides `ERT_CONFIG`. */
  path?: string;
  /** Directory searched when no path is given; default process.cwd(). */
  cwd?: string;
  /** Environment (`ERT_CONFIG`, `ERT_STORE_CONNECTION`); default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Find, read and validate the config. The file is `path`, else `$ERT_CONFIG`, else the first
 * of CONFIG_SEARCH_PLACES found in `cwd` (the `ert` key for package.json); only that
 * directory is searched. Returns the `ErtConfig` (see `configFromObject`); reads files only,
 * so calling it again gives the same result for the same files.
 * Throws ConfigError: ERT_CONFIG_NOT_FOUND (no such file / nothing found, naming where it
 * looked), ERT_CONFIG_PARSE (the file cannot be parsed or imported), ERT_CONFIG_INVALID.
 */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<ErtConfig> {
  const env = options.env ?? process.env;
  const cwd = resolve(options.cwd ?? process.cwd());
  const explorer = cosmiconfig('ert', {
    searchPlaces: CONFIG_SEARCH_PLACES,
    searchStrategy: 'none',
    cache: false,
    // An empty config file is a deliberate "all defaults", not a reason to look further.
    ignoreEmptySearchPlaces: false,
    loaders: { '.yaml': loadYaml, '.yml': loadYaml, noExt: loadYaml },
  });
  const explicit = options.path ?? (env.ERT_CONFIG === '' ? undefined : env.ERT_CONFIG);
  let result: Awaited<ReturnType<typeof explorer.search>>;
  let file: string | undefined;
  try {
    if (explicit !== undefined) {
      file = isAbsolute(explicit) ? explicit : resolve(cwd, explicit);
      if (!existsSync(file)) {
        const via = options.path !== undefined ? 'the path given' : 'ERT_CONFIG';
        throw new ConfigError(CoreErrorCodes.CONFIG_NOT_FOUND, `Config file ${file} (from ${via}) does not exist`, { path: file });
      }
      result = await explorer.load(file);
    } else {
      result = await explorer.search(cwd);
    }
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const at = file ?? (err as { filepath?: string }).filepath ?? cwd;
    throw new ConfigError(CoreErrorCodes.CONFIG_PARSE, `Config file ${at} cannot be parsed: ${messageOf(err).split('\n')[0]}`, { file: at }, { cause: err });
  }
  if (result === null && file !== undefined) {
    throw new ConfigError(CoreErrorCodes.CONFIG_NOT_FOUND, `Config file ${file} holds no ert config (no "ert" key)`, { path: file });
  }
  if (result === null) {
    throw new ConfigError(
      CoreErrorCodes.CONFIG_NOT_FOUND,
      `No ert config in ${cwd}: looked for ${CONFIG_SEARCH_PLACES.join(', ')} (the "ert" key of package.json); set ERT_CONFIG or pass a path`,
      { searched: cwd, places: CONFIG_SEARCH_PLACES },
    );
  }
  return configFromObject(result.isEmpty ? {} : result.config, {
    configDir: dirname(result.filepath),
    configFile: result.filepath,
    env,
    cwd,
  });
}
