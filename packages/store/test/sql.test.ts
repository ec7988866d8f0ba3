import { describe, expect, it } from 'vitest';
import { IN_CHUNK, inChunks } from '../src/sql.js';

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
