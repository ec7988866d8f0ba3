import { changedHosts, type HostSnapshot, type Store } from '@ert/store';

/**
 * Every host's snapshot, kept between calls and read in proportion to what changed: each call
 * asks which hosts' generations moved since the last (`changedHosts`, over
 * `Store.hostChanges`) and loads only those, as the scheduler's host manager does. Sound because the store
 * bumps a host's generation with every write its snapshot shows (its row and status, its
 * providers' inventories, traits, aggregates and usages, the sharing providers it sees, its
 * stats and instances). A snapshot is kept with the generation it was read at, so one read
 * after a newer generation list is simply read again next time. Calls run one after another.
 *
 * `GET /scheduler/v1/hosts` (and the web view's fleet) at 10,000 hosts read every host's
 * snapshot on every call before this (about 2 s).
 */
export class HostSnapshots {
  private readonly kept = new Map<string, HostSnapshot>();
  /** `kept` sorted by name, until a host changes or goes: the same array while nothing does. */
  private sorted: HostSnapshot[] | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  /** The read queued behind the running one, not started yet: later callers join it. */
  private waiting: Promise<HostSnapshot[]> | undefined;

  /** The store's `hostChanges` token as of the last read. */
  private token: string | undefined;

  constructor(private readonly store: Pick<Store, 'hostChanges' | 'loadHosts'>) {}

  /**
   * Every host's snapshot, by name, read after this call. Treat them, and the array, as
   * read-only: they are shared with later calls (the same array while no host changed). Calls made while a read is queued share that read (it starts after
   * each of them), so that the web view's concurrent reads (GET /hosts, /host-facets, the live
   * feed's poll) cost one.
   */
  all(): Promise<HostSnapshot[]> {
    if (this.waiting) return this.waiting;
    const next: Promise<HostSnapshot[]> = this.queue.then(() => {
      if (this.waiting === next) this.waiting = undefined;
      return this.read();
    });
    this.waiting = next;
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async read(): Promise<HostSnapshot[]> {
    const { changed, removed, token } = await changedHosts(this.store, this.kept, (s) => s.host.generation, this.token);
    for (const name of removed) this.kept.delete(name);
    if (removed.length > 0) this.sorted = undefined;
    if (changed.length > 0) {
      // Every host (the first read): one read of all, without lists of names.
      const loaded = await this.store.loadHosts(this.kept.size === 0 && this.token === undefined ? undefined : changed);
      const found = new Set(loaded.map((s) => s.host.name));
      for (const snapshot of loaded) this.kept.set(snapshot.host.name, snapshot);
      // Deleted between the two reads.
      for (const name of changed) if (!found.has(name)) this.kept.delete(name);
      this.sorted = undefined;
    }
    this.token = token;
    this.sorted ??= [...this.kept.values()].sort((a, b) => (a.host.name < b.host.name ? -1 : a.host.name > b.host.name ? 1 : 0));
    return this.sorted;
  }
}
