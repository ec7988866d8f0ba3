/**
 * What every part of the store shares: the connection, transactions (`write`, `read`) with
 * driver errors mapped, the resource class cache, and row lookups and generation bumps used
 * across concerns. One per store.
 */
import type { Knex } from 'knex';
import { TRAIT_SHARING_PROVIDER } from '@ert/plugin-api';
import type { ProviderRecord, StoreClient, StoreOptions } from './api.js';
import { WalCheckpointer } from './checkpointer.js';
import { busyTimeoutOf, inMemory, mapDriverError, openKnex, sqliteExec, type PgConnection, type SqliteConnection } from './connection.js';
import { StoreConflictError, StoreError } from './errors.js';
import { providerRecordFromRow, type HostRow, type ProviderRow } from './rows.js';
import { chunks, insertRows, type Db, type Trx } from './sql.js';
import { notFound } from './validate.js';
import { CommitInDoubt, TRANSACTION_ID_SQL, resolveLostCommit } from './lost-commit.js';

/** The connection `rawWrite` lends, by backend: every call on it is one round trip. */
export type RawConnection = { client: 'sqlite3'; conn: SqliteConnection } | { client: 'pg'; conn: PgConnection };

/** ROLLBACK on a raw connection (`StoreContext.rawWrite`'s). */
export function rollbackRaw(raw: RawConnection): Promise<unknown> {
  return raw.client === 'sqlite3' ? sqliteExec(raw.conn, 'ROLLBACK') : raw.conn.query('ROLLBACK');
}

export class StoreContext {
  readonly client: StoreClient;
  readonly knex: Knex;
  readonly options: StoreOptions;
  /** Resource class name -> id. Classes are never deleted, so positive entries never go stale. */
  readonly classIds = new Map<string, number>();
  readonly classNames = new Map<number, string>();
  /** Set by `close()`: every operation is refused after it (ERT_STORE_INVALID). */
  closed = false;
  /** Set by `close()` while it sends the claims made before it (`AllocationWriter.drain`): their transactions may still take connections. */
  draining = false;
  /** A SQLite file's WAL checkpoints, off the writers' path (checkpointer.ts); closed by the store's `close()`. */
  readonly checkpointer: WalCheckpointer | undefined;

  constructor(options: StoreOptions) {
    this.options = options;
    this.client = options.client;
    this.knex = openKnex(options);
    this.checkpointer = options.client === 'sqlite3' && !inMemory(options.connection) ? new WalCheckpointer(options.connection) : undefined;
    // An operation begun while close() is destroying the pool would wait in tarn (knex's pool)
    // for acquireTimeoutMillis, 60 s, keeping the process alive (Vincit/tarn.js#81): once
    // closed, every operation fails at once instead.
    const client = this.knex.client as { acquireConnection(): Promise<unknown> };
    const acquire = client.acquireConnection.bind(client);
    client.acquireConnection = () => (this.closed && !this.draining ? Promise.reject(new StoreError('ERT_STORE_INVALID', `the store ${this.describe()} is closed`)) : acquire());
  }

  /** Where the store is, for messages: the SQLite file, or the PostgreSQL URL (password masked) and schema. */
  describe(): string {
    if (this.client === 'sqlite3') return this.options.connection;
    return `${this.options.connection.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@')} (schema ${this.options.schema ?? 'public'})`;
  }

  sqliteContext(startedAt: number): { file: string; busyTimeoutMs: number; waitedMs: number } | undefined {
    if (this.client !== 'sqlite3') return undefined;
    return { file: this.options.connection, busyTimeoutMs: busyTimeoutOf(this.options), waitedMs: Date.now() - startedAt };
  }

  /**
   * Runs `fn` in a write transaction and maps driver errors. On SQLite the first statement
   * of a write transaction must write, so the transaction takes the database's write lock
   * up front (waiting via busy_timeout) instead of failing when a read upgrades to a write;
   * pass `firstStatementWrites` when `fn` already starts with a write. `resolveLostCommit`
   * (PostgreSQL): the transaction first reads its own id (one round trip more), so that a
   * COMMIT whose answer is lost with the connection is settled by asking the server
   * (`lost-commit.ts`): committed, `fn`'s value is returned as if the answer had come.
   */
  async write<T>(what: string, fn: (trx: Trx) => Promise<T>, opts: { firstStatementWrites?: boolean; resolveLostCommit?: boolean } = {}): Promise<T> {
    const startedAt = Date.now();
    const started = performance.now();
    // SQLite rolls back by itself on some errors (SQLITE_FULL); knex's ROLLBACK then fails
    // with "no transaction is active" and replaces the error: keep the first one.
    let first: unknown;
    let ok = false;
    let xid: string | undefined;
    // Set once `fn` has returned: an error after it is the COMMIT's.
    let done: { value: T } | undefined;
    try {
      const result = await this.knex.transaction(async (trx) => {
        try {
          if (this.client === 'sqlite3' && !opts.firstStatementWrites) await this.takeWriteLock(trx);
          if (this.client === 'pg' && opts.resolveLostCommit) xid = String(((await trx.raw(TRANSACTION_ID_SQL)) as { rows: Array<{ xid: string }> }).rows[0]!.xid);
          done = { value: await fn(trx) };
          return done.value;
        } catch (err) {
          first = err;
          throw err;
        }
      });
      ok = true;
      return result;
    } catch (err) {
      if (done === undefined || xid === undefined || first !== undefined) throw mapDriverError(first ?? err, what, this.sqliteContext(startedAt));
      // The COMMIT failed; knex has given the connection back, so asking cannot wait for it.
      try {
        await resolveLostCommit(this, xid, err, what);
      } catch (unresolved) {
        throw mapDriverError(unresolved, what);
      }
      ok = true;
      return done.value;
    } finally {
      this.observe('write', what.split(' ', 1)[0]!, started, ok);
    }
  }

  /**
   * A write transaction on the pool's raw connection, for a path that counts its round trips
   * (`quick-claim.ts`): `fn` sends BEGIN and COMMIT itself, each together with other
   * statements where the backend allows, and returns `{ value }` once committed, or undefined
   * to roll back (nothing to do on this path). Any error rolls back; driver errors are mapped
   * as `write` maps them; the transaction is observed as `write` observes it (not when rolled
   * back by `fn`'s choice: the caller's next transaction is the one to count). The connection
   * is held as a knex transaction holds it (on SQLite the pool's only one). A `CommitInDoubt`
   * from `fn` (PostgreSQL: its COMMIT's answer lost) is settled once the connection is given
   * back: the value it carries when the server says the transaction committed, else
   * ERT_STORE_UNAVAILABLE with the `committed` detail (`lost-commit.ts`).
   */
  async rawWrite<T>(what: string, fn: (raw: RawConnection) => Promise<{ value: T } | undefined>): Promise<T | undefined> {
    const startedAt = Date.now();
    const started = performance.now();
    let ok = false;
    let declined = false;
    // knex's own pool calls (public on its Client, undocumented): the same acquire a knex
    // transaction makes, so a closed store refuses here too (the constructor's wrapper).
    const client = this.knex.client as { acquireConnection(): Promise<unknown>; releaseConnection(conn: unknown): Promise<unknown> };
    let conn: unknown;
    try {
      conn = await client.acquireConnection();
    } catch (err) {
      this.observe('write', what, started, false);
      throw err;
    }
    const raw: RawConnection = this.client === 'sqlite3' ? { client: 'sqlite3', conn: conn as SqliteConnection } : { client: 'pg', conn: conn as PgConnection };
    let doubt: CommitInDoubt<T> | undefined;
    try {
      let done: { value: T } | undefined;
      try {
        done = await fn(raw);
      } catch (err) {
        // A batch stops at the statement that failed: roll back what ran before it. SQLite may
        // have rolled back already (SQLITE_FULL): that ROLLBACK's error is not the one to report.
        await rollbackRaw(raw).catch(() => undefined);
        throw err;
      }
      if (done === undefined) {
        await rollbackRaw(raw);
        declined = true;
        return undefined;
      }
      ok = true;
      return done.value;
    } catch (err) {
      if (!(err instanceof CommitInDoubt)) throw mapDriverError(err, what, this.sqliteContext(startedAt));
      doubt = err as CommitInDoubt<T>;
    } finally {
      await client.releaseConnection(conn);
      if (!declined && doubt === undefined) this.observe('write', what, started, ok);
    }
    // The COMMIT's answer was lost: asked once the connection is given back (with a pool of
    // one, asking while holding it would wait for it), and counted as the server says.
    try {
      await resolveLostCommit(this, doubt.xid, doubt.cause, what);
    } catch (err) {
      this.observe('write', what, started, false);
      throw mapDriverError(err, what);
    }
    this.observe('write', what, started, true);
    return doubt.ifCommitted();
  }

  /** Tell `options.onTransaction` (metrics) about a finished transaction, and the checkpointer about a write. */
  private observe(kind: 'read' | 'write', operation: string, started: number, ok: boolean): void {
    if (kind === 'write' && ok) this.checkpointer?.wrote();
    const observer = this.options.onTransaction;
    if (observer === undefined) return;
    try {
      observer({ kind, operation, seconds: (performance.now() - started) / 1000, ok });
    } catch {
      // An observer's failure is not the store's.
    }
  }

  /** A write that changes nothing but takes SQLite's write lock for the transaction. */
  async takeWriteLock(trx: Trx): Promise<void> {
    await trx.raw('UPDATE resource_classes SET name = name WHERE id = 0');
  }

  /**
   * Runs `fn` in one consistent read (a snapshot on both backends). On PostgreSQL a read whose
   * COMMIT fails after `fn` returned (the connection lost before the answer) still answers
   * what it read: the transaction is read-only, so its COMMIT changes nothing and the snapshot
   * it read from was consistent.
   */
  async read<T>(fn: (trx: Trx) => Promise<T>): Promise<T> {
    const config: Knex.TransactionConfig = this.client === 'pg' ? { isolationLevel: 'repeatable read', readOnly: true } : {};
    const startedAt = Date.now();
    const started = performance.now();
    let ok = false;
    let done: { value: T } | undefined;
    try {
      const result = await this.knex.transaction(async (trx) => {
        done = { value: await fn(trx) };
        return done.value;
      }, config);
      ok = true;
      return result;
    } catch (err) {
      if (done !== undefined && this.client === 'pg') {
        ok = true;
        return done.value;
      }
      throw mapDriverError(err, 'read', this.sqliteContext(startedAt));
    } finally {
      this.observe('read', 'read', started, ok);
    }
  }

  /** Ids of the named classes, creating missing (already validated) custom classes. */
  async classIdsFor(db: Db, names: Iterable<string>): Promise<Map<string, number>> {
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

  rememberClass(id: number, name: string): void {
    this.classIds.set(name, id);
    this.classNames.set(id, name);
  }

  /**
   * Makes `this.classNames` know every id in `ids` (ids read from the database; another
   * process may have created the class): reloads the table once on a miss.
   */
  async loadClassNames(db: Db, ids: Iterable<number>): Promise<void> {
    for (const id of ids) {
      if (!this.classNames.has(id)) {
        const rows: Array<{ id: number; name: string }> = await db('resource_classes').select('id', 'name');
        for (const row of rows) this.rememberClass(row.id, row.name);
        return;
      }
    }
  }

  /** Ids of the named traits or aggregates (by `column`), creating the missing ones. */
  async ensureNamed(db: Db, table: 'traits' | 'aggregates', column: 'name' | 'uuid', names: Iterable<string>): Promise<Map<string, number>> {
    const wanted = [...new Set(names)];
    const ids = new Map<string, number>();
    for (const part of chunks(wanted)) {
      await insertRows(db, table, [column], part.map((n) => [n]), { ignore: true });
      const rows: Array<{ id: number; key: string }> = await db(table).select('id', `${column} as key`).whereIn(column, part);
      for (const row of rows) ids.set(row.key, row.id);
    }
    return ids;
  }

  providerQuery(db: Db) {
    return db('providers as p')
      .leftJoin('providers as pp', 'pp.id', 'p.parent_id')
      .leftJoin('providers as rp', 'rp.id', 'p.root_id')
      .select('p.uuid', 'p.name', 'p.generation', 'p.owner', 'pp.uuid as parent_uuid', 'rp.uuid as root_uuid');
  }

  async providerRecord(db: Db, uuid: string): Promise<ProviderRecord> {
    const row = await this.providerQuery(db).where('p.uuid', uuid).first();
    if (!row) throw notFound('provider', uuid, { provider: uuid });
    return providerRecordFromRow(row);
  }

  /**
   * The provider's row; ERT_STORE_NOT_FOUND when there is none. `lock` (PostgreSQL; SQLite's
   * write transactions hold the whole file): the row is locked `share` or `update` until commit,
   * and read as the writer that held it last left it.
   */
  async providerRow(db: Db, uuid: string, lock?: 'share' | 'update'): Promise<ProviderRow> {
    const query = db('providers').where('uuid', uuid).first();
    if (lock !== undefined && this.client === 'pg') query[lock === 'share' ? 'forShare' : 'forUpdate']();
    const row: ProviderRow | undefined = await query;
    if (!row) throw notFound('provider', uuid, { provider: uuid });
    return row;
  }

  /**
   * Compare-and-swap of a provider's generation: the transaction's first statement (so on
   * SQLite it takes the write lock, on PostgreSQL it locks the row). A missing provider is
   * ERT_STORE_NOT_FOUND, a stale generation ERT_STORE_PROVIDER_GENERATION_CONFLICT.
   */
  async bumpProviderGeneration(trx: Trx, uuid: string, generation: number | undefined): Promise<ProviderRow> {
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
  async bumpHostsOf(trx: Trx, providerIds: number[]): Promise<void> {
    if (providerIds.length === 0) return;
    for (const part of chunks(providerIds, 1000)) {
      const seeing = (q: Knex.QueryBuilder) =>
        q.whereIn('root_provider_id', (sub) => sub.select('root_id').from('providers').whereIn('id', part)).orWhereIn('root_provider_id', (sub) => sharingMemberRoots(sub, part));
      // Locked first: an update locks them in the order it finds them.
      await this.lockHosts(trx, seeing);
      await trx('hosts').where(seeing).increment('generation', 1);
    }
  }

  /**
   * PostgreSQL: locks, in one statement, every host a claim may bump: those rooted at
   * `rootIds`, those of `hostIds`, and (`bumpHostsOf`) those that see the sharing providers
   * `sharingIds`. Two claims that bumped their own hosts first and then each other's (sharing
   * providers of one aggregate) deadlocked; locked up front in one order, the second waits.
   */
  async lockHostsToBump(trx: Trx, rootIds: number[], hostIds: number[], sharingIds: number[]): Promise<void> {
    if (rootIds.length + hostIds.length + sharingIds.length === 0) return;
    await this.lockHosts(trx, (q) => {
      if (rootIds.length > 0) q.orWhereIn('root_provider_id', rootIds);
      if (hostIds.length > 0) q.orWhereIn('id', hostIds);
      if (sharingIds.length > 0) q.orWhereIn('root_provider_id', (sub) => sharingMemberRoots(sub, sharingIds));
    });
  }

  /**
   * PostgreSQL: locks the hosts `where` selects, in id order, as every writer of several hosts
   * locks them (two writers taking them in other orders deadlock). NO KEY UPDATE, as a bump
   * itself: a row inserted that refers to a host (an instance record of a quick claim) takes
   * KEY SHARE on it, which FOR UPDATE would wait for (a deadlock with that claim, found by
   * review). A no-op on SQLite (the write lock holds the file).
   */
  async lockHosts(trx: Trx, where: (q: Knex.QueryBuilder) => void): Promise<void> {
    if (this.client === 'pg') await trx('hosts').select('id').where(where).orderBy('id').forNoKeyUpdate();
  }

  /** A select column `sharing`: whether provider `p` has the sharing trait. */
  sharingFlag(): Knex.Raw {
    return this.knex.raw(
      'exists (select 1 from provider_traits pt join traits t on t.id = pt.trait_id where pt.provider_id = p.id and t.name = ?) as sharing',
      [TRAIT_SHARING_PROVIDER],
    );
  }

  async hostRow(db: Db, name: string): Promise<HostRow> {
    const row: HostRow | undefined = await db('hosts').where('name', name).first();
    if (!row) throw notFound('host', name, { host: name });
    return row;
  }

  hostQuery(db: Db) {
    return db('hosts as h')
      .join('providers as p', 'p.id', 'h.root_provider_id')
      .select('h.id', 'h.name', 'h.root_provider_id', 'h.status', 'h.last_update', 'h.generation', 'h.machine', 'h.status_reason', 'p.uuid as root_uuid');
  }
}

/** The roots of every provider in an aggregate with one of the sharing providers `sharingIds` (for a subquery). */
function sharingMemberRoots(q: Knex.QueryBuilder, sharingIds: number[]): Knex.QueryBuilder {
  return q
    .select('member.root_id')
    .from('provider_traits as pt')
    .join('traits as t', 't.id', 'pt.trait_id')
    .join('provider_aggregates as shared', 'shared.provider_id', 'pt.provider_id')
    .join('provider_aggregates as pa', 'pa.aggregate_id', 'shared.aggregate_id')
    .join('providers as member', 'member.id', 'pa.provider_id')
    .whereIn('pt.provider_id', sharingIds)
    .where('t.name', TRAIT_SHARING_PROVIDER);
}
