import { ErtError } from '@ert/plugin-api';
export { messageOf } from '@ert/plugin-api';

/**
 * The error catalogue of @ert/core. Codes are stable; `details` carries the values at fault.
 *
 * Config (ConfigError):
 * - ERT_CONFIG_NOT_FOUND   no config file where one was asked for or searched; details {path?, searched?}
 * - ERT_CONFIG_PARSE       a config or flavors file is not valid JSON/YAML/JS; details {file}
 * - ERT_CONFIG_INVALID     the config breaks its schema; details {file, problems: ConfigProblem[]}
 *
 * Plugin loading (PluginLoadError), details always include {plugin}:
 * - ERT_PLUGIN_NOT_FOUND          no candidate resolved; details {candidates: [{specifier, reason}]}
 * - ERT_PLUGIN_MANIFEST_MISSING   the package has no `ert` block in package.json
 * - ERT_PLUGIN_MANIFEST_INVALID   the `ert` block is malformed, or peerDependencies["@ert/plugin-api"] is missing or not a range
 * - ERT_PLUGIN_API_MISMATCH       the package's peerDependencies["@ert/plugin-api"] range, or the version a plugin
 *                                 object was made with, excludes the @ert/plugin-api this host runs;
 *                                 details {apiRange | apiVersion, hostApiVersion}
 * - ERT_PLUGIN_KIND_NOT_PROVIDED  the config uses the plugin as a kind it does not provide
 * - ERT_PLUGIN_ENTRY_MISSING      the side's entry point is not declared or does not resolve
 * - ERT_PLUGIN_IMPORT_FAILED      importing the entry threw; details {file, format?} (format: an ES module / CommonJS mix-up, explained);
 *                                 or an `isolation: worker` thread did not import it in time; details {plugin, timeoutMs}
 * - ERT_PLUGIN_NOT_A_PLUGIN       the entry's default export was not made by `definePlugin`
 * - ERT_PLUGIN_NAME_CONFLICT      two different plugins configured under one name
 * - ERT_PLUGIN_OPTIONS_INVALID    `plugins.<name>` fails the plugin's optionsSchema; details {problems}
 * - ERT_PLUGIN_EXTRA_SPEC_CONFLICT two plugins own the same extra-spec key; details {key, plugins}
 *
 * Hooks (PluginHookError), details {plugin, hook}:
 * - ERT_PLUGIN_HOOK_FAILED         the hook threw or rejected (the original error is `cause`)
 * - ERT_PLUGIN_HOOK_TIMEOUT        the hook did not settle within the timeout; details {timeoutMs}
 * - ERT_PLUGIN_HOOK_INVALID_RESULT the hook's result failed validation; details {problem}
 *
 * Stats (PluginStatsError), details {plugin, path?, problems}:
 * - ERT_PLUGIN_STATS_INVALID       stats data fails the plugin's stats schema (or it declares none)
 */
export const CoreErrorCodes = {
  CONFIG_NOT_FOUND: 'ERT_CONFIG_NOT_FOUND',
  CONFIG_PARSE: 'ERT_CONFIG_PARSE',
  CONFIG_INVALID: 'ERT_CONFIG_INVALID',
  PLUGIN_NOT_FOUND: 'ERT_PLUGIN_NOT_FOUND',
  PLUGIN_MANIFEST_MISSING: 'ERT_PLUGIN_MANIFEST_MISSING',
  PLUGIN_MANIFEST_INVALID: 'ERT_PLUGIN_MANIFEST_INVALID',
  PLUGIN_API_MISMATCH: 'ERT_PLUGIN_API_MISMATCH',
  PLUGIN_KIND_NOT_PROVIDED: 'ERT_PLUGIN_KIND_NOT_PROVIDED',
  PLUGIN_ENTRY_MISSING: 'ERT_PLUGIN_ENTRY_MISSING',
  PLUGIN_IMPORT_FAILED: 'ERT_PLUGIN_IMPORT_FAILED',
  PLUGIN_NOT_A_PLUGIN: 'ERT_PLUGIN_NOT_A_PLUGIN',
  PLUGIN_NAME_CONFLICT: 'ERT_PLUGIN_NAME_CONFLICT',
  PLUGIN_OPTIONS_INVALID: 'ERT_PLUGIN_OPTIONS_INVALID',
  PLUGIN_EXTRA_SPEC_CONFLICT: 'ERT_PLUGIN_EXTRA_SPEC_CONFLICT',
  PLUGIN_HOOK_FAILED: 'ERT_PLUGIN_HOOK_FAILED',
  PLUGIN_HOOK_TIMEOUT: 'ERT_PLUGIN_HOOK_TIMEOUT',
  PLUGIN_HOOK_INVALID_RESULT: 'ERT_PLUGIN_HOOK_INVALID_RESULT',
  PLUGIN_STATS_INVALID: 'ERT_PLUGIN_STATS_INVALID',
} as const;

export type CoreErrorCode = (typeof CoreErrorCodes)[keyof typeof CoreErrorCodes];

/** One schema violation: where (`tracker.interval`), the value found and what was expected. */
export interface ConfigProblem {
  path: string;
  value: unknown;
  expected: string;
}

/** A config file that cannot be found, parsed or validated. The message has one line per problem. */
export class ConfigError extends ErtError {}

/** A plugin that cannot be resolved, imported, checked or given its options. */
export class PluginLoadError extends ErtError {}

/** A hook call that threw, rejected, timed out or returned something invalid. `cause` is kept. */
export class PluginHookError extends ErtError {}

/** Stats data that fails the plugin's stats schema. */
export class PluginStatsError extends ErtError {}

/** Short, single-line rendering of a value for error messages. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n (a BigInt)`;
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

