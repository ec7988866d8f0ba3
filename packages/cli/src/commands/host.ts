import { createTracker } from '@ert/tracker';
import { checkRoot, type CommandContext } from '../context.js';
import { renderDiscovery, renderSync } from '../render.js';

/*
 * `ert host discover` and `ert host sync`; `ert host run`, the daemon, is in host-run.ts (it
 * loads the API's code for its metrics port and agent client, which these two do not need).
 */

/** `--root` and `--name`, which every `ert host` command that runs the tracker takes. */
export interface HostOptions {
  root?: string;
  name?: string;
}

/** The tracker's options from the config and `--root` / `--name`. */
export async function trackerOptions(ctx: CommandContext, opts: HostOptions) {
  const config = await ctx.config();
  const root = opts.root !== undefined ? await checkRoot(ctx.io, opts.root) : undefined;
  return { config, logger: await ctx.logger(), ...(root !== undefined ? { root } : {}), ...(opts.name ? { hostName: opts.name } : {}) };
}

/**
 * `ert host discover`: run every resource plugin's discovery on this host (or `--root`)
 * and print what each found. Opens no store and writes nothing.
 * JSON: the tracker's DiscoveryReport.
 */
export async function hostDiscoverCommand(ctx: CommandContext, opts: HostOptions): Promise<void> {
  const tracker = await createTracker(await trackerOptions(ctx, opts));
  try {
    const report = await tracker.discover();
    ctx.out.result(report, () => renderDiscovery(ctx.out, report));
  } finally {
    await tracker.stop();
  }
}

/**
 * `ert host sync`: discover once and reconcile the host into the store (only what changed
 * is written). JSON: the tracker's SyncReport.
 */
export async function hostSyncCommand(ctx: CommandContext, opts: HostOptions): Promise<void> {
  const options = await trackerOptions(ctx, opts);
  // The plugins are loaded and checked (names, options, tracker.enforce) before the store is
  // opened: a config the tracker refuses creates and migrates no store.
  const tracker = await createTracker({ ...options, store: () => ctx.store(options.config, { create: true }) });
  try {
    const report = await tracker.sync();
    ctx.out.result(report, () => renderSync(ctx.out, report));
  } finally {
    await tracker.stop();
  }
}
