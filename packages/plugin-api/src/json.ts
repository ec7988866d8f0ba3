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
