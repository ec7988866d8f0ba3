import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const LOCK = path.join(REPO_ROOT, 'node_modules', '.ert-test-build.lock');
const STALE_LOCK_MS = 300_000;
/**
 * Set by test/global-setup.ts to an id of the vitest run (not in watch mode): a package built
 * in this run is not checked again by the next test file that needs it.
 */
export const BUILD_RUN_ENV = 'ERT_TEST_BUILD_RUN';
/** Per package directory, the id of the run that last built it. */
const STAMPS = path.join(REPO_ROOT, 'node_modules', '.ert-test-build-stamps');

/** Runs `fn` holding a lock directory, so builds of parallel test files do not write dist at once. */
function withBuildLock<T>(fn: () => T): T {
  const wait = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > STALE_LOCK_MS) rmSync(LOCK, { recursive: true, force: true });
      } catch {
        // Removed meanwhile: try again.
      }
      Atomics.wait(wait, 0, 0, 100);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

/**
 * Tests that spawn processes run the built `dist` output. Builds `packageDir` and what it
 * references with `tsc -b` (incremental: well under a second when nothing changed; one build
 * at a time across test workers), so such a test never runs stale code and never skips because
 * the code is not built: a build that fails throws with tsc's output. Within one `vitest run`
 * each package is built once (BUILD_RUN_ENV), at its first test file that asks: a source
 * edited while the run goes on reaches the next run's processes, not this one's. In watch mode
 * every call builds.
 */
export function buildPackage(packageDir: string): void {
  withBuildLock(() => {
    const run = process.env[BUILD_RUN_ENV];
    const stamp = path.join(STAMPS, createHash('sha1').update(path.resolve(packageDir)).digest('hex'));
    if (run !== undefined && readStamp(stamp) === run) return;
    try {
      execFileSync(process.execPath, [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', packageDir], { cwd: REPO_ROOT, stdio: 'pipe' });
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: Buffer; stderr?: Buffer };
      throw new Error(`tsc -b ${path.relative(REPO_ROOT, packageDir)} failed; tests that spawn processes need the built dist:\n${String(stdout ?? '')}${String(stderr ?? '')}`);
    }
    if (run !== undefined) {
      mkdirSync(STAMPS, { recursive: true });
      writeFileSync(stamp, run);
    }
  });
}

function readStamp(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
