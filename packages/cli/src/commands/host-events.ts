import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff } from '@ert/core';
import { messageOf } from '@ert/plugin-api';
import type { CommandContext } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';
import { untilStopSignal } from '../io.js';

interface HostEventsOptions {
  url?: string;
  metricsPort?: string;
  follow?: boolean;
}

/** One server-sent event as received: its `id` (when the frame had one) and its data. */
export interface SseFrame {
  id?: string;
  data: string;
}

/**
 * Server-sent events from text chunks (the WHATWG rules this stream needs): lines end with
 * LF, CRLF or CR; `data` lines are joined with LF; a blank line ends the event; comment
 * lines (`: heartbeat`) and unknown fields are skipped. An event without data is not given.
 */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private id: string | undefined;

  /** Feed a chunk; returns the events it completed. */
  push(chunk: string): SseFrame[] {
    this.buffer += chunk;
    const frames: SseFrame[] = [];
    for (;;) {
      const m = /\r\n|\n|\r/.exec(this.buffer);
      // A lone CR at the end may be the first half of CRLF: wait for the next chunk.
      if (!m || (m[0] === '\r' && m.index === this.buffer.length - 1)) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      if (line === '') {
        if (this.data.length > 0) frames.push({ ...(this.id !== undefined ? { id: this.id } : {}), data: this.data.join('\n') });
        this.data = [];
        this.id = undefined;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') this.data.push(value);
      else if (field === 'id') this.id = value;
    }
    return frames;
  }
}

/** The `/events` URL of `--url` (the metrics server's base URL, or `/events` itself) or of `--metrics-port` on 127.0.0.1. */
function eventsUrl(opts: HostEventsOptions): URL {
  if ((opts.url === undefined) === (opts.metricsPort === undefined)) {
    throw new CliError(CliErrorCode.USAGE, 'give exactly one of --url URL (the metrics server of ert host run) or --metrics-port N (on 127.0.0.1)', { option: '--url' });
  }
  if (opts.metricsPort !== undefined) {
    const port = /^\d+$/.test(opts.metricsPort) ? Number(opts.metricsPort) : NaN;
    if (!(port >= 1 && port <= 65535)) throw new CliError(CliErrorCode.USAGE, `--metrics-port must be a port number (1 to 65535), got "${opts.metricsPort}"`, { option: '--metrics-port', value: opts.metricsPort });
    return new URL(`http://127.0.0.1:${port}/events`);
  }
  let url: URL;
  try {
    url = new URL(opts.url!);
  } catch {
    throw new CliError(CliErrorCode.USAGE, `--url must be an http:// URL of ert host run's metrics server, got "${opts.url}"`, { option: '--url', value: opts.url });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(CliErrorCode.USAGE, `--url must be an http:// URL of ert host run's metrics server, got "${opts.url}"`, { option: '--url', value: opts.url });
  if (!url.pathname.endsWith('/events')) url.pathname = `${url.pathname.replace(/\/+$/, '')}/events`;
  return url;
}

/**
 * One event on one line for people: seq, time, type, instance, flavor, CPUs and each plugin's
 * assignment. A `reset` is its line, then one `live` line per instance of the state it carries.
 */
export function renderEvent(event: Record<string, unknown>): string {
  const head = `${String(event['seq'] ?? '-')}  ${String(event['time'] ?? '')}  ${String(event['type']).padEnd(8)}`;
  if (event['type'] === 'reset') {
    const state = event['state'] as { instances?: Array<Record<string, unknown>> } | null | undefined;
    const instances = state?.instances ?? [];
    const lines = instances.map((instance) => renderEvent({ ...instance, seq: event['seq'], time: event['time'], type: 'live' }));
    return `${head} ${String(event['reason'] ?? '')}; the state now: ${instances.length} live instance(s)\n${lines.join('')}`;
  }
  const parts = [String(event['instance']), `flavor ${String(event['flavor'])}${event['previousFlavor'] !== undefined ? ` (was ${String(event['previousFlavor'])})` : ''}`, `state ${String(event['state'])}`];
  if (Array.isArray(event['cpus'])) parts.push(`cpus ${event['cpus'].join(',')}`);
  const assignments = event['assignments'];
  if (assignments !== null && typeof assignments === 'object') {
    for (const [plugin, value] of Object.entries(assignments as Record<string, unknown>)) parts.push(`${plugin}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  }
  return `${head} ${parts.join('  ')}\n`;
}

/**
 * `ert host events`: the instance events `ert host run --metrics-port` publishes for outside
 * agents (docs/operations.md, "Events for outside agents"). Without `--follow`: the events its
 * buffer holds, then exit. With `--follow`: those, then each new one as it comes, until SIGINT
 * or SIGTERM (exit 0); a stream that ends or a server that does not answer is tried again with
 * capped exponential backoff, resuming after the last event printed (`Last-Event-ID`), so
 * that nothing is printed twice and a gap is a `reset` event. With `--json` each event is one
 * JSON object on one line (the shape in docs/operations.md); otherwise one readable line.
 */
export async function hostEventsCommand(ctx: CommandContext, opts: HostEventsOptions): Promise<void> {
  const url = eventsUrl(opts);
  const print = (event: Record<string, unknown>): void => {
    ctx.io.stdout.write(ctx.out.json ? `${JSON.stringify(event)}\n` : renderEvent(event));
  };
  if (!opts.follow) {
    let body: { events: Array<Record<string, unknown>> };
    try {
      const response = await fetch(url, { headers: { accept: 'application/json' } });
      if (!response.ok) throw new Error(`${response.status} ${response.statusText} from ${url.href}`);
      body = (await response.json()) as typeof body;
    } catch (err) {
      throw new CliError(CliErrorCode.EVENTS_UNAVAILABLE, `cannot read the events of ${url.href}: ${messageOf(causeOf(err))} (is ert host run running with --metrics-port?)`, { url: url.href });
    }
    for (const event of body.events) print(event);
    return;
  }

  const stop = new AbortController();
  void untilStopSignal().then(() => stop.abort());
  const backoff = new Backoff({ baseMs: 250, capMs: 10_000 });
  let lastId: string | undefined;
  let down = false;
  while (!stop.signal.aborted) {
    try {
      const response = await fetch(url, { headers: { accept: 'text/event-stream', ...(lastId !== undefined ? { 'last-event-id': lastId } : {}) }, signal: stop.signal });
      if (response.status === 404) throw new CliError(CliErrorCode.EVENTS_UNAVAILABLE, `${url.href} has no event stream (404): is it the metrics port of ert host run?`, { url: url.href });
      if (!response.ok || !response.body) throw new Error(`${response.status} ${response.statusText}`);
      if (down) ctx.out.status(`ert: connected to ${url.href} again`);
      down = false;
      backoff.reset();
      const parser = new SseParser();
      const decoder = new TextDecoder();
      for await (const chunk of response.body) {
        for (const frame of parser.push(decoder.decode(chunk as Uint8Array, { stream: true }))) {
          if (frame.id !== undefined) lastId = frame.id;
          print(JSON.parse(frame.data) as Record<string, unknown>);
        }
      }
      if (!stop.signal.aborted) ctx.out.status(`ert: the event stream of ${url.href} ended (ert host run stopped?); reconnecting`);
    } catch (err) {
      if (stop.signal.aborted) break;
      if (err instanceof CliError) throw err;
      if (!down) ctx.out.status(`ert: cannot read ${url.href}: ${messageOf(causeOf(err))}; retrying with backoff`);
      down = true;
    }
    await sleep(backoff.next(), undefined, { signal: stop.signal }).catch(() => undefined);
  }
}

/** fetch's TypeError('fetch failed') carries the reason (ECONNREFUSED) in `cause`. */
function causeOf(err: unknown): unknown {
  return err instanceof Error && err.cause !== undefined ? err.cause : err;
}
