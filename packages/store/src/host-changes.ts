/** What changed in the hosts for a reader that keeps some of them: `Store.hostChanges` with removals worked out. */
import type { Store } from './api.js';

/** What `changedHosts` found. */
export interface HostDelta {
  /** Hosts that are new or whose generation differs from the kept one: the ones to (re)load. */
  changed: string[];
  /** Kept hosts that are gone from the store. */
  removed: string[];
  /** Give this to the next call. */
  token: string;
}

/**
 * What changed in the hosts since `token` (undefined: everything), for a reader that keeps the
 * hosts `kept` (by name; `generationOf` tells the generation a kept host was read at):
 * `hostChanges(token)`, and when its count says that some kept host is gone (the kept hosts and
 * the new names do not add up to the store's), the whole list once, to tell which. The
 * scheduler's HostManager and the API's HostSnapshots both refresh this way.
 */
export async function changedHosts<T>(store: Pick<Store, 'hostChanges'>, kept: ReadonlyMap<string, T>, generationOf: (host: T) => number, token: string | undefined): Promise<HostDelta> {
  let changes = await store.hostChanges(token);
  if (!changes.complete) {
    let added = 0;
    for (const name of changes.hosts.keys()) if (!kept.has(name)) added++;
    if (kept.size + added !== changes.total) changes = await store.hostChanges();
  }
  const changed: string[] = [];
  let listed = 0;
  for (const [name, generation] of changes.hosts) {
    const host = kept.get(name);
    if (host !== undefined) listed++;
    if (host === undefined || generationOf(host) !== generation) changed.push(name);
  }
  // Every kept host listed: none removed (the usual case), without a pass over them all.
  const removed = !changes.complete || listed === kept.size ? [] : [...kept.keys()].filter((name) => !changes.hosts.has(name));
  return { changed, removed, token: changes.token };
}
