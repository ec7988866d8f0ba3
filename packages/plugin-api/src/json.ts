import { messageOf } from './errors.js';

/** A JSON value: what stats, assignments and options are made of. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
/** A JSON object: string keys, JSON values. */
export type JsonObject = { [key: string]: JsonValue };

/**
 * A JSON Schema (draft 2020-12 subset understood by Ajv). Plugins describe their
 * options, stats and extra-spec values with it; the host validates with it and can
 * publish it (e.g. on a future HTTP API), which a TypeScript type alone could not do.
 */
export type JsonSchema = { [keyword: string]: unknown };

/**
 * Most bytes (UTF-8 JSON) one plugin's stats may take. A quarter of the 1 MiB request body
 * that `ert serve`'s agent API accepts, so that a stats write through it (the host and plugin
 * names and the other arguments around the data) always fits; about 250 times the largest
 * first-party plugin's stats on the biggest host profile (under 1 KiB). Every scheduler holds
 * every host's stats, so stats are hardware facts and summaries, not logs.
 */
export const MAX_STATS_BYTES = 256 * 1024;

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const UTF8 = new TextEncoder();

/**
 * `stats` as the store will hold them, read once: a JSON round trip (what `toJSON` methods and
 * getters answer, each asked once), or why they cannot be: a non-finite number (JSON would
 * write null), a BigInt, a cycle, a getter or `toJSON` that throws, nothing JSON can write,
 * or more than `MAX_STATS_BYTES`. The host checks the copy against the plugin's stats schema
 * and writes the copy, never the plugin's object, so what is written is what was checked.
 */
export function statsCopy(stats: unknown): { data: JsonValue } | { problem: string } {
  const paths = new Map<unknown, string>();
  // What the replacer refused, with the JSON path (thrown to stop the walk, read here).
  let refused: string | undefined;
  let text: string | undefined;
  try {
    // A function, not an arrow: JSON.stringify gives the holder of `key` as `this`.
    text = JSON.stringify(stats, function (this: unknown, key: string, value: unknown): unknown {
      const parent = paths.get(this);
      const path = parent === undefined ? 'stats' : Array.isArray(this) ? `${parent}[${key}]` : IDENTIFIER.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
      if (typeof value === 'number' && !Number.isFinite(value)) refused = `${path} is ${String(value)}, which JSON cannot hold`;
      if (typeof value === 'bigint') refused = `${path} is a BigInt, which JSON cannot hold`;
      if (refused !== undefined) throw new Error(refused);
      if (typeof value === 'object' && value !== null) paths.set(value, path);
      return value;
    });
  } catch (err) {
    return { problem: refused ?? `stats cannot be written as JSON: ${messageOf(err)}` };
  }
  if (text === undefined) return { problem: `stats are ${stats === undefined ? 'undefined' : `a ${typeof stats}`}, not a JSON value` };
  const bytes = UTF8.encode(text).byteLength;
  if (bytes > MAX_STATS_BYTES) return { problem: `stats take ${bytes} bytes as JSON, more than the ${MAX_STATS_BYTES} allowed` };
  return { data: JSON.parse(text) as JsonValue };
}
