import { copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { normalizeInventory } from '@ert/plugin-api';
import { createStore } from '../src/index.js';
import { WRITER_AUTOCHECKPOINT_PAGES } from '../src/checkpointer.js';

/*
 * A SQLite store's WAL is checkpointed in the background while it writes (checkpointer.ts),
 * so that no claim's commit waits for the disk: shortly after writes stop, the database file
 * itself (without its WAL) holds every claim, although the writers' own checkpoint threshold
 * was never reached. Seen red with the checkpointer never started (`wrote` doing nothing):
 * the copied file held none of the claims.
 */

const sqlite3 = createRequire(import.meta.url)('sqlite3') as {
  OPEN_READONLY: number;
  Database: new (file: string, mode: number) => { all(sql: string, cb: (err: Error | null, rows: Array<{ n: number }>) => void): void; close(cb: () => void): void };
};

/** Rows of `table` in the database file alone (a copy without its -wal and -shm). */
async function rowsInFileAlone(file: string, table: string, dir: string): Promise<number> {
  const copy = path.join(dir, `copy-${Date.now()}.db`);
  copyFileSync(file, copy);
  const db = new sqlite3.Database(copy, sqlite3.OPEN_READONLY);
  try {
    return await new Promise<number>((resolve, reject) => db.all(`SELECT count(*) AS n FROM ${table}`, (err, rows) => (err ? reject(err) : resolve(rows[0]!.n))));
  } finally {
    await new Promise<void>((resolve) => db.close(resolve));
  }
}

describe('SQLite WAL checkpoints in the background', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ert-ckpt-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('copies the claims into the database file shortly after writes stop, below the writers own threshold', async () => {
    const file = path.join(dir, 'ert.db');
    const store = await createStore({ client: 'sqlite3', connection: file });
    try {
      await store.migrate();
      const inventories = { VCPU: normalizeInventory({ total: 10_000 }) };
      await store.importHosts(Array.from({ length: 20 }, (_, i) => ({ host: { name: `h${i}` }, providers: [{ uuid: `h${i}`, name: `h${i}`, inventories, traits: [], aggregates: [] }] })));
      const claims = 300;
      for (let i = 0; i < claims; i++) {
        await store.writeAllocations([{ consumer: { uuid: `c${i}`, projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: `h${i % 20}`, resourceClass: 'VCPU', amount: 1 }] }]);
      }
      // Far below the writers' own checkpoint: without the background one, the file would not have them.
      expect(statSync(`${file}-wal`).size).toBeLessThan(WRITER_AUTOCHECKPOINT_PAGES * 4096);
      let inFile = 0;
      for (let waited = 0; waited < 3_000 && inFile < claims; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        inFile = await rowsInFileAlone(file, 'consumers', dir);
      }
      expect(inFile).toBe(claims);
    } finally {
      await store.close();
    }
  });

  it('leaves a database held in memory alone', async () => {
    const store = await createStore({ client: 'sqlite3', connection: ':memory:' });
    try {
      await store.migrate();
      await store.createProvider({ uuid: 'm1', name: 'm1' });
      expect((await store.getProvider('m1'))?.name).toBe('m1');
    } finally {
      await store.close();
    }
  });
});
