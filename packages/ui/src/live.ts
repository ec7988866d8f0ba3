/**
 * Live updates (docs/ui.md, "Live updates"): one connection per tab to
 * `GET /scheduler/v1/events` (server-sent events), shared by every page. It is read with
 * `fetch` rather than `EventSource`, which cannot send `X-Auth-Token`. The server sends one
 * `hosts` event per poll of the store that found changes (at most one a second, the changed
 * hosts' summaries); the pages merge them, so a claim, a release or new stats show without a
 * reload. A dropped connection is opened again after 2, 4, ... 30 s; a 401 brings the login
 * prompt as any call's does.
 */
import { authListeners, refusedMessage, storedToken, type HostView } from './api.js';
import { useEffect, useState } from 'preact/hooks';

/** One `hosts` event: the changed (or new) hosts' summaries and the names of hosts that went. */
export interface HostChange {
  hosts: HostView[];
  removed: string[];
}

/** `connecting` until the server said `ready`; `live` while the stream is open; `off` between attempts. */
export type LiveState = 'connecting' | 'live' | 'off';

const listeners = new Set<(change: HostChange) => void>();
const stateListeners = new Set<(state: LiveState) => void>();
let state: LiveState = 'off';
let running = false;
/** Resolved when the stream is live (changes from then on are told). */
let ready: Promise<void> | undefined;
let markReady: () => void = () => {};

function setState(next: LiveState): void {
  state = next;
  for (const l of stateListeners) l(next);
}

/** Parse a text/event-stream body: `{event, data}` for every block that has data. */
async function readEvents(body: ReadableStream<Uint8Array>, onEvent: (event: string, data: string) => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length > 0) onEvent(event, data.join('\n'));
    }
  }
}

async function run(): Promise<void> {
  let delay = 2000;
  while (listeners.size > 0) {
    setState('connecting');
    try {
      const token = storedToken();
      const res = await fetch('/scheduler/v1/events', { headers: { accept: 'text/event-stream', ...(token !== undefined ? { 'x-auth-token': token } : {}) } });
      if (res.status === 401) {
        for (const l of authListeners) l(refusedMessage(token));
        break;
      }
      if (!res.ok || !res.body) throw new Error(`${res.status}`);
      await readEvents(res.body, (event, data) => {
        if (event === 'ready') {
          delay = 2000;
          setState('live');
          markReady();
        } else if (event === 'hosts') {
          const change = JSON.parse(data) as HostChange;
          for (const l of listeners) l(change);
        }
      });
    } catch {
      // The connection failed or dropped: try again below.
    }
    setState('off');
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 30_000);
  }
  running = false;
  setState('off');
}

/**
 * Be told of every host change from now on; resolves once the stream is live (so that a read
 * made after it misses no change). Returns the function that stops listening.
 */
export function onHostChanges(listener: (change: HostChange) => void): { ready: Promise<void>; stop: () => void } {
  listeners.add(listener);
  if (!ready || state === 'off') ready = new Promise<void>((resolve) => (markReady = resolve));
  if (!running) {
    running = true;
    void run();
  }
  return { ready: state === 'live' ? Promise.resolve() : ready, stop: () => void listeners.delete(listener) };
}

/** The connection's state, for the header's indicator. */
export function useLiveState(): LiveState {
  const [s, set] = useState(state);
  useEffect(() => {
    stateListeners.add(set);
    return () => void stateListeners.delete(set);
  }, []);
  return s;
}

/**
 * Hosts kept up to date: `load` (GET /hosts) once the stream is live, then every change merged
 * in (a host's newer generation replaces it, a removed one goes, a new one is added in name
 * order). Changes are applied at most once per animation frame.
 */
export function useLiveHosts(load: () => Promise<HostView[]>): { value?: HostView[]; error?: unknown } {
  const [result, setResult] = useState<{ value?: HostView[]; error?: unknown }>({});
  useEffect(() => {
    let hosts: HostView[] | undefined;
    let queued: HostChange[] = [];
    let frame: number | undefined;
    let live = true;
    const apply = () => {
      frame = undefined;
      if (!hosts || !live) return;
      const byName = new Map(hosts.map((h) => [h.name, h]));
      let added = false;
      for (const change of queued) {
        for (const name of change.removed) byName.delete(name);
        for (const h of change.hosts) {
          const old = byName.get(h.name);
          if (!old) added = true;
          if (!old || old.generation <= h.generation) byName.set(h.name, h);
        }
      }
      queued = [];
      hosts = added ? [...byName.values()].sort((a, b) => a.name.localeCompare(b.name)) : hosts.filter((h) => byName.has(h.name)).map((h) => byName.get(h.name)!);
      setResult({ value: hosts });
    };
    const sub = onHostChanges((change) => {
      queued.push(change);
      frame ??= requestAnimationFrame(apply);
    });
    // Read once the stream is live, or after 3 s without it (the view still works, not live).
    void Promise.race([sub.ready, new Promise((r) => setTimeout(r, 3000))])
      .then(load)
      .then(
        (value) => {
          if (!live) return;
          hosts = value;
          if (queued.length > 0) apply();
          else setResult({ value });
        },
        (error: unknown) => live && setResult({ error }),
      );
    return () => {
      live = false;
      sub.stop();
      if (frame !== undefined) cancelAnimationFrame(frame);
    };
  }, []);
  return result;
}

/** Call `onChange` (throttled to once a second) whenever one of `names` changes; for pages of one host. */
export function useHostChanged(names: string[], onChange: () => void): void {
  const key = names.join('\n');
  useEffect(() => {
    const watched = new Set(names);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const sub = onHostChanges((change) => {
      if (timer !== undefined) return;
      if (change.hosts.some((h) => watched.has(h.name)) || change.removed.some((n) => watched.has(n))) {
        timer = setTimeout(() => {
          timer = undefined;
          onChange();
        }, 0);
      }
    });
    return () => {
      sub.stop();
      clearTimeout(timer);
    };
  }, [key]);
}
