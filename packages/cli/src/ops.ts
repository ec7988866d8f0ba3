/**
 * What the long-running commands share for operations (docs/operations.md): the metrics of
 * the process, wired to the store, the dispatcher and the tracker through their observers;
 * the operator's endpoints; and the graceful stop of an HTTP server.
 */
import { createMetrics, instrumentRequests, registerOpsRoutes, storeCheck, type ErtMetrics, type ReadinessChecks, type RunningServer } from '@ert/api';
import type { ErtConfig } from '@ert/core';
import type { Store } from '@ert/store';
import type { TrackerObserver } from '@ert/tracker';
import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** A Fastify instance (the API's, or the metrics port's). */
type FastifyInstance = RunningServer['app'];

/** How long a stop waits for requests in flight before their connections are cut. */
export const SHUTDOWN_GRACE_MS = 30_000;

/** A registry for this process (default process metrics included). */
export function processMetrics(): ErtMetrics {
  return createMetrics();
}

/** `config` with the store's transactions observed by `metrics` (`StoreOptions.onTransaction`). */
export function observedStore(config: ErtConfig, metrics: ErtMetrics | undefined): ErtConfig {
  if (metrics === undefined) return config;
  return { ...config, store: { ...config.store, onTransaction: metrics.onTransaction } };
}

/** The tracker's observers that feed `metrics`: hook calls, claims, reservation passes. */
export function trackerObserver(metrics: ErtMetrics): TrackerObserver {
  return { onHookCall: metrics.onHookCall, onClaim: metrics.onClaim, onConfirm: metrics.onConfirm };
}

/**
 * `ert serve`'s setup of the API's Fastify instance (`ServeOptions.setup`): request metrics on
 * every route, and `/metrics`, `/healthz`, `/readyz` at the root, outside the Placement prefix.
 */
export function serveOps(metrics: ErtMetrics, store: Store, readiness: ReadinessChecks = {}): (app: FastifyInstance) => void {
  return (app) => {
    trackConnections(app.server);
    instrumentRequests(app, metrics);
    registerOpsRoutes(app, { metrics, readiness: { store: storeCheck(store), ...readiness } });
  };
}

/** A connection of a tracked server, and its latest request's response (in flight until it has finished). */
interface OpenConnection {
  since: number;
  response?: ServerResponse;
  responseSince?: number;
}

/** What each tracked server's connections are doing (`trackConnections`). */
const tracked = new WeakMap<Server, Map<Socket, OpenConnection>>();

/**
 * Track `server`'s connections from now on, so that a stop still waiting can say which
 * connections hold it and on what request (`closeGracefully`'s "still stopping" report). Call
 * it before the server accepts (`serveOps` does for `ert serve`; `ert host run` right after its
 * metrics port listens).
 */
export function trackConnections(server: Server): void {
  if (tracked.has(server)) return;
  const open = new Map<Socket, OpenConnection>();
  tracked.set(server, open);
  server.on('connection', (socket: Socket) => {
    open.set(socket, { since: performance.now() });
    socket.once('close', () => open.delete(socket));
  });
  // Two field writes a request: whether it is still in flight is read from its response when
  // a stop reports.
  server.on('request', (req, res) => {
    const connection = open.get(req.socket);
    if (connection === undefined) return;
    connection.response = res;
    connection.responseSince = performance.now();
  });
}

/** `server`'s open connections as a stop reports them: peer, age, the request in flight, bytes the client has not taken. */
function describeConnections(server: Server): Array<{ peer: string; openMs: number; request?: string; requestMs?: number; unsentBytes?: number }> | undefined {
  const open = tracked.get(server);
  if (open === undefined) return undefined;
  const now = performance.now();
  return [...open].map(([socket, c]) => ({
    peer: `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`,
    openMs: Math.round(now - c.since),
    ...(c.response && !c.response.writableFinished ? { request: `${c.response.req.method ?? '?'} ${c.response.req.url ?? '?'}`, requestMs: Math.round(now - c.responseSince!) } : {}),
    // Written but not taken by the client yet: a client that stopped reading.
    ...(socket.writableLength > 0 ? { unsentBytes: socket.writableLength } : {}),
  }));
}

/**
 * Stop an HTTP server gracefully (`ert serve`'s API, `ert host run`'s metrics port): it stops
 * accepting at once (new connections are refused, idle keep-alive connections closed),
 * requests in flight are answered and their connections closed once idle, and this resolves
 * when the last one is. After `graceMs` the remaining connections are cut.
 */
export async function closeGracefully(server: { app: FastifyInstance; close(): Promise<void> }, graceMs = SHUTDOWN_GRACE_MS): Promise<void> {
  // Each step logged, so that a stop that hangs says where.
  const started = performance.now();
  server.app.log.info({ graceMs }, 'stopping: no longer accepting; answering the requests in flight');
  const closing = server.close().then(() => server.app.log.info({ ms: Math.round(performance.now() - started) }, 'stopped: requests answered, server closed'));
  // Node closes the connections idle when `close` is called, not those that become idle after
  // (a keep-alive connection whose request was in flight): without this, `close` waits for the
  // client to hang up.
  const idle = setInterval(() => server.app.server.closeIdleConnections(), 50);
  // A stop still waiting after 5 s says on what: the connections still open and, where the
  // server is tracked (`trackConnections`), each one's peer and request in flight.
  const slow = setInterval(
    () =>
      server.app.server.getConnections((_err, open) =>
        server.app.log.warn(
          { ms: Math.round(performance.now() - started), connections: open, open: describeConnections(server.app.server) },
          'still stopping: waiting for requests or connections',
        ),
      ),
    5_000,
  );
  slow.unref();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), graceMs);
    timer.unref();
  });
  try {
    if ((await Promise.race([closing.then(() => 'closed' as const), late])) === 'late') {
      server.app.log.warn({ graceMs }, 'requests still in flight after the grace period: closing their connections');
      server.app.server.closeAllConnections();
      await closing;
    }
  } finally {
    clearTimeout(timer);
    clearInterval(idle);
    clearInterval(slow);
  }
}
