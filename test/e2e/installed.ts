/**
 * ert as a user installs it: every publishable workspace packed with `npm pack` (what
 * `npm publish` would upload), installed with npm into a fresh project in the system's
 * temporary directory, outside the repository. Shared by install.test.ts and
 * third-party-plugin.test.ts.
 *
 * sqlite3 is a native module. Its install script would download a prebuilt binary from
 * GitHub (no network here but the npm registry) or compile it (minutes on 2 cores). So the
 * project gets the repository's already-built node_modules/sqlite3 (and its runtime
 * dependencies) copied in before `npm install`: npm finds sqlite3@6 installed, satisfying
 * @ert/store's range, keeps it and runs no script for it. Everything else comes from the
 * tarballs (every @ert/* package, pinned with `overrides`, so npm never asks the registry
 * for an @ert name) and from the registry through the local npm cache (`--prefer-offline`).
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildPackage } from '../build.js';

const run = promisify(execFile);
export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** One packed tarball, as `npm pack --json` reports it. */
export interface Packed {
  name: string;
  version: string;
  filename: string;
  files: Array<{ path: string }>;
}

/** The workspace directories of every package that is not private (the publishable ones). */
export async function publishableWorkspaces(): Promise<Array<{ dir: string; name: string }>> {
  const found: Array<{ dir: string; name: string }> = [];
  for (const group of ['packages', 'plugins']) {
    for (const entry of (await readdir(join(REPO, group))).sort()) {
      const dir = join(REPO, group, entry);
      const pkg = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8').catch(() => 'null')) as { name: string; private?: boolean } | null;
      if (pkg !== null && pkg.private !== true) found.push({ dir, name: pkg.name });
    }
  }
  return found;
}

/** The environment for npm and ert: none of the parent's ERT_* settings or npm run-script variables. */
export function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ERT_') && !k.startsWith('npm_')));
}

/** Build what is packed (a build that fails fails the test), then pack every publishable workspace into `dest`. */
export async function packAll(dest: string, extraDirs: string[] = []): Promise<Packed[]> {
  const workspaces = await publishableWorkspaces();
  for (const w of workspaces) buildPackage(w.dir);
  await mkdir(dest, { recursive: true });
  const args = ['pack', '--json', '--pack-destination', dest, ...workspaces.flatMap((w) => ['-w', w.name])];
  const packed = JSON.parse((await run('npm', args, { cwd: REPO, env: cleanEnv(), maxBuffer: 64 * 1024 * 1024 })).stdout) as Packed[];
  for (const dir of extraDirs) {
    packed.push(...(JSON.parse((await run('npm', ['pack', '--json', '--pack-destination', dest], { cwd: dir, env: cleanEnv() })).stdout) as Packed[]));
  }
  return packed;
}

/** Build-time dependencies of sqlite3 that its (skipped) install script would use. */
const SQLITE_BUILD_ONLY = new Set(['prebuild-install', 'tar', 'node-addon-api']);

/** Copy the repository's compiled sqlite3 and its runtime dependencies, so npm does not rebuild it. */
async function copySqlite(target: string): Promise<void> {
  const pending = ['sqlite3'];
  const copied = new Set<string>();
  while (pending.length > 0) {
    const name = pending.pop()!;
    if (copied.has(name) || SQLITE_BUILD_ONLY.has(name)) continue;
    copied.add(name);
    const from = join(REPO, 'node_modules', name);
    await cp(from, join(target, 'node_modules', name), { recursive: true, dereference: true });
    const pkg = JSON.parse(await readFile(join(from, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    pending.push(...Object.keys(pkg.dependencies ?? {}));
  }
}

/**
 * A project in `project` whose package.json depends on `direct` only (names of packed
 * packages), every other packed package pinned to its tarball through `overrides`; installed
 * with `npm install`. Returns the install's wall-clock milliseconds.
 */
export async function installProject(project: string, packsDir: string, packed: Packed[], direct: string[]): Promise<number> {
  const spec = (p: Packed) => `file:${join(packsDir, p.filename)}`;
  const dependencies = Object.fromEntries(packed.filter((p) => direct.includes(p.name)).map((p) => [p.name, spec(p)]));
  const overrides = Object.fromEntries(packed.filter((p) => !direct.includes(p.name)).map((p) => [p.name, spec(p)]));
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'ert-site', private: true, type: 'module', dependencies, overrides }, null, 2));
  await copySqlite(project);
  const started = Date.now();
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: project, env: cleanEnv(), maxBuffer: 64 * 1024 * 1024 });
  return Date.now() - started;
}
