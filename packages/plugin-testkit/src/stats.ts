/**
 * Stats checked against the plugin's declared schema the way the host's stats writer
 * (`@ert/core`'s `validateStats`, called by the tracker before anything is written) checks
 * them: on the same JSON copy (`statsCopy` of `@ert/plugin-api`: what the store will hold,
 * refusing what JSON cannot hold and stats over `MAX_STATS_BYTES`), with the same validator, Ajv's JSON Schema 2020-12, with the same settings (every
 * error, union types, lenient about unknown keywords in plugin schemas, ert's `expected`
 * annotation). The kit does not depend on `@ert/core` (which brings the store and its
 * database drivers); its own tests compare both verdicts on every first-party plugin.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { statsCopy, type PluginDefinition, type StatsSchema } from '@ert/plugin-api';
import { TestkitError, TestkitErrorCodes } from './errors.js';

const ajv = new Ajv2020({ allErrors: true, verbose: true, strict: false, allowUnionTypes: true, strictRequired: false });
ajv.addKeyword({ keyword: 'expected', schemaType: 'string' });
const compiled = new WeakMap<object, ValidateFunction>();

/** The compiled validator of a stats schema (once per schema object). Throws when the schema itself is invalid. */
export function statsValidator(stats: StatsSchema): ValidateFunction {
  let validate = compiled.get(stats.schema);
  if (validate === undefined) {
    validate = ajv.compile(stats.schema);
    compiled.set(stats.schema, validate);
  }
  return validate;
}

/** `stats.numaNodes[0].cpus` from a JSON pointer `/numaNodes/0/cpus`. */
function pathOf(pointer: string): string {
  let path = 'stats';
  for (const raw of pointer === '' ? [] : pointer.slice(1).split('/')) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    path += /^\d+$/.test(segment) ? `[${segment}]` : /^[A-Za-z_$][\w$-]*$/.test(segment) ? `.${segment}` : `[${JSON.stringify(segment)}]`;
  }
  return path;
}

/**
 * Why `data` would be refused by the host's stats writer: one line per fault
 * (`stats.cpus: must be integer`), or [] when it conforms. A plugin that declares no
 * `stats` schema gets one problem (the host refuses any stats from it); stats JSON cannot
 * hold as they are (`stats.load is NaN, which JSON cannot hold`, a BigInt, a cycle) or over
 * `MAX_STATS_BYTES` get one too. The schema is checked on the JSON copy the host writes.
 */
export function statsProblems(plugin: Pick<PluginDefinition<any, any, any>, 'name' | 'stats'>, data: unknown): string[] {
  if (plugin.stats === undefined) return [`plugin "${plugin.name}" reported stats but declares no stats schema`];
  const copy = statsCopy(data);
  if ('problem' in copy) return [copy.problem];
  const validate = statsValidator(plugin.stats);
  if (validate(copy.data)) return [];
  return (validate.errors ?? []).map((e) => {
    const where = e.keyword === 'required' ? `${pathOf(e.instancePath)}.${String((e.params as { missingProperty?: unknown }).missingProperty)}` : pathOf(e.instancePath);
    const extra = e.keyword === 'additionalProperties' ? ` (${String((e.params as { additionalProperty?: unknown }).additionalProperty)})` : '';
    return `${where}: ${e.message ?? e.keyword}${extra}`;
  });
}

/**
 * Throw TestkitError ERT_PLUGIN_STATS_INVALID (the code the host uses) naming the plugin,
 * its schema version and every problem when `data` fails the plugin's stats schema.
 */
export function assertValidStats(plugin: Pick<PluginDefinition<any, any, any>, 'name' | 'stats'>, data: unknown): void {
  const problems = statsProblems(plugin, data);
  if (problems.length === 0) return;
  const version = plugin.stats === undefined ? '' : ` (schema version ${plugin.stats.version})`;
  throw new TestkitError(TestkitErrorCodes.STATS_INVALID, `Plugin "${plugin.name}" stats${version} are invalid: ${problems.join('; ')}`, { plugin: plugin.name, problems });
}
