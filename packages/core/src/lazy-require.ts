import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A getter that `require()`s a CommonJS package at its first call and returns the same module
 * after. For packages a command may not need (Ajv's compiler, tsyringe, semver): a static
 * import would load them at every process start, and `ert hosts` needs none of them
 * (test/cli/startup.test.ts checks what it loads).
 */
export function lazyRequire<T>(specifier: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(specifier) as T);
}
