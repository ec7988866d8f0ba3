/**
 * The quick claim (issue 15): claims of new consumers in three round trips on SQLite (one for a
 * lone claim, `sqlite-claim.ts`) and two on PostgreSQL, however many calls write-combining put in
 * the batch, where the general transaction (`allocations.ts`) sends about fifteen statements
 * one after the other. Each statement is a round trip: to node-sqlite3's thread pool and back,
 * or to the PostgreSQL server; that, more than the databases' own work, was a claim's cost
 * (`npm run bench -- drivers`).
 *
 * - SQLite: a lone claim first tries one statement whose trigger checks and writes it
 *   (`sqlite-claim.ts`); when it declines, and for batches: BEGIN IMMEDIATE (the write lock);
 *   one statement that reads everything the checks need (its text fixed, so the connection
 *   keeps it prepared); the writes and the COMMIT in one `exec` batch.
 * - PostgreSQL: BEGIN, the providers' rows locked (ordered by id, as the general transaction
 *   locks them; then, when a record names holds, every record's host, ordered by id, as the
 *   general path's holdLedger locks them), and the reads, in one simple query; the writes, the
 *   hosts' bump returning their generations, and the COMMIT in another. In READ COMMITTED each
 *   statement reads what was committed before it began, so the reads that follow the locks see
 *   every claim on those providers that committed before; a row the reads see that a lock
 *   statement did not take (committed while it waited) hands the batch over. Sequential scans
 *   are off for the transaction: its statements find rows by key, and a table that grew since
 *   its statistics were taken was planned as a scan (docs/benchmarks.md).
 *
 * Same checks, same rows, same results as the general path (`packages/store/test/
 * quick-claim.test.ts` compares the two on random claims, alone and combined, on both
 * backends): each call, in arrival order, against the state the calls before it left: the
 * consumer generation, every amount against the inventory and the usage, the instance's host,
 * its exclusive holds against the host's others (`HoldLedger`). Then, for the calls that
 * passed, the consumers, their allocations, the instance records and their holds written, and
 * the generations of the providers and of the hosts whose trees they are in (and of the
 * instances' hosts) bumped once. Values go into the batches as literals (`sqlLiteral`).
 *
 * Only what this file can do alone takes this path (`quickClaimable`, then the read): calls of
 * one write each, of a consumer that does not exist yet (each named once in the batch), with
 * allocations, resource classes this process already knows, providers that share nothing, and
 * an instance record (if any) that does not exist yet. Anything else (a consumer that exists, a
 * sharing provider, a record to replace) sends the whole batch, rolled back before anything was
 * written, through the general transaction.
 */
import { TRAIT_SHARING_PROVIDER, type Inventory } from '@ert/plugin-api';
import type { CallOutcome } from './allocations.js';
import type { AllocationWrite } from './api.js';
import { sqliteAll, sqliteExec, type PgResult } from './connection.js';
import { rollbackRaw, type RawConnection, type StoreContext } from './context.js';
import { HOLDS_TABLE, HOLD_COLUMNS, HoldLedger, anyHolds, holdRowValues, holdsOf, type HoldRow } from './holds.js';
import { INSTANCE_COLUMNS, instanceRowValues } from './instances.js';
import { inventoryFromRow, type InventoryRow } from './rows.js';
import { groupBy, insertSql, sqlLiteral, valuesSql } from './sql.js';
import { isStoreError } from './errors.js';
import { checkConsumerGeneration, checkFits, notFound } from './validate.js';
import { claimInOneTrip } from './sqlite-claim.js';
import { CommitInDoubt, TRANSACTION_ID_SQL } from './lost-commit.js';

const CONSUMER_COLUMNS = ['uuid', 'project_id', 'user_id', 'generation', 'consumer_type'];
const ALLOCATION_COLUMNS = ['provider_id', 'consumer_id', 'resource_class_id', 'used'];

/** What a batch of claims is checked against, read under the lock. */
interface ClaimState {
  /** The generations of the batch's consumers that exist, by uuid. */
  consumers: Map<string, number>;
  providers: Array<{ id: number; uuid: string; name: string; rootId: number; sharing: boolean }>;
  /** The providers' inventories with their usage, by `<provider id>:<class id>`; the usage moves as the batch's calls are checked. */
  inventories: Map<string, { inv: Inventory; used: number }>;
  /** The hosts rooted on the providers' trees, and the records' hosts. */
  hosts: Array<{ id: number; name: string; generation: number; rootId: number }>;
  /** Whether one of the batch's instance records exists already. */
  instanceExists: boolean;
  /** The holds on the hosts of the records that name some. */
  holds: HoldRow[];
  /**
   * PostgreSQL: a provider, or a host of a record, that the reads saw and the lock did not
   * take (committed between the statements, each with its own snapshot): the batch goes to the
   * general transaction.
   */
  unlocked: boolean;
  /** PostgreSQL: the transaction's id, to ask the server about a COMMIT whose answer was lost (`lost-commit.ts`). */
  xid?: string;
}

/** What the batch reads: the consumers, the providers and the instances (uuids), the records' hosts and those of records naming holds (names). */
interface ClaimKeys {
  consumers: string[];
  providers: string[];
  hosts: string[];
  instances: string[];
  holdHosts: string[];
}

/**
 * SQLite's read, one statement: ?1 the consumers, ?2 the sharing trait, ?3 the providers, ?4
 * the records' hosts, ?5 the instances, ?6 the hosts whose holds to read. `one`: each list is
 * one value or null (a lone claim: its own text, kept prepared, as fast as the statement before
 * batches); else each is a JSON array.
 */
function sqliteRead(one: boolean): string {
  const any = (n: number) => (one ? `= ?${n}` : `IN (SELECT value FROM json_each(?${n}))`);
  return `SELECT
  (SELECT json_group_array(json_array(uuid, generation)) FROM consumers WHERE uuid ${any(1)}) AS consumers,
  (SELECT json_group_array(json_array(p.id, p.uuid, p.name, p.root_id,
      EXISTS (SELECT 1 FROM provider_traits pt JOIN traits t ON t.id = pt.trait_id WHERE pt.provider_id = p.id AND t.name = ?2)))
    FROM providers p WHERE p.uuid IN (SELECT value FROM json_each(?3))) AS providers,
  (SELECT json_group_array(json_array(i.provider_id, i.resource_class_id, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
      -- as text: json renders a real with 15 digits, CAST with all it takes to read back the same double
      CAST(i.allocation_ratio AS TEXT),
      (SELECT sum(a.used) FROM allocations a WHERE a.provider_id = i.provider_id AND a.resource_class_id = i.resource_class_id)))
    FROM inventories i WHERE i.provider_id IN (SELECT p.id FROM providers p WHERE p.uuid IN (SELECT value FROM json_each(?3)))) AS inventories,
  (SELECT json_group_array(json_array(h.id, h.name, h.generation, h.root_provider_id))
    FROM hosts h WHERE h.root_provider_id IN (SELECT p.root_id FROM providers p WHERE p.uuid IN (SELECT value FROM json_each(?3)))
      OR h.name ${any(4)}) AS hosts,
  EXISTS (SELECT 1 FROM instances WHERE uuid ${any(5)}) AS instance_exists,
  (SELECT json_group_array(json_array(host_id, instance_uuid, hold, amount, capacity))
    FROM ${HOLDS_TABLE} WHERE host_id IN (SELECT id FROM hosts WHERE name ${any(6)})) AS holds`;
}
const SQLITE_READ_ONE = sqliteRead(true);
const SQLITE_READ_MANY = sqliteRead(false);

interface SqliteReadRow {
  consumers: string;
  providers: string;
  inventories: string;
  hosts: string;
  instance_exists: number;
  holds: string;
}

async function readSqlite(raw: Extract<RawConnection, { client: 'sqlite3' }>, keys: ClaimKeys): Promise<ClaimState> {
  await sqliteExec(raw.conn, 'BEGIN IMMEDIATE');
  const one = keys.consumers.length === 1;
  const list = (values: string[]) => (one ? (values[0] ?? null) : JSON.stringify(values));
  const [row] = await sqliteAll<SqliteReadRow>(raw.conn, one ? SQLITE_READ_ONE : SQLITE_READ_MANY, [
    list(keys.consumers),
    TRAIT_SHARING_PROVIDER,
    JSON.stringify(keys.providers),
    list(keys.hosts),
    list(keys.instances),
    list(keys.holdHosts),
  ]);
  const read = row!;
  type Tuple = Array<number | string | null>;
  const tuples = (json: string) => JSON.parse(json) as Tuple[];
  return {
    consumers: new Map(tuples(read.consumers).map(([uuid, generation]) => [String(uuid), Number(generation)])),
    providers: tuples(read.providers).map(([id, uuid, name, rootId, sharing]) => ({ id: Number(id), uuid: String(uuid), name: String(name), rootId: Number(rootId), sharing: sharing === 1 })),
    inventories: inventoriesOf(
      tuples(read.inventories).map(([provider_id, resource_class_id, total, reserved, min_unit, max_unit, step_size, allocation_ratio, used]) => ({
        provider_id: Number(provider_id),
        resource_class_id: Number(resource_class_id),
        total: Number(total),
        reserved: Number(reserved),
        min_unit: Number(min_unit),
        max_unit: Number(max_unit),
        step_size: Number(step_size),
        allocation_ratio: Number(allocation_ratio),
        used,
      })),
    ),
    hosts: tuples(read.hosts).map(([id, name, generation, rootId]) => ({ id: Number(id), name: String(name), generation: Number(generation), rootId: Number(rootId) })),
    instanceExists: read.instance_exists === 1,
    holds: tuples(read.holds).map(([host_id, instance_uuid, hold, amount, capacity]) => ({ host_id: Number(host_id), instance_uuid: String(instance_uuid), hold: String(hold), amount: amount as number | null, capacity: capacity as number | null })),
    unlocked: false,
  };
}

async function readPg(raw: Extract<RawConnection, { client: 'pg' }>, keys: ClaimKeys): Promise<ClaimState> {
  // An empty list is `IN (NULL)`: true for no row.
  const list = (values: string[]) => (values.length > 0 ? values.map((v) => sqlLiteral(v, 'pg')).join(', ') : 'NULL');
  const uuids = list(keys.providers);
  // When a record names holds, every record's host is locked here, in id order, as the general
  // path's holdLedger locks them: pools are checked by sum, which no index enforces, so the
  // hosts' rows serialise them; and no host row is first locked later in the write trip, out of
  // order (two batches, or a batch and a general transaction, would deadlock).
  const lockedHosts = keys.holdHosts.length > 0 ? keys.hosts : [];
  const statements = [
    'BEGIN',
    // Every statement of a claim finds its rows by key. A table that grew since its statistics
    // were taken (a fleet just loaded, consumers claimed by the thousand) would be scanned.
    'SET LOCAL enable_seqscan = off',
    TRANSACTION_ID_SQL,
    `SELECT id FROM providers WHERE uuid IN (${uuids}) ORDER BY id FOR UPDATE`,
    ...(lockedHosts.length > 0 ? [`SELECT id FROM hosts WHERE name IN (${list(lockedHosts)}) ORDER BY id FOR UPDATE`] : []),
    `SELECT uuid, generation FROM consumers WHERE uuid IN (${list(keys.consumers)})`,
    `SELECT p.id, p.uuid, p.name, p.root_id, EXISTS (SELECT 1 FROM provider_traits pt JOIN traits t ON t.id = pt.trait_id WHERE pt.provider_id = p.id AND t.name = ${sqlLiteral(TRAIT_SHARING_PROVIDER, 'pg')}) AS sharing FROM providers p WHERE p.uuid IN (${uuids})`,
    `SELECT i.provider_id, i.resource_class_id, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio,
       (SELECT sum(a.used) FROM allocations a WHERE a.provider_id = i.provider_id AND a.resource_class_id = i.resource_class_id) AS used
     FROM inventories i WHERE i.provider_id IN (SELECT id FROM providers WHERE uuid IN (${uuids}))`,
    // UNION, not OR: each side by its own index.
    `SELECT id, name, generation, root_provider_id FROM hosts WHERE root_provider_id IN (SELECT root_id FROM providers WHERE uuid IN (${uuids}))
     UNION SELECT id, name, generation, root_provider_id FROM hosts WHERE name IN (${list(keys.hosts)})`,
    `SELECT 1 FROM instances WHERE uuid IN (${list(keys.instances)}) LIMIT 1`,
    ...(keys.holdHosts.length > 0 ? [`SELECT host_id, instance_uuid, hold, amount, capacity FROM ${HOLDS_TABLE} WHERE host_id IN (SELECT id FROM hosts WHERE name IN (${list(keys.holdHosts)}))`] : []),
  ];
  const results = (await raw.conn.query(statements.join(';\n'))) as PgResult[];
  // The reads are the last results, in the order above.
  const [consumers, providers, inventories, hosts, instance, holds] = results.slice(lockedHosts.length > 0 ? 5 : 4);
  type Row = Record<string, unknown>;
  const n = (row: Row, key: string) => Number(row[key]);
  const locked = new Set(results[3]!.rows.map((r) => n(r, 'id')));
  const hostsLocked = new Set(lockedHosts.length > 0 ? results[4]!.rows.map((r) => n(r, 'id')) : []);
  const lockedNames = new Set(lockedHosts);
  return {
    unlocked:
      providers!.rows.some((r) => !locked.has(n(r, 'id'))) ||
      // A host committed while the lock statement waited: seen by the reads, its holds too, but not locked.
      hosts!.rows.some((r) => lockedNames.has(String(r['name'])) && !hostsLocked.has(n(r, 'id'))),
    consumers: new Map(consumers!.rows.map((r) => [String(r['uuid']), n(r, 'generation')])),
    providers: providers!.rows.map((r) => ({ id: n(r, 'id'), uuid: String(r['uuid']), name: String(r['name']), rootId: n(r, 'root_id'), sharing: r['sharing'] === true })),
    inventories: inventoriesOf(inventories!.rows as unknown as Array<InventoryRow & { used: unknown }>),
    hosts: hosts!.rows.map((r) => ({ id: n(r, 'id'), name: String(r['name']), generation: n(r, 'generation'), rootId: n(r, 'root_provider_id') })),
    instanceExists: instance!.rows.length > 0,
    holds: (holds?.rows ?? []) as unknown as HoldRow[],
    xid: String(results[2]!.rows[0]!['xid']),
  };
}

/** Inventory rows with their usage (a sum: null when nothing is allocated), by `<provider id>:<class id>`, as `checkFits` takes them. */
function inventoriesOf(rows: Array<InventoryRow & { used: unknown }>): ClaimState['inventories'] {
  return new Map(rows.map((r) => [`${r.provider_id}:${r.resource_class_id}`, { inv: inventoryFromRow(r), used: Number(r.used ?? 0) }]));
}

/**
 * The hosts a successful claim tells of, in the general path's order: those whose trees it
 * claimed on (`hostsOf` a provider's uuid: every host rooted on its tree), then its record's.
 */
function hostsTold<H>(write: AllocationWrite, hostsOf: (providerUuid: string) => readonly H[] | undefined, recordHost: H | undefined): H[] {
  const hosts = new Set<H>();
  for (const alloc of write.allocations) for (const host of hostsOf(alloc.providerUuid) ?? []) hosts.add(host);
  if (recordHost !== undefined) hosts.add(recordHost);
  return [...hosts];
}

/**
 * Whether the calls are for this path as far as they alone tell (no I/O): see the file's
 * comment. Each call one write of a new consumer with allocations; no consumer or instance
 * named twice in the batch (the general transaction orders such calls).
 */
export function quickClaimable(ctx: StoreContext, calls: AllocationWrite[][]): boolean {
  if (ctx.options.quickClaims === false) return false;
  const consumers = new Set<string>();
  const instances = new Set<string>();
  for (const call of calls) {
    if (call.length !== 1) return false;
    const write = call[0]!;
    const generation = write.consumer.generation;
    if (write.allocations.length === 0 || write.removeInstance || (generation !== null && generation !== undefined)) return false;
    if (!write.allocations.every((a) => ctx.classIds.has(a.resourceClass))) return false;
    if (consumers.has(write.consumer.uuid)) return false;
    consumers.add(write.consumer.uuid);
    if (write.instance) {
      if (instances.has(write.instance.uuid)) return false;
      instances.add(write.instance.uuid);
    }
  }
  return true;
}

/**
 * Claims the calls `quickClaimable` accepted, each checked against the state the calls before it
 * left, as the general transaction checks a combined batch; returns each call's outcome (its
 * error, or the hosts it changed). Undefined when the state read puts the batch out of this
 * path's reach (nothing was written: send it through the general transaction). Throws only
 * what the database throws (the batch as a whole failed), or, on PostgreSQL, when the COMMIT's
 * answer was lost and the server does not say it committed, ERT_STORE_UNAVAILABLE with its
 * `committed` detail (`lost-commit.ts`; a commit the server confirms is answered as usual).
 */
export function quickClaims(ctx: StoreContext, calls: AllocationWrite[][]): Promise<CallOutcome[] | undefined> {
  const writes = calls.map((call) => call[0]!);
  return ctx.rawWrite('writeAllocations', async (raw) => {
    if (raw.client === 'sqlite3' && writes.length === 1) {
      // A lone claim: one statement (sqlite-claim.ts); the checks below when it declines.
      const write = writes[0]!;
      const seen = await claimInOneTrip(ctx, raw.conn, write);
      if (seen !== undefined) {
        const byRoot = groupBy([...seen.hosts].sort((a, b) => a.id - b.id), (h) => h.rootId);
        const recordHost = write.instance && seen.hosts.find((h) => h.name === write.instance!.host);
        // The statement held the write lock: each host's generation is the one seen plus one.
        const hosts = hostsTold(write, (uuid) => byRoot.get(seen.rootOf.get(uuid)!), recordHost).map((h) => ({ name: h.name, generationBefore: h.generation, generation: h.generation + 1, shared: false }));
        return { value: [{ result: { hosts } }] };
      }
    }
    const keys: ClaimKeys = {
      consumers: writes.map((w) => w.consumer.uuid),
      providers: [...new Set(writes.flatMap((w) => w.allocations.map((a) => a.providerUuid)))],
      hosts: [...new Set(writes.flatMap((w) => (w.instance ? [w.instance.host] : [])))],
      instances: writes.flatMap((w) => (w.instance ? [w.instance.uuid] : [])),
      holdHosts: [...new Set(writes.flatMap((w) => (w.instance && anyHolds([w.instance]) ? [w.instance.host] : [])))],
    };
    const state = raw.client === 'sqlite3' ? await readSqlite(raw, keys) : await readPg(raw, keys);
    // A consumer that exists: generation null (new) is the general path's conflict; undefined (no check) replaces it there.
    if (writes.some((w) => state.consumers.has(w.consumer.uuid) && w.consumer.generation === undefined)) return undefined;
    if (state.instanceExists || state.unlocked || state.providers.some((p) => p.sharing)) return undefined;
    const providers = new Map(state.providers.map((p) => [p.uuid, p]));
    const hostByName = new Map(state.hosts.map((h) => [h.name, h]));
    // A root may carry more than one host: a claim on it changes them all (told in id order, as
    // the general path tells them).
    const hostsByRoot = groupBy([...state.hosts].sort((a, b) => a.id - b.id), (h) => h.rootId);
    const ledger = keys.holdHosts.length > 0 ? HoldLedger.fromRows(state.holds) : undefined;

    // The general path's checks, in its order, each call against the calls before it that succeeded.
    const outcomes: Array<{ error: unknown } | { hosts: Array<ClaimState['hosts'][number]> }> = [];
    const claimed: AllocationWrite[] = [];
    for (const write of writes) {
      const { consumer, allocations, instance } = write;
      const staged = new Map<string, number>();
      try {
        const existing = state.consumers.get(consumer.uuid);
        checkConsumerGeneration(write, existing === undefined ? null : { generation: existing });
        for (const alloc of allocations) {
          const provider = providers.get(alloc.providerUuid);
          if (!provider) throw notFound('provider', alloc.providerUuid, { provider: alloc.providerUuid, consumer: consumer.uuid });
          const key = `${provider.id}:${ctx.classIds.get(alloc.resourceClass)!}`;
          const entry = state.inventories.get(key);
          const used = staged.get(key) ?? entry?.used ?? 0;
          checkFits(provider, alloc, entry && { inv: entry.inv, used });
          staged.set(key, used + alloc.amount);
        }
        const instanceHost = instance && hostByName.get(instance.host);
        if (instance && !instanceHost) throw notFound('host', instance.host, { host: instance.host, instance: instance.uuid });
        // The last check: `set` changes nothing when it throws, so a refused call leaves the ledger as it was.
        if (instance && ledger && anyHolds([instance])) ledger.set(instance.uuid, instanceHost!, holdsOf(instance));
        outcomes.push({ hosts: hostsTold(write, (uuid) => hostsByRoot.get(providers.get(uuid)!.rootId), instanceHost) });
      } catch (err) {
        if (!isStoreError(err)) throw err;
        outcomes.push({ error: err });
        continue;
      }
      // A staged key has an inventory (`checkFits` refused the others): the next calls see this usage.
      for (const [key, used] of staged) state.inventories.get(key)!.used = used;
      claimed.push(write);
    }
    if (claimed.length === 0) {
      // Every call refused: the reads were all this transaction did.
      await rollbackRaw(raw);
      return { value: outcomes.map((o) => o as { error: unknown }) };
    }

    const touched = new Set(claimed.flatMap((w) => w.allocations.map((a) => providers.get(a.providerUuid)!.id)));
    const consumerRows = claimed.map(({ consumer: c }) => [c.uuid, c.projectId, c.userId, 1, c.consumerType ?? null]);
    // Each allocation with its consumer's uuid: the insert finds the consumer's id.
    const allocationValues = valuesSql(
      raw.client,
      claimed.flatMap(({ consumer, allocations }) => allocations.map((a) => [providers.get(a.providerUuid)!.id, consumer.uuid, ctx.classIds.get(a.resourceClass)!, a.amount])),
    );
    const statements = [
      ...(raw.client === 'sqlite3'
        ? [
            insertSql(raw.client, 'consumers', CONSUMER_COLUMNS, consumerRows),
            // The consumers' ids in one join: a subquery per allocation was compiled once per row,
            // a fifth of a combined batch's time (docs/benchmarks.md). LEFT JOIN keeps the
            // VALUES the outer loop and makes a consumer not found a NOT NULL failure, never a
            // dropped row (PostgreSQL's join below too).
            `INSERT INTO allocations (${ALLOCATION_COLUMNS.join(', ')}) SELECT v.column1, c.id, v.column3, v.column4
             FROM (${allocationValues}) AS v LEFT JOIN consumers c ON c.uuid = v.column2`,
          ]
        : // PostgreSQL: the consumers' ids joined from the insert's RETURNING (planning a lookup per allocation cost more than the rest of the batch).
          [
            `WITH c AS (${insertSql(raw.client, 'consumers', CONSUMER_COLUMNS, consumerRows)} RETURNING id, uuid)
             INSERT INTO allocations (${ALLOCATION_COLUMNS.join(', ')}) SELECT v.provider_id, c.id, v.resource_class_id, v.used
             FROM (${allocationValues}) AS v (provider_id, uuid, resource_class_id, used) LEFT JOIN c ON c.uuid = v.uuid`,
          ]),
      `UPDATE providers SET generation = generation + 1 WHERE id IN (${[...touched].join(', ')})`,
    ];
    const records = claimed.flatMap((w) => (w.instance ? [w.instance] : []));
    if (records.length > 0) {
      const now = Date.now();
      statements.push(insertSql(raw.client, 'instances', INSTANCE_COLUMNS, records.map((r) => instanceRowValues(r, hostByName.get(r.host)!.id, now))));
      const holds = records.flatMap((r) => holdRowValues(r, hostByName.get(r.host)!.id));
      if (holds.length > 0) statements.push(insertSql(raw.client, HOLDS_TABLE, HOLD_COLUMNS, holds));
    }
    // `shared` when more than one call changed a host.
    const writers = new Map<number, number>();
    for (const outcome of outcomes) if ('hosts' in outcome) for (const host of outcome.hosts) writers.set(host.id, (writers.get(host.id) ?? 0) + 1);
    // Each host bumped once, however many calls changed it, as the general path bumps them:
    // every host on the roots of the trees claimed on (a root may carry more than one), and the
    // records' hosts.
    const rootById = new Map(state.providers.map((p) => [p.id, p.rootId]));
    const roots = new Set([...touched].map((id) => rootById.get(id)!));
    const recordHosts = new Set(records.map((r) => hostByName.get(r.host)!.id));
    const bumped = state.hosts.filter((h) => roots.has(h.rootId) || recordHosts.has(h.id)).map((h) => h.id);
    // SQLite: nobody else writes while the lock is held, so each host's generation is the one
    // read plus one. PostgreSQL: the hosts' rows are not locked, so the bump returns them.
    let generations = new Map(state.hosts.map((h) => [h.id, h.generation + 1]));
    const bump = bumped.length > 0 ? `UPDATE hosts SET generation = generation + 1 WHERE id IN (${bumped.join(', ')})` : undefined;
    // Each call's answer; `lost`: the COMMIT's answer was lost and the server said it committed,
    // so the generations are the ones read plus one, which other writers may have passed
    // (PostgreSQL does not lock the hosts): told `shared`, which the caller does not take as
    // its own bump.
    const answer = (lost: boolean): CallOutcome[] =>
      outcomes.map((outcome): CallOutcome => {
        if ('error' in outcome) return outcome;
        const hosts = outcome.hosts.map((h) => ({ name: h.name, generationBefore: generations.get(h.id)! - 1, generation: generations.get(h.id)!, shared: lost || writers.get(h.id)! > 1 }));
        return { result: { hosts } };
      });
    if (raw.client === 'sqlite3') {
      await sqliteExec(raw.conn, [...statements, ...(bump ? [bump] : []), 'COMMIT'].join(';\n'));
    } else {
      const sql = [...statements, ...(bump ? [`${bump} RETURNING id, generation`] : []), 'COMMIT'].join(';\n');
      // A failure of this trip may have left the transaction committed: `rawWrite` settles it
      // once this connection is given back (a refused statement is a rollback, and its error).
      const results = (await raw.conn.query(sql).catch((err: unknown) => {
        throw new CommitInDoubt(state.xid!, err, () => answer(true));
      })) as PgResult[];
      if (bump) generations = new Map(results.at(-2)!.rows.map((r) => [Number(r['id']), Number(r['generation'])]));
    }
    return { value: answer(false) };
  });
}
