import { DURATION_EXPECTED, DURATION_PATTERN } from './duration.js';

/*
 * The config file's JSON Schemas and the names they enumerate. Kept apart from config.ts so
 * scripts/gen-config-validators.mjs can import them from the build and write the validators
 * ert runs (config-validators.generated.ts) without Ajv compiling them in every process.
 */

/** Where a resource plugin's hooks run: in the tracker's thread, or in a worker thread of their own. */
export type Isolation = 'inprocess' | 'worker';
export const ISOLATIONS: readonly Isolation[] = ['inprocess', 'worker'];

/**
 * The scheduler's request filters, by name (docs/request-filters.md): Nova's placement request
 * filters, each a narrowing of the candidate hosts by aggregate membership.
 */
export type RequestFilterName = 'availability-zone' | 'tenant-isolation' | 'isolated-aggregates' | 'forbidden-aggregates';
export const REQUEST_FILTERS: readonly RequestFilterName[] = ['availability-zone', 'tenant-isolation', 'isolated-aggregates', 'forbidden-aggregates'];
/**
 * `scheduler.requestFilters` when the config has none, as Nova's defaults: zones are a
 * placement query (query_placement_for_availability_zone, on since Xena), a request's own
 * forbidden aggregates apply; tenant isolation (limit_tenants_to_placement_aggregate,
 * AggregateMultiTenancyIsolation) and isolated aggregates (enable_isolated_aggregate_filtering)
 * are off until configured.
 */
export const DEFAULT_REQUEST_FILTERS: readonly RequestFilterName[] = ['availability-zone', 'forbidden-aggregates'];

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

const nonEmptyString = { type: 'string', minLength: 1 };
const duration = (fallback?: string) => ({
  type: ['string', 'number'],
  pattern: DURATION_PATTERN,
  minimum: 0,
  expected: DURATION_EXPECTED,
  ...(fallback === undefined ? {} : { default: fallback }),
});
const REF_EXPECTED = 'a plugin name or path, a plugin object, or { name, use }';
const pluginRef = (weigher: boolean) => ({
  type: ['string', 'object'],
  minLength: 1,
  expected: weigher ? `${REF_EXPECTED} with an optional multiplier` : REF_EXPECTED,
  properties: {
    name: nonEmptyString,
    use: nonEmptyString,
    plugin: {},
    ...(weigher ? { multiplier: { type: 'number', default: 1 } } : {}),
  },
  additionalProperties: false,
  anyOf: [{ required: ['name'] }, { required: ['plugin'] }],
});
const pluginList = (weigher = false) => ({ type: 'array', items: pluginRef(weigher), default: [] });

/** JSON Schema of one flavor, Nova spelling. Extra-spec numbers and booleans are taken as strings. */
export const FLAVOR_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'vcpus', 'memory_mb'],
  properties: {
    name: nonEmptyString,
    vcpus: { type: 'integer', minimum: 1 },
    memory_mb: { type: 'integer', minimum: 1 },
    disk_gb: { type: 'integer', minimum: 0, default: 0 },
    extra_specs: {
      type: 'object',
      additionalProperties: { type: ['string', 'number', 'boolean'], expected: 'a string' },
      default: {},
    },
  },
};

/** JSON Schema of the config file (before durations and paths are converted). */
export const CONFIG_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    store: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        client: { enum: ['sqlite3', 'pg'], default: 'sqlite3' },
        connection: nonEmptyString,
        pool: {
          type: 'object',
          additionalProperties: false,
          properties: { min: { type: 'integer', minimum: 0 }, max: { type: 'integer', minimum: 1 } },
        },
        schema: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$', expected: 'a schema name (letters, digits, _)' },
        busyTimeout: duration('5s'),
      },
    },
    log: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: { level: { enum: LOG_LEVELS, default: 'info' } },
    },
    tracker: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        hostName: nonEmptyString,
        root: { ...nonEmptyString, default: '/' },
        resources: pluginList(),
        interval: duration('60s'),
        staleAfter: duration(),
        providerConfigs: nonEmptyString,
        hookTimeout: duration('5s'),
        enforce: { type: 'array', items: nonEmptyString, default: [] },
        enforcementFailure: { enum: ['report', 'undo'], default: 'report' },
        isolation: { enum: ISOLATIONS, default: 'inprocess' },
      },
    },
    scheduler: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        consumers: pluginList(),
        filters: pluginList(),
        weighers: pluginList(true),
        maxAttempts: { type: 'integer', minimum: 1, default: 3 },
        hostSubsetSize: { type: 'integer', minimum: 1, default: 1 },
        refreshInterval: duration('1s'),
        hookTimeout: duration('1s'),
        placementSearchBudget: { type: 'integer', minimum: 100, maximum: 100000000, default: 50000 },
        requestFilters: { type: 'array', items: { enum: [...REQUEST_FILTERS] }, uniqueItems: true, default: [...DEFAULT_REQUEST_FILTERS] },
      },
    },
    reservations: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        timeout: duration('2m'),
        pollInterval: duration('500ms'),
      },
    },
    // `ert serve` (@ert/api's AUTH_MODES).
    api: {
      type: 'object',
      additionalProperties: false,
      properties: {
        auth: { enum: ['noauth2', 'token-file', 'trusted-headers'] },
        tokenFile: { type: 'string', minLength: 1 },
        policyDefaults: { enum: ['legacy', 'secure'] },
        policyFile: { type: 'string', minLength: 1 },
        workers: { type: 'integer', minimum: 1, maximum: 256 },
      },
    },
    // `isolation` is ert's key in every plugin's options (taken out before the plugin's own schema sees them).
    plugins: { type: 'object', additionalProperties: { type: 'object', properties: { isolation: { enum: ISOLATIONS } } }, default: {} },
    flavors: {
      type: ['array', 'string'],
      minLength: 1,
      expected: 'a list of flavors or the path of a YAML file holding them',
      items: FLAVOR_SCHEMA,
      default: [],
    },
  },
};
