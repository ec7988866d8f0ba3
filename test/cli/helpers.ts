import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync } from 'node:fs';
import { mkdtemp, rm, writeFile, cp, mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { buildPackage } from '../build.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The built binary, as a user runs it (`npm test` builds it first). */
export const BIN = join(REPO, 'packages/cli/dist/bin.js');
export const PROFILES = join(REPO, 'config/hosts');
export const GPU_PLUGIN = join(REPO, 'test/fixtures/ert-plugin-gpu');

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `ert args...` in `cwd` and collect its output. ERT_* variables of the caller are dropped. */
export function runErt(args: string[], opts: { cwd: string; env?: Record<string, string> }): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = startErt(args, opts);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

let cliBuilt = false;

/**
 * Build the CLI and what it references (`tsc -b`, once per test worker, a no-op when up to date)
 * before the first `ert` runs, so the tests never run a stale or missing dist: a failed build
 * throws. `npm run build` also marks the binary executable; so does this.
 */
export function ensureCliBuilt(): void {
  if (cliBuilt) return;
  buildPackage(join(REPO, 'packages/cli'));
  chmodSync(BIN, 0o755);
  cliBuilt = true;
}

/** Start `ert args...` without waiting (daemons). */
export function startErt(args: string[], opts: { cwd: string; env?: Record<string, string> }): ChildProcess {
  ensureCliBuilt();
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ERT_')));
  return spawn(process.execPath, [BIN, ...args], { cwd: opts.cwd, env: { ...env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * SIGTERM a daemon (`ert host run`, `ert serve`) and wait for it to exit, at most `withinMs`:
 * one that does not is SIGKILLed and the call throws naming it, with the end of its output, so a
 * shutdown that hangs fails as itself and not as a hook's timeout. Resolves with the exit code
 * (null when it died of a signal); at once when it had already exited.
 */
export async function stopDaemon(child: ChildProcess, what: string, opts: { output?: () => string; withinMs?: number } = {}): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const withinMs = opts.withinMs ?? 20_000;
  const exited = new Promise<number | null>((resolvePromise) => child.once('exit', (code) => resolvePromise(code)));
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolvePromise) => (timer = setTimeout(() => resolvePromise('late'), withinMs)));
  const outcome = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (outcome !== 'late') return outcome;
  child.kill('SIGKILL');
  await exited;
  const tail = opts.output?.().slice(-2000);
  throw new Error(`${what} did not exit within ${withinMs / 1000} s of SIGTERM (killed)${tail ? `; its output ended:\n${tail}` : ''}`);
}

/**
 * Run a bash script from the repository root, as a reader pastes it from the docs: the
 * first failing command ends it and is named on stderr. ERT_* variables of the caller are
 * dropped.
 */
export function bash(script: string, env: Record<string, string>): Promise<RunResult> {
  ensureCliBuilt();
  return new Promise((resolvePromise, reject) => {
    const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ERT_')));
    const child = spawn('bash', ['-c', `set -eo pipefail\ntrap 'echo "failed: $BASH_COMMAND" >&2' ERR\n${script}`], {
      cwd: REPO,
      env: { ...cleanEnv, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

/** Parse stdout as JSON, failing with the process's output when it is not. */
export function json<T = any>(result: RunResult): T {
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new Error(`stdout is not JSON (exit ${result.code}):\n${result.stdout}\nstderr:\n${result.stderr}`);
  }
}

/**
 * A new directory under the repository's tmp/ (git-ignored): plugin names in a config
 * resolve from its directory, so the workspace's plugin packages must be reachable from it
 * (as in a project where ert is installed).
 */
export async function scratchDir(prefix: string): Promise<string> {
  await mkdir(join(REPO, 'tmp'), { recursive: true });
  return mkdtemp(join(REPO, 'tmp', prefix));
}

export const SMALL = { name: 'small', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: {} };
export const HUGE = { name: 'huge', vcpus: 4096, memory_mb: 2048, disk_gb: 0, extra_specs: {} };
export const GPU2 = { name: 'gpu2', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: { 'gpu:count': '2' } };
export const GPU4 = { name: 'gpu4', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: { 'gpu:count': '4' } };

/**
 * A temporary project: a copy of a host profile with two GPUs added (the root the tracker
 * reads), and an ert.config.yaml using vcpu, memory and the third-party gpu plugin (by path).
 */
export class Project {
  private constructor(
    readonly dir: string,
    readonly root: string,
  ) {}

  static async create(profile = 'xeon-2s-cat'): Promise<Project> {
    const dir = await scratchDir('ert-cli-test-');
    const root = join(dir, 'root');
    await cp(join(PROFILES, profile), root, { recursive: true });
    for (const [card, vendor] of [['card0', '0x10de'], ['card1', '0x10de']] as const) {
      await mkdir(join(root, 'sys/class/drm', card, 'device'), { recursive: true });
      await writeFile(join(root, 'sys/class/drm', card, 'device/vendor'), `${vendor}\n`);
    }
    const project = new Project(dir, root);
    await project.writeConfig();
    return project;
  }

  get configFile(): string {
    return join(this.dir, 'ert.config.yaml');
  }

  /** Write ert.config.yaml; `patch` replaces top-level sections of the default test config. */
  async writeConfig(patch: Record<string, unknown> = {}): Promise<void> {
    const config = {
      store: { client: 'sqlite3', connection: './ert.db' },
      tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory', { name: 'gpu', use: GPU_PLUGIN }] },
      scheduler: {
        consumers: ['vcpu', 'memory', { name: 'gpu', use: GPU_PLUGIN }],
        filters: ['status', 'traits', 'resources', { name: 'gpu', use: GPU_PLUGIN }],
        weighers: [{ name: 'memory', multiplier: 1 }],
      },
      flavors: [SMALL, HUGE, GPU2, GPU4],
      ...patch,
    };
    await writeFile(this.configFile, stringify(config));
  }

  run(args: string[], env?: Record<string, string>): Promise<RunResult> {
    return runErt(['--config', this.configFile, ...args], { cwd: this.dir, ...(env ? { env } : {}) });
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
