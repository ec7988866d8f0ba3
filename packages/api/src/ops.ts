/**
 * The operator's endpoints (docs/operations.md): `GET /metrics` (Prometheus), `GET /healthz`
 * (the process answers) and `GET /readyz` (it can do its work: the store reachable with this
 * ert's schema, and whatever else the process adds), plus the request metrics of every route
 * of the Fastify instance they are put on. `ert serve` mounts them at the root of the API's
 * instance (outside the Placement prefix); `ert host run --metrics-port` serves them alone
 * (`startOpsServer`).
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { isErtError, messageOf } from '@ert/plugin-api';
import type { Store } from '@ert/store';
import { UNMATCHED_ROUTE, type ErtMetrics } from './metrics.js';
import { registerEventRoutes, type EventRouteOptions } from './event-stream.js';

/** One readiness check's verdict. */
export type CheckResult = { ok: true; detail?: unknown } | { ok: false; reason: string; code?: string };

/** Named checks, run in order at each `GET /readyz`. */
export type ReadinessChecks = Record<string, () => Promise<CheckResult> | CheckResult>;

/** The store reachable and its schema exactly this ert's (`store.checkSchema`). */
export function storeCheck(store: Pick<Store, 'checkSchema'>): () => Promise<CheckResult> {
  return async () => {
    try {
      await store.checkSchema();
      return { ok: true };
    } catch (err) {
      return { ok: false, reason: messageOf(err), ...(isErtError(err) ? { code: err.code } : {}) };
    }
  };
}

export interface OpsOptions {
  metrics: ErtMetrics;
  readiness: ReadinessChecks;
}

/** Probes and scrapes log at `warn` only: a scrape every 15 s is not news. */
const QUIET = { logLevel: 'warn' as const };

/**
 * The status a request is counted under when its client closed the connection before any of
 * the answer was sent (nginx's 499): its answer, whatever it was to be, reached nobody.
 */
const CLIENT_CLOSED_STATUS = 499;

/**
 * Count every response of `app` in `ert_http_requests_total` and
 * `ert_http_request_duration_seconds`, labelled by the route's pattern (`request.routeOptions.url`;
 * `(unmatched)` for a 404 no route matched, so unknown URLs cannot grow the series without
 * bound). A request whose client closed the connection before any of the answer was sent is
 * counted once, as `499`, when the connection closes (Fastify's `onResponse` never comes for it:
 * the answer is never finished); a stream whose headers went out (server-sent events) is not.
 * Call before routes are registered in child plugins, so that their contexts inherit it.
 */
export function instrumentRequests(app: FastifyInstance, metrics: ErtMetrics): void {
  const observe = (request: FastifyRequest, status: number, seconds: number) => metrics.observeRequest(request.routeOptions.url ?? UNMATCHED_ROUTE, request.method, status, seconds);
  const gone = new WeakSet<FastifyRequest>();
  app.addHook('onRequest', (request, reply, done) => {
    reply.raw.once('close', () => {
      if (reply.raw.writableFinished || reply.raw.headersSent) return;
      gone.add(request);
      observe(request, CLIENT_CLOSED_STATUS, reply.elapsedTime / 1000);
    });
    done();
  });
  app.addHook('onResponse', async (request, reply) => {
    if (!gone.has(request)) observe(request, reply.statusCode, reply.elapsedTime / 1000);
  });
}

/** `GET /metrics`, `/healthz`, `/readyz` on `app`, at its root. */
export function registerOpsRoutes(app: FastifyInstance, options: OpsOptions): void {
  app.get('/metrics', QUIET, async (request, reply) => {
    let exposition: { contentType: string; body: string };
    try {
      exposition = await options.metrics.expose();
    } catch (err) {
      // A worker of `ert serve --workers N` whose primary did not gather the workers' series:
      // no partial numbers, a failed scrape (Prometheus's `up` is 0 for it).
      request.log.warn({ err }, 'metrics unavailable');
      return reply.code(503).header('content-type', 'text/plain; charset=utf-8').send(`metrics unavailable: ${messageOf(err)}\n`);
    }
    return reply.header('content-type', exposition.contentType).send(exposition.body);
  });
  app.get('/healthz', QUIET, async (_request, reply) => reply.header('content-type', 'application/json').send(JSON.stringify({ status: 'ok' })));
  app.get('/readyz', QUIET, async (request, reply) => {
    const checks: Record<string, unknown> = {};
    let failed: { check: string; reason: string; code?: string } | undefined;
    for (const [name, check] of Object.entries(options.readiness)) {
      let result: CheckResult;
      try {
        result = await check();
      } catch (err) {
        result = { ok: false, reason: messageOf(err) };
      }
      if (result.ok) {
        checks[name] = result.detail ?? 'ok';
      } else {
        checks[name] = { reason: result.reason, ...(result.code ? { code: result.code } : {}) };
        failed ??= { check: name, reason: result.reason, ...(result.code ? { code: result.code } : {}) };
      }
    }
    if (failed) request.log.warn({ check: failed.check, reason: failed.reason }, 'not ready');
    const body = failed ? { status: 'unavailable', reason: `${failed.check}: ${failed.reason}`, ...(failed.code ? { code: failed.code } : {}), checks } : { status: 'ready', checks };
    return reply
      .code(failed ? 503 : 200)
      .header('content-type', 'application/json')
      .send(JSON.stringify(body));
  });
}

export interface OpsServerOptions extends OpsOptions {
  host: string;
  port: number;
  /** Fastify's logger option (pino): false, true, or pino options. */
  logger?: boolean | Record<string, unknown>;
  /** `GET /events` and `/events/state` (event-stream.ts): the host's events for outside agents. */
  events?: EventRouteOptions<object>;
}

export interface RunningOpsServer {
  app: FastifyInstance;
  /** `http://host:port` as bound. */
  url: string;
  close(): Promise<void>;
}

/** The operator's endpoints alone on `host:port` (`ert host run --metrics-port`), with the event stream when `events` is given. */
export async function startOpsServer(options: OpsServerOptions): Promise<RunningOpsServer> {
  const app = Fastify({ logger: options.logger ?? false, genReqId: () => `req-${randomUUID()}` });
  instrumentRequests(app, options.metrics);
  registerOpsRoutes(app, options);
  if (options.events) registerEventRoutes(app, options.events);
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return { app, url: `http://${host}:${port}`, close: () => app.close() };
}
