// The event stream of `ert host run --metrics-port` (event-stream.ts) on a real HTTP server:
// the ring buffer, SSE frames and resume, resets carrying the state, heartbeats, the end on
// close, and a client that does not read costing the server no more than a socket buffer; and
// the JSON lines of `--events-socket` on a real Unix socket.
//
// Mutations seen caught: `pump` writing on without waiting for `drain` (the paused client's
// connection buffered 6 MB on the server: "server-side buffer: expected 6294901 to be less than
// 262144"); the reset for a client behind the buffer removed (the pump read past the buffer and
// threw; the slow client stopped at seq 9: "expected 9 to be 5000"); the heartbeat removed ("heartbeat: expected [': connected']
// to include ': heartbeat'"); ids of another stream resumed as if ours (the client after a
// restart got 'released', 'claimed' instead of a reset).
// The socket: the first line's id ignored ("resumes: expected [0, 1, 2, 3, 4] to deeply equal
// [2, 3, 4]"). (Removing the socket file at close is node's own doing on server.close(); the
// explicit unlink only covers a failed close.)
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { request, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EventLog, registerEventRoutes, resumePoint, serveEventSocket } from '@ert/api';

interface Frame {
  id?: string;
  data: { seq: number; type: string; [key: string]: unknown };
}

const apps: FastifyInstance[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function serveLog(log: EventLog<object>, heartbeatMs?: number): Promise<{ app: FastifyInstance; url: string; sockets: Socket[] }> {
  const app = Fastify();
  const sockets: Socket[] = [];
  app.server.on('connection', (s: Socket) => sockets.push(s));
  registerEventRoutes(app, { log, ...(heartbeatMs !== undefined ? { heartbeatMs } : {}), state: () => ({ instances: log.latest }) });
  await app.listen({ host: '127.0.0.1', port: 0 });
  apps.push(app);
  const address = app.server.address() as { port: number };
  return { app, url: `http://127.0.0.1:${address.port}/events`, sockets };
}

/** A raw SSE client; `pause` leaves the response unread until `resume()`. */
function client(url: string, opts: { lastEventId?: string; pause?: boolean } = {}) {
  const frames: Frame[] = [];
  const comments: string[] = [];
  let text = '';
  let res: IncomingMessage | undefined;
  let ended = false;
  const req = request(url, { headers: { accept: 'text/event-stream', ...(opts.lastEventId !== undefined ? { 'last-event-id': opts.lastEventId } : {}) } });
  const response = new Promise<IncomingMessage>((resolve) =>
    req.on('response', (r) => {
      res = r;
      r.setEncoding('utf8');
      if (opts.pause) r.pause();
      r.on('data', (chunk: string) => {
        text += chunk;
        let cut: number;
        while ((cut = text.indexOf('\n\n')) >= 0) {
          const lines = text.slice(0, cut).split('\n');
          text = text.slice(cut + 2);
          comments.push(...lines.filter((l) => l.startsWith(':')));
          const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
          const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
          if (data.length > 0) frames.push({ ...(id !== undefined ? { id } : {}), data: JSON.parse(data.join('\n')) });
        }
      });
      r.on('end', () => (ended = true));
      resolve(r);
    }),
  );
  req.end();
  return {
    frames,
    comments,
    response,
    get ended() {
      return ended;
    },
    resume: () => res?.resume(),
    close: () => req.destroy(),
  };
}

describe('EventLog', () => {
  it('numbers events from 1, keeps the newest `capacity`, and says when a reader missed some', () => {
    const log = new EventLog<{ n: number }>(3);
    expect(log.latest).toBe(0);
    expect(log.after(0)).toEqual({ events: [], missed: false });
    for (let n = 1; n <= 5; n++) expect(log.publish({ n }).seq).toBe(n);
    expect([log.oldest, log.latest]).toEqual([3, 5]);
    expect(log.get(2)).toBeUndefined();
    expect(log.get(4)).toEqual({ seq: 4, n: 4 });
    expect(log.after(3)).toEqual({ events: [{ seq: 4, n: 4 }, { seq: 5, n: 5 }], missed: false });
    expect(log.after(2)).toEqual({ events: [3, 4, 5].map((n) => ({ seq: n, n })), missed: false });
    expect(log.after(1)).toEqual({ events: [3, 4, 5].map((n) => ({ seq: n, n })), missed: true });
    expect(log.after(9).missed).toBe(true);
    expect(() => new EventLog(0)).toThrow(RangeError);
  });

  it('resumes after an id of its own stream, and resets for another stream, a seq not reached or garbage', () => {
    const log = new EventLog<object>(10);
    log.publish({});
    log.publish({});
    expect(resumePoint(log, undefined)).toEqual({ after: 0, reset: false });
    expect(resumePoint(log, `${log.stream}:1`)).toEqual({ after: 1, reset: false });
    expect(resumePoint(log, '2')).toEqual({ after: 2, reset: false });
    expect(resumePoint(log, `${new EventLog<object>(1).stream}:1`)).toEqual({ after: 2, reset: true });
    expect(resumePoint(log, '3')).toEqual({ after: 2, reset: true });
    expect(resumePoint(log, 'nonsense')).toEqual({ after: 2, reset: true });
  });
});

describe('GET /events', () => {
  it('streams the buffer then each new event, resumes after Last-Event-ID, and resets a client of another stream', async () => {
    const log = new EventLog<{ type: string; n: number }>(100);
    const { url } = await serveLog(log);
    log.publish({ type: 'claimed', n: 1 });
    const first = client(url);
    const res = await first.response;
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-store');
    log.publish({ type: 'released', n: 2 });
    log.publish({ type: 'claimed', n: 3 });
    await vi.waitFor(() => expect(first.frames.map((f) => f.data.seq)).toEqual([1, 2, 3]));
    expect(first.frames.map((f) => f.id)).toEqual([1, 2, 3].map((n) => `${log.stream}:${n}`));
    expect(first.frames[1]!.data).toEqual({ seq: 2, type: 'released', n: 2 });
    first.close();

    const resumed = client(url, { lastEventId: `${log.stream}:1` });
    await vi.waitFor(() => expect(resumed.frames.map((f) => f.data.seq)).toEqual([2, 3]));
    resumed.close();
    // An id from before a restart: a reset carrying the state as of the newest event, then only new events.
    const restarted = client(url, { lastEventId: `${new EventLog<object>(1).stream}:1` });
    await vi.waitFor(() => expect(restarted.frames.map((f) => f.data.type)).toEqual(['reset']));
    expect(restarted.frames[0]!.id).toBe(`${log.stream}:3`);
    expect(restarted.frames[0]!.data).toEqual(expect.objectContaining({ seq: 3, state: { instances: 3 } }));
    log.publish({ type: 'claimed', n: 4 });
    await vi.waitFor(() => expect(restarted.frames.map((f) => f.data.seq)).toEqual([3, 4]));
    restarted.close();

    // The buffered events as one JSON document (`ert host events` without --follow), and the state.
    const listed = (await (await fetch(`${url}?after=${log.stream}:2`, { headers: { accept: 'application/json' } })).json()) as { events: Frame['data'][]; reset: boolean; latest: number };
    expect(listed.events.map((e) => e.seq)).toEqual([3, 4]);
    expect([listed.reset, listed.latest]).toEqual([false, 4]);
    expect(await (await fetch(`${url}/state`)).json()).toEqual({ stream: log.stream, seq: 4, state: { instances: 4 } });
  });

  it('sends heartbeats on an idle stream and ends open streams when the server closes', async () => {
    const log = new EventLog<object>(10);
    const { app, url } = await serveLog(log, 40);
    const idle = client(url);
    await idle.response;
    await vi.waitFor(() => expect(idle.comments, 'heartbeat').toContain(': heartbeat'), { timeout: 2000, interval: 20 });
    const started = Date.now();
    await app.close();
    apps.splice(apps.indexOf(app), 1);
    expect(Date.now() - started).toBeLessThan(2000);
    await vi.waitFor(() => expect(idle.ended).toBe(true));
  });

  it('keeps a client that does not read to one socket buffer; when it reads again it gets a reset, then the newest events', async () => {
    const log = new EventLog<{ type: string; pad: string }>(50);
    const { url, sockets } = await serveLog(log);
    const slow = client(url, { pause: true });
    await slow.response;
    const pad = 'x'.repeat(2000);
    const total = 5000; // about 10 MB of events
    for (let i = 0; i < total; i++) {
      log.publish({ type: 'claimed', pad });
      if (i % 500 === 0) await new Promise((r) => setImmediate(r));
    }
    await new Promise((r) => setTimeout(r, 50));
    const buffered = Math.max(...sockets.map((s) => s.writableLength));
    expect(buffered, 'server-side buffer').toBeLessThan(256 * 1024);

    slow.resume();
    await vi.waitFor(() => expect(slow.frames.at(-1)?.data.seq).toBe(total), { timeout: 10_000, interval: 50 });
    const seqs = slow.frames.map((f) => f.data.seq);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]!).toBeGreaterThan(seqs[i - 1]!);
    expect(slow.frames.length).toBeLessThan(total);
    const reset = slow.frames.findIndex((f) => f.data.type === 'reset');
    expect(reset, 'a reset').toBeGreaterThan(0);
    // The reset carries the state as of its seq (here: the seq itself).
    expect(slow.frames[reset]!.data.state).toEqual({ instances: slow.frames[reset]!.data.seq });
    // Before the reset, the events it had; after it, only events the buffer still held.
    expect(slow.frames.slice(0, reset).map((f) => f.data.seq)).toEqual(seqs.slice(0, reset).map((_, i) => i + 1));
    slow.close();
  });
});

describe('--events-socket', () => {
  /** A socket client: writes `first`, collects the JSON lines. */
  function lines(path: string, first: string) {
    const got: Array<Record<string, unknown>> = [];
    let text = '';
    let ended = false;
    const socket = connect(path, () => socket.write(first));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      let cut: number;
      while ((cut = text.indexOf('\n')) >= 0) {
        got.push(JSON.parse(text.slice(0, cut)) as Record<string, unknown>);
        text = text.slice(cut + 1);
      }
    });
    socket.on('end', () => (ended = true));
    return {
      got,
      get ended() {
        return ended;
      },
      close: () => socket.destroy(),
    };
  }

  it('sends a hello then the events as JSON lines, resumes after the id of the first line, resets another stream, and cleans up at close', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ert-events-socket-'));
    try {
      const path = join(dir, 'events.sock');
      const log = new EventLog<{ type: string }>(10);
      for (let i = 0; i < 3; i++) log.publish({ type: 'claimed' });
      const served = await serveEventSocket(path, { log, state: () => ({ instances: log.latest }) });
      expect((await stat(path)).mode & 0o777).toBe(0o660);

      const all = lines(path, '\n');
      await vi.waitFor(() => expect(all.got.map((l) => [l['type'], l['seq']])).toEqual([['hello', 0], ['claimed', 1], ['claimed', 2], ['claimed', 3]]));
      expect(all.got[0]).toEqual({ type: 'hello', stream: log.stream, seq: 0 });
      log.publish({ type: 'released' });
      await vi.waitFor(() => expect(all.got.at(-1)).toEqual({ seq: 4, type: 'released' }));

      const resumed = lines(path, `${log.stream}:2\n`);
      await vi.waitFor(() => expect(resumed.got.map((l) => l['seq']), 'resumes').toEqual([2, 3, 4]));
      const other = lines(path, `${new EventLog<object>(1).stream}:9\n`);
      await vi.waitFor(() => expect(other.got.map((l) => l['type'])).toEqual(['hello', 'reset']));
      expect(other.got[1]).toEqual(expect.objectContaining({ seq: 4, state: { instances: 4 } }));

      await served.close();
      await vi.waitFor(() => expect([all.ended, resumed.ended, other.ended]).toEqual([true, true, true]));
      await expect(stat(path), 'socket file removed').rejects.toThrow(/ENOENT/);

      // A file that is not a socket is never replaced.
      await writeFile(path, 'not a socket');
      await expect(serveEventSocket(path, { log, state: () => null })).rejects.toThrow(/is not a socket/);
      for (const c of [all, resumed, other]) c.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
