import { extraSpecKeyOwner, type ExtraSpecKey } from '@ert/plugin-api';
import { describeKey, PlacementErrorCodes, pluginPrefix, RequestSpecError } from './errors.js';

/**
 * Converting and checking the string value of a plugin-owned extra-spec key by its
 * `ExtraSpecKey.schema`. The schema subset is deliberately small, so that a value
 * means the same on every host and in the docs:
 *   type: 'integer' (strict decimal), 'number', 'boolean' (true/false/yes/no/1/0, any
 *   case) or 'string' (the default); enum; minimum; maximum; pattern (strings only);
 *   plus the annotations title, description, default, examples, $comment.
 */

const SUPPORTED_TYPES: ReadonlySet<string> = new Set(['integer', 'number', 'boolean', 'string']);
const SUPPORTED_KEYWORDS: ReadonlySet<string> = new Set([
  'type',
  'enum',
  'minimum',
  'maximum',
  'pattern',
  'title',
  'description',
  'default',
  'examples',
  '$comment',
]);

const INTEGER_PATTERN = /^-?\d+$/;
const NUMBER_PATTERN = /^-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const TRUE_WORDS: ReadonlySet<string> = new Set(['true', 'yes', '1']);
const FALSE_WORDS: ReadonlySet<string> = new Set(['false', 'no', '0']);

/**
 * Why a plugin's extra-spec key cannot be handled by `parseFlavor` (unsupported schema
 * type or keyword, a malformed pattern or bounds), or undefined when it can. The host
 * calls it when loading plugins, so a bad declaration fails at start, not per request.
 */
export function extraSpecKeyProblem(key: ExtraSpecKey): string | undefined {
  const schema = key.schema;
  for (const keyword of Object.keys(schema)) {
    if (!SUPPORTED_KEYWORDS.has(keyword)) return `schema keyword "${keyword}" is not supported (supported: ${[...SUPPORTED_KEYWORDS].join(', ')})`;
  }
  const type = schema['type'] ?? 'string';
  if (typeof type !== 'string' || !SUPPORTED_TYPES.has(type)) return `schema type ${JSON.stringify(type)} is not supported (one of integer, number, boolean, string)`;
  for (const bound of ['minimum', 'maximum'] as const) {
    const value = schema[bound];
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value))) return `schema ${bound} must be a number`;
  }
  if (schema['enum'] !== undefined && !Array.isArray(schema['enum'])) return 'schema enum must be an array';
  const pattern = schema['pattern'];
  if (pattern !== undefined) {
    if (typeof pattern !== 'string') return 'schema pattern must be a string';
    try {
      new RegExp(pattern, 'u');
    } catch (err) {
      return `schema pattern is not a valid regular expression: ${(err as Error).message}`;
    }
  }
  return undefined;
}

/**
 * The value of plugin key `key` converted and validated by its schema. Throws
 * RequestSpecError: ERT_SPEC_INVALID_VALUE when the string does not convert or breaks
 * enum/minimum/maximum/pattern, ERT_SPEC_SCHEMA_UNSUPPORTED when the schema itself is
 * outside the supported subset; either names the plugin that owns the key when known
 * (`extraSpecKeyOwner`).
 */
export function convertPluginValue(key: ExtraSpecKey, raw: string): unknown {
  const plugin = extraSpecKeyOwner(key);
  const about = `${pluginPrefix(plugin)}extra spec ${describeKey(key.key, raw)}`;
  const owner = plugin === undefined ? {} : { plugin };
  const problem = extraSpecKeyProblem(key);
  if (problem !== undefined) {
    throw new RequestSpecError(PlacementErrorCodes.SCHEMA_UNSUPPORTED, `${about}: the owning plugin's ${problem}`, {
      key: key.key,
      value: raw,
      expected: 'a schema using type, enum, minimum, maximum, pattern',
      ...owner,
    });
  }
  const schema = key.schema;
  const type = (schema['type'] as string | undefined) ?? 'string';
  const invalid = (expected: string): RequestSpecError =>
    new RequestSpecError(PlacementErrorCodes.INVALID_VALUE, `${about}: expected ${expected}`, {
      key: key.key,
      value: raw,
      expected,
      ...owner,
    });

  let value: string | number | boolean;
  switch (type) {
    case 'integer': {
      const text = raw.trim();
      const n = Number(text);
      if (!INTEGER_PATTERN.test(text) || !Number.isSafeInteger(n)) throw invalid('an integer (decimal digits)');
      value = n;
      break;
    }
    case 'number': {
      const text = raw.trim();
      if (!NUMBER_PATTERN.test(text) || !Number.isFinite(Number(text))) throw invalid('a number');
      value = Number(text);
      break;
    }
    case 'boolean': {
      const word = raw.trim().toLowerCase();
      if (TRUE_WORDS.has(word)) value = true;
      else if (FALSE_WORDS.has(word)) value = false;
      else throw invalid('a boolean (true/false/yes/no/1/0)');
      break;
    }
    default:
      value = raw;
  }

  const allowed = schema['enum'] as unknown[] | undefined;
  if (allowed !== undefined && !allowed.includes(value)) throw invalid(`one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}`);
  const minimum = schema['minimum'] as number | undefined;
  if (minimum !== undefined && typeof value === 'number' && value < minimum) throw invalid(`a value >= ${minimum}`);
  const maximum = schema['maximum'] as number | undefined;
  if (maximum !== undefined && typeof value === 'number' && value > maximum) throw invalid(`a value <= ${maximum}`);
  const pattern = schema['pattern'] as string | undefined;
  // The key's one-line description says in words what the pattern says in symbols.
  if (pattern !== undefined && typeof value === 'string' && !new RegExp(pattern, 'u').test(value)) throw invalid(`${key.description} (a string matching /${pattern}/)`);
  return value;
}
