// Types of gen-config-validators.mjs, for the test that imports it (packages/core/test/config-validators.test.ts).

/** The generated module's path (packages/core/src/config-validators.generated.ts). */
export declare const OUT: string;

/**
 * The generated module's text: Ajv standalone validators of `CONFIG_SCHEMA` (export
 * `validateConfig`) and of a list of `FLAVOR_SCHEMA` (export `validateFlavorList`), from an
 * Ajv made by `createAjv` with ert's config options.
 */
export declare function generate(schemas: { CONFIG_SCHEMA: object; FLAVOR_SCHEMA: object }, createAjv: (options: { strict: boolean; useDefaults?: boolean }) => unknown): string;
