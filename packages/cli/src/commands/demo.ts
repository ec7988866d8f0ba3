import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join, relative, isAbsolute } from 'node:path';
import type { ErtConfig } from '@ert/core';
import { createTracker } from '@ert/tracker';
import { positiveInt, type CommandContext } from '../context.js';
import { renderSimulation, renderSync } from '../render.js';
import { REPO_ROOT, profilesDir, simulateInto } from './simulate.js';

/** Seed of the demo workload: every run shows the same placements. */
export const DEMO_SEED = 42;

/** Whether `dir` is `root` or below it. */
function isInside(dir: string, root: string): boolean {
  const rel = relative(root, dir);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/**
 * `ert demo` (what `npm start` runs): recreate .ert/demo.db at the repository's root when
 * run inside the repository, else in the working directory (never in the repository from
 * outside it), register this machine through the real plugins (root `/`;
 * plugins that find nothing report themselves unavailable), build a sample fleet from the
 * host profiles, schedule a seeded sample workload and print the report.
 * JSON: `{ database, localHost: SyncReport, simulation: SimulationReport }`.
 */
export async function demoCommand(ctx: CommandContext, opts: { hosts: string; requests: string }): Promise<void> {
  const repoConfig = existsSync(join(REPO_ROOT, 'config/ert.config.yaml'));
  const loaded = await ctx.config(join(repoConfig ? REPO_ROOT : ctx.io.cwd, 'config/ert.config.yaml'));
  const base = repoConfig && isInside(ctx.io.cwd, REPO_ROOT) ? REPO_ROOT : ctx.io.cwd;
  const hosts = positiveInt('--hosts', opts.hosts, 12);
  const requests = positiveInt('--requests', opts.requests, 300);
  const profiles = profilesDir(ctx, loaded, undefined);

  const dir = join(base, '.ert');
  const database = join(dir, 'demo.db');
  await mkdir(dir, { recursive: true });
  for (const suffix of ['', '-wal', '-shm', '-journal']) await rm(database + suffix, { force: true });
  const config: ErtConfig = { ...loaded, store: { client: 'sqlite3', connection: database } };

  ctx.out.note(`ert demo: database ${database}\n\n1. this machine, through the real plugins (root /):`);
  const store = await ctx.openStore(config.store, { mode: 'create', quiet: true });
  let localHost;
  try {
    const tracker = await createTracker({ config, store, logger: await ctx.logger(), root: '/' });
    try {
      localHost = await tracker.sync();
    } finally {
      await tracker.stop();
    }
  } finally {
    await store.close();
  }
  ctx.out.note(renderSync(ctx.out, localHost));

  ctx.out.note(`\n2. a fleet of ${hosts} hosts from ${profiles}, ${requests} requests (seed ${DEMO_SEED}):`);
  const simulation = await simulateInto(ctx, config, database, { profilesDir: profiles, hosts, requests, seed: DEMO_SEED });
  ctx.out.result({ database, localHost, simulation }, () => renderSimulation(ctx.out, simulation) + `\nexplore it: ERT_STORE_CONNECTION=${database} npx ert --config config/ert.config.yaml usage\n`);
}
