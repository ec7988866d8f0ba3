/**
 * A local stream of events for outside agents (docs/operations.md, "Events for outside
 * agents"): `ert host run --metrics-port` publishes its host's instance events into an
 * `EventLog` (a bounded ring buffer numbering them with `seq`) and serves them at
 * `GET /events` as server-sent events, with `Last-Event-ID` resume, a `reset` event for a
 * client whose missed events were dropped, heartbeats, and a clean end when the server closes.
 *
 * A connection holds no queue of its own: it keeps a cursor (the last seq it wrote) and
 * copies from the ring buffer while the socket accepts; when the socket is full it waits for
 * `drain`. A consumer that reads slowly therefore costs the server one socket buffer, never
 * more, and once it falls behind the ring buffer's oldest event it gets a `reset`.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
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
  /** Comment lines (`: heartbeat`) sent this often on an idle stream, so that proxies keep it open. Default 15 s. */
  heartbeatMs?: number;
  /** The current state the events lead to (`GET /events/state`), as of `log.latest`: what a client re-reads after a `reset`. */
  state?: () => unknown;
}

/**
 * Where a client resumes: the seq after which it wants events, or `reset` when the id it
 * gives is not one of this log's (another run of the process, a seq not yet reached, garbage).
 * `Last-Event-ID` (or the `after` query parameter) is `<stream>:<seq>` as sent, or a bare seq.
 * After a reset the client gets this log's events from its first when the log still holds
 * them all (a restarted process: its first events describe the state), else only new ones.
 */
export function resumePoint(log: Pick<EventLog<object>, 'stream' | 'latest' | 'oldest'>, lastEventId: string | undefined): { after: number; reset: boolean } {
  if (lastEventId === undefined || lastEventId.trim() === '') return { after: 0, reset: false };
  const m = /^(?:([0-9a-f-]{36}):)?(\d+)$/i.exec(lastEventId.trim());
  const seq = m ? Number(m[2]) : NaN;
  if (!m || (m[1] !== undefined && m[1].toLowerCase() !== log.stream) || seq > log.latest) return { after: log.oldest === 1 ? 0 : log.latest, reset: true };
  return { after: seq, reset: false };
}

/** The SSE frame of one event: `id: <stream>:<seq>` and the event as one JSON line. */
function frame(stream: string, seq: number, data: unknown): string {
  return `id: ${stream}:${seq}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * The `reset` event: the client missed events it cannot get any more; it should forget what it
 * knew and re-read the state (`GET /events/state`), and the stream continues after `resumeAt`
 * (0: from this stream's first event, which with those after it give the whole state).
 */
function resetEvent(stream: string, resumeAt: number, reason: string): string {
  return frame(stream, resumeAt, { type: 'reset', seq: resumeAt, time: new Date().toISOString(), reason, resync: '/events/state' });
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
    let cursor = start.after;
    let waiting = false;
    let wrote = Date.now();
    const write = (text: string): boolean => {
      wrote = Date.now();
      return raw.write(text);
    };
    const pump = (): void => {
      if (waiting || raw.writableEnded || raw.destroyed) return;
      while (cursor < log.latest) {
        let text: string;
        if (cursor < log.oldest - 1) {
          text = resetEvent(log.stream, log.latest, `events ${cursor + 1} to ${log.oldest - 1} were dropped (the buffer keeps the newest ${log.capacity})`);
          cursor = log.latest;
        } else {
          const event = log.get(cursor + 1)!;
          cursor = event.seq;
          text = frame(log.stream, event.seq, event);
        }
        if (!write(text)) {
          waiting = true;
          raw.once('drain', () => {
            waiting = false;
            pump();
          });
          return;
        }
      }
    };
    if (start.reset) write(resetEvent(log.stream, start.after, `${id ?? ''} is not an event of this stream (the process restarted?)`));
    else write(': connected\n\n');
    const unsubscribe = log.subscribe(pump);
    const heartbeat = setInterval(() => {
      if (!waiting && Date.now() - wrote >= heartbeatMs / 2) write(': heartbeat\n\n');
    }, heartbeatMs);
    heartbeat.unref();
    raw.on('close', () => {
      unsubscribe();
      clearInterval(heartbeat);
      open.delete(raw);
    });
    pump();
  });

  app.get('/events/state', { logLevel: 'warn' }, async (_request, reply) => {
    const seq = log.latest;
    const state = options.state?.() ?? null;
    return reply.header('content-type', 'application/json').header('cache-control', 'no-store').send(JSON.stringify({ stream: log.stream, seq, state }));
  });
}
