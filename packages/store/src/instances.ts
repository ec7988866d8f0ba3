/** Instance records and their exclusive holds (holds.ts). */
import type { InstanceRecord, InstanceState } from './api.js';
import type { StoreContext } from './context.js';
import { HoldLedger, anyHolds, holdsOf, writeHolds } from './holds.js';
import { instanceFromRow, type InstanceRow } from './rows.js';
import { chunks, inChunks, insertRows, type Db, type Trx } from './sql.js';
import { checkInstance } from './validate.js';

/**
 * The holds of `hostIds` and of the instances `uuids`, for checking records' holds in this
 * transaction. PostgreSQL: the hosts' rows are locked first (ordered by id), so a concurrent
 * writer for the same host waits and then sees these holds (pools are checked by sum, which
 * no index can enforce). SQLite: the transaction already holds the write lock.
 */
export async function holdLedger(ctx: StoreContext, trx: Trx, hostIds: number[], uuids: string[]): Promise<HoldLedger> {
  const ids = [...new Set(hostIds)].sort((a, b) => a - b);
  if (ctx.client === 'pg') for (const part of chunks(ids)) await trx('hosts').select('id').whereIn('id', part).orderBy('id').forUpdate();
  return HoldLedger.read(trx, ids, uuids);
}

/**
 * The stored records of `uuids`: uuid -> host id. PostgreSQL: their rows are locked (in uuid
 * order), so a record is not moved or removed by another writer between this read and this
 * transaction's own write, which would leave the host it moved to unbumped or remove the record
 * another writer just wrote. The lock order of every write is providers, then instance
 * records, then consumers, then hosts.
 */
export async function lockRecords(ctx: StoreContext, trx: Trx, uuids: string[]): Promise<Map<string, number>> {
  const rows: Array<{ uuid: string; host_id: number }> = await inChunks([...new Set(uuids)].sort(), (part) => {
    const query = trx('instances').select('uuid', 'host_id').whereIn('uuid', part).orderBy('uuid');
    return ctx.client === 'pg' ? query.forUpdate() : query;
  });
  return new Map(rows.map((r) => [r.uuid, r.host_id]));
}

export async function upsertInstance(ctx: StoreContext, instance: InstanceRecord): Promise<void> {
  checkInstance(instance);
  await ctx.write(`upsertInstance ${instance.uuid}`, async (trx) => {
    const host = await ctx.hostRow(trx, instance.host);
    // PostgreSQL: the record's row before the host rows the holds lock (the lock order).
    const previous = ctx.client === 'pg' ? await lockRecords(ctx, trx, [instance.uuid]) : undefined;
    if (anyHolds([instance])) {
      const ledger = await holdLedger(ctx, trx, [host.id], [instance.uuid]);
      ledger.set(instance.uuid, host, holdsOf(instance));
    }
    await upsertInstancesIn(ctx, trx, [instance], new Map([[host.name, host.id]]), { previous });
  });
}

/** The `instances` columns, in the order of `instanceRowValues`. */
export const INSTANCE_COLUMNS = ['uuid', 'host_id', 'project_id', 'user_id', 'flavor', 'previous_flavor', 'migration_uuid', 'assignments', 'cpus', 'units', 'pools', 'reason', 'state', 'created_at', 'updated_at'];

/** A record's row (INSTANCE_COLUMNS) on host `hostId`, written at `now` (`createdAt` defaults to it). */
export function instanceRowValues(i: InstanceRecord, hostId: number, now: number): unknown[] {
  return [
    i.uuid,
    hostId,
    i.projectId,
    i.userId,
    JSON.stringify(i.flavor),
    i.previousFlavor ? JSON.stringify(i.previousFlavor) : null,
    i.migrationUuid ?? null,
    JSON.stringify(i.assignments ?? {}),
    i.cpus ? JSON.stringify(i.cpus) : null,
    i.units && i.units.length > 0 ? JSON.stringify(i.units) : null,
    i.pools && Object.keys(i.pools).length > 0 ? JSON.stringify(i.pools) : null,
    i.reason ?? null,
    i.state,
    i.createdAt ?? now,
    now,
  ];
}

/**
 * Inserts or updates instances (one multi-row upsert; `createdAt` is kept on update) and
 * bumps the generation of their hosts and of the hosts they moved away from.
 */
export async function upsertInstancesIn(
  ctx: StoreContext,
  trx: Trx,
  instances: InstanceRecord[],
  hostIds: Map<string, number>,
  options: { bumpHosts?: boolean; previous?: Map<string, number> } = {},
): Promise<Map<string, number>> {
  // `previous`: the records' hosts as the caller already locked and read them.
  const previous = options.previous ?? (await lockRecords(ctx, trx, instances.map((i) => i.uuid)));
  const now = Date.now();
  const updated = INSTANCE_COLUMNS.filter((c) => c !== 'uuid' && c !== 'created_at');
  // The last record of an instance wins (several calls combined in one transaction).
  const latest = new Map(instances.map((i) => [i.uuid, i]));
  await insertRows(
    trx,
    'instances',
    INSTANCE_COLUMNS,
    [...latest.values()].map((i) => instanceRowValues(i, hostIds.get(i.host)!, now)),
    { upsert: { key: 'uuid', columns: updated } },
  );
  // Holds of records that existed are replaced; a new record has none to remove.
  await writeHolds(trx, latest, hostIds, new Set(previous.keys()));
  if (options.bumpHosts !== false) {
    const bumped = new Set([...instances.map((i) => hostIds.get(i.host)!), ...previous.values()]);
    for (const part of chunks([...bumped])) await trx('hosts').whereIn('id', part).increment('generation', 1);
  }
  return previous;
}

export async function getInstance(ctx: StoreContext, uuid: string): Promise<InstanceRecord | undefined> {
  const row = await instanceQuery(ctx, ctx.knex).where('i.uuid', uuid).first();
  return row ? instanceFromRow(row) : undefined;
}

export async function listInstances(ctx: StoreContext, filter: { host?: string; state?: InstanceState | InstanceState[]; updatedBefore?: number } = {}): Promise<InstanceRecord[]> {
  const query = instanceQuery(ctx, ctx.knex).orderBy('i.uuid');
  if (filter.host !== undefined) query.where('h.name', filter.host);
  if (filter.state !== undefined) query.whereIn('i.state', Array.isArray(filter.state) ? filter.state : [filter.state]);
  if (filter.updatedBefore !== undefined) query.where('i.updated_at', '<', filter.updatedBefore);
  const rows: InstanceRow[] = await query;
  return rows.map(instanceFromRow);
}

export function instanceQuery(ctx: StoreContext, db: Db) {
  return db('instances as i').join('hosts as h', 'h.id', 'i.host_id').select('i.*', 'h.name as host');
}

export async function deleteInstance(ctx: StoreContext, uuid: string): Promise<void> {
  await ctx.write(`deleteInstance ${uuid}`, async (trx) => {
    // Locked, so the host bumped is the one the record is on when it goes, not one it was on
    // before another writer moved it.
    const host = (await lockRecords(ctx, trx, [uuid])).get(uuid);
    if (host === undefined) return;
    await trx('instances').where('uuid', uuid).delete();
    await trx('hosts').where('id', host).increment('generation', 1);
  });
}
