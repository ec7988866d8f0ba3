import type { Knex } from 'knex';
import { STANDARD_RESOURCE_CLASSES, type HostStatus, type Inventory, type JsonValue, type ResourceClass } from '@ert/plugin-api';
import type { AggregateRecord, AllocationWrite, HostImport, InstanceRecord, NewProvider, ReshapeInventory, SchemaStatus, Store, StoreClient, StoreOptions } from './api.js';
import { existsSync } from 'node:fs';
import { mapDriverError } from './connection.js';
import { StoreError } from './errors.js';
import { MIGRATIONS_TABLE, MIGRATION_NAMES, ensureMigrationTables, migrationSource } from './migrations.js';
import { StoreContext } from './context.js';
import { AllocationWriter } from './allocations.js';
import * as providers from './providers.js';
import * as hosts from './hosts.js';
import * as instances from './instances.js';
import * as snapshots from './snapshots.js';
import { ProviderModel } from './provider-model.js';

/** Errors of a migration racing another process's: retry, the winner's work will be visible. */
function isMigrationRace(err: unknown): boolean {
  const { name, code, message = '' } = (err ?? {}) as { name?: string; code?: string; message?: string };
  // knex's lock is held (MigrationLocked); concurrent CREATE of the same table, schema or row.
  if (name === 'MigrationLocked' || code === 'SQLITE_BUSY' || code === '42P07' || code === '42P06' || code === '23505' || code === '40P01') return true;
  return code === 'SQLITE_ERROR' && /already exists/.test(message);
}

/**
 * The knex implementation of `Store` (SQLite and PostgreSQL). See api.ts for each method's
 * contract and README.md for the concurrency model. This class is the index: the schema's
 * lifecycle is here; each concern is a module of its own, sharing one StoreContext
 * (context.ts): providers.ts (classes, providers, inventories, traits, aggregates),
 * allocations.ts (writeAllocations and consumers), hosts.ts (hosts, stats, import),
 * instances.ts (instance records and their holds), snapshots.ts (the scheduler's reads).
 */
export class KnexStore implements Store {
  readonly client: StoreClient;
  readonly knex: Knex;
  private readonly ctx: StoreContext;
  /** The whole model of `loadProviders`, kept between calls and read in proportion to what changed. */
  private readonly providerModel: ProviderModel;
  private readonly allocations: AllocationWriter;

  constructor(options: StoreOptions) {
    this.ctx = new StoreContext(options);
    this.providerModel = new ProviderModel(this.ctx);
    this.client = this.ctx.client;
    this.knex = this.ctx.knex;
    this.allocations = new AllocationWriter(this.ctx);
  }

  /* ---------------------------------------------------------------- lifecycle */

  async schemaStatus(): Promise<SchemaStatus> {
    const known = [...MIGRATION_NAMES];
    const none = { exists: false, applied: [], known, pending: known, unknown: [] };
    // Opening a missing SQLite file would create it: look first.
    if (this.ctx.client === 'sqlite3' && this.ctx.options.connection !== ':memory:' && !existsSync(this.ctx.options.connection)) return none;
    const startedAt = Date.now();
    try {
      const schema = this.ctx.client === 'pg' ? (this.ctx.options.schema ?? 'public') : undefined;
      const builder = schema ? this.ctx.knex.schema.withSchema(schema) : this.ctx.knex.schema;
      if (!(await builder.hasTable(MIGRATIONS_TABLE))) {
        // An existing SQLite file without ert's tables (empty, or someone else's database).
        return this.ctx.client === 'sqlite3' && this.ctx.options.connection !== ':memory:' ? { ...none, exists: true } : none;
      }
      const table = schema ? this.ctx.knex.withSchema(schema).from(MIGRATIONS_TABLE) : this.ctx.knex.from(MIGRATIONS_TABLE);
      const rows: Array<{ name: string }> = await table.select('name').orderBy('id');
      const applied = rows.map((r) => r.name);
      return { exists: true, applied, known, pending: known.filter((n) => !applied.includes(n)), unknown: applied.filter((n) => !known.includes(n)) };
    } catch (err) {
      throw mapDriverError(err, 'reading the schema', this.ctx.sqliteContext(startedAt));
    }
  }

  async checkSchema(): Promise<void> {
    const status = await this.schemaStatus();
    const where = `${this.ctx.client === 'sqlite3' ? 'SQLite' : 'PostgreSQL'} store ${this.ctx.describe()}`;
    if (!status.exists || status.applied.length === 0) {
      throw new StoreError(
        'ERT_STORE_MISSING',
        `${where} ${status.exists ? 'holds no ert schema' : 'does not exist'}; check store.connection, or create it with \`ert db migrate\``,
        { connection: this.ctx.describe(), exists: status.exists },
      );
    }
    this.refuseNewer(status, where);
    if (status.pending.length > 0) {
      throw new StoreError(
        'ERT_STORE_SCHEMA_OUTDATED',
        `${where} is at schema version ${status.applied[status.applied.length - 1]}; this ert needs ${status.known[status.known.length - 1]} (pending: ${status.pending.join(', ')}); run \`ert db migrate\``,
        { connection: this.ctx.describe(), applied: status.applied, pending: status.pending },
      );
    }
  }

  private refuseNewer(status: SchemaStatus, where: string): void {
    if (status.unknown.length === 0) return;
    throw new StoreError(
      'ERT_STORE_SCHEMA_NEWER',
      `${where} was migrated by a newer ert: schema versions ${status.unknown.join(', ')} are unknown to this one (it knows up to ${status.known[status.known.length - 1]}); upgrade ert`,
      { connection: this.ctx.describe(), unknown: status.unknown, known: status.known },
    );
  }

  async migrate(): Promise<void> {
    const before = await this.schemaStatus();
    // knex would say "migration directory is corrupt": name the versions instead.
    this.refuseNewer(before, `${this.ctx.client === 'sqlite3' ? 'SQLite' : 'PostgreSQL'} store ${this.ctx.describe()}`);
    if (before.exists && before.pending.length === 0) return;
    const schema = this.ctx.options.client === 'pg' ? (this.ctx.options.schema ?? 'public') : undefined;
    // Several processes may migrate at once: knex's lock table makes one win; the others
    // see MigrationLocked (or a racing CREATE) and retry until nothing is pending.
    for (let attempt = 0; ; attempt++) {
      const startedAt = Date.now();
      try {
        if (schema !== undefined && schema !== 'public') await this.ctx.knex.raw('CREATE SCHEMA IF NOT EXISTS ??', [schema]);
        await ensureMigrationTables(this.ctx.knex, this.ctx.client, schema);
        await this.ctx.knex.migrate.latest({ migrationSource, tableName: MIGRATIONS_TABLE, schemaName: schema });
        break;
      } catch (err) {
        const context = this.ctx.sqliteContext(startedAt);
        // A lock held for the whole busy timeout is not a race: give up now, naming the holder.
        const lockedOut = context !== undefined && (err as { code?: string }).code === 'SQLITE_BUSY' && Date.now() - startedAt >= context.busyTimeoutMs * 0.9;
        if (attempt >= 100 || lockedOut || !isMigrationRace(err)) throw mapDriverError(err, 'migrate', context);
        await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 80));
      }
    }
    // Standard classes added to the contract after the first migration.
    await this.ctx.knex('resource_classes')
      .insert(STANDARD_RESOURCE_CLASSES.map((name) => ({ name })))
      .onConflict('name')
      .ignore();
  }

  async close(): Promise<void> {
    if (this.ctx.closed) return;
    this.ctx.closed = true;
    // Claims made before close() are sent a microtask after they were made: written, not refused.
    this.ctx.draining = true;
    try {
      await this.allocations.drain();
    } finally {
      this.ctx.draining = false;
    }
    await this.ctx.knex.destroy();
    await this.ctx.checkpointer?.close();
  }

  /* ------------------------------------------------ the contract, by concern (api.ts) */

  listResourceClasses = () => providers.listResourceClasses(this.ctx);
  ensureResourceClasses = (names: string[]) => providers.ensureResourceClasses(this.ctx, names);
  createResourceClass = (name: string) => providers.createResourceClass(this.ctx, name);
  renameResourceClass = (from: string, to: string) => providers.renameResourceClass(this.ctx, from, to);
  deleteResourceClass = (name: string) => providers.deleteResourceClass(this.ctx, name);
  listTraits = () => providers.listTraits(this.ctx);
  createTrait = (name: string) => providers.createTrait(this.ctx, name);
  deleteTrait = (name: string) => providers.deleteTrait(this.ctx, name);
  updateProvider = (uuid: string, changes: { name?: string; parentUuid?: string | null }) => providers.updateProvider(this.ctx, uuid, changes);
  createProvider = (provider: NewProvider) => providers.createProvider(this.ctx, provider);
  getProvider = (uuid: string) => providers.getProvider(this.ctx, uuid);
  getProviderByName = (name: string) => providers.getProviderByName(this.ctx, name);
  listProviders = (filter?: { rootUuid?: string }) => providers.listProviders(this.ctx, filter);
  deleteProvider = (uuid: string) => providers.deleteProvider(this.ctx, uuid);
  getInventories = (uuid: string, options?: { owner?: string }) => providers.getInventories(this.ctx, uuid, options);
  setInventories = (uuid: string, generation: number | undefined, inventories: Record<ResourceClass, Inventory>, options?: { allowOverCapacity?: boolean; owner?: string }) =>
    providers.setInventories(this.ctx, uuid, generation, inventories, options);
  getUsages = (uuid: string) => providers.getUsages(this.ctx, uuid);
  getTraits = (uuid: string, options?: { owner?: string }) => providers.getTraits(this.ctx, uuid, options);
  setTraits = (uuid: string, generation: number | undefined, traits: string[], options?: { owner?: string }) => providers.setTraits(this.ctx, uuid, generation, traits, options);
  getAggregates = (uuid: string, options?: { owner?: string }) => providers.getAggregates(this.ctx, uuid, options);
  setAggregates = (uuid: string, generation: number | undefined, aggregates: string[], options?: { owner?: string }) => providers.setAggregates(this.ctx, uuid, generation, aggregates, options);
  upsertAggregate = (aggregate: AggregateRecord) => providers.upsertAggregate(this.ctx, aggregate);
  listAggregates = () => providers.listAggregates(this.ctx);

  writeAllocations = (writes: AllocationWrite[]) => this.allocations.writeAllocations(writes);
  getAllocations = (consumerUuid: string) => this.allocations.getAllocations(consumerUuid);
  deleteAllocations = (consumerUuid: string) => this.allocations.deleteAllocations(consumerUuid);
  getConsumer = (consumerUuid: string) => this.allocations.getConsumer(consumerUuid);
  listConsumers = (filter?: { providerUuid?: string; projectId?: string; userId?: string }) => this.allocations.listConsumers(filter);
  reshape = (inventories: ReshapeInventory[], writes: AllocationWrite[]) => this.allocations.reshape(inventories, writes);

  upsertHost = (host: Parameters<Store['upsertHost']>[0]) => hosts.upsertHost(this.ctx, host);
  getHost = (name: string) => hosts.getHost(this.ctx, name);
  listHosts = () => hosts.listHosts(this.ctx);
  deleteHost = (name: string, options?: { force?: boolean }) => hosts.deleteHost(this.ctx, name, options);
  setHostStatus = (name: string, status: HostStatus, reason?: string) => hosts.setHostStatus(this.ctx, name, status, reason);
  markStaleHosts = (before: number) => hosts.markStaleHosts(this.ctx, before);
  writeStats = (host: string, plugin: string, schemaVersion: number, data: JsonValue) => hosts.writeStats(this.ctx, host, plugin, schemaVersion, data);
  readStats = (host: string) => hosts.readStats(this.ctx, host);
  deleteStats = (host: string, plugin: string) => hosts.deleteStats(this.ctx, host, plugin);
  importHosts = (list: HostImport[]) => hosts.importHosts(this.ctx, list);

  upsertInstance = (instance: InstanceRecord) => instances.upsertInstance(this.ctx, instance);
  getInstance = (uuid: string) => instances.getInstance(this.ctx, uuid);
  listInstances = (filter?: Parameters<Store['listInstances']>[0]) => instances.listInstances(this.ctx, filter);
  deleteInstance = (uuid: string) => instances.deleteInstance(this.ctx, uuid);

  hostGenerations = () => snapshots.hostGenerations(this.ctx);
  hostChanges = (since?: string) => snapshots.hostChanges(this.ctx, since);
  loadHosts = (names?: string[]) => snapshots.loadHosts(this.ctx, names);
  loadProviders = () => this.providerModel.load();
}
