import { ErtError, isErtError } from '@ert/plugin-api';

/**
 * The store's error catalogue. Codes are stable; `details` carries the values at fault.
 * - ERT_STORE_CAPACITY_EXCEEDED: an allocation does not fit (details provider, providerName,
 *   resourceClass, requested, used, free, reason).
 * - ERT_STORE_PROVIDER_GENERATION_CONFLICT: the caller passed a stale provider generation.
 * - ERT_STORE_CONSUMER_GENERATION_CONFLICT: the caller passed a stale consumer generation.
 * - ERT_STORE_CONFLICT: a lost race with another writer (lock timeout, serialization
 *   failure, deadlock, concurrent creation of the same row) or a duplicate create.
 * - ERT_STORE_ASSIGNMENT_TAKEN: an instance record names a unit another instance of its host
 *   holds (a pinned CPU, a cache way), or draws more from a counted pool than is left
 *   (details host, instance, unit or pool, holder / held, capacity). Not a lost race: the
 *   writer's view of the host is behind; re-read the host's instances and choose again.
 * - ERT_STORE_INVENTORY_IN_USE: removing or shrinking an inventory below its usage.
 * - ERT_STORE_PROVIDER_IN_USE: deleting a provider that has allocations or children
 *   (details reason: 'children', 'allocations' or 'host').
 * - ERT_STORE_IN_USE: deleting a resource class an inventory has, or a trait a provider has
 *   (details resourceClass or trait).
 * - ERT_STORE_NOT_FOUND: a provider, host, consumer or instance that does not exist.
 * - ERT_STORE_INVALID: malformed input (bad class or trait name, invalid inventory,
 *   amount breaking min_unit / max_unit / step_size, duplicate entries), or a value the
 *   database refused as given (PostgreSQL's data exceptions, SQLSTATE class 22: a NUL in a
 *   string, a string longer than its column, a number out of range; details driverCode).
 * - ERT_STORE_LOCKED: another process held the SQLite write lock for longer than the busy
 *   timeout (details file, waitedMs, holders: [{ pid, command }] when /proc/locks names them).
 *   Not a lost race: retrying elsewhere would wait again.
 * - ERT_STORE_MISSING: the store does not exist (no SQLite file, no ert schema) and the
 *   caller asked not to create it (details connection).
 * - ERT_STORE_SCHEMA_OUTDATED: the store's schema lacks migrations this program needs
 *   (details applied, pending); `ert db migrate` applies them.
 * - ERT_STORE_SCHEMA_NEWER: the store holds migrations this program does not know (a newer
 *   ert migrated it; details unknown, known).
 * - ERT_STORE_CORRUPT: the SQLite file is not a database or is damaged (details file).
 * - ERT_STORE_FULL: the disk (or the database's page limit) is full (details file).
 * - ERT_STORE_READ_ONLY: the SQLite file (or its directory, where SQLite keeps -wal and -shm)
 *   cannot be written by this process (details file).
 * - ERT_STORE_UNAVAILABLE: the store cannot be reached: the PostgreSQL server refuses or drops
 *   the connection, or (for a host agent, `--server`) the ert server in front of it does not
 *   answer (details driverCode or url). Transient: retry later, re-reading what the write
 *   depended on (a write whose answer was lost may have committed). For `writeAllocations`,
 *   whose lost COMMIT answers the store settles by asking the server (`lost-commit.ts`; one
 *   that committed is answered as committed): details `committed: false` when the server said
 *   it rolled back, `committed: 'unknown'` when it could not be asked (the write may have
 *   committed); without `committed`, the failure came before any COMMIT (nothing written).
 */
export const STORE_ERROR_CODES = {
  capacityExceeded: 'ERT_STORE_CAPACITY_EXCEEDED',
  providerGenerationConflict: 'ERT_STORE_PROVIDER_GENERATION_CONFLICT',
  consumerGenerationConflict: 'ERT_STORE_CONSUMER_GENERATION_CONFLICT',
  conflict: 'ERT_STORE_CONFLICT',
  assignmentTaken: 'ERT_STORE_ASSIGNMENT_TAKEN',
  inventoryInUse: 'ERT_STORE_INVENTORY_IN_USE',
  providerInUse: 'ERT_STORE_PROVIDER_IN_USE',
  inUse: 'ERT_STORE_IN_USE',
  notFound: 'ERT_STORE_NOT_FOUND',
  invalid: 'ERT_STORE_INVALID',
  locked: 'ERT_STORE_LOCKED',
  missing: 'ERT_STORE_MISSING',
  schemaOutdated: 'ERT_STORE_SCHEMA_OUTDATED',
  schemaNewer: 'ERT_STORE_SCHEMA_NEWER',
  corrupt: 'ERT_STORE_CORRUPT',
  full: 'ERT_STORE_FULL',
  readOnly: 'ERT_STORE_READ_ONLY',
  unavailable: 'ERT_STORE_UNAVAILABLE',
} as const;

/** One of the codes of `STORE_ERROR_CODES` (the catalogue above). */
export type StoreErrorCode = (typeof STORE_ERROR_CODES)[keyof typeof STORE_ERROR_CODES];

/** Base class of every error the store raises on purpose. */
export class StoreError extends ErtError<StoreErrorCode> {}

/**
 * A retriable conflict: a stale provider or consumer generation, or a race lost to
 * another writer. Nothing was written; re-read and retry (or try another host).
 */
export class StoreConflictError extends StoreError {
  constructor(
    code: 'ERT_STORE_PROVIDER_GENERATION_CONFLICT' | 'ERT_STORE_CONSUMER_GENERATION_CONFLICT' | 'ERT_STORE_CONFLICT',
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(code, message, details, options);
  }
}

/** An allocation that does not fit the provider's free capacity. Nothing was written. */
export class CapacityExceededError extends StoreError {
  /**
   * The provider (uuid and name) and class at fault, the amount `requested`, the amount
   * `used` by other consumers, what is `free` of the capacity, and the rule that failed (`reason`).
   */
  declare readonly details: Readonly<{
    provider: string;
    providerName: string;
    resourceClass: string;
    requested: number;
    used: number;
    free: number;
    reason: string;
  }>;

  constructor(details: { provider: string; providerName: string; resourceClass: string; requested: number; used: number; free: number; reason: string }) {
    super(
      STORE_ERROR_CODES.capacityExceeded,
      `provider ${details.providerName} (${details.provider}): ${details.resourceClass} ${details.reason}`,
      details,
    );
  }
}

/**
 * An instance record names a unit of its host that another instance holds, or takes more of a
 * counted pool than the host's other instances leave. Nothing was written.
 */
export class AssignmentTakenError extends StoreError {
  constructor(
    details:
      | { host: string; instance: string; unit: string; holder: string }
      | { host: string; instance: string; pool: string; amount: number; held: number; capacity: number },
  ) {
    const message =
      'unit' in details
        ? `host ${details.host}: instance ${details.instance} cannot take ${details.unit}: instance ${details.holder} holds it`
        : `host ${details.host}: instance ${details.instance} cannot take ${details.amount} of pool ${details.pool}: other instances hold ${details.held} of its ${details.capacity}`;
    super(STORE_ERROR_CODES.assignmentTaken, message, details);
  }
}

/** Removing or shrinking an inventory that allocations still use. Nothing was written. */
export class InventoryInUseError extends StoreError {
  /**
   * `resourceClass`: the class at fault, with its `used` and the `capacity` it would have (0:
   * removed). `resourceClasses`: every class the write removes while allocated, when it
   * removes any (Placement names them all; default: `resourceClass` alone).
   */
  constructor(details: { provider: string; providerName: string; resourceClass: string; used: number; capacity: number; resourceClasses?: string[] }) {
    const what = details.capacity === 0 ? 'cannot remove' : `cannot shrink capacity to ${details.capacity}:`;
    super(
      STORE_ERROR_CODES.inventoryInUse,
      `provider ${details.providerName} (${details.provider}): ${what} ${details.resourceClass} inventory with ${details.used} in use`,
      { ...details, resourceClasses: details.resourceClasses ?? [details.resourceClass] },
    );
  }
}

const retriableCodes: ReadonlySet<string> = new Set([
  STORE_ERROR_CODES.providerGenerationConflict,
  STORE_ERROR_CODES.consumerGenerationConflict,
  STORE_ERROR_CODES.conflict,
]);

/** True for the retriable conflicts (generation conflicts and lost races), also across copies of this package. */
export function isStoreConflict(err: unknown): err is StoreConflictError {
  return isErtError(err) && retriableCodes.has(err.code);
}

/** True for ERT_STORE_UNAVAILABLE (the store or the server in front of it cannot be reached), also across copies of this package. */
export function isStoreUnavailable(err: unknown): err is StoreError {
  return isErtError(err) && err.code === STORE_ERROR_CODES.unavailable;
}

/** True for any StoreError (by code, so copies of this package loaded from another path count). */
export function isStoreError(err: unknown): err is StoreError {
  return isErtError(err) && err.code.startsWith('ERT_STORE_');
}
