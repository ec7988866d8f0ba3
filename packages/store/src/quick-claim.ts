/**
 * The quick claim (issue 15): a new consumer claimed in three round trips on SQLite and two on
 * PostgreSQL, where the general transaction (`allocations.ts`) sends about fifteen statements
 * one after the other. Each statement is a round trip: to node-sqlite3's thread pool and back,
 * or to the PostgreSQL server; that, more than the databases' own work, was a claim's cost
 * (`npm run bench -- drivers`).
 *
 * - SQLite: BEGIN IMMEDIATE (the write lock); one statement that reads everything the checks
 *   need (its text fixed, so the connection keeps it prepared); the writes and the COMMIT in
 *   one `exec` batch.
 * - PostgreSQL: BEGIN, the providers' rows locked (ordered by id, as the general transaction
 *   locks them, and the host's row when the record names holds), and the reads, in one simple
 *   query; the writes, the hosts' bump returning their generations, and the COMMIT in another.
 *   In READ COMMITTED each statement reads what was committed before it began, so the reads
 *   that follow the locks see every claim on those providers that committed before.
 *
 * Same checks, same rows, same result as the general path (`packages/store/test/
 * quick-claim.test.ts` compares the two on random claims, on both backends): the consumer
 * generation, every amount against the inventory and the usage read under the lock, the
 * instance's host, its exclusive holds against the host's others (`HoldLedger`); then the
 * consumer, its allocations, the instance record and its holds written, and the generations of
 * the providers and of the hosts whose trees they are in (and of the instance's host) bumped.
 * Values go into the batches as literals (`sqlLiteral`).
 *
 * Only what this file can do alone takes this path (`quickClaimable`, then the read): one write
 * of a consumer that does not exist yet, with allocations, resource classes this process already
 * knows, providers that share nothing, and an instance record (if any) that does not exist yet.
 * Anything else (a consumer that exists, a sharing provider, a record to replace) is rolled back
 * before anything was written and goes through the general transaction.
 */
import { TRAIT_SHARING_PROVIDER, type Inventory } from '@ert/plugin-api';
import type { AllocationWrite, AllocationWriteResult } from './api.js';
import { sqliteAll, sqliteExec, type PgResult } from './connection.js';
import type { RawConnection, StoreContext } from './context.js';
import { HOLDS_TABLE, HOLD_COLUMNS, HoldLedger, anyHolds, holdRowValues, holdsOf, type HoldRow } from './holds.js';
import { INSTANCE_COLUMNS, instanceRowValues } from './instances.js';
import { inventoryFromRow, type InventoryRow } from './rows.js';
import { RawSql, insertSql, sqlLiteral } from './sql.js';
import { checkConsumerGeneration, checkFits, notFound } from './validate.js';

/** What a claim is checked against, read under the lock. */
interface ClaimState {
  consumerGeneration: number | null;
  providers: Array<{ id: number; uuid: string; name: string; rootId: number; sharing: boolean }>;
  /** The providers' inventories with their usage, by `<provider id>:<class id>`. */
  inventories: Map<string, { inv: Inventory; used: number }>;
  /** The hosts rooted on the providers' trees, and the instance's host. */
  hosts: Array<{ id: number; name: string; generation: number; rootId: number }>;
  instanceExists: boolean;
  /** The instance's host's holds (only when the record names some). */
  holds: HoldRow[];
  /**
   * PostgreSQL: a provider the reads saw that the lock did not take (committed between the
   * two statements, each with its own snapshot): the claim goes to the general transaction.
   */
  unlocked: boolean;
}

/** What the claim reads: the consumer, the providers, the instance (uuids), its host (name), and whether the record names holds. */
interface ClaimKeys {
  consumer: string;
  providers: string[];
  host: string | null;
  instance: string | null;
  withHolds: boolean;
}

/**
 * SQLite's read, one statement: ?1 the consumer, ?2 the sharing trait, ?3 the providers (a
 * JSON array of uuids), ?4 the instance's host, ?5 the instance, ?6 1 when the record names holds.
 */
const SQLITE_READ = `SELECT
  (SELECT generation FROM consumers WHERE uuid = ?1) AS consumer_generation,
  (SELECT json_group_array(json_array(p.id, p.uuid, p.name, p.root_id,
      EXISTS (SELECT 1 FROM provider_traits pt JOIN traits t ON t.id = pt.trait_id WHERE pt.provider_id = p.id AND t.name = ?2)))
    FROM providers p WHERE p.uuid IN (SELECT value FROM json_each(?3))) AS providers,
  (SELECT json_group_array(json_array(i.provider_id, i.resource_class_id, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
      -- as text: json renders a real with 15 digits, CAST with all it takes to read back the same double
      CAST(i.allocation_ratio AS TEXT),
      (SELECT sum(a.used) FROM allocations a WHERE a.provider_id = i.provider_id AND a.resource_class_id = i.resource_class_id)))
    FROM inventories i WHERE i.provider_id IN (SELECT p.id FROM providers p WHERE p.uuid IN (SELECT value FROM json_each(?3)))) AS inventories,
  (SELECT json_group_array(json_array(h.id, h.name, h.generation, h.root_provider_id))
    FROM hosts h WHERE h.root_provider_id IN (SELECT p.root_id FROM providers p WHERE p.uuid IN (SELECT value FROM json_each(?3))) OR h.name = ?4) AS hosts,
  (SELECT 1 FROM instances WHERE uuid = ?5) AS instance_exists,
  (SELECT json_group_array(json_array(host_id, instance_uuid, hold, amount, capacity))
    FROM ${HOLDS_TABLE} WHERE ?6 = 1 AND host_id = (SELECT id FROM hosts WHERE name = ?4)) AS holds`;

interface SqliteReadRow {
  consumer_generation: number | null;
  providers: string;
  inventories: string;
  hosts: string;
  instance_exists: number | null;
  holds: string;
}

async function readSqlite(raw: Extract<RawConnection, { client: 'sqlite3' }>, keys: ClaimKeys): Promise<ClaimState> {
  await sqliteExec(raw.conn, 'BEGIN IMMEDIATE');
  const [row] = await sqliteAll<SqliteReadRow>(raw.conn, SQLITE_READ, [
    keys.consumer,
    TRAIT_SHARING_PROVIDER,
    JSON.stringify(keys.providers),
    keys.host,
    keys.instance,
    keys.withHolds ? 1 : 0,
  ]);
  const read = row!;
  type Tuple = Array<number | string | null>;
  const tuples = (json: string) => JSON.parse(json) as Tuple[];
  return {
    consumerGeneration: read.consumer_generation,
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
    instanceExists: read.instance_exists !== null,
    holds: tuples(read.holds).map(([host_id, instance_uuid, hold, amount, capacity]) => ({ host_id: Number(host_id), instance_uuid: String(instance_uuid), hold: String(hold), amount: amount as number | null, capacity: capacity as number | null })),
    unlocked: false,
  };
}

async function readPg(raw: Extract<RawConnection, { client: 'pg' }>, keys: ClaimKeys): Promise<ClaimState> {
  const lit = (v: unknown) => sqlLiteral(v, 'pg');
  const uuids = keys.providers.map(lit).join(', ');
  const host = lit(keys.host);
  const statements = [
    'BEGIN',
    `SELECT id FROM providers WHERE uuid IN (${uuids}) ORDER BY id FOR UPDATE`,
    // Pools are checked by sum, which no index enforces: the host's row serialises them (holdLedger does the same).
    ...(keys.withHolds ? [`SELECT id FROM hosts WHERE name = ${host} FOR UPDATE`] : []),
    `SELECT generation FROM consumers WHERE uuid = ${lit(keys.consumer)}`,
    `SELECT p.id, p.uuid, p.name, p.root_id, EXISTS (SELECT 1 FROM provider_traits pt JOIN traits t ON t.id = pt.trait_id WHERE pt.provider_id = p.id AND t.name = ${lit(TRAIT_SHARING_PROVIDER)}) AS sharing FROM providers p WHERE p.uuid IN (${uuids})`,
    `SELECT i.provider_id, i.resource_class_id, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio,
       (SELECT sum(a.used) FROM allocations a WHERE a.provider_id = i.provider_id AND a.resource_class_id = i.resource_class_id) AS used
     FROM inventories i WHERE i.provider_id IN (SELECT id FROM providers WHERE uuid IN (${uuids}))`,
    `SELECT h.id, h.name, h.generation, h.root_provider_id FROM hosts h WHERE h.root_provider_id IN (SELECT root_id FROM providers WHERE uuid IN (${uuids})) OR h.name = ${host}`,
    `SELECT 1 FROM instances WHERE uuid = ${lit(keys.instance)}`,
    ...(keys.withHolds ? [`SELECT host_id, instance_uuid, hold, amount, capacity FROM ${HOLDS_TABLE} WHERE host_id = (SELECT id FROM hosts WHERE name = ${host})`] : []),
  ];
  const results = (await raw.conn.query(statements.join(';\n'))) as PgResult[];
  // The reads are the last results, in the order above.
  const [consumer, providers, inventories, hosts, instance, holds] = results.slice(keys.withHolds ? 3 : 2);
  type Row = Record<string, unknown>;
  const n = (row: Row, key: string) => Number(row[key]);
  const locked = new Set(results[1]!.rows.map((r) => n(r, 'id')));
  return {
    unlocked: providers!.rows.some((r) => !locked.has(n(r, 'id'))),
    consumerGeneration: consumer!.rows.length > 0 ? n(consumer!.rows[0]!, 'generation') : null,
    providers: providers!.rows.map((r) => ({ id: n(r, 'id'), uuid: String(r['uuid']), name: String(r['name']), rootId: n(r, 'root_id'), sharing: r['sharing'] === true })),
    inventories: inventoriesOf(inventories!.rows as unknown as Array<InventoryRow & { used: unknown }>),
    hosts: hosts!.rows.map((r) => ({ id: n(r, 'id'), name: String(r['name']), generation: n(r, 'generation'), rootId: n(r, 'root_provider_id') })),
    instanceExists: instance!.rows.length > 0,
    holds: (holds?.rows ?? []) as unknown as HoldRow[],
  };
}

/** Inventory rows with their usage (a sum: null when nothing is allocated), by `<provider id>:<class id>`, as `checkFits` takes them. */
function inventoriesOf(rows: Array<InventoryRow & { used: unknown }>): ClaimState['inventories'] {
  return new Map(rows.map((r) => [`${r.provider_id}:${r.resource_class_id}`, { inv: inventoryFromRow(r), used: Number(r.used ?? 0) }]));
}

/** Whether `call` is for this path as far as the call alone tells (no I/O): see the file's comment. */
export function quickClaimable(ctx: StoreContext, call: AllocationWrite[]): boolean {
  if (ctx.options.quickClaims === false || call.length !== 1) return false;
  const write = call[0]!;
  const generation = write.consumer.generation;
  return (
    write.allocations.length > 0 &&
    !write.removeInstance &&
    (generation === null || generation === undefined) &&
    write.allocations.every((a) => ctx.classIds.has(a.resourceClass))
  );
}

/**
 * Claims `write` (one that `quickClaimable` accepted); undefined when the state read puts it
 * out of this path's reach (nothing was written: send it through the general transaction).
 * Throws the general path's errors for the same claims.
 */
export function quickClaim(ctx: StoreContext, write: AllocationWrite): Promise<AllocationWriteResult | undefined> {
  return ctx.rawWrite('writeAllocations', async (raw) => {
    const { consumer, allocations, instance } = write;
    const keys: ClaimKeys = {
      consumer: consumer.uuid,
      providers: [...new Set(allocations.map((a) => a.providerUuid))],
      host: instance?.host ?? null,
      instance: instance?.uuid ?? null,
      withHolds: instance !== undefined && anyHolds([instance]),
    };
    const state = raw.client === 'sqlite3' ? await readSqlite(raw, keys) : await readPg(raw, keys);
    // A consumer that exists: generation null (new) is the general path's conflict; undefined (no check) replaces it there.
    if (state.consumerGeneration !== null && consumer.generation === undefined) return undefined;
    checkConsumerGeneration(write, state.consumerGeneration === null ? null : { generation: state.consumerGeneration });
    if (state.instanceExists || state.unlocked) return undefined;
    const providers = new Map(state.providers.map((p) => [p.uuid, p]));
    if (state.providers.some((p) => p.sharing)) return undefined;

    // The general path's checks, in its order.
    const lit = (v: unknown) => sqlLiteral(v, raw.client);
    const rows: unknown[][] = [];
    for (const alloc of allocations) {
      const provider = providers.get(alloc.providerUuid);
      if (!provider) throw notFound('provider', alloc.providerUuid, { provider: alloc.providerUuid, consumer: consumer.uuid });
      const classId = ctx.classIds.get(alloc.resourceClass)!;
      checkFits(provider, alloc, state.inventories.get(`${provider.id}:${classId}`));
      rows.push([provider.id, new RawSql(`(SELECT id FROM consumers WHERE uuid = ${lit(consumer.uuid)})`), classId, alloc.amount]);
    }
    const instanceHost = instance && state.hosts.find((h) => h.name === instance.host);
    if (instance && !instanceHost) throw notFound('host', instance.host, { host: instance.host, instance: instance.uuid });
    if (instance && keys.withHolds) HoldLedger.fromRows(state.holds).set(instance.uuid, instanceHost!, holdsOf(instance));

    // The hosts told, in the general path's order: those whose trees were claimed on, then the instance's.
    const touched = [...new Set(allocations.map((a) => providers.get(a.providerUuid)!))];
    const bumped = new Map<number, ClaimState['hosts'][number]>();
    for (const provider of touched) {
      const host = state.hosts.find((h) => h.rootId === provider.rootId);
      if (host) bumped.set(host.id, host);
    }
    if (instanceHost) bumped.set(instanceHost.id, instanceHost);
    const statements = [
      insertSql(raw.client, 'consumers', ['uuid', 'project_id', 'user_id', 'generation', 'consumer_type'], [[consumer.uuid, consumer.projectId, consumer.userId, 1, consumer.consumerType ?? null]]),
      insertSql(raw.client, 'allocations', ['provider_id', 'consumer_id', 'resource_class_id', 'used'], rows),
      `UPDATE providers SET generation = generation + 1 WHERE id IN (${touched.map((p) => p.id).join(', ')})`,
    ];
    if (instance) {
      statements.push(insertSql(raw.client, 'instances', INSTANCE_COLUMNS, [instanceRowValues(instance, instanceHost!.id, Date.now())]));
      const holds = holdRowValues(instance, instanceHost!.id);
      if (holds.length > 0) statements.push(insertSql(raw.client, HOLDS_TABLE, HOLD_COLUMNS, holds));
    }
    // SQLite: nobody else writes while the lock is held, so each host's generation is the one
    // read plus one. PostgreSQL: the hosts' rows are not locked, so the bump returns them.
    let generations = new Map([...bumped.values()].map((h) => [h.id, h.generation + 1]));
    const bump = bumped.size > 0 ? `UPDATE hosts SET generation = generation + 1 WHERE id IN (${[...bumped.keys()].join(', ')})` : undefined;
    if (raw.client === 'sqlite3') {
      await sqliteExec(raw.conn, [...statements, ...(bump ? [bump] : []), 'COMMIT'].join(';\n'));
    } else {
      const results = (await raw.conn.query([...statements, ...(bump ? [`${bump} RETURNING id, generation`] : []), 'COMMIT'].join(';\n'))) as PgResult[];
      if (bump) generations = new Map(results.at(-2)!.rows.map((r) => [Number(r['id']), Number(r['generation'])]));
    }
    const result: AllocationWriteResult = {
      hosts: [...bumped.values()].map((h) => ({ name: h.name, generationBefore: generations.get(h.id)! - 1, generation: generations.get(h.id)!, shared: false })),
    };
    return { value: result };
  });
}
