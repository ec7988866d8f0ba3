import type { Knex } from 'knex';
import {
  STANDARD_RESOURCE_CLASSES,
  TRAIT_SHARING_PROVIDER,
  amountProblem,
  capacityOf,
  inventoryProblem,
  isValidResourceClass,
  isValidTraitName,
  type Flavor,
  type HostStatus,
  type Inventory,
  type JsonValue,
  type ResourceClass,
} from '@ert/plugin-api';
import type {
  AggregateRecord,
  Allocation,
  AllocationWrite,
  AllocationWriteResult,
  HostImport,
  HostRecord,
  HostSnapshot,
  InstanceRecord,
  InstanceState,
  NewProvider,
  ProviderRecord,
  ProviderSnapshot,
  StatsRecord,
  Store,
  StoreClient,
  SchemaStatus,
  StoreOptions,
} from './api.js';
import { existsSync } from 'node:fs';
import { busyTimeoutOf, mapDriverError, openKnex } from './connection.js';
import { CapacityExceededError, InventoryInUseError, StoreConflictError, StoreError, isStoreError } from './errors.js';
import { MIGRATIONS_TABLE, MIGRATION_NAMES, ensureMigrationTables, migrationSource } from './migrations.js';

import { chunks, inChunks, insertObjects, insertRows, type Db, type Trx } from './sql.js';
import { HoldLedger, anyHolds, checkHolds, holdsOf, writeHolds } from './holds.js';

/** Most writeAllocations calls combined in one transaction. */
const MAX_COMBINED_WRITES = 256;
/** Hosts per transaction in `importHosts`. */
const IMPORT_BATCH = 1000;

const HOST_STATUSES: ReadonlySet<string> = new Set<HostStatus>(['up', 'stale', 'disabled']);
const INSTANCE_STATES: ReadonlySet<string> = new Set<InstanceState>(['scheduled', 'active', 'resizing', 'error', 'refused', 'expired']);
/** Outcomes of a reservation that hold nothing: not instances of their host for the scheduler. */
const ENDED_STATES: InstanceState[] = ['refused', 'expired'];

interface ProviderRow {
  id: number;
  uuid: string;
  name: string;
  parent_id: number | null;
  root_id: number | null;
  generation: number;
}

interface InventoryRow {
  provider_id: number;
  resource_class_id: number;
  total: number;
  reserved: number;
  min_unit: number;
  max_unit: number;
  step_size: number;
  allocation_ratio: number;
}

interface HostRow {
  id: number;
  name: string;
  root_provider_id: number;
  status: string;
  last_update: number | string;
  generation: number;
  machine?: string | null;
}

interface InstanceRow {
  uuid: string;
  host: string;
  project_id: string;
  user_id: string;
  flavor: string;
  previous_flavor: string | null;
  migration_uuid: string | null;
  assignments: string;
  cpus: string | null;
  units: string | null;
  pools: string | null;
  reason: string | null;
  state: string;
  created_at: number | string;
  updated_at: number | string;
}

function invalid(message: string, details: Record<string, unknown> = {}): StoreError {
  return new StoreError('ERT_STORE_INVALID', message, details);
}

function notFound(what: string, key: string, details: Record<string, unknown> = {}): StoreError {
  return new StoreError('ERT_STORE_NOT_FOUND', `${what} ${key} not found`, details);
}

/** Errors of a migration racing another process's: retry, the winner's work will be visible. */
function isMigrationRace(err: unknown): boolean {
  const { name, code, message = '' } = (err ?? {}) as { name?: string; code?: string; message?: string };
  // knex's lock is held (MigrationLocked); concurrent CREATE of the same table, schema or row.
  if (name === 'MigrationLocked' || code === 'SQLITE_BUSY' || code === '42P07' || code === '42P06' || code === '23505' || code === '40P01') return true;
  return code === 'SQLITE_ERROR' && /already exists/.test(message);
}

function inventoryFromRow(row: InventoryRow): Inventory {
  return {
    total: row.total,
    reserved: row.reserved,
    minUnit: row.min_unit,
    maxUnit: row.max_unit,
    stepSize: row.step_size,
    allocationRatio: Number(row.allocation_ratio),
  };
}

function inventoryToRow(providerId: number, classId: number, inv: Inventory): InventoryRow {
  return {
    provider_id: providerId,
    resource_class_id: classId,
    total: inv.total,
    reserved: inv.reserved,
    min_unit: inv.minUnit,
    max_unit: inv.maxUnit,
    step_size: inv.stepSize,
    allocation_ratio: inv.allocationRatio,
  };
}

function hostFromRow(row: HostRow, rootProviderUuid: string): HostRecord {
  return {
    name: row.name,
    rootProviderUuid,
    status: row.status as HostStatus,
    lastUpdate: Number(row.last_update),
    generation: row.generation,
    ...(row.machine ? { machine: row.machine } : {}),
  };
}

function instanceFromRow(row: InstanceRow): InstanceRecord {
  const record: InstanceRecord = {
    uuid: row.uuid,
    host: row.host,
    projectId: row.project_id,
    userId: row.user_id,
    flavor: JSON.parse(row.flavor) as Flavor,
    state: row.state as InstanceState,
    assignments: JSON.parse(row.assignments) as Record<string, JsonValue>,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
  if (row.previous_flavor !== null) record.previousFlavor = JSON.parse(row.previous_flavor) as Flavor;
  if (row.migration_uuid !== null) record.migrationUuid = row.migration_uuid;
  if (row.cpus !== null) record.cpus = JSON.parse(row.cpus) as number[];
  if (row.units !== null && row.units !== undefined) record.units = JSON.parse(row.units) as string[];
  if (row.pools !== null && row.pools !== undefined) record.pools = JSON.parse(row.pools) as NonNullable<InstanceRecord['pools']>;
  if (row.reason !== null && row.reason !== undefined) record.reason = row.reason;
  return record;
}

function checkName(kind: string, value: unknown, max = 255): asserts value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw invalid(`${kind} must be a non-empty string of at most ${max} characters, got ${JSON.stringify(value)}`, { [kind]: value });
  }
}

function checkInventories(providerName: string, inventories: Record<ResourceClass, Inventory>): void {
  if (typeof inventories !== 'object' || inventories === null) throw invalid(`provider ${providerName}: inventories must be an object`);
  for (const [resourceClass, inv] of Object.entries(inventories)) {
    if (!isValidResourceClass(resourceClass)) {
      throw invalid(`provider ${providerName}: ${JSON.stringify(resourceClass)} is not a standard or CUSTOM_ resource class`, {
        provider: providerName,
        resourceClass,
      });
    }
    const problem = inventoryProblem(inv);
    if (problem) throw invalid(`provider ${providerName}: ${resourceClass} inventory: ${problem}`, { provider: providerName, resourceClass });
  }
}

function checkTraits(providerName: string, traits: string[]): void {
  for (const trait of traits) {
    if (typeof trait !== 'string' || !isValidTraitName(trait)) {
      throw invalid(`provider ${providerName}: ${JSON.stringify(trait)} is not a valid trait name`, { provider: providerName, trait });
    }
  }
}

/**
 * The knex implementation of `Store` (SQLite and PostgreSQL). See api.ts for each
 * method's contract and README.md for the concurrency model.
 */
export class KnexStore implements Store {
  readonly client: StoreClient;
  readonly knex: Knex;
  private readonly options: StoreOptions;
  /** Resource class name -> id. Classes are never deleted, so positive entries never go stale. */
  private readonly classIds = new Map<string, number>();
  private readonly classNames = new Map<number, string>();
  private closed = false;

  constructor(options: StoreOptions) {
    this.options = options;
    this.client = options.client;
    this.knex = openKnex(options);
  }

  /* ---------------------------------------------------------------- lifecycle */

  /** Where the store is, for messages: the SQLite file, or the PostgreSQL URL (password masked) and schema. */
  private describe(): string {
    if (this.client === 'sqlite3') return this.options.connection;
    return `${this.options.connection.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@')} (schema ${this.options.schema ?? 'public'})`;
  }

  private sqliteContext(startedAt: number): { file: string; busyTimeoutMs: number; waitedMs: number } | undefined {
    if (this.client !== 'sqlite3') return undefined;
    return { file: this.options.connection, busyTimeoutMs: busyTimeoutOf(this.options), waitedMs: Date.now() - startedAt };
  }

  async schemaStatus(): Promise<SchemaStatus> {
    const known = [...MIGRATION_NAMES];
    const none = { exists: false, applied: [], known, pending: known, unknown: [] };
    // Opening a missing SQLite file would create it: look first.
    if (this.client === 'sqlite3' && this.options.connection !== ':memory:' && !existsSync(this.options.connection)) return none;
    const startedAt = Date.now();
    try {
      const schema = this.client === 'pg' ? (this.options.schema ?? 'public') : undefined;
      const builder = schema ? this.knex.schema.withSchema(schema) : this.knex.schema;
      if (!(await builder.hasTable(MIGRATIONS_TABLE))) {
        // An existing SQLite file without ert's tables (empty, or someone else's database).
        return this.client === 'sqlite3' && this.options.connection !== ':memory:' ? { ...none, exists: true } : none;
      }
      const table = schema ? this.knex.withSchema(schema).from(MIGRATIONS_TABLE) : this.knex.from(MIGRATIONS_TABLE);
      const rows: Array<{ name: string }> = await table.select('name').orderBy('id');
      const applied = rows.map((r) => r.name);
      return { exists: true, applied, known, pending: known.filter((n) => !applied.includes(n)), unknown: applied.filter((n) => !known.includes(n)) };
    } catch (err) {
      throw mapDriverError(err, 'reading the schema', this.sqliteContext(startedAt));
    }
  }

  async checkSchema(): Promise<void> {
    const status = await this.schemaStatus();
    const where = `${this.client === 'sqlite3' ? 'SQLite' : 'PostgreSQL'} store ${this.describe()}`;
    if (!status.exists || status.applied.length === 0) {
      throw new StoreError(
        'ERT_STORE_MISSING',
        `${where} ${status.exists ? 'holds no ert schema' : 'does not exist'}; check store.connection, or create it with \`ert db migrate\``,
        { connection: this.describe(), exists: status.exists },
      );
    }
    this.refuseNewer(status, where);
    if (status.pending.length > 0) {
      throw new StoreError(
        'ERT_STORE_SCHEMA_OUTDATED',
        `${where} is at schema version ${status.applied[status.applied.length - 1]}; this ert needs ${status.known[status.known.length - 1]} (pending: ${status.pending.join(', ')}); run \`ert db migrate\``,
        { connection: this.describe(), applied: status.applied, pending: status.pending },
      );
    }
  }

  private refuseNewer(status: SchemaStatus, where: string): void {
    if (status.unknown.length === 0) return;
    throw new StoreError(
      'ERT_STORE_SCHEMA_NEWER',
      `${where} was migrated by a newer ert: schema versions ${status.unknown.join(', ')} are unknown to this one (it knows up to ${status.known[status.known.length - 1]}); upgrade ert`,
      { connection: this.describe(), unknown: status.unknown, known: status.known },
    );
  }

  async migrate(): Promise<void> {
    const before = await this.schemaStatus();
    // knex would say "migration directory is corrupt": name the versions instead.
    this.refuseNewer(before, `${this.client === 'sqlite3' ? 'SQLite' : 'PostgreSQL'} store ${this.describe()}`);
    if (before.exists && before.pending.length === 0) return;
    const schema = this.options.client === 'pg' ? (this.options.schema ?? 'public') : undefined;
    // Several processes may migrate at once: knex's lock table makes one win; the others
    // see MigrationLocked (or a racing CREATE) and retry until nothing is pending.
    for (let attempt = 0; ; attempt++) {
      const startedAt = Date.now();
      try {
        if (schema !== undefined && schema !== 'public') await this.knex.raw('CREATE SCHEMA IF NOT EXISTS ??', [schema]);
        await ensureMigrationTables(this.knex, this.client, schema);
        await this.knex.migrate.latest({ migrationSource, tableName: MIGRATIONS_TABLE, schemaName: schema });
        break;
      } catch (err) {
        const context = this.sqliteContext(startedAt);
        // A lock held for the whole busy timeout is not a race: give up now, naming the holder.
        const lockedOut = context !== undefined && (err as { code?: string }).code === 'SQLITE_BUSY' && Date.now() - startedAt >= context.busyTimeoutMs * 0.9;
        if (attempt >= 100 || lockedOut || !isMigrationRace(err)) throw mapDriverError(err, 'migrate', context);
        await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 80));
      }
    }
    // Standard classes added to the contract after the first migration.
    await this.knex('resource_classes')
      .insert(STANDARD_RESOURCE_CLASSES.map((name) => ({ name })))
      .onConflict('name')
      .ignore();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.knex.destroy();
  }

  /**
   * Runs `fn` in a write transaction and maps driver errors. On SQLite the first statement
   * of a write transaction must write, so the transaction takes the database's write lock
   * up front (waiting via busy_timeout) instead of failing when a read upgrades to a write;
   * pass `firstStatementWrites` when `fn` already starts with a write.
   */
  private async write<T>(what: string, fn: (trx: Trx) => Promise<T>, opts: { firstStatementWrites?: boolean } = {}): Promise<T> {
    const startedAt = Date.now();
    // SQLite rolls back by itself on some errors (SQLITE_FULL); knex's ROLLBACK then fails
    // with "no transaction is active" and replaces the error: keep the first one.
    let first: unknown;
    try {
      return await this.knex.transaction(async (trx) => {
        try {
          if (this.client === 'sqlite3' && !opts.firstStatementWrites) await this.takeWriteLock(trx);
          return await fn(trx);
        } catch (err) {
          first = err;
          throw err;
        }
      });
    } catch (err) {
      throw mapDriverError(first ?? err, what, this.sqliteContext(startedAt));
    }
  }

  /** A write that changes nothing but takes SQLite's write lock for the transaction. */
  private async takeWriteLock(trx: Trx): Promise<void> {
    await trx.raw('UPDATE resource_classes SET name = name WHERE id = 0');
  }

  /** Runs `fn` in one consistent read (a snapshot on both backends). */
  private async read<T>(fn: (trx: Trx) => Promise<T>): Promise<T> {
    const config: Knex.TransactionConfig = this.client === 'pg' ? { isolationLevel: 'repeatable read', readOnly: true } : {};
    const startedAt = Date.now();
    try {
      return await this.knex.transaction(fn, config);
    } catch (err) {
      throw mapDriverError(err, 'read', this.sqliteContext(startedAt));
    }
  }

  /* ---------------------------------------------------------------- classes */

  async listResourceClasses(): Promise<string[]> {
    const rows: Array<{ name: string }> = await this.knex('resource_classes').select('name').orderBy('name');
    return rows.map((r) => r.name);
  }

  async ensureResourceClasses(names: string[]): Promise<void> {
    for (const name of names) {
      if (typeof name !== 'string' || !isValidResourceClass(name)) {
        throw invalid(`${JSON.stringify(name)} is not a standard or CUSTOM_ resource class`, { resourceClass: name });
      }
    }
    await this.write('ensureResourceClasses', (trx) => this.classIdsFor(trx, names));
  }

  /** Ids of the named classes, creating missing (already validated) custom classes. */
  private async classIdsFor(db: Db, names: Iterable<string>): Promise<Map<string, number>> {
    const wanted = [...new Set(names)];
    const missing = wanted.filter((n) => !this.classIds.has(n));
    if (missing.length > 0) {
      await db('resource_classes')
        .insert(missing.map((name) => ({ name })))
        .onConflict('name')
        .ignore();
      const rows: Array<{ id: number; name: string }> = await db('resource_classes').select('id', 'name').whereIn('name', missing);
      for (const row of rows) this.rememberClass(row.id, row.name);
    }
    return new Map(wanted.map((n) => [n, this.classIds.get(n)!]));
  }

  private rememberClass(id: number, name: string): void {
    this.classIds.set(name, id);
    this.classNames.set(id, name);
  }

  /**
   * Makes `this.classNames` know every id in `ids` (ids read from the database; another
   * process may have created the class): reloads the table once on a miss.
   */
  private async loadClassNames(db: Db, ids: Iterable<number>): Promise<void> {
    for (const id of ids) {
      if (!this.classNames.has(id)) {
        const rows: Array<{ id: number; name: string }> = await db('resource_classes').select('id', 'name');
        for (const row of rows) this.rememberClass(row.id, row.name);
        return;
      }
    }
  }

  /** Ids of the named traits or aggregates (by `column`), creating the missing ones. */
  private async ensureNamed(db: Db, table: 'traits' | 'aggregates', column: 'name' | 'uuid', names: Iterable<string>): Promise<Map<string, number>> {
    const wanted = [...new Set(names)];
    const ids = new Map<string, number>();
    for (const part of chunks(wanted)) {
      await insertRows(db, table, [column], part.map((n) => [n]), { ignore: true });
      const rows: Array<{ id: number; key: string }> = await db(table).select('id', `${column} as key`).whereIn(column, part);
      for (const row of rows) ids.set(row.key, row.id);
    }
    return ids;
  }

  /* ---------------------------------------------------------------- providers */

  private providerQuery(db: Db) {
    return db('providers as p')
      .leftJoin('providers as pp', 'pp.id', 'p.parent_id')
      .leftJoin('providers as rp', 'rp.id', 'p.root_id')
      .select('p.uuid', 'p.name', 'p.generation', 'pp.uuid as parent_uuid', 'rp.uuid as root_uuid');
  }

  private static providerRecord(row: { uuid: string; name: string; generation: number; parent_uuid: string | null; root_uuid: string | null }): ProviderRecord {
    const record: ProviderRecord = { uuid: row.uuid, name: row.name, rootUuid: row.root_uuid ?? row.uuid, generation: row.generation };
    if (row.parent_uuid !== null) record.parentUuid = row.parent_uuid;
    return record;
  }

  private async providerRecord(db: Db, uuid: string): Promise<ProviderRecord> {
    const row = await this.providerQuery(db).where('p.uuid', uuid).first();
    if (!row) throw notFound('provider', uuid, { provider: uuid });
    return KnexStore.providerRecord(row);
  }

  private async providerRow(db: Db, uuid: string): Promise<ProviderRow> {
    const row: ProviderRow | undefined = await db('providers').where('uuid', uuid).first();
    if (!row) throw notFound('provider', uuid, { provider: uuid });
    return row;
  }

  async createProvider(provider: NewProvider): Promise<ProviderRecord> {
    checkName('uuid', provider.uuid, 36);
    checkName('name', provider.name, 200);
    return this.write(`createProvider ${provider.name}`, async (trx) => {
      let parent: ProviderRow | undefined;
      if (provider.parentUuid !== undefined) parent = await this.providerRow(trx, provider.parentUuid);
      const existing = await trx('providers').select('uuid', 'name').where('uuid', provider.uuid).orWhere('name', provider.name).first();
      if (existing) {
        throw new StoreConflictError('ERT_STORE_CONFLICT', `provider ${existing.uuid === provider.uuid ? provider.uuid : provider.name} already exists`, {
          provider: provider.uuid,
          name: provider.name,
        });
      }
      const [inserted] = await trx('providers')
        .insert({ uuid: provider.uuid, name: provider.name, parent_id: parent?.id ?? null, root_id: parent ? parent.root_id : null, generation: 0 })
        .returning('id');
      const id = (inserted as { id: number }).id;
      if (parent) {
        await this.bumpHostsOf(trx, [parent.id]);
      } else {
        await trx('providers').where('id', id).update({ root_id: id });
      }
      return this.providerRecord(trx, provider.uuid);
    });
  }

  async getProvider(uuid: string): Promise<ProviderRecord | undefined> {
    const row = await this.providerQuery(this.knex).where('p.uuid', uuid).first();
    return row ? KnexStore.providerRecord(row) : undefined;
  }

  async getProviderByName(name: string): Promise<ProviderRecord | undefined> {
    const row = await this.providerQuery(this.knex).where('p.name', name).first();
    return row ? KnexStore.providerRecord(row) : undefined;
  }

  async listProviders(filter: { rootUuid?: string } = {}): Promise<ProviderRecord[]> {
    const query = this.providerQuery(this.knex).orderBy('p.id');
    if (filter.rootUuid !== undefined) query.where('rp.uuid', filter.rootUuid);
    const rows = await query;
    return rows.map((row) => KnexStore.providerRecord(row));
  }

  async deleteProvider(uuid: string): Promise<void> {
    await this.write(`deleteProvider ${uuid}`, async (trx) => {
      const row = await this.providerRow(trx, uuid);
      const inUse = (reason: string) =>
        new StoreError('ERT_STORE_PROVIDER_IN_USE', `provider ${row.name} (${uuid}) cannot be deleted: ${reason}`, { provider: uuid, providerName: row.name });
      if (await trx('providers').where('parent_id', row.id).first('id')) throw inUse('it has child providers');
      if (await trx('allocations').where('provider_id', row.id).first('id')) throw inUse('it has allocations');
      const host = await trx('hosts').where('root_provider_id', row.id).first('name');
      if (host) throw inUse(`host ${host.name} is rooted on it`);
      await this.bumpHostsOf(trx, [row.id]);
      await trx('providers').where('id', row.id).delete();
    });
  }

  /**
   * Compare-and-swap of a provider's generation: the transaction's first statement (so on
   * SQLite it takes the write lock, on PostgreSQL it locks the row). A missing provider is
   * ERT_STORE_NOT_FOUND, a stale generation ERT_STORE_PROVIDER_GENERATION_CONFLICT.
   */
  private async bumpProviderGeneration(trx: Trx, uuid: string, generation: number | undefined): Promise<ProviderRow> {
    const query = trx('providers').where('uuid', uuid).increment('generation', 1);
    if (generation !== undefined) query.where('generation', generation);
    const changed = await query;
    const row = await this.providerRow(trx, uuid);
    if (changed === 0) {
      throw new StoreConflictError(
        'ERT_STORE_PROVIDER_GENERATION_CONFLICT',
        `provider ${row.name} (${uuid}) changed: generation ${row.generation}, caller read ${String(generation)}`,
        { provider: uuid, providerName: row.name, expected: generation, actual: row.generation },
      );
    }
    return row;
  }

  /**
   * Bumps the generation of every host that sees one of these providers: the host rooted on
   * the provider's tree and, for a sharing provider, every host with a provider in one of
   * its aggregates (their snapshots list it among `sharingProviders`).
   */
  private async bumpHostsOf(trx: Trx, providerIds: number[]): Promise<void> {
    if (providerIds.length === 0) return;
    for (const part of chunks(providerIds, 1000)) {
      await trx('hosts')
        .whereIn('root_provider_id', (q) => q.select('root_id').from('providers').whereIn('id', part))
        .orWhereIn('root_provider_id', (q) =>
          q
            .select('member.root_id')
            .from('provider_traits as pt')
            .join('traits as t', 't.id', 'pt.trait_id')
            .join('provider_aggregates as shared', 'shared.provider_id', 'pt.provider_id')
            .join('provider_aggregates as pa', 'pa.aggregate_id', 'shared.aggregate_id')
            .join('providers as member', 'member.id', 'pa.provider_id')
            .whereIn('pt.provider_id', part)
            .where('t.name', TRAIT_SHARING_PROVIDER),
        )
        .increment('generation', 1);
    }
  }

  /** A select column `sharing`: whether provider `p` has the sharing trait. */
  private sharingFlag(): Knex.Raw {
    return this.knex.raw(
      'exists (select 1 from provider_traits pt join traits t on t.id = pt.trait_id where pt.provider_id = p.id and t.name = ?) as sharing',
      [TRAIT_SHARING_PROVIDER],
    );
  }

  /* ---------------------------------------------------------------- inventories */

  async getInventories(uuid: string): Promise<{ generation: number; inventories: Record<ResourceClass, Inventory> }> {
    return this.read(async (trx) => {
      const row = await this.providerRow(trx, uuid);
      const rows: InventoryRow[] = await trx('inventories').where('provider_id', row.id);
      await this.loadClassNames(trx, rows.map((r) => r.resource_class_id));
      const inventories: Record<ResourceClass, Inventory> = {};
      for (const r of rows) inventories[this.classNames.get(r.resource_class_id)!] = inventoryFromRow(r);
      return { generation: row.generation, inventories };
    });
  }

  async setInventories(uuid: string, generation: number | undefined, inventories: Record<ResourceClass, Inventory>): Promise<ProviderRecord> {
    try {
      checkInventories(uuid, inventories);
    } catch (err) {
      // Name the provider as operators know it, with its uuid.
      const provider = isStoreError(err) ? await this.getProvider(uuid).catch(() => undefined) : undefined;
      if (!provider || !isStoreError(err)) throw err;
      throw invalid(err.message.replace(`provider ${uuid}:`, `provider ${provider.name} (${uuid}):`), { ...err.details, provider: provider.name, providerUuid: uuid });
    }
    return this.write(
      `setInventories ${uuid}`,
      async (trx) => {
        const row = await this.bumpProviderGeneration(trx, uuid, generation);
        const classIds = await this.classIdsFor(trx, Object.keys(inventories));
        const usages = await this.usagesOf(trx, row.id);
        for (const [resourceClass, used] of Object.entries(usages)) {
          const inv = inventories[resourceClass];
          const capacity = inv ? capacityOf(inv) : 0;
          if (used > capacity) throw new InventoryInUseError({ provider: uuid, providerName: row.name, resourceClass, used, capacity });
        }
        await trx('inventories').where('provider_id', row.id).delete();
        const rows = Object.entries(inventories).map(([rc, inv]) => inventoryToRow(row.id, classIds.get(rc)!, inv));
        await insertObjects(trx, 'inventories', rows);
        await this.bumpHostsOf(trx, [row.id]);
        return this.providerRecord(trx, uuid);
      },
      { firstStatementWrites: true },
    );
  }

  async getUsages(uuid: string): Promise<Record<ResourceClass, number>> {
    return this.read(async (trx) => this.usagesOf(trx, (await this.providerRow(trx, uuid)).id));
  }

  private async usagesOf(db: Db, providerId: number): Promise<Record<ResourceClass, number>> {
    const rows: Array<{ resource_class_id: number; used: number | string }> = await db('allocations')
      .select('resource_class_id')
      .sum({ used: 'used' })
      .where('provider_id', providerId)
      .groupBy('resource_class_id');
    await this.loadClassNames(db, rows.map((r) => r.resource_class_id));
    const usages: Record<ResourceClass, number> = {};
    for (const r of rows) usages[this.classNames.get(r.resource_class_id)!] = Number(r.used);
    return usages;
  }

  /* ---------------------------------------------------------------- traits, aggregates */

  async getTraits(uuid: string): Promise<string[]> {
    return this.read(async (trx) => {
      const row = await this.providerRow(trx, uuid);
      const rows: Array<{ name: string }> = await trx('provider_traits as pt')
        .join('traits as t', 't.id', 'pt.trait_id')
        .where('pt.provider_id', row.id)
        .select('t.name')
        .orderBy('t.name');
      return rows.map((r) => r.name);
    });
  }

  async setTraits(uuid: string, generation: number | undefined, traits: string[]): Promise<ProviderRecord> {
    checkTraits(uuid, traits);
    return this.write(
      `setTraits ${uuid}`,
      async (trx) => {
        const row = await this.bumpProviderGeneration(trx, uuid, generation);
        // Before and after: adding or removing the sharing trait changes who sees it.
        await this.bumpHostsOf(trx, [row.id]);
        const ids = await this.ensureNamed(trx, 'traits', 'name', traits);
        await trx('provider_traits').where('provider_id', row.id).delete();
        await insertRows(trx, 'provider_traits', ['provider_id', 'trait_id'], [...ids.values()].map((id) => [row.id, id]));
        await this.bumpHostsOf(trx, [row.id]);
        return this.providerRecord(trx, uuid);
      },
      { firstStatementWrites: true },
    );
  }

  async getAggregates(uuid: string): Promise<string[]> {
    return this.read(async (trx) => {
      const row = await this.providerRow(trx, uuid);
      const rows: Array<{ uuid: string }> = await trx('provider_aggregates as pa')
        .join('aggregates as a', 'a.id', 'pa.aggregate_id')
        .where('pa.provider_id', row.id)
        .select('a.uuid')
        .orderBy('a.uuid');
      return rows.map((r) => r.uuid);
    });
  }

  async setAggregates(uuid: string, generation: number | undefined, aggregates: string[]): Promise<ProviderRecord> {
    for (const agg of aggregates) checkName('aggregate', agg, 36);
    return this.write(
      `setAggregates ${uuid}`,
      async (trx) => {
        const row = await this.bumpProviderGeneration(trx, uuid, generation);
        // Before and after: a sharing provider leaving or joining aggregates changes who sees it.
        await this.bumpHostsOf(trx, [row.id]);
        const ids = await this.ensureNamed(trx, 'aggregates', 'uuid', aggregates);
        await trx('provider_aggregates').where('provider_id', row.id).delete();
        await insertRows(trx, 'provider_aggregates', ['provider_id', 'aggregate_id'], [...ids.values()].map((id) => [row.id, id]));
        await this.bumpHostsOf(trx, [row.id]);
        return this.providerRecord(trx, uuid);
      },
      { firstStatementWrites: true },
    );
  }

  async upsertAggregate(aggregate: AggregateRecord): Promise<void> {
    checkName('aggregate', aggregate.uuid, 36);
    const metadata = aggregate.metadata ?? {};
    for (const [key, value] of Object.entries(metadata)) {
      if (typeof value !== 'string') throw invalid(`aggregate ${aggregate.uuid}: metadata ${key} must be a string`, { aggregate: aggregate.uuid, key });
    }
    await this.write(`upsertAggregate ${aggregate.uuid}`, async (trx) => {
      await trx('aggregates')
        .insert({ uuid: aggregate.uuid, name: aggregate.name ?? null, metadata: JSON.stringify(metadata) })
        .onConflict('uuid')
        .merge(['name', 'metadata']);
      // The metadata of a root's aggregates is part of its host's snapshot.
      await trx('hosts')
        .whereIn('root_provider_id', (q) =>
          q.select('pa.provider_id').from('provider_aggregates as pa').join('aggregates as a', 'a.id', 'pa.aggregate_id').where('a.uuid', aggregate.uuid),
        )
        .increment('generation', 1);
    });
  }

  /* ---------------------------------------------------------------- allocations */

  /**
   * Write-combining: calls that arrive while a write is in flight are committed together
   * in the next transaction (each call's writes checked as a unit, in arrival order, so
   * one call's failure does not affect the others and every caller gets its own result).
   */
  private readonly pendingWrites: PendingWrite[] = [];
  private flushing = false;

  async writeAllocations(writes: AllocationWrite[]): Promise<AllocationWriteResult> {
    validateWrites(writes);
    if (writes.length === 0) return { hosts: [] };
    if (this.closed) throw new StoreError('ERT_STORE_INVALID', 'writeAllocations: the store is closed');
    return new Promise<AllocationWriteResult>((resolve, reject) => {
      this.pendingWrites.push({ writes, resolve, reject });
      this.flushPendingWrites();
    });
  }

  private flushPendingWrites(): void {
    if (this.flushing || this.pendingWrites.length === 0) return;
    this.flushing = true;
    const batch = this.pendingWrites.splice(0, this.options.combineWrites === false ? 1 : MAX_COMBINED_WRITES);
    void this.commitCombined(batch).finally(() => {
      this.flushing = false;
      this.flushPendingWrites();
    });
  }

  private async commitCombined(batch: PendingWrite[]): Promise<void> {
    const run = (calls: PendingWrite[]) =>
      this.write(
        'writeAllocations',
        (trx) =>
          this.applyAllocationCalls(
            trx,
            calls.map((c) => c.writes),
          ),
        { firstStatementWrites: true },
      );
    const settle = (call: PendingWrite, outcome: CallOutcome) => ('error' in outcome ? call.reject(outcome.error) : call.resolve(outcome.result));
    try {
      const outcomes = await run(batch);
      batch.forEach((call, i) => settle(call, outcomes[i]!));
    } catch (err) {
      if (batch.length === 1) {
        batch[0]!.reject(err);
        return;
      }
      // The combined transaction failed as a whole (a race with another process): give
      // each call its own transaction so one call's conflict is not the others'.
      for (const call of batch) {
        try {
          const [outcome] = await run([call]);
          settle(call, outcome!);
        } catch (callErr) {
          call.reject(callErr);
        }
      }
    }
  }

  /**
   * Applies several `writeAllocations` calls in one transaction and returns each call's
   * outcome (its error, or the hosts it changed); a call that fails leaves no trace. Locks every provider
   * the calls touch (new allocations and the consumers' current ones) before reading usage:
   * SQLite by taking the write lock with the first statement, PostgreSQL with SELECT ...
   * FOR UPDATE ordered by id (a fixed order, so concurrent claims cannot deadlock), then the
   * consumer rows. Checks run in memory against the usage read under the locks; the result
   * is written with a fixed number of set-based statements, however many calls are combined.
   */
  private async applyAllocationCalls(trx: Trx, calls: AllocationWrite[][]): Promise<CallOutcome[]> {
    const pg = this.client === 'pg';
    if (!pg) await this.takeWriteLock(trx);
    const all = calls.flat();
    const consumerUuids = [...new Set(all.map((w) => w.consumer.uuid))];
    const newUuids = [...new Set(all.flatMap((w) => w.allocations.map((a) => a.providerUuid)))].sort();

    let consumers = await this.readConsumers(trx, consumerUuids, false);
    const heldIds = (states: Map<string, ConsumerState>) => [...new Set([...states.values()].flatMap((c) => [...c.allocations.keys()].map(providerOfKey)))];
    const providerQuery = trx('providers as p')
      .select('p.id', 'p.uuid', 'p.name', 'p.root_id', this.sharingFlag())
      .where((q) => {
        q.whereIn('p.uuid', newUuids);
        const held = heldIds(consumers);
        if (held.length > 0) q.orWhereIn('p.id', held);
      })
      .orderBy('id');
    if (pg) providerQuery.forUpdate();
    const providers: Array<{ id: number; uuid: string; name: string; root_id: number; sharing: number | boolean }> = await providerQuery;
    if (pg) {
      // Lock the consumers and read them again: they are now stable until commit.
      consumers = await this.readConsumers(trx, consumerUuids, true);
      const locked = new Set(providers.map((p) => p.id));
      if (heldIds(consumers).some((id) => !locked.has(id))) {
        throw new StoreConflictError('ERT_STORE_CONFLICT', 'writeAllocations: a consumer changed providers concurrently', { consumers: consumerUuids });
      }
    }
    const providerByUuid = new Map(providers.map((p) => [p.uuid, p]));
    const newIds = newUuids.flatMap((u) => providerByUuid.get(u)?.id ?? []);
    const classIds = await this.classIdsFor(trx, all.flatMap((w) => w.allocations.map((a) => a.resourceClass)));

    // Inventories with their usage in one query (usage only exists where inventory does:
    // setInventories refuses to remove a class in use).
    const inventoryRows: Array<InventoryRow & { used: number | string | null }> = await inChunks(newIds, (part) =>
      trx('inventories as i')
        .select('i.*', trx.raw('(select sum(a.used) from allocations a where a.provider_id = i.provider_id and a.resource_class_id = i.resource_class_id) as used'))
        .whereIn('i.provider_id', part),
    );
    const inventories = new Map(inventoryRows.map((r) => [allocationKey(r.provider_id, r.resource_class_id), inventoryFromRow(r)]));
    const usage = new Map(inventoryRows.map((r) => [allocationKey(r.provider_id, r.resource_class_id), Number(r.used ?? 0)]));
    const instanceHosts = [...new Set(all.flatMap((w) => (w.instance ? [w.instance.host] : [])))];
    const hostRows: Array<{ id: number; name: string }> = await inChunks(instanceHosts, (part) => trx('hosts').select('id', 'name').whereIn('name', part));
    const hostIds = new Map(hostRows.map((r) => [r.name, r.id]));
    // Exclusive holds (pinned CPUs, cache ways, pools), only when some record names one:
    // releasing never conflicts, and rows of removed records go with them (foreign key).
    const ledger = anyHolds(all.flatMap((w) => (w.instance ? [w.instance] : [])))
      ? await this.holdLedger(trx, [...hostIds.values()], all.flatMap((w) => (w.instance ? [w.instance.uuid] : w.removeInstance ? [w.consumer.uuid] : [])))
      : undefined;

    // Check each call against the state left by the calls before it.
    const outcomes: Array<{ error: unknown } | { providers: Set<number>; instances: InstanceRecord[]; removed: string[] }> = [];
    const final = new Map<string, ConsumerState | null>();
    const touched = new Set<number>();
    const instances: InstanceRecord[] = [];
    // Each instance record's last state over the successful calls, in order: written, or removed (null).
    const records = new Map<string, InstanceRecord | null>();
    for (const call of calls) {
      const stagedConsumers = new Map<string, ConsumerState | null>();
      const stagedUsage = new Map<string, number>();
      const usedOf = (key: string) => stagedUsage.get(key) ?? usage.get(key) ?? 0;
      const holdsMark = ledger?.mark() ?? 0;
      try {
        for (const write of call) {
          const { uuid } = write.consumer;
          const current = stagedConsumers.has(uuid) ? stagedConsumers.get(uuid)! : final.has(uuid) ? final.get(uuid)! : (consumers.get(uuid) ?? null);
          checkConsumerGeneration(write, current);
          for (const [key, used] of current?.allocations ?? []) stagedUsage.set(key, usedOf(key) - used);
          const allocations = new Map<string, number>();
          for (const alloc of write.allocations) {
            const provider = providerByUuid.get(alloc.providerUuid);
            if (!provider) throw notFound('provider', alloc.providerUuid, { provider: alloc.providerUuid, consumer: uuid });
            const key = allocationKey(provider.id, classIds.get(alloc.resourceClass)!);
            const inv = inventories.get(key);
            checkFits(provider, alloc, inv && { inv, used: usedOf(key) });
            stagedUsage.set(key, usedOf(key) + alloc.amount);
            allocations.set(key, alloc.amount);
          }
          if (write.instance && !hostIds.has(write.instance.host)) throw notFound('host', write.instance.host, { host: write.instance.host, instance: write.instance.uuid });
          if (write.instance) ledger?.set(write.instance.uuid, { id: hostIds.get(write.instance.host)!, name: write.instance.host }, holdsOf(write.instance));
          if (write.removeInstance) ledger?.release(uuid);
          stagedConsumers.set(
            uuid,
            allocations.size === 0
              ? null
              : {
                  id: current?.id,
                  generation: current ? current.generation + 1 : 0,
                  projectId: write.consumer.projectId,
                  userId: write.consumer.userId,
                  allocations,
                },
          );
        }
      } catch (err) {
        if (!isStoreError(err)) throw err;
        ledger?.rollback(holdsMark);
        outcomes.push({ error: err });
        continue;
      }
      const callProviders = new Set<number>();
      const callInstances = call.flatMap((write) => (write.instance ? [write.instance] : []));
      const callRemoved = call.flatMap((write) => (write.removeInstance ? [write.consumer.uuid] : []));
      outcomes.push({ providers: callProviders, instances: callInstances, removed: callRemoved });
      for (const write of call) {
        if (write.instance) records.set(write.instance.uuid, write.instance);
        if (write.removeInstance) records.set(write.consumer.uuid, null);
      }
      for (const [key, used] of stagedUsage) usage.set(key, used);
      for (const [uuid, state] of stagedConsumers) {
        const before = final.has(uuid) ? final.get(uuid) : consumers.get(uuid);
        for (const key of [...(before?.allocations.keys() ?? []), ...(state?.allocations.keys() ?? [])]) callProviders.add(providerOfKey(key));
        final.set(uuid, state);
      }
      for (const id of callProviders) touched.add(id);
      instances.push(...callInstances);
    }
    if (final.size > 0) await this.writeConsumers(trx, consumers, final);
    if (touched.size > 0) await trx('providers').whereIn('id', [...touched]).increment('generation', 1);
    // Instance records removed (`removeInstance`): their hosts read first, then the rows deleted
    // unless a later call of the batch wrote the record again.
    const removedUuids = [...new Set(outcomes.flatMap((o) => ('removed' in o ? o.removed : [])))];
    const removedRows: Array<{ uuid: string; host_id: number }> = await inChunks(removedUuids, (part) => trx('instances').select('uuid', 'host_id').whereIn('uuid', part));
    const removedHosts = new Map(removedRows.map((r) => [r.uuid, r.host_id]));
    const gone = removedRows.filter((r) => records.get(r.uuid) === null).map((r) => r.uuid);
    for (const part of chunks(gone)) await trx('instances').whereIn('uuid', part).delete();
    const written = [...records.values()].filter((r): r is InstanceRecord => r !== null);
    const previousHosts = written.length > 0 ? await this.upsertInstancesIn(trx, written, hostIds, { bumpHosts: false }) : new Map<string, number>();
    // Host generations, each bumped once: the roots of the trees touched and the instances'
    // hosts (new and previous) in one statement returning the new generations; then the
    // general path for sharing providers (hosts of their aggregates).
    const rootOf = new Map(providers.map((p) => [p.id, p.root_id]));
    const roots = [...new Set([...touched].map((id) => rootOf.get(id)!))];
    const instanceHostIds = [...new Set([...instances.map((i) => hostIds.get(i.host)!), ...previousHosts.values(), ...removedHosts.values()])];
    const bumped: Array<{ id: number; name: string; generation: number; root_provider_id: number }> = [];
    for (let i = 0; i < Math.max(roots.length, instanceHostIds.length); i += 450) {
      const rootPart = roots.slice(i, i + 450);
      const hostPart = instanceHostIds.slice(i, i + 450);
      const rows: Array<{ id: number; name: string; generation: number; root_provider_id: number }> = await trx('hosts')
        .where((q) => {
          // Only non-empty lists: knex turns an empty one into a constant (`1 = 0`), and an OR
          // with a constant makes SQLite scan every host instead of using the two indexes.
          if (rootPart.length > 0) q.orWhereIn('root_provider_id', rootPart);
          if (hostPart.length > 0) q.orWhereIn('id', hostPart);
        })
        .modify((q) => {
          if (bumped.length > 0) q.whereNotIn('id', bumped.map((r) => r.id));
        })
        .update({ generation: trx.raw('generation + 1') })
        .returning(['id', 'name', 'generation', 'root_provider_id']);
      bumped.push(...rows);
    }
    const sharing = [...touched].filter((id) => providers.some((p) => p.id === id && Boolean(p.sharing)));
    if (sharing.length > 0) await this.bumpHostsOf(trx, sharing);
    // Each successful call: the hosts it changed, `shared` when another call changed them too.
    const hostById = new Map(bumped.map((r) => [r.id, r]));
    const hostByRoot = new Map(bumped.map((r) => [r.root_provider_id, r]));
    const writers = new Map<number, number>();
    const hostsOfCall = outcomes.map((outcome) => {
      if ('error' in outcome) return [];
      const ids = new Set<number>();
      for (const provider of outcome.providers) {
        const host = hostByRoot.get(rootOf.get(provider)!);
        if (host) ids.add(host.id);
      }
      for (const instance of outcome.instances) {
        ids.add(hostIds.get(instance.host)!);
        const previous = previousHosts.get(instance.uuid);
        if (previous !== undefined) ids.add(previous);
      }
      for (const uuid of outcome.removed) {
        const host = removedHosts.get(uuid);
        if (host !== undefined) ids.add(host);
      }
      for (const id of ids) writers.set(id, (writers.get(id) ?? 0) + 1);
      return [...ids];
    });
    return outcomes.map((outcome, i): CallOutcome => {
      if ('error' in outcome) return outcome;
      const hosts = hostsOfCall[i]!.flatMap((id) => {
        const host = hostById.get(id);
        if (!host) return [];
        return [{ name: host.name, generationBefore: host.generation - 1, generation: host.generation, shared: writers.get(id)! > 1 || sharing.length > 0 }];
      });
      return { result: { hosts } };
    });
  }

  /** Consumers by uuid with their allocations (`provider:class` -> amount); `lock` locks the rows (PostgreSQL). */
  private async readConsumers(trx: Trx, uuids: string[], lock: boolean): Promise<Map<string, ConsumerState>> {
    const rows: Array<{ id: number; uuid: string; generation: number; project_id: string; user_id: string; provider_id: number | null; resource_class_id: number | null; used: number | null }> =
      await inChunks(uuids, (part) => {
        const query = trx('consumers as c')
          .leftJoin('allocations as a', 'a.consumer_id', 'c.id')
          .whereIn('c.uuid', part)
          .select('c.id', 'c.uuid', 'c.generation', 'c.project_id', 'c.user_id', 'a.provider_id', 'a.resource_class_id', 'a.used')
          .orderBy('c.id');
        if (lock) query.forUpdate('c');
        return query;
      });
    const out = new Map<string, ConsumerState>();
    for (const row of rows) {
      let state = out.get(row.uuid);
      if (!state) {
        state = { id: row.id, generation: row.generation, projectId: row.project_id, userId: row.user_id, allocations: new Map() };
        out.set(row.uuid, state);
      }
      if (row.provider_id !== null && row.resource_class_id !== null) state.allocations.set(allocationKey(row.provider_id, row.resource_class_id), row.used ?? 0);
    }
    return out;
  }

  /** Writes the consumers' final states: set-based deletes and inserts, one update per surviving existing consumer. */
  private async writeConsumers(trx: Trx, before: Map<string, ConsumerState>, final: Map<string, ConsumerState | null>): Promise<void> {
    const existingIds = [...final.keys()].flatMap((uuid) => before.get(uuid)?.id ?? []);
    for (const part of chunks(existingIds)) await trx('allocations').whereIn('consumer_id', part).delete();
    const removed = [...final].flatMap(([uuid, state]) => (state === null ? (before.get(uuid)?.id ?? []) : []));
    for (const part of chunks(removed)) await trx('consumers').whereIn('id', part).delete();
    const kept = [...final].filter((entry): entry is [string, ConsumerState] => entry[1] !== null);
    const ids = new Map<string, number>();
    for (const [uuid, state] of kept) {
      const id = before.get(uuid)?.id;
      if (id === undefined) continue;
      await trx('consumers').where('id', id).update({ generation: state.generation, project_id: state.projectId, user_id: state.userId });
      ids.set(uuid, id);
    }
    const created = kept.filter(([uuid]) => !ids.has(uuid));
    const rows = await insertRows(
      trx,
      'consumers',
      ['uuid', 'project_id', 'user_id', 'generation'],
      created.map(([uuid, s]) => [uuid, s.projectId, s.userId, s.generation]),
      { returning: ['id', 'uuid'] },
    );
    for (const row of rows as Array<{ id: number; uuid: string }>) ids.set(row.uuid, row.id);
    await insertRows(
      trx,
      'allocations',
      ['provider_id', 'consumer_id', 'resource_class_id', 'used'],
      kept.flatMap(([uuid, s]) => [...s.allocations].map(([key, used]) => [providerOfKey(key), ids.get(uuid)!, classOfKey(key), used])),
    );
  }

  async getAllocations(consumerUuid: string): Promise<{ generation: number | null; allocations: Allocation[] }> {
    return this.read(async (trx) => {
      const consumer: { id: number; generation: number } | undefined = await trx('consumers').where('uuid', consumerUuid).first('id', 'generation');
      if (!consumer) return { generation: null, allocations: [] };
      const rows: Array<{ uuid: string; resource_class_id: number; used: number }> = await trx('allocations as a')
        .join('providers as p', 'p.id', 'a.provider_id')
        .where('a.consumer_id', consumer.id)
        .select('p.uuid', 'a.resource_class_id', 'a.used')
        .orderBy(['p.uuid', 'a.resource_class_id']);
      await this.loadClassNames(trx, rows.map((r) => r.resource_class_id));
      return {
        generation: consumer.generation,
        allocations: rows.map((r) => ({ providerUuid: r.uuid, resourceClass: this.classNames.get(r.resource_class_id)!, amount: r.used })),
      };
    });
  }

  async deleteAllocations(consumerUuid: string): Promise<void> {
    checkName('consumer', consumerUuid, 36);
    await this.writeAllocations([{ consumer: { uuid: consumerUuid, projectId: '', userId: '' }, allocations: [] }]);
  }

  /* ---------------------------------------------------------------- hosts */

  /**
   * The holds of `hostIds` and of the instances `uuids`, for checking records' holds in this
   * transaction. PostgreSQL: the hosts' rows are locked first (ordered by id), so a concurrent
   * writer for the same host waits and then sees these holds (pools are checked by sum, which
   * no index can enforce). SQLite: the transaction already holds the write lock.
   */
  private async holdLedger(trx: Trx, hostIds: number[], uuids: string[]): Promise<HoldLedger> {
    const ids = [...new Set(hostIds)].sort((a, b) => a - b);
    if (this.client === 'pg') for (const part of chunks(ids)) await trx('hosts').select('id').whereIn('id', part).orderBy('id').forUpdate();
    return HoldLedger.read(trx, ids, uuids);
  }

  private async hostRow(db: Db, name: string): Promise<HostRow> {
    const row: HostRow | undefined = await db('hosts').where('name', name).first();
    if (!row) throw notFound('host', name, { host: name });
    return row;
  }

  private hostQuery(db: Db) {
    return db('hosts as h')
      .join('providers as p', 'p.id', 'h.root_provider_id')
      .select('h.id', 'h.name', 'h.root_provider_id', 'h.status', 'h.last_update', 'h.generation', 'h.machine', 'p.uuid as root_uuid');
  }

  private static hostRecord(row: HostRow & { root_uuid: string }): HostRecord {
    return hostFromRow(row, row.root_uuid);
  }

  async upsertHost(host: { name: string; rootProviderUuid: string; status?: HostStatus; lastUpdate?: number; machine?: string }): Promise<HostRecord> {
    checkName('host', host.name);
    if (host.status !== undefined && !HOST_STATUSES.has(host.status)) throw invalid(`host ${host.name}: unknown status ${JSON.stringify(host.status)}`, { host: host.name });
    return this.write(`upsertHost ${host.name}`, async (trx) => {
      const root = await this.providerRow(trx, host.rootProviderUuid);
      if (root.parent_id !== null) throw invalid(`host ${host.name}: provider ${root.name} is not a root provider`, { host: host.name, provider: root.uuid });
      const existing: HostRow | undefined = await trx('hosts').where('name', host.name).first();
      const fields: Record<string, unknown> = { root_provider_id: root.id };
      if (host.status !== undefined) fields.status = host.status;
      if (host.lastUpdate !== undefined) fields.last_update = host.lastUpdate;
      if (host.machine !== undefined) fields.machine = host.machine;
      if (existing) {
        await trx('hosts').where('id', existing.id).update({ ...fields, generation: existing.generation + 1 });
      } else {
        await trx('hosts').insert({ name: host.name, status: 'up', last_update: Date.now(), generation: 0, ...fields });
      }
      return KnexStore.hostRecord(await this.hostQuery(trx).where('h.name', host.name).first());
    });
  }

  async getHost(name: string): Promise<HostRecord | undefined> {
    const row = await this.hostQuery(this.knex).where('h.name', name).first();
    return row ? KnexStore.hostRecord(row) : undefined;
  }

  async listHosts(): Promise<HostRecord[]> {
    const rows = await this.hostQuery(this.knex).orderBy('h.name');
    return rows.map((row) => KnexStore.hostRecord(row));
  }

  async setHostStatus(name: string, status: HostStatus): Promise<void> {
    if (!HOST_STATUSES.has(status)) throw invalid(`host ${name}: unknown status ${JSON.stringify(status)}`, { host: name, status });
    await this.write(
      `setHostStatus ${name}`,
      async (trx) => {
        const changed = await trx('hosts').where('name', name).update({ status, generation: trx.raw('generation + 1') });
        if (changed === 0) throw notFound('host', name, { host: name });
      },
      { firstStatementWrites: true },
    );
  }

  async markStaleHosts(before: number): Promise<string[]> {
    return this.write('markStaleHosts', async (trx) => {
      const rows: Array<{ id: number; name: string }> = await trx('hosts').where('status', 'up').where('last_update', '<', before).select('id', 'name');
      for (const part of chunks(rows.map((r) => r.id))) {
        await trx('hosts').whereIn('id', part).update({ status: 'stale', generation: trx.raw('generation + 1') });
      }
      return rows.map((r) => r.name).sort();
    });
  }

  /* ---------------------------------------------------------------- stats */

  async writeStats(host: string, plugin: string, schemaVersion: number, data: JsonValue): Promise<void> {
    checkName('plugin', plugin);
    if (!Number.isSafeInteger(schemaVersion) || schemaVersion < 0) {
      throw invalid(`host ${host}: plugin ${plugin} stats schemaVersion must be a non-negative integer, got ${String(schemaVersion)}`, { host, plugin });
    }
    const json = JSON.stringify(data);
    if (json === undefined) throw invalid(`host ${host}: plugin ${plugin} stats are not JSON`, { host, plugin });
    await this.write(
      `writeStats ${host} ${plugin}`,
      async (trx) => {
        const changed = await trx('hosts').where('name', host).increment('generation', 1);
        if (changed === 0) throw notFound('host', host, { host, plugin });
        const row = await this.hostRow(trx, host);
        await trx('host_stats')
          .insert({ host_id: row.id, plugin, schema_version: schemaVersion, data: json, updated_at: Date.now() })
          .onConflict(['host_id', 'plugin'])
          .merge(['schema_version', 'data', 'updated_at']);
      },
      { firstStatementWrites: true },
    );
  }

  async readStats(host: string): Promise<Record<string, StatsRecord>> {
    return this.read(async (trx) => {
      const row = await this.hostRow(trx, host);
      const rows: StatsRow[] = await trx('host_stats').where('host_id', row.id);
      return statsRecords(rows);
    });
  }

  /* ---------------------------------------------------------------- instances */

  async upsertInstance(instance: InstanceRecord): Promise<void> {
    checkInstance(instance);
    await this.write(`upsertInstance ${instance.uuid}`, async (trx) => {
      const host = await this.hostRow(trx, instance.host);
      if (anyHolds([instance])) {
        const ledger = await this.holdLedger(trx, [host.id], [instance.uuid]);
        ledger.set(instance.uuid, host, holdsOf(instance));
      }
      await this.upsertInstancesIn(trx, [instance], new Map([[host.name, host.id]]));
    });
  }

  /**
   * Inserts or updates instances (one multi-row upsert; `createdAt` is kept on update) and
   * bumps the generation of their hosts and of the hosts they moved away from.
   */
  private async upsertInstancesIn(
    trx: Trx,
    instances: InstanceRecord[],
    hostIds: Map<string, number>,
    options: { bumpHosts?: boolean } = {},
  ): Promise<Map<string, number>> {
    const uuids = instances.map((i) => i.uuid);
    const previous: Array<{ uuid: string; host_id: number }> = await inChunks(uuids, (part) => trx('instances').select('uuid', 'host_id').whereIn('uuid', part));
    const now = Date.now();
    const columns = ['uuid', 'host_id', 'project_id', 'user_id', 'flavor', 'previous_flavor', 'migration_uuid', 'assignments', 'cpus', 'units', 'pools', 'reason', 'state', 'created_at', 'updated_at'];
    const updated = columns.filter((c) => c !== 'uuid' && c !== 'created_at');
    // The last record of an instance wins (several calls combined in one transaction).
    const latest = new Map(instances.map((i) => [i.uuid, i]));
    await insertRows(
      trx,
      'instances',
      columns,
      [...latest.values()].map((i) => [
        i.uuid,
        hostIds.get(i.host)!,
        i.projectId,
        i.userId,
        JSON.stringify(i.flavor),
        i.previousFlavor ? JSON.stringify(i.previousFlavor) : null,
        i.migrationUuid ?? null,
        JSON.stringify(i.assignments ?? {}),
        i.cpus ? JSON.stringify(i.cpus) : null,
        i.units && i.units.length > 0 ? JSON.stringify(i.units) : null,
        i.pools && Object.keys(i.pools).length > 0 ? JSON.stringify(i.pools) : null,
        i.reason ?? null,
        i.state,
        i.createdAt ?? now,
        now,
      ]),
      { upsert: { key: 'uuid', columns: updated } },
    );
    // Holds of records that existed are replaced; a new record has none to remove.
    await writeHolds(trx, latest, hostIds, new Set(previous.map((p) => p.uuid)));
    if (options.bumpHosts !== false) {
      const bumped = new Set([...instances.map((i) => hostIds.get(i.host)!), ...previous.map((p) => p.host_id)]);
      for (const part of chunks([...bumped])) await trx('hosts').whereIn('id', part).increment('generation', 1);
    }
    return new Map(previous.map((p) => [p.uuid, p.host_id]));
  }

  async getInstance(uuid: string): Promise<InstanceRecord | undefined> {
    const row = await this.instanceQuery(this.knex).where('i.uuid', uuid).first();
    return row ? instanceFromRow(row) : undefined;
  }

  async listInstances(filter: { host?: string; state?: InstanceState | InstanceState[]; updatedBefore?: number } = {}): Promise<InstanceRecord[]> {
    const query = this.instanceQuery(this.knex).orderBy('i.uuid');
    if (filter.host !== undefined) query.where('h.name', filter.host);
    if (filter.state !== undefined) query.whereIn('i.state', Array.isArray(filter.state) ? filter.state : [filter.state]);
    if (filter.updatedBefore !== undefined) query.where('i.updated_at', '<', filter.updatedBefore);
    const rows: InstanceRow[] = await query;
    return rows.map(instanceFromRow);
  }

  private instanceQuery(db: Db) {
    return db('instances as i').join('hosts as h', 'h.id', 'i.host_id').select('i.*', 'h.name as host');
  }

  async deleteInstance(uuid: string): Promise<void> {
    await this.write(`deleteInstance ${uuid}`, async (trx) => {
      const row: { host_id: number } | undefined = await trx('instances').where('uuid', uuid).first('host_id');
      if (!row) return;
      await trx('instances').where('uuid', uuid).delete();
      await trx('hosts').where('id', row.host_id).increment('generation', 1);
    });
  }

  /* ---------------------------------------------------------------- bulk import */

  async importHosts(hosts: HostImport[]): Promise<void> {
    validateImport(hosts);
    for (const batch of chunks(hosts, IMPORT_BATCH)) {
      await this.write(`importHosts (${batch[0]!.host.name}...)`, (trx) => this.importBatch(trx, batch));
    }
  }

  private async importBatch(trx: Trx, hosts: HostImport[]): Promise<void> {
    const providers = hosts.flatMap((h) => h.providers);
    const classIds = await this.classIdsFor(trx, providers.flatMap((p) => Object.keys(p.inventories)));
    const traitIds = await this.ensureNamed(trx, 'traits', 'name', providers.flatMap((p) => p.traits));
    const aggregateIds = await this.ensureNamed(trx, 'aggregates', 'uuid', providers.flatMap((p) => p.aggregates));

    // Providers level by level (roots, then their children, ...) so parent and root ids are known.
    const ids = new Map<string, number>();
    const rootOf = new Map<string, string>();
    for (const host of hosts) for (const p of host.providers) rootOf.set(p.uuid, host.providers[0]!.uuid);
    let level = providers.filter((p) => p.parentUuid === undefined);
    const placed = new Set<string>();
    while (level.length > 0) {
      const rows = level.map((p) => [p.uuid, p.name, p.parentUuid ? ids.get(p.parentUuid)! : null, p.parentUuid ? ids.get(rootOf.get(p.uuid)!)! : null, 0]);
      await insertRows(trx, 'providers', ['uuid', 'name', 'parent_id', 'root_id', 'generation'], rows);
      for (const part of chunks(level.map((p) => p.uuid))) {
        const got: Array<{ id: number; uuid: string }> = await trx('providers').select('id', 'uuid').whereIn('uuid', part);
        for (const row of got) ids.set(row.uuid, row.id);
      }
      for (const p of level) placed.add(p.uuid);
      if (level[0]!.parentUuid === undefined) {
        for (const part of chunks(level.map((p) => ids.get(p.uuid)!))) await trx('providers').whereIn('id', part).update({ root_id: trx.ref('id') });
      }
      level = providers.filter((p) => !placed.has(p.uuid) && p.parentUuid !== undefined && placed.has(p.parentUuid));
    }

    await insertObjects(
      trx,
      'inventories',
      providers.flatMap((p) => Object.entries(p.inventories).map(([rc, inv]) => inventoryToRow(ids.get(p.uuid)!, classIds.get(rc)!, inv))),
    );
    await insertRows(trx, 'provider_traits', ['provider_id', 'trait_id'], providers.flatMap((p) => [...new Set(p.traits)].map((t) => [ids.get(p.uuid)!, traitIds.get(t)!])));
    await insertRows(
      trx,
      'provider_aggregates',
      ['provider_id', 'aggregate_id'],
      providers.flatMap((p) => [...new Set(p.aggregates)].map((a) => [ids.get(p.uuid)!, aggregateIds.get(a)!])),
    );

    const now = Date.now();
    await insertRows(
      trx,
      'hosts',
      ['name', 'root_provider_id', 'status', 'last_update', 'generation', 'machine'],
      hosts.map((h) => [h.host.name, ids.get(h.providers[0]!.uuid)!, h.host.status ?? 'up', h.host.lastUpdate ?? now, 0, h.host.machine ?? null]),
    );
    const withStats = hosts.filter((h) => h.stats && Object.keys(h.stats).length > 0);
    if (withStats.length > 0) {
      const hostIds = new Map<string, number>();
      for (const part of chunks(withStats.map((h) => h.host.name))) {
        const got: Array<{ id: number; name: string }> = await trx('hosts').select('id', 'name').whereIn('name', part);
        for (const row of got) hostIds.set(row.name, row.id);
      }
      await insertRows(
        trx,
        'host_stats',
        ['host_id', 'plugin', 'schema_version', 'data', 'updated_at'],
        withStats.flatMap((h) => Object.entries(h.stats!).map(([plugin, s]) => [hostIds.get(h.host.name)!, plugin, s.schemaVersion, JSON.stringify(s.data), now])),
      );
    }
  }

  /* ---------------------------------------------------------------- scheduler reads */

  async hostGenerations(): Promise<Map<string, number>> {
    if (this.client === 'sqlite3') {
      // One JSON value rather than a row per host: the SQLite driver's per-row objects cost
      // about three times more, on the connection every write waits for, once per refresh.
      const [row]: Array<{ pairs: string }> = await this.knex.raw('SELECT json_group_array(json_array(name, generation)) AS pairs FROM hosts');
      return new Map(JSON.parse(row!.pairs) as Array<[string, number]>);
    }
    const rows: Array<{ name: string; generation: number }> = await this.knex('hosts').select('name', 'generation');
    return new Map(rows.map((r) => [r.name, r.generation]));
  }

  async loadHosts(names?: string[]): Promise<HostSnapshot[]> {
    return this.read(async (trx) => {
      // A fixed number of set-based queries, whatever the number of hosts (IN lists chunked).
      const hostRows: HostRow[] =
        names === undefined
          ? await trx('hosts').select('*').orderBy('name')
          : (await inChunks([...new Set(names)], (part) => trx('hosts').select('*').whereIn('name', part))).sort((a, b) => (a.name < b.name ? -1 : 1));
      if (hostRows.length === 0) return [];
      const rootIds = hostRows.map((h) => h.root_provider_id);
      const scope: ProviderScope = names === undefined ? { all: true } : { rootIds };
      const snapshots = await this.providerSnapshots(trx, scope);

      const sharing = await this.providerSnapshots(trx, { sharing: true });
      const sharingByAggregate = new Map<number, ProviderSnapshotWithIds[]>();
      for (const s of sharing.list) for (const agg of s.aggregateIds) sharingByAggregate.set(agg, [...(sharingByAggregate.get(agg) ?? []), s]);

      const hostIds = hostRows.map((h) => h.id);
      const statsRows: StatsRow[] = names === undefined ? await trx('host_stats').select('*') : await inChunks(hostIds, (part) => trx('host_stats').select('*').whereIn('host_id', part));
      const instanceRows: Array<{ uuid: string; host_id: number }> =
        names === undefined
          ? await trx('instances').select('uuid', 'host_id').whereNotIn('state', ENDED_STATES).orderBy('uuid')
          : await inChunks(hostIds, (part) => trx('instances').select('uuid', 'host_id').whereIn('host_id', part).whereNotIn('state', ENDED_STATES).orderBy('uuid'));
      const rootAggregateIds = [...new Set(hostRows.flatMap((h) => snapshots.byId.get(h.root_provider_id)?.aggregateIds ?? []))];
      const metadataRows: Array<{ id: number; metadata: string }> = await inChunks(rootAggregateIds, (part) =>
        trx('aggregates').select('id', 'metadata').whereIn('id', part).orderBy('uuid'),
      );
      const metadataById = new Map(metadataRows.map((r) => [r.id, JSON.parse(r.metadata) as Record<string, string>]));

      const statsByHost = groupBy(statsRows, (r) => r.host_id);
      const instancesByHost = groupBy(instanceRows, (r) => r.host_id);
      return hostRows.map((h): HostSnapshot => {
        const tree = snapshots.byRoot.get(h.root_provider_id) ?? [];
        const treeIds = new Set(tree.map((p) => p.id));
        const seen = new Set<number>();
        const sharingProviders: ProviderSnapshot[] = [];
        for (const p of tree) {
          for (const agg of p.aggregateIds) {
            for (const s of sharingByAggregate.get(agg) ?? []) {
              if (!treeIds.has(s.id) && !seen.has(s.id)) {
                seen.add(s.id);
                sharingProviders.push(s.snapshot);
              }
            }
          }
        }
        const aggregateMetadata: Record<string, string> = {};
        for (const agg of snapshots.byId.get(h.root_provider_id)?.aggregateIds ?? []) Object.assign(aggregateMetadata, metadataById.get(agg));
        return {
          host: hostFromRow(h, snapshots.byId.get(h.root_provider_id)!.snapshot.uuid),
          providers: tree.map((p) => p.snapshot),
          sharingProviders,
          aggregateMetadata,
          stats: statsRecords(statsByHost.get(h.id) ?? []),
          instances: (instancesByHost.get(h.id) ?? []).map((r) => r.uuid),
        };
      });
    });
  }

  /**
   * Snapshots (inventories, usages, traits, aggregates) of a set of providers, in five
   * set-based queries: every provider, the trees of some roots, or the sharing providers.
   */
  private async providerSnapshots(trx: Trx, scope: ProviderScope): Promise<ProviderSnapshots> {
    // Each query joins `providers as p` and is restricted to the scope.
    const scoped = async <T>(build: (q: Knex.QueryBuilder) => Knex.QueryBuilder): Promise<T[]> => {
      if ('all' in scope) return build(trx.queryBuilder());
      if ('sharing' in scope) {
        return build(trx.queryBuilder()).whereIn('p.id', (q) =>
          q.select('pt.provider_id').from('provider_traits as pt').join('traits as t', 't.id', 'pt.trait_id').where('t.name', TRAIT_SHARING_PROVIDER),
        );
      }
      return inChunks(scope.rootIds, (part) => build(trx.queryBuilder()).whereIn('p.root_id', part));
    };
    const providerRows = await scoped<ProviderRow>((q) => q.from('providers as p').select('p.*'));
    const inventoryRows = await scoped<InventoryRow>((q) => q.from('inventories as i').join('providers as p', 'p.id', 'i.provider_id').select('i.*'));
    const usageRows = await scoped<{ provider_id: number; resource_class_id: number; used: number | string }>((q) =>
      q
        .from('allocations as a')
        .join('providers as p', 'p.id', 'a.provider_id')
        .select('a.provider_id', 'a.resource_class_id')
        .sum({ used: 'a.used' })
        .groupBy('a.provider_id', 'a.resource_class_id'),
    );
    const traitRows = await scoped<{ provider_id: number; name: string }>((q) =>
      q.from('provider_traits as pt').join('providers as p', 'p.id', 'pt.provider_id').join('traits as t', 't.id', 'pt.trait_id').select('pt.provider_id', 't.name'),
    );
    const aggregateRows = await scoped<{ provider_id: number; aggregate_id: number; uuid: string }>((q) =>
      q
        .from('provider_aggregates as pa')
        .join('providers as p', 'p.id', 'pa.provider_id')
        .join('aggregates as ag', 'ag.id', 'pa.aggregate_id')
        .select('pa.provider_id', 'pa.aggregate_id', 'ag.uuid'),
    );
    await this.loadClassNames(trx, [...inventoryRows, ...usageRows].map((r) => r.resource_class_id));

    const rowsById = new Map(providerRows.map((r) => [r.id, r]));
    const byId = new Map<number, ProviderSnapshotWithIds>();
    for (const row of providerRows) {
      const parent = row.parent_id === null ? undefined : rowsById.get(row.parent_id);
      const root = row.root_id === null ? undefined : rowsById.get(row.root_id);
      const snapshot: ProviderSnapshot = {
        uuid: row.uuid,
        name: row.name,
        rootUuid: root?.uuid ?? row.uuid,
        generation: row.generation,
        inventories: {},
        usages: {},
        traits: [],
        aggregates: [],
      };
      if (parent) snapshot.parentUuid = parent.uuid;
      byId.set(row.id, { id: row.id, rootId: row.root_id ?? row.id, depth: depthOf(row, rowsById), aggregateIds: [], snapshot });
    }
    for (const r of inventoryRows) {
      const p = byId.get(r.provider_id);
      if (p) p.snapshot.inventories[this.classNames.get(r.resource_class_id)!] = inventoryFromRow(r);
    }
    for (const r of usageRows) {
      const p = byId.get(r.provider_id);
      if (p) p.snapshot.usages[this.classNames.get(r.resource_class_id)!] = Number(r.used);
    }
    for (const r of traitRows) byId.get(r.provider_id)?.snapshot.traits.push(r.name);
    for (const r of aggregateRows) {
      const p = byId.get(r.provider_id);
      if (!p) continue;
      p.snapshot.aggregates.push(r.uuid);
      p.aggregateIds.push(r.aggregate_id);
    }
    const list = [...byId.values()].sort((a, b) => a.depth - b.depth || a.id - b.id);
    const byRoot = new Map<number, ProviderSnapshotWithIds[]>();
    for (const p of list) {
      p.snapshot.traits.sort();
      p.snapshot.aggregates.sort();
      byRoot.set(p.rootId, [...(byRoot.get(p.rootId) ?? []), p]);
    }
    return { list, byId, byRoot };
  }
}

interface PendingWrite {
  writes: AllocationWrite[];
  resolve(result: AllocationWriteResult): void;
  reject(err: unknown): void;
}

/** Outcome of one call in a combined transaction: its error, or the hosts it changed. */
type CallOutcome = { error: unknown } | { result: AllocationWriteResult };

/** A consumer inside writeAllocations: `id` undefined until created; allocations by allocationKey. */
interface ConsumerState {
  id: number | undefined;
  generation: number;
  projectId: string;
  userId: string;
  allocations: Map<string, number>;
}

function allocationKey(providerId: number, classId: number): string {
  return `${providerId}:${classId}`;
}

function providerOfKey(key: string): number {
  return Number(key.slice(0, key.indexOf(':')));
}

function classOfKey(key: string): number {
  return Number(key.slice(key.indexOf(':') + 1));
}

/** The caller's consumer generation against the current one (null: no such consumer). */
function checkConsumerGeneration(write: AllocationWrite, current: ConsumerState | null): void {
  const expected = write.consumer.generation;
  const actual = current ? current.generation : null;
  if (expected === undefined || expected === actual) return;
  throw new StoreConflictError(
    'ERT_STORE_CONSUMER_GENERATION_CONFLICT',
    `consumer ${write.consumer.uuid} changed: generation ${String(actual)}, caller read ${String(expected)}`,
    { consumer: write.consumer.uuid, expected, actual },
  );
}

type ProviderScope = { all: true } | { sharing: true } | { rootIds: number[] };

interface ProviderSnapshotWithIds {
  id: number;
  rootId: number;
  depth: number;
  aggregateIds: number[];
  snapshot: ProviderSnapshot;
}

interface ProviderSnapshots {
  list: ProviderSnapshotWithIds[];
  byId: Map<number, ProviderSnapshotWithIds>;
  byRoot: Map<number, ProviderSnapshotWithIds[]>;
}

interface StatsRow {
  host_id: number;
  plugin: string;
  schema_version: number;
  data: string;
  updated_at: number | string;
}

function statsRecords(rows: StatsRow[]): Record<string, StatsRecord> {
  const out: Record<string, StatsRecord> = {};
  for (const r of rows) out[r.plugin] = { plugin: r.plugin, schemaVersion: r.schema_version, data: JSON.parse(r.data) as JsonValue, updatedAt: Number(r.updated_at) };
  return out;
}

/** Depth of a provider in its tree (0 for a root), from rows read together. */
function depthOf(row: ProviderRow, rowsById: Map<number, ProviderRow>): number {
  let depth = 0;
  for (let p = row; p.parent_id !== null && depth < 64; depth++) {
    const parent = rowsById.get(p.parent_id);
    if (!parent) break;
    p = parent;
  }
  return depth;
}

function groupBy<T, K>(items: T[], key: (item: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

function validateWrites(writes: AllocationWrite[]): void {
  if (!Array.isArray(writes)) throw invalid('writeAllocations expects an array of writes');
  const consumers = new Set<string>();
  for (const write of writes) {
    const uuid = write.consumer?.uuid;
    checkName('consumer', uuid, 36);
    if (consumers.has(uuid)) throw invalid(`consumer ${uuid} appears twice in one writeAllocations call`, { consumer: uuid });
    consumers.add(uuid);
    if (write.allocations.length > 0) {
      checkName('projectId', write.consumer.projectId);
      checkName('userId', write.consumer.userId);
    }
    const seen = new Set<string>();
    for (const a of write.allocations) {
      checkName('provider', a.providerUuid, 36);
      if (!isValidResourceClass(a.resourceClass)) {
        throw invalid(`consumer ${uuid}: ${JSON.stringify(a.resourceClass)} is not a standard or CUSTOM_ resource class`, { consumer: uuid, resourceClass: a.resourceClass });
      }
      if (!Number.isSafeInteger(a.amount) || a.amount < 1) {
        throw invalid(`consumer ${uuid}: ${a.resourceClass} on provider ${a.providerUuid}: amount must be a positive integer, got ${String(a.amount)}`, {
          consumer: uuid,
          provider: a.providerUuid,
          resourceClass: a.resourceClass,
          amount: a.amount,
        });
      }
      const key = `${a.providerUuid}\u0000${a.resourceClass}`;
      if (seen.has(key)) throw invalid(`consumer ${uuid}: ${a.resourceClass} on provider ${a.providerUuid} is listed twice`, { consumer: uuid, provider: a.providerUuid });
      seen.add(key);
    }
    if (write.instance) checkInstance(write.instance);
    if (write.removeInstance !== undefined && typeof write.removeInstance !== 'boolean') throw invalid(`consumer ${uuid}: removeInstance must be a boolean`, { consumer: uuid });
    if (write.removeInstance && (write.instance || write.allocations.length > 0)) {
      throw invalid(`consumer ${uuid}: removeInstance removes the instance record with its allocations; it takes no allocations and no instance`, { consumer: uuid });
    }
  }
}

/** Throws when `alloc` does not fit: capacity (ERT_STORE_CAPACITY_EXCEEDED) or units (ERT_STORE_INVALID). */
function checkFits(provider: { uuid: string; name: string }, alloc: Allocation, entry: { inv: Inventory; used: number } | undefined): void {
  const details = { provider: provider.uuid, providerName: provider.name, resourceClass: alloc.resourceClass, requested: alloc.amount };
  if (!entry) throw new CapacityExceededError({ ...details, used: 0, free: 0, reason: `has no inventory (needs ${alloc.amount})` });
  const { inv, used } = entry;
  const problem = amountProblem(inv, used, alloc.amount);
  if (problem === undefined) return;
  const capacity = capacityOf(inv);
  if (used + alloc.amount > capacity) throw new CapacityExceededError({ ...details, used, free: Math.max(capacity - used, 0), reason: problem });
  throw invalid(`provider ${provider.name} (${provider.uuid}): ${alloc.resourceClass} ${problem}`, details);
}

function checkInstance(instance: InstanceRecord): void {
  checkName('instance', instance.uuid, 36);
  checkName('host', instance.host);
  checkName('projectId', instance.projectId);
  checkName('userId', instance.userId);
  if (!INSTANCE_STATES.has(instance.state)) throw invalid(`instance ${instance.uuid}: unknown state ${JSON.stringify(instance.state)}`, { instance: instance.uuid });
  if (typeof instance.flavor !== 'object' || instance.flavor === null) throw invalid(`instance ${instance.uuid}: flavor must be an object`, { instance: instance.uuid });
  checkHolds(instance);
}

function validateImport(hosts: HostImport[]): void {
  const hostNames = new Set<string>();
  const uuids = new Set<string>();
  const names = new Set<string>();
  for (const { host, providers, stats } of hosts) {
    checkName('host', host.name);
    if (hostNames.has(host.name)) throw invalid(`importHosts: host ${host.name} is listed twice`, { host: host.name });
    hostNames.add(host.name);
    if (host.status !== undefined && !HOST_STATUSES.has(host.status)) throw invalid(`host ${host.name}: unknown status ${JSON.stringify(host.status)}`, { host: host.name });
    if (providers.length === 0 || providers[0]!.parentUuid !== undefined) {
      throw invalid(`importHosts: host ${host.name} must list its root provider (no parentUuid) first`, { host: host.name });
    }
    const tree = new Set<string>();
    for (const p of providers) {
      checkName('uuid', p.uuid, 36);
      checkName('name', p.name, 200);
      if (uuids.has(p.uuid) || names.has(p.name)) throw invalid(`importHosts: provider ${p.name} (${p.uuid}) is listed twice`, { host: host.name, provider: p.uuid });
      if (p !== providers[0] && (p.parentUuid === undefined || !tree.has(p.parentUuid))) {
        throw invalid(`importHosts: host ${host.name}: provider ${p.name} must name a parent listed before it in the same tree`, { host: host.name, provider: p.uuid });
      }
      uuids.add(p.uuid);
      names.add(p.name);
      tree.add(p.uuid);
      checkInventories(p.name, p.inventories);
      checkTraits(p.name, p.traits);
      for (const agg of p.aggregates) checkName('aggregate', agg, 36);
    }
    for (const [plugin, s] of Object.entries(stats ?? {})) {
      if (!Number.isSafeInteger(s.schemaVersion) || s.schemaVersion < 0) throw invalid(`host ${host.name}: plugin ${plugin} stats schemaVersion must be a non-negative integer`, { host: host.name, plugin });
    }
  }
}
