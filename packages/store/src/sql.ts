/** Set-based SQL helpers shared by the store's parts: IN lists and multi-row inserts in bounded chunks, rows grouped by a key. */
import { createRequire } from 'node:module';
import type { Knex } from 'knex';
import { StoreError } from './errors.js';

/**
 * node-postgres's literal quoting (quotes doubled, backslashes doubled under E''): right whatever
 * standard_conforming_strings says. pg is required at the first use, not when the store is
 * imported: a SQLite store never loads it.
 */
let pgEscapeLiteral: ((value: string) => string) | undefined;

export type Trx = Knex.Transaction;
export type Db = Knex | Knex.Transaction;

/** Rows per IN list: well below SQLite's 32766 and PostgreSQL's 65535 bound parameters. */
export const IN_CHUNK = 5000;
/** Bound parameters per multi-row INSERT statement. */
const INSERT_PARAMS = 30_000;

export function chunks<T>(items: readonly T[], size = IN_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** `items` by `key`, each group in the items' order. */
export function groupBy<T, K>(items: readonly T[], key: (item: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

export async function inChunks<T, V>(values: V[], query: (part: V[]) => PromiseLike<T[]>): Promise<T[]> {
  const out: T[] = [];
  // Row by row: a chunk's rows can be many more than its values (5,000 hosts' trees: 125,000
  // trait rows), beyond what a spread into push takes as arguments (a RangeError).
  for (const part of chunks(values)) for (const row of await query(part)) out.push(row);
  return out;
}

/**
 * Multi-row INSERT ... VALUES (...), (...) in chunks of at most INSERT_PARAMS bound values
 * (knex compiles SQLite multi-row inserts to UNION ALL selects, limited to 500 rows).
 * `ignore` skips rows that conflict; `upsert` updates `columns` of the row with the same
 * `key`; `returning` returns those columns of the inserted rows (SQLite 3.35+, PostgreSQL).
 */
export async function insertRows(
  db: Db,
  table: string,
  columns: string[],
  rows: unknown[][],
  options: { ignore?: boolean; upsert?: { key: string; columns: string[] }; returning?: string[] } = {},
): Promise<Array<Record<string, unknown>>> {
  const out: Array<Record<string, unknown>> = [];
  if (rows.length === 0) return out;
  const perStatement = Math.max(1, Math.floor(INSERT_PARAMS / columns.length));
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  let suffix = '';
  const suffixBindings: string[] = [];
  if (options.ignore) suffix = ' ON CONFLICT DO NOTHING';
  if (options.upsert) {
    suffix = ` ON CONFLICT (??) DO UPDATE SET ${options.upsert.columns.map(() => '?? = excluded.??').join(', ')}`;
    suffixBindings.push(options.upsert.key, ...options.upsert.columns.flatMap((c) => [c, c]));
  }
  if (options.returning) {
    suffix += ` RETURNING ${options.returning.map(() => '??').join(', ')}`;
    suffixBindings.push(...options.returning);
  }
  for (const part of chunks(rows, perStatement)) {
    const result: unknown = await db.raw(`INSERT INTO ?? (${columns.map(() => '??').join(', ')}) VALUES ${part.map(() => tuple).join(', ')}${suffix}`, [
      table,
      ...columns,
      ...(part.flat() as Knex.RawBinding[]),
      ...suffixBindings,
    ]);
    if (options.returning) out.push(...(Array.isArray(result) ? result : (result as { rows: Array<Record<string, unknown>> }).rows));
  }
  return out;
}

export async function insertObjects<T extends object>(db: Db, table: string, rows: T[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]!);
  await insertRows(db, table, columns, rows.map((r) => columns.map((c) => (r as Record<string, unknown>)[c])));
}

/**
 * A value as an SQL literal, for statements sent as text in one batch (SQLite's `exec`,
 * PostgreSQL's simple query: no parameters there): NULL, a finite number, 1/0, or a string.
 * SQLite: quoted with its quotes doubled (SQLite has no backslash escapes), and a string
 * holding NUL, which would end exec's C string, as the CAST of its UTF-8 bytes in hex.
 * PostgreSQL: node-postgres's `escapeLiteral`; a string holding NUL is ERT_STORE_INVALID (text
 * cannot hold it, and the simple query's C string would end there). Anything else is
 * ERT_STORE_INVALID.
 */
export function sqlLiteral(value: unknown, client: 'sqlite3' | 'pg' = 'sqlite3'): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'string') {
    if (client === 'pg') {
      if (value.includes('\0')) throw new StoreError('ERT_STORE_INVALID', `a string holding NUL (\\u0000) cannot be stored in PostgreSQL: ${JSON.stringify(value)}`, { value });
      pgEscapeLiteral ??= (createRequire(import.meta.url)('pg') as { escapeLiteral(value: string): string }).escapeLiteral;
      return pgEscapeLiteral(value);
    }
    return value.includes('\0') ? `CAST(X'${Buffer.from(value, 'utf8').toString('hex')}' AS TEXT)` : `'${value.replaceAll("'", "''")}'`;
  }
  throw new StoreError('ERT_STORE_INVALID', `a value of type ${typeof value} (${String(value)}) cannot be written as an SQL literal`, { value: String(value) });
}

/** `VALUES (...), ...` with the rows as literals (`sqlLiteral`). */
export function valuesSql(client: 'sqlite3' | 'pg', rows: ReadonlyArray<readonly unknown[]>): string {
  return `VALUES ${rows.map((row) => `(${row.map((v) => sqlLiteral(v, client)).join(', ')})`).join(', ')}`;
}

/** `INSERT INTO table (columns) VALUES (...), ...` (`valuesSql`). */
export function insertSql(client: 'sqlite3' | 'pg', table: string, columns: readonly string[], rows: ReadonlyArray<readonly unknown[]>): string {
  return `INSERT INTO ${table} (${columns.join(', ')}) ${valuesSql(client, rows)}`;
}
