import fc from 'fast-check';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { IN_CHUNK, inChunks, insertSql, sqlLiteral } from '../src/sql.js';

/**
 * The set-based helpers' bounds. A chunk of an IN list can return many more rows than it has
 * values (5,000 hosts' trees: 125,000 trait rows): every row comes back, in order.
 * Mutation seen red: `out.push(...(await query(part)))` (the spread before the fix) throws
 * RangeError (Maximum call stack size exceeded) here, as loadHosts of 10,000 named hosts did.
 */
describe('inChunks', () => {
  it('returns every row of every chunk, however many rows a chunk gives', async () => {
    const values = Array.from({ length: IN_CHUNK + 1 }, (_, i) => i);
    const parts: number[] = [];
    const rows = await inChunks(values, async (part) => {
      parts.push(part.length);
      return Array.from({ length: 400_000 }, (_, i) => part[0]! + i);
    });
    expect(parts).toEqual([IN_CHUNK, 1]);
    expect(rows).toHaveLength(800_000);
    expect(rows[0]).toBe(0);
    expect(rows[400_000]).toBe(IN_CHUNK);
  });
});

/**
 * `sqlLiteral`: a value written as text into an `exec` batch must read back exactly as the same
 * value bound as a parameter, whatever the string holds (quotes, backslashes, NUL, any Unicode,
 * SQL of its own). Mutations seen red: quotes not doubled (a syntax error, or a string ending
 * early and the rest run as SQL); NUL written as is (exec's C string ended there).
 */
describe('sqlLiteral', () => {
  it('reads back in SQLite as the same value bound as a parameter', async () => {
    const sqlite3 = createRequire(createRequire(import.meta.url).resolve('@ert/store'))('sqlite3') as typeof import('sqlite3');
    const db = new sqlite3.Database(':memory:');
    const get = (sql: string, params: unknown[]) =>
      new Promise<{ v: unknown; t: string }>((resolve, reject) => db.get(sql, params, (err: Error | null, row: { v: unknown; t: string }) => (err ? reject(err) : resolve(row))));
    try {
      const check = async (value: string | number | boolean | null) => {
        const literal = await get(`SELECT ${sqlLiteral(value)} AS v, typeof(${sqlLiteral(value)}) AS t`, []);
        const bound = await get('SELECT ? AS v, typeof(?) AS t', [value, value]);
        // Numbers: the same value; its storage class may differ (the driver binds integers past
        // 2^31 as reals), and the store's numeric columns convert either to their affinity.
        if (typeof value === 'number') expect(literal.v, String(value)).toBe(bound.v);
        else expect(literal, JSON.stringify(value)).toEqual(bound);
      };
      for (const value of ["it's", "'); DROP TABLE x; --", 'a\\b', 'nul\u0000inside', '\u0000', '', 'ünïcødé 雪 🚀', 'line\nbreak', 0, -3, 1.5, 0.1 + 0.2, 2 ** 53 - 1, 1e300, null, true, false]) {
        await check(value);
      }
      await fc.assert(fc.asyncProperty(fc.string({ unit: 'binary', maxLength: 40 }), async (s) => check(s)), { numRuns: 300 });
      expect(() => sqlLiteral(Number.NaN)).toThrow(/cannot be written as an SQL literal/);
      expect(() => sqlLiteral({})).toThrow(/cannot be written as an SQL literal/);
      // PostgreSQL text cannot hold NUL, and the simple query would end there: refused, named.
      expect(() => sqlLiteral('a\u0000b', 'pg')).toThrow(/a string holding NUL .* cannot be stored in PostgreSQL/);
      // Quotes doubled and, under E'', backslashes too (node-postgres puts a space before the E).
      expect(sqlLiteral("it's \\ here", 'pg').trim()).toBe("E'it''s \\\\ here'");
      // A value is never written as SQL: an object that looks like SQL text is refused.
      expect(() => insertSql('sqlite3', 't', ['a'], [[{ sql: 'DROP TABLE t' }]])).toThrow(/cannot be written as an SQL literal/);
    } finally {
      db.close();
    }
  });
});
