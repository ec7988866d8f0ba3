/**
 * Live changes of the fleet for `GET /scheduler/v1/events` (server-sent events; the web view's
 * live updates, docs/ui.md). One feed per server, whatever the number of clients: while at
 * least one client listens it reads every host's snapshot every `intervalMs` from the
 * server's one `HostSnapshots` (the same kept snapshots `GET /hosts` answers from: one cheap
 * read of the hosts' generations, and only the hosts whose generation moved are loaded, once,
 * whoever asked first), and when hosts changed (a claim, a release, new stats, a status:
 * anything that bumps a host's generation), were added or went, it hands every listener one
 * change with the summaries of those snapshots. Changes are coalesced per interval, so 10,000
 * hosts changing make one message a second, not 10,000; a client that reads slower than that
 * gets its pending changes merged (the latest summary of each host) until its connection
 * drains (see `eventStream`).
 */
import type { ServerResponse } from 'node:http';

/** What a listener is told: the changed or new hosts' summaries (as GET /hosts lists them), and the names of hosts that went. */
export interface HostChange {
  hosts: Array<{ name: string } & Record<string, unknown>>;
  removed: string[];
}

/** What the feed needs of a host's snapshot (`@ert/store`'s HostSnapshot, structurally). */
export interface VersionedHost {
  host: { name: string; generation: number };
}

export interface HostChangeFeedOptions<S extends VersionedHost> {
  /** Every host's current snapshot (`HostSnapshots.all()`: shared with GET /hosts, read in proportion to what changed). */
  snapshots: () => Promise<readonly S[]>;
  /** The summaries of these snapshots (as GET /hosts lists them). */
  summaries: (snapshots: S[]) => HostChange['hosts'];
  /** Time between two polls, ms (from the end of one to the start of the next). */
  intervalMs: number;
  /** Told when a poll fails (the feed keeps polling). */
  onError?: (err: unknown) => void;
}

/** The shared poller: started by the first listener, stopped when the last one leaves. */
export class HostChangeFeed<S extends VersionedHost = VersionedHost> {
  private readonly listeners = new Set<(change: HostChange) => void>();
  private previous: Map<string, number> | undefined;
  /** The list `previous` was made from: a poll that gets the same array back (nothing changed, HostSnapshots) skips the comparison. */
  private previousList: readonly S[] | undefined;
  private baseline: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: HostChangeFeedOptions<S>) {}

  /** Listeners now. */
  get size(): number {
    return this.listeners.size;
  }

  /**
   * Listen; resolves once the feed holds the generations it compares with, so that every
   * change after this resolves is told. Returns the function that stops listening.
   */
  async subscribe(listener: (change: HostChange) => void): Promise<() => void> {
    this.listeners.add(listener);
    this.baseline ??= this.options.snapshots().then(
      (snapshots) => {
        this.previous = generationsOf(snapshots);
        this.previousList = snapshots;
        this.schedule();
      },
      (err: unknown) => {
        this.baseline = undefined;
        throw err;
      },
    );
    try {
      await this.baseline;
    } catch (err) {
      this.listeners.delete(listener);
      throw err;
    }
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /** Stop polling (the next subscriber starts again from a new baseline). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.previous = undefined;
    this.previousList = undefined;
    this.baseline = undefined;
  }

  private schedule(): void {
    if (this.listeners.size === 0) return this.stop();
    this.timer = setTimeout(() => void this.poll(), this.options.intervalMs);
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    const baseline = this.baseline;
    try {
      const snapshots = await this.options.snapshots();
      // Stopped (and maybe restarted) while reading: this poll's result belongs to nobody.
      if (this.baseline !== baseline) return;
      if (snapshots !== this.previousList) this.compare(snapshots);
    } catch (err) {
      this.options.onError?.(err);
    }
    if (this.baseline === baseline) this.schedule();
  }

  /** Tell the listeners which hosts changed or went since the previous list. */
  private compare(snapshots: readonly S[]): void {
    const now = generationsOf(snapshots);
    const before = this.previous ?? now;
    const changed = snapshots.filter((s) => before.get(s.host.name) !== s.host.generation);
    const removed = [...before.keys()].filter((name) => !now.has(name));
    if (changed.length > 0 || removed.length > 0) {
      const hosts = changed.length > 0 ? this.options.summaries(changed) : [];
      for (const listener of this.listeners) listener({ hosts, removed });
    }
    this.previous = now;
    this.previousList = snapshots;
  }
}

const generationsOf = (snapshots: readonly VersionedHost[]): Map<string, number> => new Map(snapshots.map((s) => [s.host.name, s.host.generation]));

/**
 * Serve one client's event stream on `res` (already answered 200 `text/event-stream` by the
 * caller): `event: ready` once the feed listens, then `event: hosts` with a HostChange per
 * poll that found changes, and a comment every `keepAliveMs` so proxies keep the connection.
 * When the client does not drain its connection, the changes wait, merged (the latest summary
 * per host), and go as one message at the next drain. Resolves when the client goes or
 * `closed` resolves (the server closing).
 */
export async function eventStream<S extends VersionedHost>(feed: HostChangeFeed<S>, res: ServerResponse, closed: Promise<void>, keepAliveMs = 15_000): Promise<void> {
  const pending = new Map<string, HostChange['hosts'][number]>();
  const removed = new Set<string>();
  let blocked = false;
  const flush = () => {
    if (pending.size === 0 && removed.size === 0) return;
    const change: HostChange = { hosts: [...pending.values()], removed: [...removed] };
    pending.clear();
    removed.clear();
    blocked = !res.write(`event: hosts\ndata: ${JSON.stringify(change)}\n\n`);
  };
  const unsubscribe = await feed.subscribe((change) => {
    for (const name of change.removed) {
      pending.delete(name);
      removed.add(name);
    }
    for (const host of change.hosts) {
      removed.delete(host.name);
      pending.set(host.name, host);
    }
    if (!blocked) flush();
  });
  const onDrain = () => {
    blocked = false;
    flush();
  };
  res.on('drain', onDrain);
  res.write('event: ready\ndata: {}\n\n');
  const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), keepAliveMs);
  keepAlive.unref();
  try {
    await Promise.race([new Promise<void>((resolve) => res.once('close', () => resolve())), closed]);
  } finally {
    clearInterval(keepAlive);
    res.off('drain', onDrain);
    unsubscribe();
    if (!res.writableEnded) res.end();
  }
}
