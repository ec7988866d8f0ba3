import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { normalizeInventory, type Inventory } from '@ert/plugin-api';
import { createStore, dropPostgresSchema, type Store, type StoreOptions } from '@ert/store';

/** The backends the store suites run against: SQLite always, PostgreSQL when ERT_TEST_PG_URL is set. */
export const backends: Array<'sqlite3' | 'pg'> = process.env.ERT_TEST_PG_URL ? ['sqlite3', 'pg'] : ['sqlite3'];

/**
 * The backends with each claim path, for the suites that write allocations: each backend twice,
 * with its quick claims of new consumers (`quick-claim.ts`, the default) and with them off
 * (every claim through the general transaction), so both paths are held to the same tests.
 */
export const claimPaths = backends.flatMap((client): Array<{ label: string; client: 'sqlite3' | 'pg'; extra: Partial<StoreOptions> }> => [
  { label: client, client, extra: {} },
  { label: `${client}, general claims`, client, extra: { quickClaims: false } },
]);

/**
 * Fresh, isolated store options: a SQLite file in a new temp directory, or a new
 * PostgreSQL schema. `cleanup` removes the file or drops the schema.
 */
export function isolatedOptions(client: 'sqlite3' | 'pg', label: string): { options: StoreOptions; cleanup(): Promise<void> } {
  const unique = `${label}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`.replace(/[^a-z0-9_]/gi, '_').toLowerCase();
  if (client === 'sqlite3') {
    const dir = mkdtempSync(path.join(tmpdir(), 'ert-store-'));
    return {
      options: { client, connection: path.join(dir, 'ert.db') },
      async cleanup() {
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const url = process.env.ERT_TEST_PG_URL!;
  return {
    options: { client, connection: url, schema: `t_${unique}` },
    async cleanup() {
      await dropPostgresSchema(url, `t_${unique}`);
    },
  };
}

/** Opens and migrates an isolated store (`extra`: more options, e.g. `quickClaims: false`). */
export async function openStore(client: 'sqlite3' | 'pg', label: string, extra: Partial<StoreOptions> = {}): Promise<{ store: Store; options: StoreOptions; cleanup(): Promise<void> }> {
  const isolated = isolatedOptions(client, label);
  const options = { ...isolated.options, ...extra };
  const cleanup = isolated.cleanup;
  const store = await createStore(options);
  await store.migrate();
  return {
    store,
    options,
    async cleanup() {
      await store.close();
      await cleanup();
    },
  };
}

export function inv(total: number, extra: Partial<Inventory> = {}): Inventory {
  return normalizeInventory({ total, ...extra });
}

/** The error `promise` rejects with (a test failure when it resolves). */
export async function rejection(promise: Promise<unknown>): Promise<{ code?: string; message: string; details?: Record<string, unknown> }> {
  try {
    await promise;
  } catch (err) {
    return err as { code?: string; message: string; details?: Record<string, unknown> };
  }
  throw new Error('expected a rejection');
}

/**
 * A connection of the driver's own beside the store's, as another process would hold one:
 * `run` sends any SQL as text (several statements at once), in the store's schema on
 * PostgreSQL. For tests that hold a transaction open while the store works.
 */
export async function rawConnection(options: StoreOptions): Promise<{ run(sql: string): Promise<unknown>; close(): Promise<unknown> }> {
  const require = createRequire(createRequire(import.meta.url).resolve('@ert/store'));
  if (options.client === 'sqlite3') {
    const sqlite3 = require('sqlite3') as typeof import('sqlite3');
    const db = new sqlite3.Database(options.connection);
    return {
      run: (sql) => new Promise<void>((resolve, reject) => db.exec(sql, (err) => (err ? reject(err) : resolve()))),
      close: () => new Promise<void>((resolve) => db.close(() => resolve())),
    };
  }
  type PgClient = { connect(): Promise<void>; query(sql: string): Promise<unknown>; end(): Promise<void> };
  const pg = require('pg') as { Client: new (config: { connectionString: string }) => PgClient };
  const db = new pg.Client({ connectionString: options.connection });
  await db.connect();
  await db.query(`SET search_path TO ${options.schema ?? 'public'}`);
  return { run: (sql) => db.query(sql), close: () => db.end() };
}

/**
 * PostgreSQL: a connection that holds row locks (`holder`, whose backend pid is `pid`) and a
 * probe that asks the server who waits for them, for tests that line writers up behind a lock
 * instead of sleeping. Both closed by `close`.
 */
export async function lockHolder(options: StoreOptions): Promise<{
  holder: Awaited<ReturnType<typeof rawConnection>>;
  /** Waits until `count` backends wait, directly or behind another waiter, for the holder's locks (10 s at most). */
  untilWaiting(count: number): Promise<void>;
  close(): Promise<void>;
}> {
  const holder = await rawConnection(options);
  const probe = await rawConnection(options);
  const { rows } = (await holder.run('SELECT pg_backend_pid() AS pid')) as { rows: Array<{ pid: number }> };
  const pid = rows[0]!.pid;
  const waitingBehind = async (): Promise<number> => {
    const { rows: backends } = (await probe.run('SELECT pid, pg_blocking_pids(pid) AS blockers FROM pg_stat_activity WHERE datname = current_database()')) as {
      rows: Array<{ pid: number; blockers: number[] }>;
    };
    const behind = new Set([pid]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const row of backends) {
        if (behind.has(row.pid) || !row.blockers.some((blocker) => behind.has(blocker))) continue;
        behind.add(row.pid);
        grew = true;
      }
    }
    return behind.size - 1;
  };
  return {
    holder,
    async untilWaiting(count) {
      const deadline = Date.now() + 10_000;
      while ((await waitingBehind()) < count) {
        if (Date.now() > deadline) throw new Error(`fewer than ${count} backend(s) waiting behind ${pid} after 10 s`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    async close() {
      await holder.close();
      await probe.close();
    },
  };
}

/**
 * Makes `calls` so that the store sends the first alone and combines the rest into one batch
 * behind it: the store flushes what is pending once the microtasks queued before have run
 * (allocations.ts `scheduleFlush`), so the first call is sent during one tick, and the others,
 * made after it, queue while it is in flight. Each call's promise, in order.
 */
export async function firstAloneRestCombined<T>(calls: ReadonlyArray<() => Promise<T>>): Promise<Array<Promise<T>>> {
  const [first, ...rest] = calls;
  const started = [first!()];
  await Promise.resolve();
  return [...started, ...rest.map((call) => call())];
}
