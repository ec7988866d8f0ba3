import { resolveAuth, serve } from '@ert/api';
import type { ErtConfig } from '@ert/core';
import { isErtError, messageOf } from '@ert/plugin-api';
import { createStore, type Store } from '@ert/store';
import type { CommandContext } from '../context.js';
import { describeConnection, positiveInt } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';
import { untilStopSignal } from '../io.js';

export interface ServeCommandOptions {
  host: string;
  port: string;
  prefix: string;
  auth?: string;
}

/**
 * `ert serve`: the Placement-compatible API (docs/api.md) on the configured store, opened as
 * the read-only commands open it (nothing created or migrated), until SIGINT or SIGTERM.
 * The auth mode is `--auth`, else ERT_API_AUTH, else the config's `api.auth`, else noauth2
 * on a loopback address; any other address without an explicit mode is refused
 * (ERT_API_AUTH_REQUIRED, exit 1).
 */
export async function serveCommand(ctx: CommandContext, opts: ServeCommandOptions): Promise<void> {
  const port = opts.port === '0' ? 0 : positiveInt('--port', opts.port, 8778);
  if (port > 65535) throw new CliError(CliErrorCode.USAGE, `--port must be at most 65535, got "${opts.port}"`, { option: '--port', value: opts.port });
  const config = await ctx.config();
  const auth = opts.auth ?? (ctx.io.env.ERT_API_AUTH || undefined) ?? config.api?.auth;
  // Refused before the store is opened: bound beyond loopback without an explicit auth mode.
  const mode = resolveAuth(opts.host, auth);
  const store = await openExisting(config);
  try {
    // Request logs (pino, Fastify's logger) go to stderr: stdout is for the result.
    const logger = { level: ctx.globals.logLevel ?? config.log.level, stream: process.stderr };
    const stopped = untilStopSignal();
    const server = await serve({ store, host: opts.host, port, prefix: opts.prefix, auth: mode, logger });
    try {
      ctx.out.status(`ert: Placement API on ${server.url}${server.prefix || '/'} (auth ${server.auth}; SIGINT or SIGTERM to stop)`);
      const signal = await stopped;
      ctx.out.status(`ert: ${signal} received, stopping`);
    } finally {
      await server.close();
    }
    ctx.out.result({ url: server.url, prefix: server.prefix, stopped: true }, () => `stopped serving ${server.url}${server.prefix || '/'}\n`);
  } finally {
    await store.close();
  }
}

/**
 * The configured store as a read-only command opens it: nothing is created or migrated; a
 * missing store or a schema other than this program's is the store's error saying which
 * (ERT_STORE_MISSING, ERT_STORE_SCHEMA_OUTDATED, ERT_STORE_SCHEMA_NEWER).
 */
async function openExisting(config: ErtConfig): Promise<Store> {
  const options = config.store;
  const store = await createStore(options);
  try {
    await store.checkSchema();
  } catch (err) {
    await store.close().catch(() => undefined);
    if (isErtError(err)) throw err;
    throw new CliError(CliErrorCode.STORE_UNAVAILABLE, `cannot open the ${options.client} store ${describeConnection(options)}: ${messageOf(err)}`, {
      client: options.client,
      connection: describeConnection(options),
    }, { cause: err });
  }
  return store;
}
