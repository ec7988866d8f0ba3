import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Tests that spawn processes run the built `dist` output. Builds `packageDir` and what it
 * references with `tsc -b` (incremental: well under a second when nothing changed), so such a
 * test never runs stale code and never skips because the code is not built: a build that fails
 * throws with tsc's output.
 */
export function buildPackage(packageDir: string): void {
  try {
    execFileSync(process.execPath, [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', packageDir], { cwd: REPO_ROOT, stdio: 'pipe' });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`tsc -b ${path.relative(REPO_ROOT, packageDir)} failed; the multi-process tests need the built dist:\n${String(stdout ?? '')}${String(stderr ?? '')}`);
  }
}
