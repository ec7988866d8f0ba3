// Issue 20, point 6, across real `ert` processes: `ert host run --metrics-port 0` publishes its
// host's instance events at /events for outside agents. A claim by another process
// (`ert claim`, its own tracker), a reservation the running tracker confirms
// (`ert schedule --wait`) and two releases (`ert release`, another process) are seen, in
// order, by `ert host events --follow --json` (a child process) and by a raw SSE client
// (node:http, its own frame parsing), each event carrying what the store's instance record
// says (assignments, CPUs, allocations); `Last-Event-ID` resumes with only the missed events;
// a client older than the buffer (`--events-buffer 3`) gets a `reset`; SIGTERM ends the raw
// stream cleanly; `ert host events --follow` outlives the daemon, resumes on a new daemon at
// the same port with a `reset` carrying the state (the live instance), and stops on SIGINT
// (exit 0). `--events-socket` gives the same events as JSON lines after a `hello`.
//
// Mutations seen caught: the watch's poll of the store removed (only the tracker's own
// listeners left): the two `ert release` events never came ("expected 4 frames, got 2");
// Last-Event-ID ignored by the server (the resumed client got a reset instead of 3 and 4:
// "expected [4] to deeply equal [3, 4]"); the preClose hook that ends open streams removed
// (host run did not stop with the raw client open: "the stream did not end"); `ert host events
// --follow` reconnecting without Last-Event-ID (after the restart it printed the new stream's
// `updated` with no `reset` before it: "a reset first: expected 'updated' to be 'reset'").
import { once } from 'node:events';
import { request, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createStore, type Store } from '@ert/store';
import { json, runErt, startErt } from '../cli/helpers.js';
import { BACKENDS, ROOT, xeonProject } from './xeon-host.js';


interface Event {
  seq: number;
  type: string;
  time: string;
  host: string;
  instance: string;
  state: string;
  flavor: string;
  allocations: Array<{ provider: string; providerUuid: string; resourceClass: string; amount: number }>;
  assignments: Record<string, unknown>;
  cpus?: number[];
  reason?: string;
}

/** A raw SSE client: frames split on blank lines, `id:` and `data:` read by hand. */
function sseClient(url: string, lastEventId?: string): { frames: Array<{ id?: string; data: Event }>; comments: string[]; response: Promise<IncomingMessage>; ended: Promise<void>; close(): void } {
  const frames: Array<{ id?: string; data: Event }> = [];
  const comments: string[] = [];
  let text = '';
  let resolveEnd!: () => void;
  const ended = new Promise<void>((resolve) => (resolveEnd = resolve));
  const req = request(url, { headers: { accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) } });
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    req.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        let cut: number;
        while ((cut = text.indexOf('\n\n')) >= 0) {
          const block = text.slice(0, cut);
          text = text.slice(cut + 2);
          const lines = block.split('\n');
          const id = lines.find((l) => l.startsWith('id: '))?.slice(4);
          const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
          comments.push(...lines.filter((l) => l.startsWith(':')));
          if (data.length > 0) frames.push({ ...(id !== undefined ? { id } : {}), data: JSON.parse(data.join('\n')) as Event });
        }
      });
      res.on('end', resolveEnd);
      resolve(res);
    });
    req.on('error', reject);
  });
  req.end();
  return { frames, comments, response, ended, close: () => req.destroy() };
}

describe.each(BACKENDS)('ert host run publishes its instance events (%s)', (backend) => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('claims, a confirmed reservation and releases reach ert host events --follow and a raw SSE client, in order, as the store records them', async () => {
    const { dir, storeOptions } = await xeonProject(backend, 'events', cleanups);

    const socketPath = join(dir, 'events.sock');
    const run = startErt(['host', 'run', '--metrics-port', '0', '--events-buffer', '3', '--events-socket', socketPath], { cwd: dir });
    let runLog = '';
    run.stdout!.on('data', (d) => (runLog += d));
    run.stderr!.on('data', (d) => (runLog += d));
    cleanups.push(async () => {
      if (run.exitCode === null && run.signalCode === null) {
        run.kill('SIGKILL');
        await once(run, 'exit');
      }
    });
    const base = await vi.waitFor(
      () => {
        expect(runLog).toMatch(/tracking host xeon-1/);
        return /metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(runLog)![1]!;
      },
      { timeout: 30_000, interval: 50 },
    );
    const store: Store = await createStore(storeOptions);
    cleanups.push(() => store.close());

    // The same events as JSON lines on the Unix socket.
    const socketLines: Event[] = [];
    let socketEnded = false;
    const socket = connect(socketPath, () => socket.write('\n'));
    socket.setEncoding('utf8');
    let socketText = '';
    socket.on('data', (chunk: string) => {
      socketText += chunk;
      let cut: number;
      while ((cut = socketText.indexOf('\n')) >= 0) {
        socketLines.push(JSON.parse(socketText.slice(0, cut)) as Event);
        socketText = socketText.slice(cut + 1);
      }
    });
    socket.on('end', () => (socketEnded = true));
    cleanups.push(async () => socket.destroy());
    const raw = sseClient(`${base}/events`);
    const rawResponse = await raw.response;
    expect(rawResponse.statusCode).toBe(200);
    expect(rawResponse.headers['content-type']).toMatch(/^text\/event-stream/);
    cleanups.push(async () => raw.close());
    const follow = startErt(['host', 'events', '--url', base, '--follow', '--json'], { cwd: dir });
    let followOut = '';
    let followErr = '';
    follow.stdout!.on('data', (d) => (followOut += d));
    follow.stderr!.on('data', (d) => (followErr += d));
    cleanups.push(async () => {
      if (follow.exitCode === null && follow.signalCode === null) {
        follow.kill('SIGKILL');
        await once(follow, 'exit');
      }
    });

    const claimed = await runErt(['claim', '--flavor', 'ways', '--host', 'xeon-1', '--root', ROOT, '--json'], { cwd: dir });
    expect(claimed.code, claimed.stderr).toBe(0);
    const waysUuid = json<{ instance: string }>(claimed).instance;
    const scheduled = await runErt(['schedule', '--flavor', 'pinned', '--wait', '--json'], { cwd: dir });
    expect(scheduled.code, scheduled.stderr + runLog).toBe(0);
    const pinnedUuid = json<{ selections: Array<{ instanceUuid: string }> }>(scheduled).selections[0]!.instanceUuid;
    await vi.waitFor(() => expect(raw.frames.map((f) => f.data.type)).toEqual(['claimed', 'claimed']), { timeout: 10_000, interval: 50 });

    // Each event says what the store's record and allocations say.
    for (const uuid of [waysUuid, pinnedUuid]) {
      const event = raw.frames.find((f) => f.data.instance === uuid)!.data;
      const record = (await store.getInstance(uuid))!;
      expect(event.host).toBe('xeon-1');
      expect(event.state).toBe('active');
      expect(event.flavor).toBe(record.flavor.name);
      expect(event.assignments).toEqual(record.assignments);
      expect(event.cpus).toEqual(record.cpus);
      const { allocations } = await store.getAllocations(uuid);
      expect(event.allocations.map(({ providerUuid, resourceClass, amount }) => ({ providerUuid, resourceClass, amount })).sort((a, b) => (a.providerUuid + a.resourceClass).localeCompare(b.providerUuid + b.resourceClass))).toEqual(
        allocations.map(({ providerUuid, resourceClass, amount }) => ({ providerUuid, resourceClass, amount })).sort((a, b) => (a.providerUuid + a.resourceClass).localeCompare(b.providerUuid + b.resourceClass)),
      );
      for (const a of event.allocations) expect(a.provider).toBe((await store.getProvider(a.providerUuid))!.name);
    }
    const waysEvent = raw.frames[0]!.data;
    expect(waysEvent.instance).toBe(waysUuid);
    expect(waysEvent.assignments['llc']).toEqual(expect.objectContaining({ domain: expect.any(Number), mask: expect.any(String), closid: expect.any(Number) }));
    expect(waysEvent.allocations).toContainEqual(expect.objectContaining({ provider: expect.stringMatching(/^xeon-1_llc_\d$/), resourceClass: 'CUSTOM_LLC_WAYS', amount: 3 }));
    expect(raw.frames[1]!.data.cpus).toHaveLength(2);

    for (const uuid of [waysUuid, pinnedUuid]) {
      const released = await runErt(['release', uuid, '--root', ROOT], { cwd: dir });
      expect(released.code, released.stderr).toBe(0);
    }
    await vi.waitFor(() => expect(raw.frames).toHaveLength(4), { timeout: 10_000, interval: 50 });
    const events = raw.frames.map((f) => f.data);
    expect(events.map((e) => [e.type, e.instance])).toEqual([
      ['claimed', waysUuid],
      ['claimed', pinnedUuid],
      ['released', waysUuid],
      ['released', pinnedUuid],
    ]);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    // A released event carries what the instance held.
    expect(events[2]!.assignments).toEqual(events[0]!.assignments);
    expect(events[2]!.allocations).toEqual(events[0]!.allocations);
    const stream = raw.frames[0]!.id!.split(':')[0]!;
    expect(raw.frames.map((f) => f.id)).toEqual([1, 2, 3, 4].map((n) => `${stream}:${n}`));

    await vi.waitFor(() => expect(socketLines.slice(1)).toEqual(events), { timeout: 5000, interval: 50 });
    expect(socketLines[0]).toEqual({ type: 'hello', stream, seq: 0 });
    // The follow child printed the same events, one JSON object per line.
    await vi.waitFor(() => expect(followOut.trim().split('\n'), followErr).toHaveLength(4), { timeout: 10_000, interval: 50 });
    expect(followOut.trim().split('\n').map((line) => JSON.parse(line) as Event)).toEqual(events);

    // Resume after seq 2: only 3 and 4 (the buffer of 3 still holds them).
    const resumed = sseClient(`${base}/events`, `${stream}:2`);
    cleanups.push(async () => resumed.close());
    await vi.waitFor(() => expect(resumed.frames.map((f) => f.data.seq)).toEqual([3, 4]), { timeout: 5000, interval: 50 });
    await new Promise((r) => setTimeout(r, 200));
    expect(resumed.frames.map((f) => f.data.seq), 'missed only').toEqual([3, 4]);
    resumed.close();
    // After seq 0: event 1 is gone from the buffer of 3: a reset, then nothing older.
    const behind = sseClient(`${base}/events`, `${stream}:0`);
    cleanups.push(async () => behind.close());
    await vi.waitFor(() => expect(behind.frames.map((f) => f.data.type)).toEqual(['reset']), { timeout: 5000, interval: 50 });
    expect(behind.frames[0]!.id).toBe(`${stream}:4`);
    behind.close();
    // Without --follow: what the buffer holds (2, 3, 4), then exit 0.
    const listed = await runErt(['host', 'events', '--url', base, '--json'], { cwd: dir });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout.trim().split('\n').map((line) => (JSON.parse(line) as Event).seq)).toEqual([2, 3, 4]);
    const readable = await runErt(['host', 'events', '--url', base], { cwd: dir });
    expect(readable.stdout).toContain(`released ${waysUuid}  flavor ways`);

    // One instance live across a restart of the daemon.
    const kept = await runErt(['claim', '--flavor', 'ways', '--host', 'xeon-1', '--root', ROOT, '--json'], { cwd: dir });
    expect(kept.code, kept.stderr).toBe(0);
    const keptUuid = json<{ instance: string }>(kept).instance;
    await vi.waitFor(() => expect(followOut.trim().split('\n')).toHaveLength(5), { timeout: 10_000, interval: 50 });

    // SIGTERM: the daemon ends the open stream cleanly and exits 0.
    run.kill('SIGTERM');
    await Promise.race([raw.ended, new Promise((_, reject) => setTimeout(() => reject(new Error(`the stream did not end: ${runLog}`)), 20_000))]);
    const [code] = (await once(run, 'exit')) as [number | null];
    expect(code, runLog).toBe(0);
    await vi.waitFor(() => expect(socketEnded, 'the socket ended').toBe(true), { timeout: 5000, interval: 50 });
    // The follow child outlives it (reconnecting) ...
    await vi.waitFor(() => expect(followErr).toMatch(/ended .*reconnecting/), { timeout: 10_000, interval: 50 });
    expect(follow.exitCode).toBeNull();
    // ... and, when a new daemon answers on the same port, resumes with a reset (another
    // stream) carrying the state: the live instance, whether the reset or an `updated` after it brings it.
    const port = new URL(base).port;
    const again = startErt(['host', 'run', '--metrics-port', port], { cwd: dir });
    let againLog = '';
    again.stderr!.on('data', (d) => (againLog += d));
    cleanups.push(async () => {
      if (again.exitCode === null && again.signalCode === null) {
        again.kill('SIGKILL');
        await once(again, 'exit');
      }
    });
    // What a client rebuilds from the lines after the restart: a reset (its state), then events.
    const rebuilt = (): Map<string, Event> => {
      const live = new Map<string, Event>();
      for (const e of followOut.trim().split('\n').slice(5).map((line) => JSON.parse(line) as Event & { state?: { instances: Event[] } })) {
        if (e.type === 'reset') {
          live.clear();
          for (const instance of e.state!.instances) live.set(instance.instance, instance);
        } else if (e.type === 'released') live.delete(e.instance);
        else live.set(e.instance, e);
      }
      return live;
    };
    await vi.waitFor(() => expect([...rebuilt().keys()], followErr + againLog).toEqual([keptUuid]), { timeout: 30_000, interval: 100 });
    expect((JSON.parse(followOut.trim().split('\n')[5]!) as Event).type, 'a reset first').toBe('reset');
    expect(rebuilt().get(keptUuid)!.assignments).toEqual((await store.getInstance(keptUuid))!.assignments);
    again.kill('SIGTERM');
    expect(((await once(again, 'exit')) as [number | null])[0], againLog).toBe(0);
    // SIGINT stops it with exit 0.
    follow.kill('SIGINT');
    const [followCode] = (await once(follow, 'exit')) as [number | null];
    expect(followCode, followErr).toBe(0);
  }, 120_000);
});
