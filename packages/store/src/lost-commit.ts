/**
 * A PostgreSQL transaction whose COMMIT was sent but whose answer was lost with the connection
 * (the server's backend killed, a network fault, a proxy restarted): the server may have
 * committed it or not. Applying it again would refuse what had committed (its consumers
 * exist) and telling the caller it failed would leave a claim its caller believes undone, so
 * the store asks the server, on another connection, what became of the transaction
 * (`txid_status`, PostgreSQL 10 and later), by the id the transaction read of itself
 * (`TRANSACTION_ID_SQL`: sent with the quick claim's reads, no round trip of its own; the
 * general claim transaction's first statement, `StoreContext.write`'s `resolveLostCommit`).
 * Other writes (providers, inventories, hosts) do not ask: their callers get
 * ERT_STORE_UNAVAILABLE and re-read, as Placement's clients re-read after a 409 or a 5xx.
 * SQLite needs none of this: its COMMIT runs in this process.
 */
import type { StoreContext } from './context.js';
import { unreachable } from './connection.js';
import { StoreError } from './errors.js';

/** A statement a transaction sends to learn its own id (`xid`, text: a 64-bit number). */
export const TRANSACTION_ID_SQL = 'SELECT txid_current()::text AS xid';

/** How long to wait for a server that is still ending the transaction ('in progress'). */
const LOST_COMMIT_WAIT_MS = 5000;
const LOST_COMMIT_POLL_MS = 20;

/**
 * Returns when transaction `xid`, whose last query (the one with its COMMIT) failed with `err`,
 * committed all the same. Otherwise throws: `err` itself when it is not a lost connection (a
 * statement failed, so the server rolled back) or when the outcome cannot be learnt (the
 * server unreachable, or still busy with the transaction after LOST_COMMIT_WAIT_MS: the caller
 * gets ERT_STORE_UNAVAILABLE, which says the write may have committed); ERT_STORE_UNAVAILABLE
 * with `committed: false` when the server rolled it back (nothing was written).
 */
export async function resolveLostCommit(ctx: StoreContext, xid: string, err: unknown, what: string): Promise<void> {
  if (typeof err !== 'object' || err === null || !unreachable(err)) throw err;
  const deadline = performance.now() + LOST_COMMIT_WAIT_MS;
  for (;;) {
    let status: string | null;
    try {
      const result = (await ctx.knex.raw('SELECT txid_status(?::bigint) AS status', [xid])) as { rows: Array<{ status: string | null }> };
      status = result.rows[0]?.status ?? null;
    } catch {
      throw err;
    }
    if (status === 'committed') return;
    if (status === 'aborted') {
      throw new StoreError(
        'ERT_STORE_UNAVAILABLE',
        `${what}: the connection to the database was lost before the commit was answered; the server rolled the transaction back (nothing was written)`,
        { committed: false },
        { cause: err },
      );
    }
    // 'in progress' (the server has not yet ended it), or null (an id it no longer knows).
    if (status !== 'in progress' || performance.now() > deadline) throw err;
    await new Promise((resolve) => setTimeout(resolve, LOST_COMMIT_POLL_MS));
  }
}
