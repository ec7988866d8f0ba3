/**
 * A lone claim on SQLite in one round trip (issue 15): one prepared statement inserts the claim
 * into the view `claim_inbox`, whose trigger (migrations 0014 to 0016) checks and writes it in
 * that statement's transaction. A lone claim in the quick claim's three trips (BEGIN IMMEDIATE,
 * the read, the writes and COMMIT) took 0.5-0.7 ms at the median on the benchmarks' machine, in
 * this one 0.4-0.45 ms (docs/benchmarks.md).
 *
 * The trigger only takes claims that pass every check; anything else stops the statement
 * (nothing is written) and the caller runs the quick claim's full checks, which give the
 * refusal its exact error (or write what the trigger's stricter tests sent back). So this path
 * decides nothing on its own: `packages/store/test/quick-claim.test.ts` compares its outcomes
 * and rows with the general transaction's on random claims.
 */
import type { AllocationWrite } from './api.js';
import { sqliteAll, type SqliteConnection } from './connection.js';
import type { StoreContext } from './context.js';
import { holdRowValues } from './holds.js';
import { instanceRowValues } from './instances.js';

/**
 * Fires the claim: ?1 the payload (migration 0014 describes it; 0015 makes `claim_inbox` a view,
 * so no row is written). `seen` is filled before the trigger runs: the providers' roots and the
 * hosts' rows as the claim found them.
 */
const CLAIM = `INSERT INTO claim_inbox (payload, seen) SELECT ?1, json_array(
  (SELECT json_group_array(json_array(uuid, root_id)) FROM providers WHERE uuid IN (SELECT value->>0 FROM json_each(?1, '$.a'))),
  (SELECT json_group_array(json_array(h.id, h.name, h.generation, h.root_provider_id)) FROM hosts h
    WHERE h.root_provider_id IN (SELECT root_id FROM providers WHERE uuid IN (SELECT value->>0 FROM json_each(?1, '$.a')))
       OR h.name IN (SELECT value->>0 FROM json_each(?1, '$.i'))))
RETURNING seen`;

/** A lone surrogate as JSON.stringify escapes it (also matches an escaped backslash before such text: harmless). */
const LONE_SURROGATE = /\\u[dD][89a-fA-F]/;

type Seen = [providers: Array<[uuid: string, rootId: number]>, hosts: Array<[id: number, name: string, generation: number, rootId: number]>];

/** What a claim written in one statement found, before writing: its providers' roots, and the hosts rooted there or named by its record. */
export interface OneTripClaim {
  rootOf: Map<string, number>;
  hosts: Array<{ id: number; name: string; generation: number; rootId: number }>;
}

/**
 * Claims `write` (one call the quick claim accepted) in one statement. Returns what it found
 * (the caller tells the hosts), or undefined when the trigger stopped it (nothing was written:
 * check it in full). Throws what else the database throws (busy, I/O).
 */
export async function claimInOneTrip(ctx: StoreContext, conn: SqliteConnection, write: AllocationWrite): Promise<OneTripClaim | undefined> {
  const { consumer, allocations, instance } = write;
  if (allocations.length === 0) return undefined;
  const now = Date.now();
  const payload = JSON.stringify({
    c: [consumer.uuid, consumer.projectId, consumer.userId, consumer.consumerType ?? null],
    a: allocations.map((a) => [a.providerUuid, ctx.classIds.get(a.resourceClass)!, a.amount]),
    // The record's columns after host_id, which the trigger finds by the host's name.
    i: instance ? [[instance.host, ...instanceRowValues(instance, 0, now).filter((_, column) => column !== 1)]] : [],
    h: instance ? holdRowValues(instance, 0).map(([, ...hold]) => [instance.host, ...hold]) : [],
  });
  // A string with a lone surrogate (JSON.stringify escapes it as \udXXX; a pair is written as
  // is) would come out of the payload as other bytes than a bound parameter gives, and a unit
  // compared by the unique index as another unit: such claims take the full checks.
  if (LONE_SURROGATE.test(payload)) return undefined;
  let seen: string;
  try {
    const [row] = await sqliteAll<{ seen: string }>(conn, CLAIM, [payload]);
    seen = row!.seen;
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT') return undefined;
    throw err;
  }
  const [providers, hosts] = JSON.parse(seen) as Seen;
  return { rootOf: new Map(providers), hosts: hosts.map(([id, name, generation, rootId]) => ({ id, name, generation, rootId })) };
}
