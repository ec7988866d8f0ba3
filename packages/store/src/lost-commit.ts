/**
 * A PostgreSQL transaction whose COMMIT was sent but whose answer never came (the connection
 * lost: the server's backend killed, a network fault, a proxy restarted; or a query timeout):
 * the server may have committed it or not. Applying it again would refuse what had committed
 * (its consumers exist) and telling the caller it failed would leave a claim its caller
 * believes undone, so the store asks the server, on another connection and once the broken one
 * is given back, what became of the transaction (`txid_status`, PostgreSQL 10 and later), by
 * the id the transaction read of itself (`TRANSACTION_ID_SQL`: sent with the quick claim's
 * reads, no round trip of its own; the general claim transaction's first statement,
 * `StoreContext.write`'s `resolveLostCommit`). Other writes (providers, inventories, hosts) do
 * not ask: their callers get ERT_STORE_UNAVAILABLE and re-read, as Placement's clients re-read
 * after a 409 or a 5xx. SQLite needs none of this: its COMMIT runs in this process.
 *
 * Limits: the answer is the server's that is asked, about the id it knows. After a failover to
 * an asynchronous standby, or a restore, an id may name another transaction or none (NULL:
 * unknown). With synchronous replication, PostgreSQL 15 reports a transaction committed once
 * its commit record is written, possibly before the standby confirmed it (before the COMMIT
 * would have been answered).
 */
import { messageOf } from '@ert/plugin-api';
import type { StoreContext } from './context.js';
import { StoreError } from './errors.js';

/** A statement a transaction sends to learn its own id (`xid`, text: a 64-bit number with its epoch). */
export const TRANSACTION_ID_SQL = 'SELECT txid_current()::text AS xid';

/** How long to wait for a server that is still ending the transaction ('in progress'). */
const LOST_COMMIT_WAIT_MS = 5000;
const LOST_COMMIT_POLL_MS = 20;

/**
 * True for a statement the server refused (an ErrorResponse of severity ERROR): the
 * transaction is rolled back, and a COMMIT sent after it in the same trip does not run. Any
 * other failure of a COMMIT's trip (the connection, a timeout, FATAL or PANIC) leaves the
 * outcome to be asked.
 */
function isStatementError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { severity?: unknown }).severity === 'ERROR' && typeof (err as { code?: unknown }).code === 'string';
}

/**
 * Thrown by a raw transaction's `fn` (`StoreContext.rawWrite`) whose COMMIT's trip failed, the
 * outcome perhaps in doubt: `rawWrite` gives the connection back (asking while holding it could
 * wait for the pool's last connection), asks (`resolveLostCommit(xid, cause)`), and returns
 * `ifCommitted()`, the value the transaction would have returned, when it committed.
 */
export class CommitInDoubt<T> extends Error {
  constructor(
    readonly xid: string,
    override readonly cause: unknown,
    readonly ifCommitted: () => T,
  ) {
    super('the outcome of a COMMIT is in doubt');
  }
}

/**
 * Returns when transaction `xid`, whose COMMIT's trip failed with `err`, committed all the
 * same. Otherwise throws: `err` itself when it is a statement error (rolled back); else
 * ERT_STORE_UNAVAILABLE with `committed: false` when the server says it rolled back (nothing
 * was written), or with `committed: 'unknown'` when that cannot be learnt (the server out of
 * reach, or still busy with the transaction after LOST_COMMIT_WAIT_MS, or not knowing the id).
 */
export async function resolveLostCommit(ctx: StoreContext, xid: string, err: unknown, what: string): Promise<void> {
  if (isStatementError(err)) throw err;
  const unknown = (reason: string) =>
    new StoreError('ERT_STORE_UNAVAILABLE', `${what}: the answer to the commit was lost (${messageOf(err)}) and ${reason}: the write may have committed; re-read it`, { committed: 'unknown' }, { cause: err });
  const deadline = performance.now() + LOST_COMMIT_WAIT_MS;
  for (;;) {
    let status: string | null;
    try {
      const result = (await ctx.knex.raw('SELECT txid_status(?::bigint) AS status', [xid])) as { rows: Array<{ status: string | null }> };
      status = result.rows[0]?.status ?? null;
    } catch (asking) {
      throw unknown(`the database could not be asked about it (${messageOf(asking)})`);
    }
    if (status === 'committed') return;
    if (status === 'aborted') {
      throw new StoreError('ERT_STORE_UNAVAILABLE', `${what}: the answer to the commit was lost (${messageOf(err)}); the server rolled the transaction back (nothing was written)`, { committed: false }, { cause: err });
    }
    if (status === null) throw unknown('the server no longer knows the transaction');
    if (performance.now() > deadline) throw unknown(`the transaction was still in progress after ${LOST_COMMIT_WAIT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, LOST_COMMIT_POLL_MS));
  }
}
