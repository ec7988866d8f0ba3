import { createRequire } from 'node:module';
import type { SqliteConnection } from './connection.js';

interface Sqlite3Module {
  OPEN_READWRITE: number;
  Database: new (file: string, mode: number, callback: (err: Error | null) => void) => SqliteConnection;
}

// Required when the first checkpoint runs, not when the store is imported: a process that
// imports @ert/store without opening a SQLite store (a PostgreSQL one, or none) never loads
// the native module.
let sqlite3: Sqlite3Module | undefined;

/** How often, while the store writes, the WAL is checkpointed in the background. */
export const CHECKPOINT_INTERVAL_MS = 100;

/**
 * The writers' own checkpoint threshold (`PRAGMA wal_autocheckpoint`, pages) when the
 * background checkpointer runs: a fallback that resets the WAL, finding its pages mostly
 * copied already. SQLite's default is 1,000.
 */
export const WRITER_AUTOCHECKPOINT_PAGES = 4_000;

/**
 * SQLite's WAL checkpoints, off the writers' path. SQLite copies the WAL's pages back into the
 * database file, and syncs both, in the commit that takes the WAL past `wal_autocheckpoint`
 * pages; with synchronous=NORMAL that commit is the only one that waits for the disk (about
 * one claim in fifty here, 3-6 ms each: the tail of a claim's latency). While the store
 * writes, this runs a PASSIVE checkpoint (which never waits for, nor blocks, readers and
 * writers) every CHECKPOINT_INTERVAL_MS on a connection of its own, on libuv's thread pool;
 * the writers checkpoint only past WRITER_AUTOCHECKPOINT_PAGES. It stops when writes stop,
 * and never creates the database file. Its errors (another process's checkpoint running,
 * the file gone) are ignored: the writers' own checkpoint still bounds the WAL.
 */
export class WalCheckpointer {
  private db: SqliteConnection | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private wroteSinceTick = false;
  private closed = false;
  /** Checkpoints run (for tests and metrics). */
  checkpoints = 0;

  constructor(
    private readonly file: string,
    private readonly intervalMs = CHECKPOINT_INTERVAL_MS,
  ) {}

  /** A write transaction committed: a checkpoint follows within the interval. */
  wrote(): void {
    if (this.closed) return;
    this.wroteSinceTick = true;
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  private tick(): void {
    if (this.running !== undefined) return;
    if (!this.wroteSinceTick) {
      // Nothing written since the last checkpoint: stop until the next write.
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    this.wroteSinceTick = false;
    this.running = new Promise<void>((resolve) => {
      const checkpoint = (db: SqliteConnection) =>
        db.run('PRAGMA wal_checkpoint(PASSIVE)', [], (err) => {
          if (err === null) this.checkpoints++;
          resolve();
        });
      if (this.db !== undefined) return checkpoint(this.db);
      sqlite3 ??= createRequire(import.meta.url)('sqlite3') as Sqlite3Module;
      const db = new sqlite3.Database(this.file, sqlite3.OPEN_READWRITE, (err) => {
        if (err !== null) return resolve();
        this.db = db;
        checkpoint(db);
      });
    }).finally(() => {
      this.running = undefined;
    });
  }

  /** Stop checkpointing and close the connection (after a checkpoint under way). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
    const db = this.db;
    this.db = undefined;
    if (db !== undefined) await new Promise<void>((resolve) => db.close(() => resolve()));
  }
}
