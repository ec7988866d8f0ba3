/**
 * @ert/store — providers, inventories, allocations, hosts, stats and instances on knex
 * (SQLite by default, PostgreSQL). See README.md for backends and the concurrency model.
 * @module @ert/store
 */
import type { Store, StoreOptions } from './api.js';
import { KnexStore } from './store.js';

export type * from './api.js';
export * from './errors.js';
export { MIGRATIONS_TABLE } from './migrations.js';
export { SQLITE_BUSY_TIMEOUT_MS, dropPostgresSchema } from './connection.js';
export { HOST_STORE_KINDS, HOST_STORE_METHODS, type HostStore, type HostStoreMethod } from './host-store.js';
export { changedHosts, type HostDelta } from './host-changes.js';
export { endReservation, expireReservations, withdrawInstance, type ReservationEnd, type Withdrawal } from './reservations.js';

/**
 * The owner a host's tracker records on the providers it creates and on the traits and
 * inventories it writes (`NewProvider.owner`, `setTraits`/`setInventories` `options.owner`):
 * a sync adds, updates and removes only these, and leaves every other writer's alone.
 */
export const TRACKER_OWNER = 'tracker';

/**
 * Opens a store (a connection pool; no query is run yet). Call `await store.migrate()`
 * before first use and `store.close()` when done. Invalid options are ERT_STORE_INVALID.
 */
export async function createStore(options: StoreOptions): Promise<Store> {
  return new KnexStore(options);
}
