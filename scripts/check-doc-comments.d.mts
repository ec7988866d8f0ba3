// Types of check-doc-comments.mjs, for the tests that import it (test/docs/doc-comments.test.ts).

/** The package directories whose public symbols must have doc comments. */
export declare const DOCUMENTED: string[];

/**
 * `package/symbol[.member]` of every public symbol without a doc comment, in the packages
 * under `dirs` (repository-relative, default `DOCUMENTED`); empty when all are documented.
 */
export declare function undocumented(dirs?: string[]): string[];
