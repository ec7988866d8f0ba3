import type { Store } from './api.js';

/**
 * The store calls a host's tracker makes (sync, claims, resizes, releases, confirming
 * reservations, readiness), each with whether it only reads or writes (the agent client's
 * metrics count them apart). A host agent reporting through `ert serve` (`ert host run
 * --server`) has exactly these, served by the agent API, each one call in one transaction on
 * the server's store: the semantics are the store's, unchanged.
 */
export const HOST_STORE_KINDS = {
  checkSchema: 'read',
  ensureResourceClasses: 'write',
  createProvider: 'write',
  getProvider: 'read',
  getProviderByName: 'read',
  listProviders: 'read',
  deleteProvider: 'write',
  getInventories: 'read',
  setInventories: 'write',
  getUsages: 'read',
  getTraits: 'read',
  setTraits: 'write',
  getAggregates: 'read',
  setAggregates: 'write',
  writeAllocations: 'write',
  getAllocations: 'read',
  upsertHost: 'write',
  getHost: 'read',
  markStaleHosts: 'write',
  writeStats: 'write',
  readStats: 'read',
  deleteStats: 'write',
  getInstance: 'read',
  listInstances: 'read',
  loadHosts: 'read',
} as const satisfies Partial<Record<keyof Store, 'read' | 'write'>>;

/** The methods of `HOST_STORE_KINDS`, in its order. */
export const HOST_STORE_METHODS = Object.keys(HOST_STORE_KINDS) as ReadonlyArray<keyof typeof HOST_STORE_KINDS>;

/** One of `HOST_STORE_METHODS`. */
export type HostStoreMethod = keyof typeof HOST_STORE_KINDS;

/** What a host's tracker needs of a store: `HOST_STORE_METHODS`, and `close`. A full `Store` is one. */
export type HostStore = Pick<Store, HostStoreMethod | 'close'>;
