import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { Plugin } from '@ert/plugin-api';
import { CoreErrorCodes, PluginStatsError, describeValue } from './errors.js';
import { compileSchema, formatProblem, lazyAjv, problemsFromAjv } from './schema.js';

const ajv = lazyAjv({ strict: false, optimize: false });
const compiled = new WeakMap<Plugin, ValidateFunction>();

/**
 * Check `data` against `plugin.stats.schema` before anything is written (the schema is
 * compiled once per plugin object). Returns normally when it conforms. Throws
 * PluginStatsError ERT_PLUGIN_STATS_INVALID naming the plugin, the JSON path of each fault
 * (`stats.domains[0].ways`), the value and what was expected; also when the plugin declares
 * no stats schema. Never modifies `data`.
 */
export function validateStats(plugin: Plugin, data: unknown): void {
  if (plugin.stats === undefined) {
    throw new PluginStatsError(
      CoreErrorCodes.PLUGIN_STATS_INVALID,
      `Plugin "${plugin.name}" reported stats but declares no stats schema`,
      { plugin: plugin.name, problems: [] },
    );
  }
  let validate = compiled.get(plugin);
  if (validate === undefined) {
    validate = compileSchema(ajv(), plugin.stats.schema, `plugin "${plugin.name}" stats`);
    compiled.set(plugin, validate);
  }
  if (validate(data)) return;
  const problems = problemsFromAjv(validate.errors, 'stats');
  const first = problems[0];
  throw new PluginStatsError(
    CoreErrorCodes.PLUGIN_STATS_INVALID,
    `Plugin "${plugin.name}" stats (schema version ${plugin.stats.version}) are invalid: ${problems.map(formatProblem).join('; ')}`,
    { plugin: plugin.name, path: first?.path, value: first === undefined ? undefined : describeValue(first.value), problems },
  );
}
