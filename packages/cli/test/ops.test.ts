import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { createMetrics, EventLog, startOpsServer } from '@ert/api';
import { closeGracefully, trackConnections } from '../src/ops.js';

/**
 * `ert host run --metrics-port` stops its server with `closeGracefully`, as `ert serve` does. A
 * plain Fastify close closes the connections idle when it is called, not one whose request
 * was in flight and goes idle after: a scraper's keep-alive connection then held the stop until
 * the scraper hung up (Fastify's keep-alive timeout is 72 s). Here a raw client that never
 * hangs up has a /readyz in flight, held by its readiness check, and an event stream open
 * when the stop begins. Seen red ("still open after 10 s"): the stop made by `ops.close()`, as
 * `ert host run` made it before, in place of `closeGracefully(ops)`; and `closeGracefully`
 * without its closing of idle connections every 50 ms.
 */
describe('the metrics port stopped by closeGracefully', () => {
  it('answers the request in flight, ends the event stream, closes both connections and resolves', async () => {
    let entered!: () => void;
    const inCheck = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const log = new EventLog<{ type: string }>(10);
    const ops = await startOpsServer({
      host: '127.0.0.1',
      port: 0,
      metrics: createMetrics({ defaultMetrics: false }),
      readiness: {
        slow: async () => {
          entered();
          await gate;
          return { ok: true };
        },
      },
      events: { log, state: () => ({}) },
    });
    trackConnections(ops.app.server);
    const port = Number(new URL(ops.url).port);
    /** A client that never ends its side: only the server can close the connection. */
    const client = (request: string) => {
      const socket = net.connect(port, '127.0.0.1');
      const seen = { data: '', closedByServer: false };
      socket.on('data', (d: Buffer) => (seen.data += d.toString()));
      socket.on('close', () => (seen.closedByServer = true));
      socket.write(request);
      return seen;
    };
    const ready = client('GET /readyz HTTP/1.1\r\nHost: ops\r\nConnection: keep-alive\r\n\r\n');
    const stream = client('GET /events HTTP/1.1\r\nHost: ops\r\nAccept: text/event-stream\r\n\r\n');
    await inCheck;
    await expect.poll(() => stream.data).toContain(': connected');

    const closing = closeGracefully(ops, 20_000).then(() => 'closed' as const);
    // The stop has begun (no longer accepting) while /readyz waits for its check.
    const refused = () =>
      new Promise<boolean>((resolve) => {
        const probe = net.connect(port, '127.0.0.1');
        probe.on('connect', () => (probe.destroy(), resolve(false))).on('error', () => resolve(true));
      });
    await expect.poll(refused).toBe(true);
    release();
    const outcome = await Promise.race([closing, new Promise<string>((resolve) => setTimeout(() => resolve('still open after 10 s'), 10_000).unref())]);
    expect(outcome).toBe('closed');
    await expect.poll(() => ready.closedByServer && stream.closedByServer).toBe(true);
    expect(ready.data).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(ready.data).toContain('"status":"ready"');
    expect(stream.data).toContain(': closing');
  }, 30_000);
});
