import { createTracker } from '@ert/tracker';
import { checkRoot, type CommandContext } from '../context.js';
import { renderDiscovery, renderSync } from '../render.js';
import { untilStopSignal } from '../io.js';

interface HostOptions {
  root?: string;
  name?: string;
}

async function trackerOptions(ctx: CommandContext, opts: HostOptions) {
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
  const store = await ctx.store(options.config, { create: true });
  const tracker = await createTracker({ ...options, store });
  try {
    const report = await tracker.sync();
    ctx.out.result(report, () => renderSync(ctx.out, report));
  } finally {
    await tracker.stop();
  }
}

/**
 * `ert host run`: the tracker daemon. Starts the tracker (sync now, then every
 * tracker.interval) and stops gracefully on SIGINT or SIGTERM: the timer stops, claims in
 * flight finish, plugins and the store are closed, exit status 0.
 */
export async function hostRunCommand(ctx: CommandContext, opts: HostOptions): Promise<void> {
  const options = await trackerOptions(ctx, opts);
  const store = await ctx.store(options.config, { create: true });
  const tracker = await createTracker({ ...options, store });
  const stopped = untilStopSignal();
  try {
    await tracker.start();
    ctx.out.status(`ert: tracking host ${tracker.hostName} every ${options.config.tracker.interval / 1000}s (SIGINT or SIGTERM to stop)`);
    const signal = await stopped;
    ctx.out.status(`ert: ${signal} received, stopping`);
  } finally {
    await tracker.stop();
  }
  ctx.out.result({ host: tracker.hostName, stopped: true }, () => `stopped tracking ${tracker.hostName}\n`);
}
