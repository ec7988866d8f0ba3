import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const storePackageDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = path.resolve(storePackageDir, '..', '..');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : statSync(full).mtimeMs);
  }
  return newest;
}

/**
 * Spawned processes run the built store (packages/store/dist). Builds it with `tsc -b`
 * when dist is missing or older than a source file (`npm test` builds first anyway).
 */
export function ensureStoreBuilt(): void {
  const entry = path.join(storePackageDir, 'dist', 'index.js');
  const sources = [path.join(storePackageDir, 'src'), path.join(repoRoot, 'packages', 'plugin-api', 'src')];
  if (existsSync(entry) && statSync(entry).mtimeMs >= Math.max(...sources.map(newestMtime))) return;
  execFileSync(process.execPath, [path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', storePackageDir], { cwd: repoRoot, stdio: 'pipe' });
}
