import knexFactory, { type Knex } from 'knex';
import type { StoreOptions } from './api.js';
import { StoreConflictError, StoreError, isStoreError } from './errors.js';

/** How long a SQLite connection waits for another process's write lock before SQLITE_BUSY. */
export const SQLITE_BUSY_TIMEOUT_MS = 10_000;

/** Pragmas applied to every SQLite connection (WAL so readers never block the writer). */
const SQLITE_PRAGMAS = [
  'PRAGMA journal_mode = WAL',
  'PRAGMA foreign_keys = ON',
  `PRAGMA busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`,
  'PRAGMA synchronous = NORMAL',
];

interface SqliteConnection {
  exec(sql: string, callback: (err: Error | null) => void): void;
}

const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Builds the knex instance for the options; validates them first (ERT_STORE_INVALID). */
export function openKnex(options: StoreOptions): Knex {
  if (typeof options.connection !== 'string' || options.connection === '') {
    throw new StoreError('ERT_STORE_INVALID', `store.connection must be a non-empty string, got ${JSON.stringify(options.connection)}`, {
      key: 'connection',
    });
  }
  if (options.client === 'sqlite3') {
    return knexFactory({
      client: 'sqlite3',
      connection: { filename: options.connection },
      useNullAsDefault: true,
      // One connection per process: SQLite has one writer at a time anyway, and a single
      // connection keeps each transaction's statements together.
      pool: {
        min: 1,
        max: 1,
        afterCreate(conn: SqliteConnection, done: (err: Error | null, conn: SqliteConnection) => void) {
          conn.exec(SQLITE_PRAGMAS.join(';\n'), (err) => done(err, conn));
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
      connection: options.connection,
      searchPath: [schema],
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

/**
 * Maps a driver error to the store's typed errors: a lost race (SQLite busy, PostgreSQL
 * serialization failure or deadlock, a unique or foreign-key violation from a concurrent
 * writer) becomes a `StoreConflictError`; StoreErrors and anything else pass through.
 */
export function mapDriverError(err: unknown, what: string): unknown {
  if (isStoreError(err) || typeof err !== 'object' || err === null) return err;
  const { code, message = '' } = err as DriverError;
  const conflict = (reason: string) => new StoreConflictError('ERT_STORE_CONFLICT', `${what}: ${reason}`, { driverCode: code }, { cause: err });
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') return conflict('the database is locked by another writer');
  if (code !== undefined && PG_RETRIABLE.has(code)) return conflict('lost a race with a concurrent transaction');
  if (code === '23505' || (code === 'SQLITE_CONSTRAINT' && /UNIQUE|PRIMARY KEY/.test(message))) {
    return conflict(`a row already exists (${message.replace(/^.* - /, '')})`);
  }
  if (code === '23503' || (code === 'SQLITE_CONSTRAINT' && /FOREIGN KEY/.test(message))) {
    return conflict('a referenced row was removed concurrently or is still referenced');
  }
  return err;
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
