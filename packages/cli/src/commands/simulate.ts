import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import cliProgress from 'cli-progress';
import { ConfigError, CoreErrorCodes, type ErtConfig } from '@ert/core';
import { messageOf } from '@ert/plugin-api';
import { flavorsFileOf, positiveInt, type CommandContext } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';
import { renderSimulation } from '../render.js';
import { runSimulation, type SimulationReport } from '../simulation.js';

/** The repository's root when the CLI runs from its workspace (packages/cli/dist/commands). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

/**
 * The host profiles directory: `--profiles`, else `hosts/` next to the config file, else
 * the repository's config/hosts. Missing, not a directory or without a profile (a
 * subdirectory): exit 2 naming every place looked at, or the directory.
 */
export function profilesDir(ctx: CommandContext, config: ErtConfig, option: string | undefined): string {
  const candidates = option !== undefined ? [resolve(ctx.io.cwd, option)] : [join(config.configDir, 'hosts'), join(REPO_ROOT, 'config/hosts')];
  const found = candidates.find((dir) => existsSync(dir));
  const via = option !== undefined ? { option: '--profiles' } : {};
  if (!found) {
    throw new CliError(CliErrorCode.MISSING_FILE, `no host profiles directory: tried ${candidates.join(', ')}`, { tried: candidates, ...via });
  }
  let profiles: string[];
  try {
    profiles = readdirSync(found, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch (err) {
    throw new CliError(CliErrorCode.MISSING_FILE, `host profiles directory ${found} cannot be read: ${messageOf(err)}`, { profilesDir: found, ...via }, { cause: err });
  }
  if (profiles.length === 0) {
    throw new CliError(CliErrorCode.MISSING_FILE, `host profiles directory ${found} has no profiles (one subdirectory per host profile, standing for its /, as in config/hosts)`, { profilesDir: found, ...via });
  }
  return found;
}

/**
 * The flavors a simulation draws its requests from: the config's; none is a configuration
 * error naming the file that should hold them (ERT_CONFIG_INVALID, exit 2).
 */
function simulatedFlavors(config: ErtConfig): void {
  if (config.flavors.length > 0) return;
  const file = flavorsFileOf(config) ?? '<config object>';
  throw new ConfigError(CoreErrorCodes.CONFIG_INVALID, `Invalid config ${file}: flavors: none configured; a simulation draws its requests from the flavors (see config/flavors.yaml)`, {
    file,
    problems: [{ path: 'flavors', value: [], expected: 'at least one flavor (a simulation draws its requests from them)' }],
  });
}

interface SimulateOptions {
  hosts: string;
  requests: string;
  seed: string;
  db?: string;
  profiles?: string;
  lifetime?: string;
}

/** Run a simulation into a fresh SQLite file, with a progress bar on a TTY stderr. */
export async function simulateInto(
  ctx: CommandContext,
  config: ErtConfig,
  dbFile: string,
  params: { profilesDir: string; hosts: number; requests: number; seed: number; meanLifetime?: number },
  /** The option that named `dbFile` (`--db`), for the error when it cannot be created. */
  option?: string,
): Promise<SimulationReport> {
  simulatedFlavors(config);
  const simConfig: ErtConfig = { ...config, store: { client: 'sqlite3', connection: dbFile } };
  // A new file every time: created without the note that a store was created.
  const store = await ctx.openStore(simConfig.store, { mode: 'create', quiet: true, ...(option !== undefined ? { option } : {}) });
  const bar =
    ctx.io.stderr.isTTY && !ctx.out.json
      ? new cliProgress.SingleBar(
          { stream: ctx.io.stderr as NodeJS.WriteStream, format: 'scheduling [{bar}] {value}/{total} requests | {eta}s left', clearOnComplete: true },
          cliProgress.Presets.shades_classic,
        )
      : undefined;
  try {
    bar?.start(params.requests, 0);
    return await runSimulation({ ...params, config: simConfig, store, logger: await ctx.logger(), onProgress: (done) => bar?.update(done) });
  } finally {
    bar?.stop();
    await store.close();
  }
}

/**
 * `ert simulate --hosts N --requests M [--seed S]`: see `runSimulation`. The database is a
 * fresh SQLite file in a temporary directory (removed afterwards) unless `--db FILE`, which
 * must not exist yet. JSON: the `SimulationReport`.
 */
export async function simulateCommand(ctx: CommandContext, opts: SimulateOptions): Promise<void> {
  const config = await ctx.config();
  const hosts = positiveInt('--hosts', opts.hosts, 1);
  const requests = positiveInt('--requests', opts.requests, 1);
  if (!/^\d+$/.test(opts.seed)) throw new CliError(CliErrorCode.USAGE, `--seed must be a non-negative integer, got "${opts.seed}"`, { option: '--seed', value: opts.seed });
  const lifetime = opts.lifetime !== undefined ? positiveInt('--lifetime', opts.lifetime, 1) : undefined;
  const profiles = profilesDir(ctx, config, opts.profiles);

  let dbFile: string;
  let tempDir: string | undefined;
  if (opts.db !== undefined) {
    dbFile = resolve(ctx.io.cwd, opts.db);
    if (existsSync(dbFile)) throw new CliError(CliErrorCode.USAGE, `--db ${opts.db} already exists; simulate needs a new file`, { option: '--db', value: dbFile });
  } else {
    tempDir = await mkdtemp(join(tmpdir(), 'ert-simulate-'));
    dbFile = join(tempDir, 'simulate.db');
  }
  try {
    const report = await simulateInto(
      ctx,
      config,
      dbFile,
      {
        profilesDir: profiles,
        hosts,
        requests,
        seed: Number(opts.seed),
        ...(lifetime !== undefined ? { meanLifetime: lifetime } : {}),
      },
      opts.db !== undefined ? '--db' : undefined,
    );
    ctx.out.result(report, () => renderSimulation(ctx.out, report));
  } catch (err) {
    // A failed run leaves no half-made --db behind (it did not exist: checked above).
    if (opts.db !== undefined) for (const suffix of ['', '-wal', '-shm', '-journal']) await rm(dbFile + suffix, { force: true });
    throw err;
  } finally {
    if (tempDir) await rm(tempDir, { recursive: true, force: true });
  }
}
