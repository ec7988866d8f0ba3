/**
 * A local stream of events for outside agents (docs/operations.md, "Events for outside
 * agents"): `ert host run --metrics-port` publishes its host's instance events into an
 * `EventLog` (a bounded ring buffer numbering them with `seq`) and serves them at
 * `GET /events` as server-sent events (and, with `--events-socket`, as JSON lines on a Unix
 * socket), with `Last-Event-ID` resume, a `reset` event carrying the state for a client whose
 * missed events were dropped, heartbeats, and a clean end when the server closes.
 *
 * A connection holds no queue of its own: it keeps a cursor (the last seq it wrote) and
 * copies from the ring buffer while the socket accepts; when the socket is full it waits for
 * `drain`. A consumer that reads slowly therefore costs the server one socket buffer, never
 * more, and once it falls behind the ring buffer's oldest event it gets a `reset`.
 */
import { randomUUID } from 'node:crypto';
import { chmod, lstat, unlink } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { createServer, type Socket } from 'node:net';
import type { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';

/** An event as the log holds it: the payload given to `publish`, numbered. */
export type Logged<T> = T & { seq: number };

/**
 * A bounded, numbered log of events in memory: `publish` gives each the next `seq` (1, 2, …,
 * never reused while the process lives) and keeps the newest `capacity`.
 */
export class EventLog<T extends object> {
  /** This log's id: a `Last-Event-ID` of another log (an earlier run of the process) gets a reset. */
  readonly stream: string = randomUUID();
  private readonly slots: Array<Logged<T> | undefined>;
  private last = 0;
  private readonly listeners = new Set<() => void>();

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`event log capacity must be a positive integer, got ${capacity}`);
    this.slots = new Array<Logged<T> | undefined>(capacity);
  }

  /** Number `payload` with the next seq, keep it (dropping the oldest when full) and wake the subscribers. */
  publish(payload: T): Logged<T> {
    const event = { seq: ++this.last, ...payload } as Logged<T>;
    event.seq = this.last;
    this.slots[event.seq % this.capacity] = event;
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch {
        // A subscriber's failure (one client's connection) is its own, never the publisher's.
      }
    }
    return event;
  }

  /** Seq of the newest event (0 before the first). */
  get latest(): number {
    return this.last;
  }

  /** Seq of the oldest event kept (`latest + 1` when the log is empty). */
  get oldest(): number {
    return Math.max(1, this.last - this.capacity + 1);
  }

  /** The event numbered `seq`, if it is still kept. */
  get(seq: number): Logged<T> | undefined {
    return seq >= this.oldest && seq <= this.last ? this.slots[seq % this.capacity] : undefined;
  }

  /** The kept events after `seq`; `missed` when some after it were already dropped (or `seq` is not one of this log's). */
  after(seq: number): { events: Array<Logged<T>>; missed: boolean } {
    const missed = seq < this.oldest - 1 || seq > this.last;
    const from = missed ? this.oldest : seq + 1;
    const events: Array<Logged<T>> = [];
    for (let s = from; s <= this.last; s++) events.push(this.slots[s % this.capacity]!);
    return { events, missed };
  }

  /** Called (synchronously, no argument) after each publish; returns the unsubscribe function. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export interface EventRouteOptions<T extends object> {
  log: EventLog<T>;
  /**
   * The state the events lead to, as of `log.latest` (called synchronously, so it must be kept
   * in step with what was published): `GET /events/state`, and carried by each `reset` event.
   */
  state: () => unknown;
  /** Comment lines (`: heartbeat`) sent this often on an idle stream, so that proxies keep it open. Default 15 s. */
  heartbeatMs?: number;
}

/**
 * Where a client resumes: the seq after which it wants events, or `reset` (at the newest
 * event) when the id it gives is not one of this log's: another run of the process (the
 * `<stream>` part differs), a seq not reached yet, garbage. The id (`Last-Event-ID`, the
 * `after` query parameter, the first line on the socket) is `<stream>:<seq>` as sent, or a
 * bare seq; none or empty: from the oldest event kept.
 */
export function resumePoint(log: Pick<EventLog<object>, 'stream' | 'latest'>, lastEventId: string | undefined): { after: number; reset: boolean } {
  if (lastEventId === undefined || lastEventId.trim() === '') return { after: 0, reset: false };
  const m = /^(?:([0-9a-f-]{36}):)?(\d+)$/i.exec(lastEventId.trim());
  const seq = m ? Number(m[2]) : NaN;
  if (!m || (m[1] !== undefined && m[1].toLowerCase() !== log.stream) || seq > log.latest) return { after: log.latest, reset: true };
  return { after: seq, reset: false };
}

/** How events are written on one transport: SSE frames, or JSON lines. */
type Format = (stream: string, seq: number, data: unknown) => string;

/** The SSE frame of one event: `id: <stream>:<seq>` and the event as one JSON line. */
const sseFrame: Format = (stream, seq, data) => `id: ${stream}:${seq}\ndata: ${JSON.stringify(data)}\n\n`;
/** One JSON object per line (the Unix socket). */
const jsonLine: Format = (_stream, _seq, data) => `${JSON.stringify(data)}\n`;

/**
 * Copy `log`'s events after `after` to `out` as they come, while `out` accepts them (then wait
 * for `drain`): the connection holds a cursor, never a queue. A client behind the oldest event
 * kept gets a `reset` carrying the state as of the newest, and goes on from there. `reset`
 * given: start with one (the client's id was not one of this log's). Returns the stop function.
 */
function follow<T extends object>(out: Writable, options: EventRouteOptions<T>, format: Format, after: number, reset: string | undefined): { stop(): void; write(text: string): boolean; waiting(): boolean } {
  const { log } = options;
  let cursor = after;
  let waiting = false;
  const resetText = (reason: string): string => {
    cursor = log.latest;
    return format(log.stream, cursor, { type: 'reset', seq: cursor, time: new Date().toISOString(), reason, state: options.state() });
  };
  const pump = (): void => {
    if (waiting || out.writableEnded || out.destroyed) return;
    while (cursor < log.latest) {
      let text: string;
      if (cursor < log.oldest - 1) {
        text = resetText(`events ${cursor + 1} to ${log.oldest - 1} were dropped (the buffer keeps the newest ${log.capacity})`);
      } else {
        const event = log.get(cursor + 1)!;
        cursor = event.seq;
        text = format(log.stream, event.seq, event);
      }
      if (!out.write(text)) {
        waiting = true;
        out.once('drain', () => {
          waiting = false;
          pump();
        });
        return;
      }
    }
  };
  if (reset !== undefined) out.write(resetText(reset));
  const unsubscribe = log.subscribe(pump);
  pump();
  return { stop: unsubscribe, write: (text) => out.write(text), waiting: () => waiting };
}

/**
 * `GET /events` (server-sent events, or with `Accept: application/json` the buffered events
 * as one document) and `GET /events/state`, on `app`. Open streams are ended when `app`
 * closes (`preClose`), so that a stopping process does not wait for its clients.
 */
export function registerEventRoutes<T extends object>(app: FastifyInstance, options: EventRouteOptions<T>): void {
  const { log } = options;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const open = new Set<ServerResponse>();

  app.addHook('preClose', async () => {
    for (const raw of open) raw.end(': closing\n\n');
    open.clear();
  });

  app.get<{ Querystring: { after?: string } }>('/events', { logLevel: 'warn' }, async (request, reply) => {
    const header = request.headers['last-event-id'];
    const id = (Array.isArray(header) ? header[0] : header) ?? request.query.after;
    const start = resumePoint(log, id);
    const accept = request.headers.accept ?? '';
    if (accept.includes('application/json') && !accept.includes('text/event-stream')) {
      const { events, missed } = log.after(start.after);
      return reply
        .header('content-type', 'application/json')
        .header('cache-control', 'no-store')
        .send(JSON.stringify({ stream: log.stream, capacity: log.capacity, oldest: log.oldest, latest: log.latest, reset: start.reset || missed, events }));
    }

    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // nginx and friends: do not buffer the stream.
      'x-accel-buffering': 'no',
    });
    open.add(raw);
    if (!start.reset) raw.write(': connected\n\n');
    let wrote = Date.now();
    const format: Format = (streamId, seq, data) => {
      wrote = Date.now();
      return sseFrame(streamId, seq, data);
    };
    const stream = follow(raw, options, format, start.after, start.reset ? `${id ?? ''} is not an event of this stream (the process restarted?)` : undefined);
    const heartbeat = setInterval(() => {
      if (raw.writableEnded || raw.destroyed) return;
      if (!stream.waiting() && Date.now() - wrote >= heartbeatMs / 2) {
        wrote = Date.now();
        stream.write(': heartbeat\n\n');
      }
    }, heartbeatMs);
    heartbeat.unref();
    raw.on('close', () => {
      stream.stop();
      clearInterval(heartbeat);
      open.delete(raw);
    });
  });

  app.get('/events/state', { logLevel: 'warn' }, async (_request, reply) => {
    const seq = log.latest;
    const state = options.state();
    return reply.header('content-type', 'application/json').header('cache-control', 'no-store').send(JSON.stringify({ stream: log.stream, seq, state }));
  });
}

/** A listening `--events-socket`. */
export interface EventSocket {
  path: string;
  /** End every connection, stop listening and remove the socket file. */
  close(): Promise<void>;
}

/**
 * The same events as JSON lines on a Unix socket at `path` (mode 0660). A client first writes
 * one line: empty for every event kept, or the id of the last event it has (`<stream>:<seq>`,
 * as the `hello` line gave the stream) to resume after it. The server answers
 * `{"type":"hello","stream","seq"}` (where it starts), then the events, one per line, with the
 * resets of `GET /events`. A stale socket file at `path` is replaced; any other file is refused.
 */
export async function serveEventSocket<T extends object>(path: string, options: Omit<EventRouteOptions<T>, 'heartbeatMs'>): Promise<EventSocket> {
  const { log } = options;
  try {
    const existing = await lstat(path);
    if (!existing.isSocket()) throw new Error(`${path} exists and is not a socket; refusing to replace it`);
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const open = new Set<Socket>();
  const server = createServer((socket) => {
    open.add(socket);
    let first = '';
    let stream: { stop(): void } | undefined;
    socket.setEncoding('utf8');
    const onData = (chunk: string): void => {
      first += chunk;
      const newline = first.indexOf('\n');
      if (newline < 0) {
        if (first.length > 256) socket.destroy();
        return;
      }
      socket.off('data', onData);
      // Anything else the client writes is read and ignored, so that it never fills a buffer.
      socket.on('data', () => undefined);
      const id = first.slice(0, newline).trim();
      const start = resumePoint(log, id);
      socket.write(jsonLine(log.stream, start.after, { type: 'hello', stream: log.stream, seq: start.after }));
      stream = follow(socket, options, jsonLine, start.after, start.reset ? `${id} is not an event of this stream (the process restarted?)` : undefined);
    };
    socket.on('data', onData);
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      stream?.stop();
      open.delete(socket);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  await chmod(path, 0o660);
  return {
    path,
    close: async () => {
      for (const socket of open) socket.end();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await unlink(path).catch(() => undefined);
    },
  };
}
