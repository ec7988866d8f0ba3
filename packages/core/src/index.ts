/**
 * @ert/core — the host: config (cosmiconfig + JSON Schema), plugin loader, dispatcher,
 * logging (pino) and DI (tsyringe). The tracker, the scheduler and the CLI build on it.
 */
export * from './errors.js';
export { parseDuration, DURATION_EXPECTED } from './duration.js';
export {
  loadConfig,
  configFromObject,
  maskPasswords,
  CONFIG_SEARCH_PLACES,
  type ErtConfig,
  type PluginRef,
  type WeigherRef,
  type ConfigSource,
  type LoadConfigOptions,
} from './config.js';
export { CONFIG_SCHEMA, FLAVOR_SCHEMA, LOG_LEVELS, ISOLATIONS, type Isolation, type LogLevel } from './config-schema.js';
export { createLogger, type LoggerOptions } from './logger.js';
export { Dispatcher, createDispatcher, currentHookCall, type HookCall, type CallOptions, type DispatcherOptions, type HookCallObservation, type HookTiming, type ResultValidator } from './dispatcher.js';
export {
  resolvePlugin,
  packageCandidates,
  isPathSpecifier,
  defaultConditions,
  resolveExportSubpath,
  SIDE_KINDS,
  type PluginSide,
  type ResolvedPlugin,
  type ResolvePluginOptions,
  type CandidateFailure,
} from './loader.js';
export {
  createPluginRuntime,
  validatePluginOptions,
  isolationOf,
  PluginServices,
  TOKENS,
  systemClock,
  type PluginRuntime,
  type PluginRuntimeOptions,
  type ActivePlugin,
  type ActiveResource,
  type ActiveConsumer,
  type ActiveFilter,
  type ActiveWeigher,
} from './runtime.js';
export { loadWorkerResource, workerEntry, WORKER_LOAD_TIMEOUT_MS, type LoadedWorkerResource, type WorkerResourceOptions } from './isolation/host.js';
export { validateStats } from './stats.js';
export { seededRandom } from './random.js';
export { Backoff } from './backoff.js';
