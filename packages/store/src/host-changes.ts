/** What changed in the hosts for a reader that keeps some of them: `Store.hostChanges` with removals worked out. */
import type { Store } from './api.js';

/** What `changedHosts` found. */
export interface HostDelta {
  /** Name -> generation of the hosts that may have changed or are new (compare with what is kept). */
  generations: Map<string, number>;
  /** Kept hosts that are gone from the store. */
  removed: string[];
  /** Give this to the next call. */
  token: string;
}

/**
 * What changed in the hosts since `token` (undefined: everything), for a reader that keeps the
 * hosts `kept` (by name): `hostChanges(token)`, and when its count says that some kept host is
 * gone (the kept hosts and the new names do not add up to the store's), the whole list once, to
 * tell which. The scheduler's HostManager and the API's HostSnapshots both refresh this way.
 */
export async function changedHosts(store: Pick<Store, 'hostChanges'>, kept: ReadonlyMap<string, unknown>, token: string | undefined): Promise<HostDelta> {
  let changes = await store.hostChanges(token);
  if (!changes.complete) {
    let added = 0;
    for (const name of changes.hosts.keys()) if (!kept.has(name)) added++;
    if (kept.size + added !== changes.total) changes = await store.hostChanges();
  }
  let removed: string[] = [];
  if (changes.complete) {
    let listed = 0;
    for (const name of changes.hosts.keys()) if (kept.has(name)) listed++;
    // Every kept host listed: none removed (the usual case), without a pass over them all.
    if (listed !== kept.size) removed = [...kept.keys()].filter((name) => !changes.hosts.has(name));
  }
  return { generations: changes.hosts, removed, token: changes.token };
}
