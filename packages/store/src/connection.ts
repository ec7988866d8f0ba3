import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import knexFactory, { type Knex } from 'knex';
import type { StoreLogger, StoreOptions } from './api.js';
import { WRITER_AUTOCHECKPOINT_PAGES } from './checkpointer.js';
import { StoreConflictError, StoreError, isStoreError } from './errors.js';

/**
 * Default of how long a SQLite connection waits for another process's write lock before
 * SQLITE_BUSY (`StoreOptions.busyTimeoutMs`, config `store.busyTimeout`).
 */
export const SQLITE_BUSY_TIMEOUT_MS = 5_000;

/** Largest busy timeout accepted (and 32-bit timers can hold): 2^31-1 ms. */
export const MAX_BUSY_TIMEOUT_MS = 2_147_483_647;

/**
 * Pragmas applied to every SQLite connection (WAL so readers never block the writer). A
 * database in a file is checkpointed in the background (checkpointer.ts): its writers
 * checkpoint only past WRITER_AUTOCHECKPOINT_PAGES.
 */
function sqlitePragmas(busyTimeoutMs: number, file: string): string[] {
  const pragmas = ['PRAGMA journal_mode = WAL', 'PRAGMA foreign_keys = ON', `PRAGMA busy_timeout = ${busyTimeoutMs}`, 'PRAGMA synchronous = NORMAL'];
  if (!inMemory(file)) pragmas.push(`PRAGMA wal_autocheckpoint = ${WRITER_AUTOCHECKPOINT_PAGES}`);
  return pragmas;
}

/** True for a SQLite database held in memory (no file, no WAL to checkpoint). */
export function inMemory(file: string): boolean {
  return file === ':memory:' || file === '' || /[?&]mode=memory\b/.test(file);
}

/** The busy timeout in force for these options (validated: an integer 0..2^31-1). */
export function busyTimeoutOf(options: StoreOptions): number {
  const ms = options.busyTimeoutMs ?? SQLITE_BUSY_TIMEOUT_MS;
  if (!Number.isSafeInteger(ms) || ms < 0 || ms > MAX_BUSY_TIMEOUT_MS) {
    throw new StoreError('ERT_STORE_INVALID', `store.busyTimeout must be 0..${MAX_BUSY_TIMEOUT_MS} ms, got ${String(ms)}`, { key: 'busyTimeout', value: ms });
  }
  return ms;
}

/**
 * PostgreSQL bigint (int8, OID 20) as a JS number: the amount and total columns are bigint
 * (migration 0003), and every value the store writes is a safe integer (`inventoryProblem`
 * bounds totals and capacities), so no precision is lost. Per connection, not global.
 */
let pgTypes: { getTypeParser(oid: number, format?: string): unknown } | undefined;
const PG_TYPES = {
  getTypeParser(oid: number, format?: string): unknown {
    if (oid === 20 && format !== 'binary') return (value: string) => Number(value);
    // pg is required here, on a PostgreSQL store's first query, not when this module is
    // imported: a SQLite store (and every process that only imports @ert/store) never loads it.
    pgTypes ??= (createRequire(import.meta.url)('pg') as { types: NonNullable<typeof pgTypes> }).types;
    return pgTypes.getTypeParser(oid, format);
  },
};

type SqliteCallback = (this: unknown, err: Error | null, result?: unknown) => void;
interface SqliteStatement {
  all(params: unknown[], callback: SqliteCallback): unknown;
  run(params: unknown[], callback: SqliteCallback): unknown;
  reset(callback: () => void): void;
  finalize(callback: () => void): void;
}
/** The node-sqlite3 connection as the store uses it (knex's pooled `Database`). */
export interface SqliteConnection {
  exec(sql: string, callback: (err: Error | null) => void): void;
  all(sql: string, params: unknown[], callback: SqliteCallback): unknown;
  run(sql: string, params: unknown[], callback: SqliteCallback): unknown;
  prepare(sql: string, callback?: (err: Error | null) => void): SqliteStatement;
  close(callback: (err: Error | null) => void): void;
}

/** A node-postgres client as knex's pool lends it: `query` of several statements (no parameters) returns one result each. */
export interface PgConnection {
  query(sql: string): Promise<PgResult | PgResult[]>;
}

/** One statement's result from node-postgres. */
export interface PgResult {
  command: string;
  rows: Array<Record<string, unknown>>;
}

/** Runs `sql` (any number of statements, no parameters) in one trip to the driver's thread. */
export function sqliteExec(conn: SqliteConnection, sql: string): Promise<void> {
  return new Promise((resolve, reject) => conn.exec(sql, (err) => (err ? reject(err) : resolve())));
}

/** Runs one statement with its parameters (prepared once: `cacheStatements`) and returns its rows. */
export function sqliteAll<T>(conn: SqliteConnection, sql: string, params: unknown[]): Promise<T[]> {
  return new Promise((resolve, reject) => conn.all(sql, params, (err, rows) => (err ? reject(err) : resolve(rows as T[]))));
}

/** Most prepared statements kept per SQLite connection (least recently used go first). */
const STATEMENT_CACHE_SIZE = 500;

/** A kept statement; `waiting` holds the calls that came while it was being prepared. */
interface CachedStatement {
  stmt: SqliteStatement;
  waiting: Array<() => void> | undefined;
  error?: Error;
}

/**
 * Keeps the connection's prepared statements: knex runs each query through the driver's
 * `all`/`run`, which prepare the SQL, step it and finalize it every time, and preparing was
 * most of a short statement's cost (`npm run bench -- drivers`: a claim's statements 2x faster
 * prepared once). Same semantics: one statement per SQL text, re-bound by every call, and reset
 * right after it unless it ran to its end (node-sqlite3 queues the calls on a statement, so two
 * uses never interleave), re-prepared by SQLite itself after a schema change. A call waits for
 * its statement's preparation: a statement that fails to prepare answers the calls waiting for
 * it with the error (node-sqlite3 would never call them back) and is not kept. `close`
 * finalizes what is kept first (SQLite does not close a connection with statements left).
 */
function cacheStatements(conn: SqliteConnection): void {
  const statements = new Map<string, CachedStatement>();
  const call = (method: 'all' | 'run') => (sql: string, params: unknown[], callback: SqliteCallback) => {
    let entry = statements.get(sql);
    if (entry) {
      // Most recently used last: the Map's order is the eviction order.
      statements.delete(sql);
      statements.set(sql, entry);
    } else {
      const created: CachedStatement = { stmt: undefined as unknown as SqliteStatement, waiting: [] };
      created.stmt = conn.prepare(sql, (err) => {
        const waiting = created.waiting ?? [];
        created.waiting = undefined;
        if (err) {
          created.error = err;
          if (statements.get(sql) === created) statements.delete(sql);
        }
        for (const resume of waiting) resume();
      });
      statements.set(sql, (entry = created));
      if (statements.size > STATEMENT_CACHE_SIZE) {
        const [oldest, evicted] = statements.entries().next().value as [string, CachedStatement];
        statements.delete(oldest);
        // Queued behind the calls already made on it.
        if (evicted.error === undefined) evicted.stmt.finalize(() => undefined);
      }
    }
    const kept = entry;
    const run = () => {
      if (kept.error !== undefined) return callback.call(undefined, kept.error);
      if (method === 'all') {
        // `all` steps the statement until it stops returning rows. SQLITE_DONE ends it: it
        // holds no read snapshot or lock after (sqlite3_stmt_busy is false), so a successful
        // call is not reset (that cost a second trip to the driver's thread pool, a few % of a
        // lone claim: docs/benchmarks.md). An error may not end it (SQLITE_BUSY leaves it
        // active, and then no later statement of the connection commits): a failed call is
        // reset, before its caller hears (and may call again).
        kept.stmt.all(params, function (this: unknown, err, rows) {
          if (err) kept.stmt.reset(() => undefined);
          callback.call(this, err, rows);
        });
        return;
      }
      kept.stmt.run(params, callback);
      // `run` steps once: a statement that returns rows is left mid-way, holding its read
      // snapshot (this connection would then never see another's commits). Queued right behind
      // the call, as the driver queues its finalize.
      kept.stmt.reset(() => undefined);
    };
    if (kept.waiting) kept.waiting.push(run);
    else run();
  };
  const close = conn.close.bind(conn);
  conn.all = call('all');
  conn.run = call('run');
  conn.close = (callback) => {
    const open = [...statements.values()].filter((entry) => entry.error === undefined);
    statements.clear();
    let left = open.length;
    if (left === 0) return close(callback);
    for (const entry of open) entry.stmt.finalize(() => --left === 0 && close(callback));
  };
}

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** knex's `log` option sending its diagnostics to `logger` (knex's own console output otherwise). */
function knexLog(logger: StoreLogger | undefined): Pick<Knex.Config, 'log'> {
  if (logger === undefined) return {};
  const warn = (message: unknown) => logger.warn({ source: 'knex' }, String(message));
  return { log: { warn, error: warn, deprecate: (method: string, alternative: string) => warn(`${method} is deprecated: use ${alternative}`), debug: () => undefined } };
}

/** Builds the knex instance for the options; validates them first (ERT_STORE_INVALID). */
export function openKnex(options: StoreOptions): Knex {
  if (typeof options.connection !== 'string' || options.connection === '') {
    throw new StoreError('ERT_STORE_INVALID', `store.connection must be a non-empty string, got ${JSON.stringify(options.connection)}`, {
      key: 'connection',
    });
  }
  if (options.client === 'sqlite3') {
    const pragmas = sqlitePragmas(busyTimeoutOf(options), options.connection);
    return knexFactory({
      client: 'sqlite3',
      connection: { filename: options.connection },
      useNullAsDefault: true,
      ...knexLog(options.logger),
      // One connection per process: SQLite has one writer at a time anyway, and a single
      // connection keeps each transaction's statements together.
      pool: {
        min: 1,
        max: 1,
        afterCreate(conn: SqliteConnection, done: (err: Error | null, conn: SqliteConnection) => void) {
          cacheStatements(conn);
          conn.exec(pragmas.join(';\n'), (err) => done(err, conn));
        },
      },
    });
  }
  if (options.client === 'pg') {
    const schema = options.schema ?? 'public';
    if (!SCHEMA_NAME.test(schema)) {
      throw new StoreError('ERT_STORE_INVALID', `store.schema must be a plain identifier, got ${JSON.stringify(schema)}`, { key: 'schema', value: schema });
    }
    return knexFactory({
      client: 'pg',
      connection: { connectionString: options.connection, types: PG_TYPES } as Knex.PgConnectionConfig,
      searchPath: [schema],
      ...knexLog(options.logger),
      pool: { min: options.pool?.min ?? 0, max: options.pool?.max ?? 10 },
    });
  }
  throw new StoreError('ERT_STORE_INVALID', `store.client must be "sqlite3" or "pg", got ${JSON.stringify(options.client)}`, {
    key: 'client',
    value: options.client,
  });
}

interface DriverError {
  code?: string;
  message?: string;
}

const PG_RETRIABLE = new Set(['40001', '40P01', '55P03']);
/** Socket errors, PostgreSQL's connection-exception class (08) and shutdown codes (57P01-57P03). */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', '57P01', '57P02', '57P03']);

/** True when a driver error says the database server cannot be reached (refused, dropped, shutting down, no connection in time). */
function unreachable(err: object): boolean {
  const { code, message = '' } = err as DriverError;
  if (code !== undefined && (UNREACHABLE.has(code) || code.startsWith('08'))) return true;
  return (err as { name?: string }).name === 'KnexTimeoutError' || /Connection terminated|connect ECONNREFUSED/.test(message);
}

/**
 * Maps a driver error to the store's typed errors: a lost race (SQLite busy, PostgreSQL
 * serialization failure or deadlock, a unique or foreign-key violation from a concurrent
 * writer) becomes a `StoreConflictError`; StoreErrors and anything else pass through.
 */
export function mapDriverError(err: unknown, what: string, sqlite?: { file: string; busyTimeoutMs: number; waitedMs: number }): unknown {
  if (isStoreError(err) || typeof err !== 'object' || err === null) return err;
  const { code, message = '' } = err as DriverError;
  const conflict = (reason: string) => new StoreConflictError('ERT_STORE_CONFLICT', `${what}: ${reason}`, { driverCode: code }, { cause: err });
  if ((code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') && sqlite !== undefined && sqlite.waitedMs >= sqlite.busyTimeoutMs * 0.9) {
    // Waited the whole busy timeout: a lock held this long is not a race to retry elsewhere.
    return lockedError(sqlite.file, sqlite.waitedMs, what, err);
  }
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') return conflict('the database is locked by another writer');
  const sqliteProblem = sqlite === undefined ? undefined : sqliteFileError(err, sqlite.file, what);
  if (sqliteProblem) return sqliteProblem;
  if (code !== undefined && PG_RETRIABLE.has(code)) return conflict('lost a race with a concurrent transaction');
  if (sqlite === undefined && unreachable(err)) {
    return new StoreError('ERT_STORE_UNAVAILABLE', `${what}: the database cannot be reached (${message.replace(/^.* - /, '') || code})`, { driverCode: code }, { cause: err });
  }
  if (code === '23505' || (code === 'SQLITE_CONSTRAINT' && /UNIQUE|PRIMARY KEY/.test(message))) {
    return conflict(`a row already exists (${message.replace(/^.* - /, '')})`);
  }
  if (code === '23503' || (code === 'SQLITE_CONSTRAINT' && /FOREIGN KEY/.test(message))) {
    return conflict('a referenced row was removed concurrently or is still referenced');
  }
  // PostgreSQL's data exceptions (class 22): a value it cannot store as given (a NUL in text,
  // a string longer than its column, a number out of range), which the checks before let by.
  if (code !== undefined && /^22[0-9A-Z]{3}$/.test(code)) {
    return new StoreError('ERT_STORE_INVALID', `${what}: the database refused a value (${message.replace(/^.* - /, '')})`, { driverCode: code }, { cause: err });
  }
  return err;
}

/** Processes holding a POSIX lock on the SQLite file or its -wal/-shm (Linux /proc/locks), other than this one. */
export function sqliteLockHolders(file: string): Array<{ pid: number; command: string }> {
  const inodes = new Set<string>();
  for (const suffix of ['', '-wal', '-shm', '-journal']) {
    try {
      const st = statSync(file + suffix);
      inodes.add(String(st.ino));
    } catch {
      // absent: not locked through it
    }
  }
  let locks: string;
  try {
    locks = readFileSync('/proc/locks', 'utf8');
  } catch {
    return [];
  }
  const pids = new Set<number>();
  for (const line of locks.split('\n')) {
    // "1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 120 120" (a "->" marks a waiter: skipped)
    const m = /^\d+:\s+(?:POSIX|OFDLCK|FLOCK)\s+\S+\s+\S+\s+(-?\d+)\s+[0-9a-f]+:[0-9a-f]+:(\d+)\s/.exec(line);
    if (m && inodes.has(m[2]!) && Number(m[1]) > 0 && Number(m[1]) !== process.pid) pids.add(Number(m[1]));
  }
  return [...pids].sort((a, b) => a - b).map((pid) => {
    let command = '';
    try {
      command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
    } catch {
      // gone or not ours to read
    }
    return { pid, command };
  });
}

function lockedError(file: string, waitedMs: number, what: string, cause: unknown): StoreError {
  const holders = sqliteLockHolders(file);
  const by = holders.length > 0 ? `held by ${holders.map((h) => `pid ${h.pid}${h.command ? ` (${h.command.slice(0, 120)})` : ''}`).join(', ')}` : 'holder unknown';
  return new StoreError(
    'ERT_STORE_LOCKED',
    `${what}: the SQLite store ${file} is locked by another process (${by}); gave up after ${(waitedMs / 1000).toFixed(1)} s (store.busyTimeout)`,
    { file, waitedMs, holders },
    { cause },
  );
}

/** A corrupt file or a full disk, as one clear error naming the file; undefined for anything else. */
function sqliteFileError(err: object, file: string, what: string): StoreError | undefined {
  const { code, message = '' } = err as DriverError;
  if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT' || /file is not a database|malformed/.test(message)) {
    return new StoreError('ERT_STORE_CORRUPT', `${what}: the SQLite store ${file} is not a database or is damaged (${message.replace(/^.* - /, '')})`, { file }, { cause: err });
  }
  if (code === 'SQLITE_READONLY' || /attempt to write a readonly database/.test(message)) {
    return new StoreError(
      'ERT_STORE_READ_ONLY',
      `${what}: the SQLite store ${file} cannot be written by this process (permissions of the file, or of its directory, where SQLite keeps ${file}-wal and -shm)`,
      { file },
      { cause: err },
    );
  }
  if (code === 'SQLITE_FULL' || /database or disk is full/.test(message)) {
    return new StoreError('ERT_STORE_FULL', `${what}: the SQLite store ${file} cannot grow: the disk (or the database's page limit) is full`, { file }, { cause: err });
  }
  return undefined;
}

/**
 * Drops a PostgreSQL schema and everything in it (test and benchmark isolation). Idempotent:
 * a missing schema is not an error. Refuses `public` so that it cannot wipe a real store.
 */
export async function dropPostgresSchema(connection: string, schema: string): Promise<void> {
  if (!SCHEMA_NAME.test(schema) || schema === 'public') {
    throw new StoreError('ERT_STORE_INVALID', `dropPostgresSchema: refusing schema ${JSON.stringify(schema)}`, { key: 'schema', value: schema });
  }
  const knex = knexFactory({ client: 'pg', connection, pool: { min: 0, max: 1 } });
  try {
    await knex.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  } finally {
    await knex.destroy();
  }
}
