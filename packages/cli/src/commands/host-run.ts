import { readFile } from 'node:fs/promises';
import { EventLog, remoteStore, serveEventSocket, startOpsServer, type EventSocket, storeCheck, type CheckResult, type ErtMetrics, type RunningOpsServer } from '@ert/api';
import { Backoff, type ErtConfig } from '@ert/core';
import { messageOf } from '@ert/plugin-api';
import { isStoreUnavailable, type HostStore } from '@ert/store';
import { HostEventWatch, createTracker, type HostEvent } from '@ert/tracker';
import type { CommandContext } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';
import { untilStopSignal } from '../io.js';
import { closeGracefully, observedStore, processMetrics, trackConnections, trackerObserver } from '../ops.js';
import { trackerOptions, type HostOptions } from './host.js';

interface HostRunOptions extends HostOptions {
  metricsPort?: string;
  metricsHost: string;
  server?: string;
  tokenFile?: string;
  eventsBuffer: string;
  eventsSocket?: string;
}

/**
 * `ert host run`: the tracker daemon. Starts the tracker (sync now, then every
 * tracker.interval) and stops gracefully on SIGINT or SIGTERM: the timer stops, claims in
 * flight finish, plugins and the store are closed, exit status 0. With `--metrics-port`,
 * `/metrics`, `/healthz` and `/readyz` are served there (docs/operations.md) from before the
 * first sync (ready once it is done) until the tracker has stopped, and the host's instance
 * events for outside agents at `/events` (server-sent events; the newest `--events-buffer`
 * kept for resuming; `ert host events` reads them); with `--events-socket PATH`, the same
 * events as JSON lines on a Unix socket.
 *
 * With `--server URL` the tracker reports through that `ert serve`'s agent API instead of
 * opening the store (no database credentials on the host; `--token-file` holds the
 * X-Auth-Token). Either way a store (or server) that cannot be reached, at start or later, is
 * retried with capped exponential backoff and logged once per change, not once per attempt.
 */
export async function hostRunCommand(ctx: CommandContext, opts: HostRunOptions): Promise<void> {
  const metricsPort = opts.metricsPort === undefined ? undefined : metricsPortOf(opts.metricsPort);
  const eventsBuffer = eventsBufferOf(opts.eventsBuffer);
  if (opts.server === undefined && opts.tokenFile !== undefined) throw new CliError(CliErrorCode.USAGE, '--token-file needs --server (the token is sent to that server)', { option: '--token-file' });
  const options = await trackerOptions(ctx, opts);
  const metrics = metricsPort === undefined ? undefined : processMetrics();
  const stopped = untilStopSignal();
  // Everything the operator's config and options decide is checked before the store is opened
  // (or created, or waited for): the plugins (createTracker loads them) and the event socket.
  // The tracker gets the store once it is open (it asks for it at its first sync).
  let store: HostStore | undefined;
  const tracker = await createTracker({
    ...options,
    store: () => (store !== undefined ? Promise.resolve(store) : Promise.reject(new Error('host run: the store is not open yet'))),
    ...(metrics ? { observer: trackerObserver(metrics) } : {}),
  });
  let ops: RunningOpsServer | undefined;
  let socket: EventSocket | undefined;
  let watch: HostEventWatch | undefined;
  let started = false;
  try {
    // The host's instance events, for outside agents: read from the store (instances change
    // through other processes too), looked at at once after each of this tracker's events.
    const log = new EventLog<HostEvent>(eventsBuffer);
    const state = () => ({ host: tracker.hostName, instances: watch?.state() ?? [] });
    if (opts.eventsSocket !== undefined) {
      try {
        socket = await serveEventSocket(opts.eventsSocket, { log, state });
      } catch (err) {
        throw new CliError(CliErrorCode.USAGE, `--events-socket ${opts.eventsSocket}: ${messageOf(err)}`, { option: '--events-socket', value: opts.eventsSocket });
      }
    }
    store = opts.server !== undefined ? await agentStore(opts.server, opts.tokenFile, metrics) : await directStore(ctx, options.config, metrics, stopped);
    if (store === undefined) {
      ctx.out.status('ert: stop signal received before the store could be reached, stopping');
      return;
    }
    if (metricsPort !== undefined || opts.eventsSocket !== undefined) {
      const events = new HostEventWatch({ store, hostName: tracker.hostName, publish: (e) => log.publish(e), pollMs: options.config.reservations.pollInterval, logger: options.logger });
      for (const type of ['claimed', 'released', 'resized', 'updated'] as const) tracker.on(type, () => void events.poke());
      watch = events;
    }
    if (metrics && metricsPort !== undefined) {
      // The plugins are loaded (createTracker instantiated them); ready once the first sync is done.
      const tracking = (): CheckResult => {
        if (!started) return { ok: false, reason: 'starting: the first sync has not finished' };
        const plugins = tracker.lastSync?.discovery.plugins.map((p) => ({ plugin: p.plugin, available: p.available })) ?? [];
        return { ok: true, detail: { host: tracker.hostName, plugins } };
      };
      const logger = { level: ctx.globals.logLevel ?? options.config.log.level, stream: process.stderr };
      ops = await startOpsServer({ host: opts.metricsHost, port: metricsPort, metrics, readiness: { store: storeCheck(store), tracker: tracking }, logger, events: { log, state } });
      trackConnections(ops.app.server);
      ctx.out.status(`ert: metrics on ${ops.url}/metrics (/healthz, /readyz; events at /events)`);
    }
    if (socket !== undefined) ctx.out.status(`ert: events on unix socket ${socket.path}`);
    const first = tracker.start({ waitForStore: true });
    // A stop signal while the store is still out of reach ends the wait (start then rejects).
    if ((await Promise.race([first.then(() => 'started' as const), stopped])) !== 'started') {
      ctx.out.status('ert: stop signal received before the first sync, stopping');
      await tracker.stop();
      await first.catch(() => undefined);
      return;
    }
    started = true;
    await watch?.start();
    ctx.out.status(`ert: tracking host ${tracker.hostName} every ${options.config.tracker.interval / 1000}s (SIGINT or SIGTERM to stop)`);
    const signal = await stopped;
    ctx.out.status(`ert: ${signal} received, stopping`);
  } finally {
    await watch?.stop();
    await tracker.stop();
    // Ends the event streams too (their clients see the end of the stream, not a reset connection).
    await socket?.close();
    // As ert serve stops: a scrape in flight is answered, and its keep-alive connection closed
    // once idle (a plain close waited for the scraper to hang up, up to the 72 s keep-alive).
    if (ops) await closeGracefully(ops);
  }
  ctx.out.result({ host: tracker.hostName, stopped: true }, () => `stopped tracking ${tracker.hostName}\n`);
}

/**
 * The store of `host run` without `--server`: opened from the config (created and migrated
 * when missing). A database that cannot be reached (ERT_STORE_UNAVAILABLE) is tried again with
 * capped exponential backoff until it answers; undefined when a stop signal came first.
 */
async function directStore(ctx: CommandContext, config: ErtConfig, metrics: ErtMetrics | undefined, stopped: Promise<string>): Promise<HostStore | undefined> {
  const backoff = new Backoff({ baseMs: Math.min(1000, config.tracker.interval), capMs: config.tracker.interval });
  for (;;) {
    try {
      const store = await ctx.store(observedStore(config, metrics), { create: true });
      metrics?.useStore(store);
      if (backoff.attempts > 0) ctx.out.status(`ert: the store answers again after ${backoff.attempts} failed attempt(s)`);
      return store;
    } catch (err) {
      // ctx.store names the store in a CliError whose cause is the ERT_STORE_UNAVAILABLE.
      if (!isStoreUnavailable(err) && !isStoreUnavailable((err as { cause?: unknown }).cause)) throw err;
      const wait = backoff.next();
      if (backoff.attempts === 1) ctx.out.status(`ert: ${messageOf(err)}; retrying with backoff (up to tracker.interval) until it answers`);
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([new Promise<'retry'>((resolve) => (timer = setTimeout(() => resolve('retry'), wait))), stopped]);
      clearTimeout(timer);
      if (outcome !== 'retry') return undefined;
    }
  }
}

/** The store of `host run --server URL`: the server's agent API, with the token of `--token-file` (first line). */
async function agentStore(server: string, tokenFile: string | undefined, metrics: ErtMetrics | undefined): Promise<HostStore> {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    url = new URL('invalid:');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(CliErrorCode.USAGE, `--server must be an http:// or https:// URL of an ert serve, got "${server}"`, { option: '--server', value: server });
  let token: string | undefined;
  if (tokenFile !== undefined) {
    let text: string;
    try {
      text = await readFile(tokenFile, 'utf8');
    } catch (err) {
      throw new CliError(CliErrorCode.USAGE, `--token-file ${tokenFile}: ${messageOf(err)}`, { option: '--token-file', file: tokenFile });
    }
    token = text.split('\n')[0]!.trim();
    if (token === '') throw new CliError(CliErrorCode.USAGE, `--token-file ${tokenFile}: the first line is empty (it should hold the token)`, { option: '--token-file', file: tokenFile });
  }
  return remoteStore({ url: server, ...(token !== undefined ? { token } : {}), ...(metrics ? { onCall: metrics.onTransaction } : {}) });
}

/** `--events-buffer`: how many events `/events` keeps for resuming, 1 to 100000 (about 1 KB each). */
function eventsBufferOf(value: string): number {
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(n >= 1 && n <= 100_000)) throw new CliError(CliErrorCode.USAGE, `--events-buffer must be a number of events (1 to 100000), got "${value}"`, { option: '--events-buffer', value });
  return n;
}

/** `--metrics-port`: 0 (any free port) to 65535. */
function metricsPortOf(value: string): number {
  const port = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(port >= 0 && port <= 65535)) throw new CliError(CliErrorCode.USAGE, `--metrics-port must be a port number (0 to 65535), got "${value}"`, { option: '--metrics-port', value });
  return port;
}
