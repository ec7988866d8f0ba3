import { createTracker } from '@ert/tracker';
import { checkRoot, type CommandContext } from '../context.js';
import { renderDiscovery, renderSync } from '../render.js';
import { untilStopSignal } from '../io.js';
import { startOpsServer, storeCheck, type CheckResult, type RunningOpsServer } from '@ert/api';
import { CliError, CliErrorCode } from '../errors.js';
import { observedStore, processMetrics, trackerObserver } from '../ops.js';

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

interface HostRunOptions extends HostOptions {
  metricsPort?: string;
  metricsHost: string;
}

/**
 * `ert host run`: the tracker daemon. Starts the tracker (sync now, then every
 * tracker.interval) and stops gracefully on SIGINT or SIGTERM: the timer stops, claims in
 * flight finish, plugins and the store are closed, exit status 0. With `--metrics-port`,
 * `/metrics`, `/healthz` and `/readyz` are served there (docs/operations.md) from before the
 * first sync (ready once it is done) until the tracker has stopped.
 */
export async function hostRunCommand(ctx: CommandContext, opts: HostRunOptions): Promise<void> {
  const metricsPort = opts.metricsPort === undefined ? undefined : metricsPortOf(opts.metricsPort);
  const options = await trackerOptions(ctx, opts);
  const metrics = metricsPort === undefined ? undefined : processMetrics();
  const store = await ctx.store(observedStore(options.config, metrics), { create: true });
  metrics?.useStore(store);
  const tracker = await createTracker({ ...options, store, ...(metrics ? { observer: trackerObserver(metrics) } : {}) });
  const stopped = untilStopSignal();
  let ops: RunningOpsServer | undefined;
  let started = false;
  try {
    if (metrics && metricsPort !== undefined) {
      // The plugins are loaded (createTracker instantiated them); ready once the first sync is done.
      const tracking = (): CheckResult => {
        if (!started) return { ok: false, reason: 'starting: the first sync has not finished' };
        const plugins = tracker.lastSync?.discovery.plugins.map((p) => ({ plugin: p.plugin, available: p.available })) ?? [];
        return { ok: true, detail: { host: tracker.hostName, plugins } };
      };
      const logger = { level: ctx.globals.logLevel ?? options.config.log.level, stream: process.stderr };
      ops = await startOpsServer({ host: opts.metricsHost, port: metricsPort, metrics, readiness: { store: storeCheck(store), tracker: tracking }, logger });
      ctx.out.status(`ert: metrics on ${ops.url}/metrics (/healthz, /readyz)`);
    }
    await tracker.start();
    started = true;
    ctx.out.status(`ert: tracking host ${tracker.hostName} every ${options.config.tracker.interval / 1000}s (SIGINT or SIGTERM to stop)`);
    const signal = await stopped;
    ctx.out.status(`ert: ${signal} received, stopping`);
  } finally {
    await tracker.stop();
    await ops?.close();
  }
  ctx.out.result({ host: tracker.hostName, stopped: true }, () => `stopped tracking ${tracker.hostName}\n`);
}

/** `--metrics-port`: 0 (any free port) to 65535. */
function metricsPortOf(value: string): number {
  const port = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(port >= 0 && port <= 65535)) throw new CliError(CliErrorCode.USAGE, `--metrics-port must be a port number (0 to 65535), got "${value}"`, { option: '--metrics-port', value });
  return port;
}
