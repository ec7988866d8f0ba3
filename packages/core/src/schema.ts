import type { Ajv2020, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type { JsonSchema } from '@ert/plugin-api';
import { describeValue, messageOf, type ConfigProblem } from './errors.js';
import { lazyRequire } from './lazy-require.js';

/**
 * Ajv instances and the translation of Ajv's errors into `ConfigProblem`s
 * (`tracker.interval: got "abc", expected ...`), shared by the config, plugin options
 * and plugin stats so that every schema error in ert reads the same way.
 */

/** Ajv, loaded by the first `createAjv`: the config's validators are generated, so a command that compiles no schema (`ert hosts`) does not load it. */
const ajvModule = lazyRequire<typeof import('ajv/dist/2020.js')>('ajv/dist/2020.js');

/**
 * An Ajv (JSON Schema 2020-12) with every error reported and defaults applied.
 * `strict` is for ert's own schemas (a typo in them is a bug); plugin schemas are
 * compiled leniently so an unknown annotation keyword does not refuse the plugin.
 * `optimize: false` skips Ajv's optimisation passes over the generated code: for schemas
 * compiled at every process start and validated rarely (plugins' options once, their stats
 * once per sync), where it cuts the compile time by about 40 % (the first-party plugins'
 * ten schemas: 120-175 ms against 85-105).
 */
export function createAjv(options: AjvOptions): Ajv2020 {
  const ajv = new (ajvModule().Ajv2020)({
    allErrors: true,
    verbose: true,
    useDefaults: options.useDefaults ?? false,
    strict: options.strict,
    allowUnionTypes: true,
    strictRequired: false,
    ...(options.optimize === false ? { code: { optimize: false } } : {}),
  });
  // `expected` is ert's own annotation: the wording used when a value fails its schema.
  ajv.addKeyword({ keyword: 'expected', schemaType: 'string' });
  return ajv;
}

/** The options of `createAjv`. */
export interface AjvOptions {
  strict: boolean;
  useDefaults?: boolean;
  optimize?: boolean;
}

/** A getter of one Ajv made by `createAjv(options)` at its first call. */
export function lazyAjv(options: AjvOptions): () => Ajv2020 {
  let ajv: Ajv2020 | undefined;
  return () => (ajv ??= createAjv(options));
}

/** Compile a schema, naming its owner when it is itself invalid. */
export function compileSchema(ajv: Ajv2020, schema: JsonSchema, owner: string): ValidateFunction {
  try {
    return ajv.compile(schema);
  } catch (err) {
    throw new Error(`${owner}: the schema is invalid: ${messageOf(err)}`, { cause: err });
  }
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/** JSON pointer segments (`/tracker/resources/2`) to a readable key path (`tracker.resources[2]`). */
export function keyPath(pointer: string, base = ''): string {
  let path = base;
  if (pointer === '') return path;
  for (const raw of pointer.slice(1).split('/')) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(segment)) path += `[${segment}]`;
    else if (IDENTIFIER.test(segment)) path += path === '' ? segment : `.${segment}`;
    else path += `[${JSON.stringify(segment)}]`;
  }
  return path;
}

function childPath(parent: string, key: string): string {
  return keyPath(`/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`, parent);
}

function typeWords(type: unknown): string {
  const types = Array.isArray(type) ? type : [type];
  const words = types.map((t) => (t === 'integer' ? 'an integer' : t === 'object' ? 'an object' : t === 'array' ? 'a list' : `a ${String(t)}`));
  return words.join(' or ');
}

function expectedOf(err: ErrorObject): string {
  const custom = (err.parentSchema as { expected?: unknown } | undefined)?.expected;
  if (typeof custom === 'string' && err.keyword !== 'required' && err.keyword !== 'additionalProperties') return custom;
  const p = err.params as Record<string, unknown>;
  switch (err.keyword) {
    case 'type':
      return typeWords(p.type);
    case 'enum':
      return `one of ${(p.allowedValues as unknown[]).map((v) => describeValue(v)).join(', ')}`;
    case 'const':
      return `exactly ${describeValue(p.allowedValue)}`;
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return `a number ${String(p.comparison)} ${String(p.limit)}`;
    case 'minLength':
      return p.limit === 1 ? 'a non-empty string' : `a string of at least ${String(p.limit)} characters`;
    case 'maxLength':
      return `a string of at most ${String(p.limit)} characters`;
    case 'minItems':
      return `a list of at least ${String(p.limit)} items`;
    case 'maxItems':
      return `a list of at most ${String(p.limit)} items`;
    case 'pattern':
      return `a string matching ${String(p.pattern)}`;
    case 'multipleOf':
      return `a multiple of ${String(p.multipleOf)}`;
    case 'format':
      return `a ${String(p.format)}`;
    case 'uniqueItems':
      return `a list without duplicates (items ${String(p.j)} and ${String(p.i)} are equal)`;
    default:
      return err.message ?? err.keyword;
  }
}

/**
 * Turn Ajv's errors into one problem per fault. Errors from inside a failed `anyOf`/`oneOf`
 * are folded into that combinator (its `expected` annotation, or its branches' wording), and
 * `if` bookkeeping errors are dropped, so each wrong value is reported once.
 */
export function problemsFromAjv(errors: readonly ErrorObject[] | null | undefined, basePath = ''): ConfigProblem[] {
  const all = errors ?? [];
  const combinators = all.filter((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf');
  const problems: ConfigProblem[] = [];
  const seen = new Set<string>();
  for (const err of all) {
    if (err.keyword === 'if') continue;
    if (combinators.some((c) => c !== err && err.schemaPath.startsWith(`${c.schemaPath}/`))) continue;
    const p = err.params as Record<string, unknown>;
    let problem: ConfigProblem;
    const at = keyPath(err.instancePath, basePath);
    if (err.keyword === 'additionalProperties') {
      const key = String(p.additionalProperty);
      const known = Object.keys((err.parentSchema as { properties?: object } | undefined)?.properties ?? {});
      problem = {
        path: childPath(at, key),
        value: (err.data as Record<string, unknown>)[key],
        expected: known.length > 0 ? `no such key; known keys here: ${known.join(', ')}` : 'no such key',
      };
    } else if (err.keyword === 'required') {
      problem = { path: childPath(at, String(p.missingProperty)), value: undefined, expected: 'a value (the key is required)' };
    } else if (err.keyword === 'anyOf' || err.keyword === 'oneOf') {
      const custom = (err.parentSchema as { expected?: unknown }).expected;
      const branches = all.filter((e) => e.schemaPath.startsWith(`${err.schemaPath}/`) && e.instancePath === err.instancePath);
      problem = {
        path: at,
        value: err.data,
        expected: typeof custom === 'string' ? custom : [...new Set(branches.map(expectedOf))].join(', or '),
      };
    } else {
      problem = { path: at, value: err.data, expected: expectedOf(err) };
    }
    const key = `${problem.path}\u0000${problem.expected}`;
    if (seen.has(key)) continue;
    seen.add(key);
    problems.push(problem);
  }
  return problems;
}

/** `path: got <value>, expected <what>` (the value is omitted when the key is missing). */
export function formatProblem(problem: ConfigProblem): string {
  const where = problem.path === '' ? '(top level)' : problem.path;
  const got = problem.value === undefined ? 'missing' : `got ${describeValue(problem.value)}`;
  return `${where}: ${got}, expected ${problem.expected}`;
}
