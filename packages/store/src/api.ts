import type { Flavor, HostStatus, Inventory, JsonValue, ResourceClass } from '@ert/plugin-api';

/**
 * The store API. Both sides meet only here. Semantics follow OpenStack Placement so a
 * Placement-compatible HTTP API can sit on it later:
 * - every change to a provider (inventory, traits, aggregates, allocations against it)
 *   increments its `generation`; callers pass the generation they read and a stale one
 *   is a `StoreConflictError` (code ERT_STORE_PROVIDER_GENERATION_CONFLICT);
 * - every write that changes capacity or usage is one transaction;
 * - concurrent writers never push usage past capacity; a lost race is a conflict error.
 * Error codes live in `errors.ts`.
 */

export type StoreClient = 'sqlite3' | 'pg';

/** How `createStore` connects: the backend, where the data is, and tuning. */
export interface StoreOptions {
  /** `sqlite3` (default) or `pg`. */
  client: StoreClient;
  /** SQLite: a file path (`:memory:` for tests only). PostgreSQL: a `postgres://` URL. */
  connection: string;
  /** Connection pool size (PostgreSQL). SQLite always uses one connection per process. */
  pool?: { min?: number; max?: number };
  /** PostgreSQL schema to use (created if missing); lets tests run isolated. Default `public`. */
  schema?: string;
  /**
   * Commit `writeAllocations` calls together in one transaction (each call still checked and
   * answered on its own): those that arrive while another is in flight, and those made before
   * the store's flush, which is queued as a microtask when a call arrives and none is pending
   * (so callers answered together, continuing in step, are combined again). Default true;
   * false gives one transaction per call (for comparison in benchmarks).
   */
  combineWrites?: boolean;
  /**
   * A `writeAllocations` call that claims for one new consumer, alone in its transaction, is
   * read and written in three round trips on SQLite and two on PostgreSQL instead of one per
   * statement (`quick-claim.ts`; same checks and result). Default true; false sends every call
   * through the general transaction (for comparison in tests and benchmarks).
   */
  quickClaims?: boolean;
  /**
   * SQLite: how long a write waits for another process's write lock, ms (default
   * `SQLITE_BUSY_TIMEOUT_MS`, 5 s). Waiting that long fails with ERT_STORE_LOCKED naming the
   * file and, when /proc/locks tells, the holder's pid and command.
   */
  busyTimeoutMs?: number;
  /**
   * Called after every transaction (`write`, `read`) settles: how metrics see the store's
   * latency without the store depending on a metrics library. A throw from it is ignored.
   */
  onTransaction?: (transaction: TransactionObservation) => void;
  /**
   * Where the database library's own diagnostics go (knex's pool: "Connection Error: ..." when
   * a connection is lost, "Acquire connection error: ..." when none could be opened; its
   * deprecation notices), each as one warning with `{ source: 'knex' }`. The errors they tell
   * of also reach the caller as the store's errors. Default: knex's own, printed with
   * `console.log`. A pino logger fits.
   */
  logger?: StoreLogger;
}

/** The part of a logger the store uses (pino's signature). */
export interface StoreLogger {
  /** One diagnostic line: `fields` to merge into it (`{ source: 'knex' }`), `message` as the library wrote it. */
  warn(fields: Record<string, unknown>, message: string): void;
}

/** One finished store transaction. */
export interface TransactionObservation {
  /** `write` for a read-write transaction, `read` for a read-only one. */
  kind: 'read' | 'write';
  /** The write's operation (`writeAllocations`, `upsertHost`, ...: its name, no ids); `read` for reads. */
  operation: string;
  /** Wall time from start to settle, in seconds (including waits for locks). */
  seconds: number;
  /** False when the transaction failed (rolled back); true when it committed. */
  ok: boolean;
}

/** A resource provider as stored (Placement's resource provider, without its inventories). */
export interface ProviderRecord {
  /** The provider's uuid; unique. */
  uuid: string;
  /** The provider's name; unique (a host's root is named after the host). */
  name: string;
  /** Undefined for a root provider. */
  parentUuid?: string;
  /** Uuid of the root of its tree (its own uuid for a root provider). */
  rootUuid: string;
  /** 0 when created; bumped by every change of its inventories, traits, aggregates or allocations. */
  generation: number;
  /**
   * Who created it (`NewProvider.owner`): `tracker` for the providers a host's tracker creates
   * for its plugins and provider config files; undefined for anything else (the Placement
   * API, the CLI, scripts). A tracker's sync deletes only providers it owns.
   */
  owner?: string;
}

/** What `createProvider` takes. */
export interface NewProvider {
  /** The new provider's uuid (at most 36 characters); one another provider has is a conflict. */
  uuid: string;
  /** The new provider's name (at most 200 characters); one another provider has is a conflict. */
  name: string;
  /** The parent's uuid; omitted for a new root. */
  parentUuid?: string;
  /**
   * The writer that owns it (at most 64 characters): `tracker` when a host's tracker creates
   * it; omitted (null in the store) for other writers. `importHosts` gives the provider's
   * traits and inventories the same owner.
   */
  owner?: string;
}

/** One allocation: `amount` of `resourceClass` held on provider `providerUuid`. */
export interface Allocation {
  /** Uuid of the provider the amount is held on. */
  providerUuid: string;
  /** A class the provider has an inventory of. */
  resourceClass: ResourceClass;
  /** Positive integer within the inventory's min_unit, max_unit and step_size. */
  amount: number;
}

/** The consumer an `AllocationWrite` is for (Placement's consumer: an instance or a migration). */
export interface ConsumerRef {
  /** The consumer's uuid: an instance's, or a migration's during a resize. */
  uuid: string;
  /** Project that owns the consumer (recorded; `listConsumers` filters on it). */
  projectId: string;
  /** User that owns the consumer (recorded; `listConsumers` filters on it). */
  userId: string;
  /**
   * The consumer generation the caller last read: `null` for a consumer the caller
   * believes is new. A mismatch is ERT_STORE_CONSUMER_GENERATION_CONFLICT. `undefined`
   * skips the check (trusted internal callers only, e.g. the tracker re-adopting).
   */
  generation?: number | null;
  /**
   * Placement's `consumer_type` (1.38, `^[A-Z0-9_]+$`): set when given (1 to 255 characters,
   * else ERT_STORE_INVALID); undefined keeps the consumer's current type (none for a new
   * consumer: read back as null).
   */
  consumerType?: string;
}

/** A consumer as stored: Placement's consumer record with its allocations. */
export interface ConsumerRecord {
  /** The consumer's uuid. */
  uuid: string;
  /** 1 after the consumer's first write, +1 per write (Placement's count). */
  generation: number;
  /** Project that owns the consumer. */
  projectId: string;
  /** User that owns the consumer. */
  userId: string;
  /** The type last written (`ConsumerRef.consumerType`), null when none was. */
  consumerType: string | null;
  /** Everything the consumer holds (never empty: a consumer without allocations is not stored). */
  allocations: Allocation[];
}

/**
 * One provider's inventories in a `reshape`: the whole new set (Placement's PUT
 * inventories), checked against the generation the caller read.
 */
export interface ReshapeInventory {
  /** The provider whose inventories are replaced. */
  providerUuid: string;
  /** The provider generation the caller read; another is ERT_STORE_PROVIDER_GENERATION_CONFLICT. */
  generation: number;
  /** The provider's whole new inventory set, by class (a class left out is removed). */
  inventories: Record<ResourceClass, Inventory>;
}

/**
 * `scheduled`: a scheduler's reservation (allocations written, not yet confirmed by the host's
 * tracker); `active`: confirmed through the host's plugins; `refused`: the host's plugins
 * refused the reservation (allocations released, `reason` says which plugin and why);
 * `expired`: nobody confirmed it within `reservations.timeout` (allocations released). A
 * `refused` or `expired` record holds nothing; it stays as the outcome until the uuid is
 * scheduled again or removed. See ARCHITECTURE.md, "Reservations".
 */
export type InstanceState = 'scheduled' | 'active' | 'resizing' | 'error' | 'refused' | 'expired';

/** An instance as recorded in the store: its flavor (with extra specs) and what plugins decided. */
export interface InstanceRecord {
  /** The instance's uuid (its allocations' consumer). */
  uuid: string;
  /** Name of the host it is on; an unknown host is ERT_STORE_NOT_FOUND. */
  host: string;
  /** Project that owns the instance. */
  projectId: string;
  /** User that owns the instance. */
  userId: string;
  /** The flavor it runs with (during a resize: the new one). */
  flavor: Flavor;
  /** Where the instance stands in its lifecycle (see `InstanceState`). */
  state: InstanceState;
  /** During a resize: the flavor being left (its allocations are held by `migrationUuid`). */
  previousFlavor?: Flavor;
  /** During a resize: the consumer uuid that holds the old flavor's allocations until confirm or revert. */
  migrationUuid?: string;
  /** Per-plugin assignments (`ClaimGrant.assignment`), by plugin name. */
  assignments: Record<string, JsonValue>;
  /** Host CPUs the instance is pinned to (a plugin's `ClaimGrant.cpus`); absent when it floats. */
  cpus?: number[];
  /**
   * Units of its host the instance holds alone (`<plugin>/<unit>`, from `ClaimGrant.units`).
   * With `cpus` (each CPU the unit `cpu/<n>`) they are the instance's exclusive holds: a write
   * that gives a unit to a second instance of the same host is ERT_STORE_ASSIGNMENT_TAKEN.
   */
  units?: string[];
  /**
   * Counted pools the instance draws from (`<plugin>/<pool>` -> amount of a pool of capacity,
   * from `ClaimGrant.pools`): a write whose amount, with the host's other instances' amounts
   * from the pool, exceeds the capacity it names is ERT_STORE_ASSIGNMENT_TAKEN.
   */
  pools?: Record<string, { amount: number; capacity: number }>;
  /** Why a reservation is `refused` (the refusing plugin named) or `expired`. */
  reason?: string;
  /** Epoch ms of the first write; set by the store when not given, kept on update. */
  createdAt?: number;
  /** Epoch ms of the last write; the store sets it on every write (a given value is ignored). */
  updatedAt?: number;
}

/**
 * Replace every allocation of one consumer (Placement's PUT /allocations/{consumer}).
 * An empty `allocations` removes the consumer's allocations.
 */
export interface AllocationWrite {
  /** The consumer whose allocations are replaced, with the generation the caller read. */
  consumer: ConsumerRef;
  /** The consumer's whole new set of allocations; empty removes them (and the consumer). */
  allocations: Allocation[];
  /** Written in the same transaction (e.g. the scheduler's claim records the instance). */
  instance?: InstanceRecord;
  /**
   * Delete the instance record whose uuid is the consumer's, in the same transaction as the
   * allocations (a release, a confirmed or reverted resize dropping its migration record):
   * the record and its allocations go together or not at all. Only with empty `allocations`
   * and no `instance` (else ERT_STORE_INVALID); no such record is a no-op. Bumps the
   * generation of the record's host.
   */
  removeInstance?: boolean;
}

/** A compute host as stored: the row its tracker keeps up to date, keyed by name. */
export interface HostRecord {
  /** The host's name (its root provider's name too). */
  name: string;
  /** Uuid of the root provider of the host's tree. */
  rootProviderUuid: string;
  /** The stored status (`up`, `disabled`, or `stale` once `markStaleHosts` marked it). */
  status: HostStatus;
  /** Epoch ms of the tracker's last successful update. */
  lastUpdate: number;
  /** Changes whenever anything the scheduler reads about this host changes. */
  generation: number;
  /**
   * The machine the host was registered from (`machine-id:<id>` of its `/etc/machine-id`, or
   * `root:<path>` of the directory standing for `/`); absent for hosts imported without one
   * or registered before schema 0005. A tracker reading another machine refuses to sync it.
   */
  machine?: string;
  /** Why an operator disabled the host (`setHostStatus(..., 'disabled', reason)`); absent otherwise. */
  statusReason?: string;
}

/** What `deleteHost` removed. */
export interface HostDeletion {
  /** The host's name. */
  host: string;
  /** The providers of the host's tree, root first; `owner` as recorded (`tracker`, or absent: another writer). */
  providers: Array<{ uuid: string; name: string; owner?: string }>;
  /** Instance records of the host that were removed (only with `force`). */
  instances: string[];
  /** Consumers whose allocations were removed (only with `force`). */
  consumers: string[];
}

/** One plugin's stats of one host, as last written by the host's tracker. */
export interface StatsRecord {
  /** The plugin's configured name. */
  plugin: string;
  /** The plugin's `StatsSchema.version` the data was written with (a non-negative integer). */
  schemaVersion: number;
  /** The stats, validated against the plugin's schema by the writer's caller. */
  data: JsonValue;
  /** Epoch ms of the last `writeStats` for this plugin and host. */
  updatedAt: number;
}

/** An aggregate (a Nova host aggregate / Placement aggregate): a uuid providers are members of. */
export interface AggregateRecord {
  /** The aggregate's uuid (at most 36 characters). */
  uuid: string;
  /** Its name; absent for an aggregate only named by `setAggregates`. */
  name?: string;
  /** Nova-style aggregate metadata (aggregate_instance_extra_specs, weigher multipliers). */
  metadata: Record<string, string>;
}

/** A provider with everything the scheduler needs about it. */
export interface ProviderSnapshot extends ProviderRecord {
  /** The provider's inventories, by class. */
  inventories: Record<ResourceClass, Inventory>;
  /** Amount in use per class, summed over every consumer's allocations; classes with none are absent. */
  usages: Record<ResourceClass, number>;
  /** The provider's trait names. */
  traits: string[];
  /** Uuids of the aggregates it is in. */
  aggregates: string[];
}

/** Everything the scheduler reads about one host, in one consistent read. */
export interface HostSnapshot {
  /** The host's row. */
  host: HostRecord;
  /** The host's tree, root first, parents before children. */
  providers: ProviderSnapshot[];
  /** Sharing providers (trait MISC_SHARES_VIA_AGGREGATE) in an aggregate of the tree. */
  sharingProviders: ProviderSnapshot[];
  /** Metadata of the aggregates the root provider is in, merged. */
  aggregateMetadata: Record<string, string>;
  /** Every plugin's stats of the host, by plugin name. */
  stats: Record<string, StatsRecord>;
  /** Uuids of instances recorded on the host. */
  instances: string[];
}

/** A whole host to create at once (see `Store.importHosts`). */
export interface HostImport {
  /** `machine`: see HostRecord.machine (a simulated host records the profile it was read from). */
  host: { name: string; status?: HostStatus; lastUpdate?: number; machine?: string };
  /** The host's tree, root first, parents before children. */
  providers: Array<NewProvider & { inventories: Record<ResourceClass, Inventory>; traits: string[]; aggregates: string[] }>;
  /** Stats to write for the host, by plugin name. */
  stats?: Record<string, { schemaVersion: number; data: JsonValue }>;
}

/**
 * What one `writeAllocations` call changed in host generations (`hostGenerations`): each host
 * of the call's allocations (their trees, old and new), instances (old and new hosts) and
 * sharing providers. The transaction bumps each such host's generation exactly once, from
 * `generationBefore` to `generation`. `shared`: other calls combined in the same transaction
 * changed that host too (or a sharing provider did), so the bump covers more than this call;
 * also set when the store cannot tell (PostgreSQL: the COMMIT's answer was lost with the
 * connection and the server said the transaction committed; `generationBefore` is then the
 * generation the claim read and `generation` that plus one, which other writers may have
 * passed).
 */
export interface AllocationWriteResult {
  /** One entry per host whose generation the call's transaction bumped. */
  hosts: Array<{ name: string; generationBefore: number; generation: number; shared: boolean }>;
}

/**
 * What `hostChanges` read: the hosts whose generation changed since the token given, and the
 * token to give next time.
 */
export interface HostChangeSet {
  /** Give this to the next `hostChanges` call: its answer covers every change after this one's read. */
  token: string;
  /**
   * Name -> generation of the hosts inserted or whose generation was written since the token
   * (maybe a few more: the answer may repeat a change). With `complete`, every host.
   */
  hosts: Map<string, number>;
  /**
   * True when `hosts` lists every host (no token given, or one this store cannot read from:
   * another backend's, or one ahead of the store): a host not listed is gone.
   */
  complete: boolean;
  /**
   * How many hosts there are. With a partial answer, the caller's hosts plus the new names in
   * `hosts` come to this unless some host was removed: then ask again without a token.
   */
  total: number;
}

/** Where a store's schema stands against this program's migrations (`Store.schemaStatus`). */
export interface SchemaStatus {
  /** Whether the store exists: the SQLite file, or ert's migrations table in the PostgreSQL schema. */
  exists: boolean;
  /** Migrations recorded in the store, in order. */
  applied: string[];
  /** This program's migrations, in order. */
  known: string[];
  /** Known migrations the store lacks (`ert db migrate` applies them). */
  pending: string[];
  /** Migrations the store records that this program does not know (a newer ert migrated it). */
  unknown: string[];
}

/**
 * The store: everything ert persists, shared by trackers, schedulers, the API and the CLI.
 * Made by `createStore`. Reads of unknown rows return undefined where the signature allows
 * it, else ERT_STORE_NOT_FOUND; errors are `StoreError`s with the codes of `errors.ts`.
 */
export interface Store {
  /** The backend this store runs on. */
  readonly client: StoreClient;

  /**
   * Apply pending migrations (idempotent; safe when several processes race). Creates the
   * store when it does not exist. A store migrated by a newer program (migrations this one
   * does not know) is ERT_STORE_SCHEMA_NEWER, naming them, and is left untouched.
   */
  migrate(): Promise<void>;
  /**
   * Reads where the schema stands without creating or writing anything (a missing SQLite
   * file is reported as `exists: false` and not created).
   */
  schemaStatus(): Promise<SchemaStatus>;
  /**
   * Checks that the store exists and its schema is exactly this program's, writing nothing:
   * ERT_STORE_MISSING (no file / no schema), ERT_STORE_SCHEMA_OUTDATED (pending migrations),
   * ERT_STORE_SCHEMA_NEWER (unknown migrations), each naming the store and the versions.
   */
  checkSchema(): Promise<void>;
  /**
   * Close the pool once the operations in progress are done; `writeAllocations` calls made
   * before `close()` are sent and written first. An operation begun during or after close fails
   * at once (ERT_STORE_INVALID, "the store ... is closed"), never waits on the closing pool.
   */
  close(): Promise<void>;

  /* resource classes and traits */
  /** Every resource class the store knows (standard and custom), sorted by name. */
  listResourceClasses(): Promise<string[]>;
  /** Create missing custom classes; a name that is neither standard nor CUSTOM_ is ERT_STORE_INVALID. */
  ensureResourceClasses(names: string[]): Promise<void>;
  /**
   * Create one custom class (Placement's POST /resource_classes, PUT at 1.7+): true when it
   * was created, false when it already existed. Anything but `CUSTOM_[A-Z0-9_]+` (at most
   * 255 characters) is ERT_STORE_INVALID.
   */
  createResourceClass(name: string): Promise<boolean>;
  /**
   * Rename a custom class (Placement's PUT /resource_classes/{name} before 1.7): inventories
   * and allocations of `from` become `to`'s, in one transaction, and hosts whose providers
   * have it are bumped. A standard `from` or a malformed `to` is ERT_STORE_INVALID, an unknown
   * `from` ERT_STORE_NOT_FOUND, an existing `to` ERT_STORE_CONFLICT (details `duplicate: 'name'`).
   * The class gets a new internal id (ids are never reused nor renamed, so every process's
   * cache of id -> name stays right).
   */
  renameResourceClass(from: string, to: string): Promise<void>;
  /**
   * Delete a custom class (Placement's DELETE /resource_classes/{name}): a standard class is
   * ERT_STORE_INVALID, an unknown one ERT_STORE_NOT_FOUND, one that an inventory still has
   * ERT_STORE_IN_USE.
   */
  deleteResourceClass(name: string): Promise<void>;
  /**
   * Every trait the store records (created with `createTrait`, or by `setTraits`), sorted,
   * each with whether a provider has it. Standard traits no provider ever had are not
   * recorded: the API adds os-traits' list.
   */
  listTraits(): Promise<Array<{ name: string; associated: boolean }>>;
  /** Record a trait (Placement's PUT /traits/{name}): true when created, false when it existed. Malformed: ERT_STORE_INVALID. */
  createTrait(name: string): Promise<boolean>;
  /**
   * Delete a recorded trait (Placement's DELETE /traits/{name}): one a provider has is
   * ERT_STORE_IN_USE, an unrecorded one ERT_STORE_NOT_FOUND. Only `CUSTOM_` traits can go
   * (else ERT_STORE_INVALID).
   */
  deleteTrait(name: string): Promise<void>;

  /* providers */
  /**
   * A new provider at generation 0, its own root or under `parentUuid` (unknown parent:
   * ERT_STORE_NOT_FOUND). A uuid or name another provider has is ERT_STORE_CONFLICT, details
   * `duplicate: 'uuid' | 'name'`.
   */
  createProvider(provider: NewProvider): Promise<ProviderRecord>;
  /** The provider with this uuid; undefined when there is none. */
  getProvider(uuid: string): Promise<ProviderRecord | undefined>;
  /** The provider with this name; undefined when there is none. */
  getProviderByName(name: string): Promise<ProviderRecord | undefined>;
  /** All providers, or the tree of one root. */
  listProviders(filter?: { rootUuid?: string }): Promise<ProviderRecord[]>;
  /**
   * Rename and/or re-parent a provider (Placement's PUT /resource_providers/{u}; which
   * parent changes a microversion allows is the API's rule). `parentUuid: null` makes it a
   * root, a uuid moves it (and its subtree, whose root follows) under that provider,
   * undefined leaves the parent alone. Unknown provider or parent: ERT_STORE_NOT_FOUND; a name
   * another provider has: ERT_STORE_CONFLICT (details `duplicate: 'name'`); a parent inside
   * its own subtree, or a parent for the root of a host (the tracker owns hosts' roots):
   * ERT_STORE_INVALID. The provider's generation is not bumped (as Placement); hosts of the
   * trees it leaves and joins are.
   */
  updateProvider(uuid: string, changes: { name?: string; parentUuid?: string | null }): Promise<ProviderRecord>;
  /**
   * Refused (ERT_STORE_PROVIDER_IN_USE, details `reason`: 'children', 'allocations' or 'host',
   * checked in that order) while it has children, allocations or a host rooted on it; its
   * inventories, traits and aggregate memberships go with it. Unknown: NOT_FOUND.
   */
  deleteProvider(uuid: string): Promise<void>;

  /**
   * The provider's inventories by class with its generation, read together. Unknown provider:
   * NOT_FOUND. `options.owner`: only the inventories that writer owns (`setInventories`).
   */
  getInventories(uuid: string, options?: { owner?: string }): Promise<{ generation: number; inventories: Record<ResourceClass, Inventory> }>;
  /**
   * Replace the provider's inventory set (Placement's PUT inventories). Every inventory is
   * validated. Removing a class that has allocations, or shrinking capacity below current
   * usage, is refused (ERT_STORE_INVENTORY_IN_USE) and nothing is written.
   * Pass the generation read, or undefined to skip the check. Returns the new record.
   * Valid CUSTOM_ classes that do not exist yet are created. Every call bumps the generation.
   * `options.allowOverCapacity` (Placement's rule, for the API): only removing a class that
   * has allocations is refused; capacity below usage is written (the provider is then over
   * capacity and takes no new allocation of that class).
   *
   * Ownership (each inventory records the writer that owns it). Without `options.owner`
   * (the Placement API, the CLI): the whole set is replaced; a class already there keeps its
   * owner (a value written over the tracker's comes back at its next sync), a new class has
   * none. With `options.owner` (the tracker passes `tracker`): only that writer's inventories
   * are replaced: the classes it owns that `inventories` leaves out are removed, the classes
   * of `inventories` are written and become its own (a class another writer added is
   * adopted), and every other writer's class is kept as it is. The in-use checks apply to the
   * resulting set.
   */
  setInventories(
    uuid: string,
    generation: number | undefined,
    inventories: Record<ResourceClass, Inventory>,
    options?: { allowOverCapacity?: boolean; owner?: string },
  ): Promise<ProviderRecord>;
  /** Amount in use per class on the provider, over all consumers (classes with none absent). Unknown provider: NOT_FOUND. */
  getUsages(uuid: string): Promise<Record<ResourceClass, number>>;

  /**
   * The provider's traits, sorted. Unknown provider: NOT_FOUND. `options.owner`: only the
   * traits that writer owns (`setTraits`).
   */
  getTraits(uuid: string, options?: { owner?: string }): Promise<string[]>;
  /**
   * Replace the provider's traits (unknown valid names are created). Pass the generation
   * read, or undefined to skip the check; every call bumps it.
   *
   * Ownership (each provider-trait association records the writer that owns it; Nova's rule:
   * the driver manages the traits it reports and leaves the rest). Without `options.owner`
   * (the Placement API's PUT traits, the CLI): the whole set is replaced; a trait already
   * there keeps its owner, an added one has none (so a trait the tracker reports and the API
   * removes is back at the tracker's next sync). With `options.owner` (the tracker passes
   * `tracker`): only that writer's traits are replaced: the ones it owns that `traits` leaves
   * out are removed, the ones of `traits` are set and become its own (adopted when another
   * writer had set them), and every other writer's trait is kept.
   */
  setTraits(uuid: string, generation: number | undefined, traits: string[], options?: { owner?: string }): Promise<ProviderRecord>;
  /**
   * Uuids of the aggregates the provider is in, sorted. Unknown provider: NOT_FOUND. With
   * `options.owner`, only the memberships that writer owns (`setAggregates`).
   */
  getAggregates(uuid: string, options?: { owner?: string }): Promise<string[]>;
  /**
   * Replace the provider's aggregate memberships (unknown aggregates are created without name
   * or metadata). Pass the generation read, or undefined to skip the check; bumps it, and the
   * generation of the hosts that see the provider. Returns the new record.
   *
   * Ownership, as `setTraits`: each membership records the writer that owns it. Without
   * `options.owner` (the Placement API's PUT aggregates, `ert aggregate add-host`) the whole
   * set is replaced, a kept membership keeping its owner and an added one having none. With
   * `options.owner` (the tracker, for provider config files' `aggregates`) only that owner's
   * memberships are replaced and the others kept; one it names that another writer added
   * becomes its own. So an aggregate a file stops naming leaves, and an operator's stays.
   */
  setAggregates(uuid: string, generation: number | undefined, aggregates: string[], options?: { owner?: string }): Promise<ProviderRecord>;
  /**
   * Create an aggregate or replace its name and metadata (values must be strings, else
   * ERT_STORE_INVALID); bumps the hosts whose root is a member, as their snapshots change.
   */
  upsertAggregate(aggregate: AggregateRecord): Promise<void>;
  /**
   * Every aggregate the store knows (made by `upsertAggregate`, or named by `setAggregates`:
   * then without name, metadata {}), with the uuids of its member providers, by uuid.
   */
  listAggregates(): Promise<Array<AggregateRecord & { providers: string[] }>>;

  /* allocations */
  /**
   * Replace each consumer's allocations, all writes in one transaction: every amount is
   * checked against capacity, min_unit, max_unit and step_size with the usage seen inside
   * the transaction; provider and consumer generations are bumped. Too little capacity is
   * ERT_STORE_CAPACITY_EXCEEDED naming provider, class, requested and free; a stale
   * consumer generation or a lost race is a conflict. On any error nothing is written.
   * Details: writes apply in order (a later write sees an earlier one's release); usage
   * excludes the consumer's own current allocations; a class the provider has no inventory
   * of is ERT_STORE_CAPACITY_EXCEEDED with free 0; an amount breaking min_unit, max_unit or
   * step_size is ERT_STORE_INVALID; an unknown provider, or an instance on an unknown host,
   * is ERT_STORE_NOT_FOUND. A consumer's first write leaves it at generation 1 and each
   * write increments it (Placement's count: created at 0, bumped by the write); empty
   * `allocations` delete the consumer. Instance records written (`instance`) and
   * removed (`removeInstance`) are part of the same transaction: a call's allocations and
   * records are all written or none is, even if the process dies. Calls made while another is in flight,
   * or before the flush a call queues (`combineWrites`), may be committed in one transaction,
   * each checked on its own: one call's refusal never affects another's result (a transaction
   * whose commit is in doubt answers every call in it ERT_STORE_UNAVAILABLE).
   * Resolves with the hosts whose generation the call's transaction bumped (see
   * `AllocationWriteResult`), so a caller that already knows what it wrote (a scheduler
   * counting its own claims) can record the new generation instead of reloading the host.
   */
  writeAllocations(writes: AllocationWrite[]): Promise<AllocationWriteResult>;
  /** A consumer's allocations and generation (null, with no allocations, when it holds nothing). */
  getAllocations(consumerUuid: string): Promise<{ generation: number | null; allocations: Allocation[] }>;
  /** A consumer holding allocations, with its project, user and type; undefined when it holds nothing. */
  getConsumer(consumerUuid: string): Promise<ConsumerRecord | undefined>;
  /**
   * Every consumer holding allocations, with them, in one consistent read, sorted by uuid;
   * only those holding something on `providerUuid`, or of `projectId` (and `userId`), when
   * given (Placement's `GET /resource_providers/{u}/allocations` and `GET /usages`).
   */
  listConsumers(filter?: { providerUuid?: string; projectId?: string; userId?: string }): Promise<ConsumerRecord[]>;
  /**
   * Placement's reshaper (`POST /reshaper`): in one transaction, replace the inventories of
   * several providers and the allocations of several consumers, as one change. Each
   * provider's generation must be the one given (else ERT_STORE_PROVIDER_GENERATION_CONFLICT;
   * unknown: ERT_STORE_NOT_FOUND). The allocations are checked, as `writeAllocations`, against
   * the union of old and new inventories; then the new inventories are set, and a class
   * removed while allocations remain on it is ERT_STORE_INVENTORY_IN_USE (capacity shrunk
   * below usage is allowed, as Placement allows it). Provider, consumer and host generations
   * are bumped. On any error nothing is written.
   */
  reshape(inventories: ReshapeInventory[], writes: AllocationWrite[]): Promise<void>;
  /** Remove a consumer's allocations (and the consumer), without a generation check. Unknown consumers are a no-op. */
  deleteAllocations(consumerUuid: string): Promise<void>;

  /* hosts */
  /**
   * Create or update a host row (the compute host's record, keyed by name). The root must be
   * a root provider (else ERT_STORE_INVALID). A new host is `up` with lastUpdate = now unless
   * given; an update keeps the fields not given and bumps the generation. With `keepDisabled`,
   * a stored `disabled` status stays and `status` applies only otherwise (a host that reports
   * in is up again, but an operator's disable outlives it, even one committed while this runs).
   */
  upsertHost(host: { name: string; rootProviderUuid: string; status?: HostStatus; keepDisabled?: boolean; lastUpdate?: number; machine?: string }): Promise<HostRecord>;
  /** The host with this name; undefined when there is none. */
  getHost(name: string): Promise<HostRecord | undefined>;
  /** Every host, sorted by name, with its stored status (not the scheduler's effective one). */
  listHosts(): Promise<HostRecord[]>;
  /**
   * Set a host's status (bumps its generation). `reason` is recorded with `disabled` (an
   * operator's why) and cleared by any other status. Unknown host: NOT_FOUND.
   */
  setHostStatus(name: string, status: HostStatus, reason?: string): Promise<void>;
  /**
   * Remove a host on purpose (`ert host delete`), in one transaction: its row, stats and
   * instance records, and every provider of its tree (children first) with their
   * inventories, traits and aggregate memberships, whoever wrote them. Refused
   * (ERT_STORE_PROVIDER_IN_USE, nothing removed) while the host has instance records or its
   * providers hold allocations, unless `force`: then those instances' records, those
   * consumers (all their allocations, wherever they are) and their instance records go too. Returns what went, with each
   * provider's owner, so a caller can say what other writers had put there. Unknown host: NOT_FOUND.
   */
  deleteHost(name: string, options?: { force?: boolean }): Promise<HostDeletion>;
  /**
   * Mark `up` hosts whose lastUpdate is older than `before` (epoch ms) as stale (bumping their
   * generations); returns their names, sorted. A host disabled or reported meanwhile by another
   * writer is left as that writer left it.
   */
  markStaleHosts(before: number): Promise<string[]>;

  /* stats (validated by the writer's caller against the plugin's schema) */
  /** Replace one plugin's stats of a host (idempotent per value; bumps the host generation). Unknown host: NOT_FOUND. */
  writeStats(host: string, plugin: string, schemaVersion: number, data: JsonValue): Promise<void>;
  /** Every plugin's stats of a host, by plugin name. Unknown host: NOT_FOUND. */
  readStats(host: string): Promise<Record<string, StatsRecord>>;
  /**
   * Remove one plugin's stats of a host (they expired: the plugin is unavailable, its stats
   * failed, or it is no longer configured). Bumps the host generation when a record went, so
   * schedulers consume the host again without them. Returns whether one existed. Unknown host: NOT_FOUND.
   */
  deleteStats(host: string, plugin: string): Promise<boolean>;

  /* instances */
  /**
   * Insert or replace an instance record (createdAt is kept on update). Bumps the generation
   * of its host and, when it moved, of its previous host. Unknown host: NOT_FOUND.
   */
  upsertInstance(instance: InstanceRecord): Promise<void>;
  /** The instance record with this uuid; undefined when there is none. */
  getInstance(uuid: string): Promise<InstanceRecord | undefined>;
  /**
   * Instance records, by uuid; only those of `host`, in `state` (one state or any of several)
   * and last written before `updatedBefore` (epoch ms) when given.
   */
  listInstances(filter?: { host?: string; state?: InstanceState | InstanceState[]; updatedBefore?: number }): Promise<InstanceRecord[]>;
  /**
   * Remove an instance record (not its allocations); unknown uuids are a no-op. To remove a
   * record together with its allocations, atomically, use `writeAllocations` with `removeInstance`.
   */
  deleteInstance(uuid: string): Promise<void>;

  /**
   * Create many hosts with their trees, inventories, traits, aggregates and stats in bulk
   * (simulated fleets, benchmarks). Batched transactions; validation as for the single
   * calls; a host or provider that already exists is ERT_STORE_CONFLICT.
   */
  importHosts(hosts: HostImport[]): Promise<void>;

  /* scheduler reads */
  /** Name -> generation for every host (what `hostChanges` lists without a token). */
  hostGenerations(): Promise<Map<string, number>>;
  /**
   * The hosts whose generation changed since `since` (a previous answer's `token`): every host
   * written by any process or by plain SQL after the read that gave the token is listed
   * (migration 0013; SQLite reads only those rows, PostgreSQL's server scans the table and sends
   * only those). Without a token, or with one this store cannot read from (another backend's,
   * or one ahead of the store), every host (`complete`). Removed hosts are not listed: `total`
   * tells that some went (see `HostChangeSet`). After a restore, restart the readers: a token
   * taken before it is only known to be ahead until new writes pass it.
   */
  hostChanges(since?: string): Promise<HostChangeSet>;
  /**
   * Full snapshots of the named hosts (all hosts when omitted; unknown names are skipped),
   * sorted by name, read in one snapshot with a fixed number of set-based queries.
   */
  loadHosts(names?: string[]): Promise<HostSnapshot[]>;
  /**
   * A snapshot (inventories, usages, traits, aggregates) of every provider, hosts' or not, in
   * provider creation order, consistent as of one read: the Placement API's reads of the whole
   * model. Read in proportion to what changed since this store's previous call (one row per
   * provider, then the changed providers' snapshots; provider-model.ts). While nothing changed
   * the same array (and snapshots) is returned again: treat it as read-only.
   */
  loadProviders(): Promise<ProviderSnapshot[]>;
}
