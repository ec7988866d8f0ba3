import type { Store } from './api.js';

/**
 * The store calls a host's tracker makes (sync, claims, resizes, releases, confirming
 * reservations, readiness). A host agent reporting through `ert serve` (`ert host run
 * --server`) has exactly these, served by the agent API, each one call in one transaction on
 * the server's store: the semantics are the store's, unchanged.
 */
export const HOST_STORE_METHODS = [
  'checkSchema',
  'ensureResourceClasses',
  'createProvider',
  'getProvider',
  'getProviderByName',
  'listProviders',
  'deleteProvider',
  'getInventories',
  'setInventories',
  'getUsages',
  'getTraits',
  'setTraits',
  'getAggregates',
  'setAggregates',
  'writeAllocations',
  'getAllocations',
  'upsertHost',
  'getHost',
  'markStaleHosts',
  'writeStats',
  'readStats',
  'deleteStats',
  'getInstance',
  'listInstances',
  'loadHosts',
] as const satisfies ReadonlyArray<keyof Store>;

/** One of `HOST_STORE_METHODS`. */
export type HostStoreMethod = (typeof HOST_STORE_METHODS)[number];

/** What a host's tracker needs of a store: `HOST_STORE_METHODS`, and `close`. A full `Store` is one. */
export type HostStore = Pick<Store, HostStoreMethod | 'close'>;
