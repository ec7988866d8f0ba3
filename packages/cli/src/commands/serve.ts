import cluster, { type Worker } from 'node:cluster';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import {
  AuthConfigError,
  ErtMetrics,
  AuthErrorCodes,
  isLoopback,
  POLICY_DEFAULTS,
  PolicyError,
  PolicyErrorCodes,
  policyFromFile,
  resolveAuth,
  serve,
  tokenFileAuthenticator,
  tokensFromFile,
  type Authenticator,
  type AuthMode,
  type CheckResult,
  type Policy,
  type PolicyDefaults,
} from '@ert/api';
import type { ErtConfig } from '@ert/core';
import { createScheduler, effectiveStatus } from '@ert/scheduler';
import { isErtError, messageOf } from '@ert/plugin-api';
import { createStore, type Store, type StoreLogger } from '@ert/store';
import { parse as parseYaml } from 'yaml';
import type { CommandContext } from '../context.js';
import { describeConnection, positiveInt } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';
import { untilStopSignal } from '../io.js';
import { closeGracefully, observedStore, processMetrics, serveOps } from '../ops.js';

export interface ServeCommandOptions {
  host: string;
  port: string;
  prefix: string;
  auth?: string;
  tokenFile?: string;
  policyDefaults?: string;
  policyFile?: string;
  workers?: string;
}

/** A YAML or JSON file's content; `bad` words the refusal (missing, unreadable, not YAML). */
async function readYaml(file: string, bad: (message: string, cause: unknown) => Error): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw bad(`cannot read it: ${messageOf(err)}`, err);
  }
  try {
    return parseYaml(text) as unknown;
  } catch (err) {
    throw bad(`not YAML or JSON: ${messageOf(err)}`, err);
  }
}

/** The token-file mode's authenticator, re-reading the file on `reload()` (SIGHUP); a bad file then keeps the old tokens. */
async function tokenFileAuth(file: string): Promise<{ authenticate: Authenticator; reload(): Promise<void> }> {
  const load = async () =>
    tokenFileAuthenticator(
      tokensFromFile(
        await readYaml(file, (message, cause) => new AuthConfigError(AuthErrorCodes.BAD_TOKEN_FILE, `token file ${file}: ${message}`, { file }, { cause })),
        file,
      ),
    );
  let current = await load();
  return {
    authenticate: (headers) => current(headers),
    reload: async () => {
      current = await load();
    },
  };
}

/** The policy: `--policy-defaults` (else the config's `api.policyDefaults`, else legacy) with the policy file's overrides. */
async function loadPolicy(defaults: string, file: string | undefined): Promise<Policy> {
  if (!(POLICY_DEFAULTS as readonly string[]).includes(defaults)) {
    throw new CliError(CliErrorCode.USAGE, `--policy-defaults must be one of ${POLICY_DEFAULTS.join(', ')}, got "${defaults}"`, { option: '--policy-defaults', value: defaults });
  }
  const content =
    file === undefined
      ? undefined
      : await readYaml(file, (message, cause) => new PolicyError(PolicyErrorCodes.BAD_POLICY, `policy file ${file}: ${message}`, { source: file }, { cause }));
  return policyFromFile(content, file === undefined ? 'the policy' : `policy file ${file}`, defaults as PolicyDefaults);
}

/** What `ert serve` checked before opening the store or forking a worker. */
interface ServeSetup {
  port: number;
  mode: AuthMode;
  tokenFile: string | undefined;
  policyDefaults: string;
  policyFile: string | undefined;
  workers: number;
}

/**
 * `ert serve`: the Placement-compatible API (docs/api.md) on the configured store, opened as
 * the read-only commands open it (nothing created or migrated), until SIGINT or SIGTERM.
 * The auth mode is `--auth`, else ERT_API_AUTH, else the config's `api.auth`, else noauth2
 * on a loopback address; any other address without an explicit mode is refused
 * (ERT_API_AUTH_REQUIRED, exit 1). The token file and the policy file are read and checked
 * before the store is opened. With `--workers N` (N > 1) this process forks N workers
 * (node:cluster) that share the port, and stops them all at SIGINT or SIGTERM.
 */
export async function serveCommand(ctx: CommandContext, opts: ServeCommandOptions): Promise<void> {
  const port = opts.port === '0' ? 0 : positiveInt('--port', opts.port, 8778);
  if (port > 65535) throw new CliError(CliErrorCode.USAGE, `--port must be at most 65535, got "${opts.port}"`, { option: '--port', value: opts.port });
  const config = await ctx.config();
  const auth = opts.auth ?? (ctx.io.env.ERT_API_AUTH || undefined) ?? config.api?.auth;
  // Refused before the store is opened: bound beyond loopback without an explicit auth mode.
  const mode = resolveAuth(opts.host, auth);
  const tokenFile = opts.tokenFile ?? config.api?.tokenFile;
  if (mode === 'token-file' && tokenFile === undefined) {
    throw new CliError(CliErrorCode.USAGE, 'the token-file auth mode needs --token-file <file> (or api.tokenFile in the config)', { option: '--token-file' });
  }
  if (mode !== 'token-file' && opts.tokenFile !== undefined) {
    throw new CliError(CliErrorCode.USAGE, `--token-file is for --auth token-file, not ${mode}`, { option: '--token-file' });
  }
  const setup: ServeSetup = {
    port,
    mode,
    tokenFile: mode === 'token-file' ? tokenFile : undefined,
    policyDefaults: opts.policyDefaults ?? config.api?.policyDefaults ?? 'legacy',
    policyFile: opts.policyFile ?? config.api?.policyFile,
    workers: opts.workers === undefined ? (config.api?.workers ?? 1) : positiveInt('--workers', opts.workers, 1),
  };
  if (setup.workers > 1 && cluster.isPrimary) return servePrimary(ctx, opts, config, setup);
  return serveOne(ctx, opts, config, setup);
}

/** The built web view (`@ert/ui`'s dist/); not installed: a directory that is not there, and /ui says so. */
function uiAssets(): string {
  try {
    return join(dirname(createRequire(import.meta.url).resolve('@ert/ui/package.json')), 'dist');
  } catch {
    return join(dirname(new URL(import.meta.url).pathname), 'ui-not-installed');
  }
}

const policyLabel = (policy: Policy, file: string | undefined): string => `policy ${policy.defaults}${file ? ` + ${file}` : ''}`;

/**
 * A readiness check held by a warm-up run once listening (`ert serve`'s host snapshots and
 * candidates index): not ready (`starting`) until the warm-up settles, ready then either way
 * (one that failed is done by the first request, which the detail says).
 */
function warmUpCheck(starting: string, failed: string, instead: string): { check: () => CheckResult; settle: (outcome: object | { error: unknown }) => void } {
  let result: CheckResult = { ok: false, reason: starting, code: 'ERT_API_STARTING' };
  return {
    check: () => result,
    settle: (outcome) => {
      result = 'error' in outcome ? { ok: true, detail: `${failed} (${messageOf(outcome.error)}): ${instead}` } : { ok: true, detail: outcome };
    },
  };
}

/** One server in this process: `ert serve` itself, or one of the workers of `--workers N`. */
async function serveOne(ctx: CommandContext, opts: ServeCommandOptions, config: ErtConfig, setup: ServeSetup): Promise<void> {
  const tokens = setup.tokenFile === undefined ? undefined : await tokenFileAuth(setup.tokenFile);
  const policy = await loadPolicy(setup.policyDefaults, setup.policyFile);
  const worker = cluster.isWorker;
  // Metrics (docs/operations.md): the store's transactions, HTTP requests, hosts by status.
  const metrics = processMetrics();
  // A worker's /metrics answers the sum over all workers, gathered by the primary.
  if (worker) metrics.shareWithCluster();
  // knex's pool diagnostics (a connection to PostgreSQL lost) are warnings of the service's log.
  const store = await openExisting(observedStore(config, metrics), await ctx.logger());
  metrics.useStore(store);
  try {
    // Request logs (pino, Fastify's logger) go to stderr: stdout is for the result.
    const logger = { level: ctx.globals.logLevel ?? config.log.level, stream: process.stderr };
    // A worker also stops when its primary is gone.
    const stopped = worker
      ? Promise.race([untilStopSignal(), new Promise<string>((resolve) => process.once('disconnect', () => resolve('disconnect')))])
      : untilStopSignal();
    const onHup = () => {
      tokens?.reload().then(
        () => ctx.out.status(`ert: SIGHUP: token file ${setup.tokenFile} reloaded`),
        (err: unknown) => ctx.out.status(`ert: SIGHUP: ${messageOf(err)}; keeping the tokens loaded before`),
      );
    };
    if (tokens) process.on('SIGHUP', onHup);
    const snapshotsRead = warmUpCheck('reading every host once (GET /scheduler/v1/hosts then answers from memory)', 'not read at start', 'GET /hosts reads them');
    const candidatesIndexed = warmUpCheck('indexing every provider once (GET /allocation_candidates then answers from the index)', 'not built at start', 'the first request builds it');
    const server = await serve({
      store,
      host: opts.host,
      port: setup.port,
      prefix: opts.prefix,
      auth: setup.mode,
      ...(tokens ? { authenticate: tokens.authenticate } : {}),
      policy,
      workerHeader: worker,
      logger,
      // Ready once every host's snapshot is read (below): the first view of a large fleet then
      // answers from memory. A read that failed does not hold readiness (the store check says
      // why, and GET /hosts reads them itself).
      setup: serveOps(metrics, store, { 'host-snapshots': snapshotsRead.check, 'candidates-index': candidatesIndexed.check }),
      // The same for GET /allocation_candidates: its search index built once listening.
      warmCandidateIndex: true,
      onCandidateIndexBuilt: candidatesIndexed.settle,
      // The scheduler API (/scheduler/v1): one scheduler for this process, created at the first
      // select or explain; claims of concurrent requests are written concurrently (overlapClaims).
      scheduler: {
        createScheduler: async () => {
          const scheduler = await createScheduler({ config, store, logger: await ctx.logger(), overlapClaims: true });
          metrics.useSchedulerHooks(() => scheduler.timings());
          return scheduler;
        },
        flavors: config.flavors,
        effectiveStatus,
        staleAfter: config.tracker.staleAfter,
        onDecision: metrics.observeDecision,
        // GET /hosts (the web view's fleet) answers from kept snapshots: read them once listening,
        // so that the first view of a large fleet does not wait for every host to be read.
        warmHostSnapshots: true,
        onHostSnapshotsRead: snapshotsRead.settle,
      },
      // The web view at /ui (docs/ui.md): opens without asking for a token only where noauth2
      // already lets anyone who connects be admin, on a loopback address.
      // With trusted-headers the proxy in front signs the user in: the view asks for no token.
      ui: {
        dir: uiAssets(),
        ...(setup.mode === 'noauth2' && isLoopback(opts.host) ? { openToken: 'admin' } : {}),
        ...(setup.mode === 'trusted-headers' ? { identity: 'proxy' as const } : {}),
      },
    });
    try {
      if (worker) {
        process.send?.({ type: 'ert-serve-listening', url: server.url, prefix: server.prefix });
        await stopped;
      } else {
        ctx.out.status(`ert: Placement API on ${server.url}${server.prefix || '/'} (auth ${server.auth}, ${policyLabel(policy, setup.policyFile)}; SIGINT or SIGTERM to stop)`);
        ctx.out.status(`ert: web view on ${server.url}/ui/`);
        const signal = await stopped;
        ctx.out.status(`ert: ${signal} received, stopping`);
      }
    } finally {
      process.off('SIGHUP', onHup);
      // Graceful: stop accepting, answer the requests in flight, then the store is closed below.
      await closeGracefully(server);
    }
    if (!worker) ctx.out.result({ url: server.url, prefix: server.prefix, stopped: true }, () => `stopped serving ${server.url}${server.prefix || '/'}\n`);
  } finally {
    await store.close();
    // A worker's IPC channel to the primary would keep it alive: closed, it exits.
    if (worker && process.connected) process.disconnect();
  }
}

/**
 * `--workers N`: checks what every worker will need (token file, policy file, store), forks
 * N workers that share the port (node:cluster hands each the listening socket; `--port 0`
 * is one port for all), reports once all listen, replaces a worker that dies afterwards,
 * gathers the workers' metrics (summed) for whichever worker is scraped, forwards SIGHUP,
 * and at SIGINT or SIGTERM stops them all (each finishes its requests: Fastify's close) and
 * waits for them.
 */
async function servePrimary(ctx: CommandContext, opts: ServeCommandOptions, config: ErtConfig, setup: ServeSetup): Promise<void> {
  if (setup.tokenFile !== undefined) await tokenFileAuth(setup.tokenFile);
  const policy = await loadPolicy(setup.policyDefaults, setup.policyFile);
  await (await openExisting(config)).close();
  const stopped = untilStopSignal();
  // Each worker's /metrics asks this process for the series of all workers, summed.
  const stopAggregating = ErtMetrics.aggregateCluster();
  const workers = new Set<Worker>();
  const exited: Array<Promise<void>> = [];
  let stopping = false;
  let failStartup: (err: Error) => void = () => undefined;
  const startupFailed = new Promise<never>((_resolve, reject) => (failStartup = reject));
  startupFailed.catch(() => undefined);
  type Listening = { url: string; prefix: string };
  const fork = (): Promise<Listening> =>
    new Promise((resolve) => {
      const worker = cluster.fork();
      workers.add(worker);
      let ready = false;
      worker.on('message', (message: { type?: string } & Partial<Listening>) => {
        if (message?.type !== 'ert-serve-listening') return;
        ready = true;
        resolve({ url: message.url!, prefix: message.prefix! });
      });
      exited.push(
        new Promise<void>((done) =>
          worker.once('exit', (code, signal) => {
            workers.delete(worker);
            done();
            if (stopping) return;
            const how = signal ?? `exit ${code}`;
            if (!ready) {
              failStartup(new CliError(CliErrorCode.STORE_UNAVAILABLE, `a worker of ert serve (pid ${worker.process.pid}) stopped before listening (${how}); its error is above`, { workers: setup.workers }));
              return;
            }
            ctx.out.status(`ert: worker ${worker.process.pid} stopped (${how}); starting another`);
            void fork();
          }),
        ),
      );
    });
  const onHup = () => {
    for (const worker of workers) worker.process.kill('SIGHUP');
  };
  process.on('SIGHUP', onHup);
  let listening: Listening | undefined;
  try {
    const all = await Promise.race([Promise.all(Array.from({ length: setup.workers }, fork)), startupFailed, stopped.then(() => undefined)]);
    listening = all?.[0];
    if (listening) {
      ctx.out.status(
        `ert: Placement API on ${listening.url}${listening.prefix || '/'} (auth ${setup.mode}, ${policyLabel(policy, setup.policyFile)}, ` +
          `${setup.workers} workers; SIGINT or SIGTERM to stop)`,
      );
      ctx.out.status(`ert: web view on ${listening.url}/ui/`);
      const signal = await Promise.race([stopped, startupFailed]);
      ctx.out.status(`ert: ${signal} received, stopping ${workers.size} workers`);
    }
  } finally {
    process.off('SIGHUP', onHup);
    stopping = true;
    for (const worker of workers) worker.process.kill('SIGTERM');
    const force = setTimeout(() => {
      for (const worker of workers) worker.process.kill('SIGKILL');
    }, 30_000);
    await Promise.all(exited);
    clearTimeout(force);
    stopAggregating();
  }
  const url = listening!.url;
  const prefix = listening!.prefix;
  ctx.out.result({ url, prefix, workers: setup.workers, stopped: true }, () => `stopped serving ${url}${prefix || '/'} (${setup.workers} workers)\n`);
}


/**
 * The configured store as a read-only command opens it: nothing is created or migrated; a
 * missing store or a schema other than this program's is the store's error saying which
 * (ERT_STORE_MISSING, ERT_STORE_SCHEMA_OUTDATED, ERT_STORE_SCHEMA_NEWER).
 */
async function openExisting(config: ErtConfig, logger?: StoreLogger): Promise<Store> {
  const options = config.store;
  const store = await createStore({ ...options, ...(logger ? { logger } : {}) });
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
