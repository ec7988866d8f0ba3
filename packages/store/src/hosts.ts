/** Hosts (the compute hosts' records), their plugin stats, and bulk import of whole hosts. */
import type { Knex } from 'knex';
import { type HostStatus, type JsonValue } from '@ert/plugin-api';
import type { HostDeletion, HostImport, HostRecord, StatsRecord } from './api.js';
import { StoreError } from './errors.js';
import type { StoreContext } from './context.js';
import { HOST_STATUSES, hostRecordFromRow, inventoryToRow, statsRecords, type HostRow, type StatsRow } from './rows.js';
import { chunks, inChunks, insertObjects, insertRows, type Trx } from './sql.js';
import { checkName, invalid, notFound, validateImport } from './validate.js';

export async function upsertHost(ctx: StoreContext, host: { name: string; rootProviderUuid: string; status?: HostStatus; keepDisabled?: boolean; lastUpdate?: number; machine?: string }): Promise<HostRecord> {
  checkName('host', host.name);
  if (host.status !== undefined && !HOST_STATUSES.has(host.status)) throw invalid(`host ${host.name}: unknown status ${JSON.stringify(host.status)}`, { host: host.name });
  return ctx.write(`upsertHost ${host.name}`, async (trx) => {
    const root = await ctx.providerRow(trx, host.rootProviderUuid);
    if (root.parent_id !== null) throw invalid(`host ${host.name}: provider ${root.name} is not a root provider`, { host: host.name, provider: root.uuid });
    const existing: HostRow | undefined = await trx('hosts').where('name', host.name).first();
    const fields: Record<string, unknown> = { root_provider_id: root.id };
    if (host.status !== undefined) fields.status = host.status;
    if (host.lastUpdate !== undefined) fields.last_update = host.lastUpdate;
    if (host.machine !== undefined) fields.machine = host.machine;
    if (existing) {
      // Bumped in the statement, not from the generation read above: on PostgreSQL a claim may
      // bump the host between that read and this update (the row is not locked until here), and
      // writing read + 1 would undo its bump (test/host-generation.test.ts).
      // `keepDisabled` is decided in the update itself, which sees an operator's disable
      // committed after the read above (PostgreSQL re-reads the row it waited for).
      const status = host.status !== undefined && host.keepDisabled ? { status: trx.raw(`CASE WHEN status = 'disabled' THEN status ELSE ? END`, [host.status]) } : {};
      await trx('hosts').where('id', existing.id).update({ ...fields, ...status, generation: trx.raw('generation + 1') });
    } else {
      await trx('hosts').insert({ name: host.name, status: 'up', last_update: Date.now(), generation: 0, ...fields });
    }
    return hostRecordFromRow(await ctx.hostQuery(trx).where('h.name', host.name).first());
  });
}

export async function getHost(ctx: StoreContext, name: string): Promise<HostRecord | undefined> {
  const row = await ctx.hostQuery(ctx.knex).where('h.name', name).first();
  return row ? hostRecordFromRow(row) : undefined;
}

export async function listHosts(ctx: StoreContext): Promise<HostRecord[]> {
  const rows = await ctx.hostQuery(ctx.knex).orderBy('h.name');
  return rows.map((row) => hostRecordFromRow(row));
}

export async function deleteHost(ctx: StoreContext, name: string, options: { force?: boolean } = {}): Promise<HostDeletion> {
  checkName('host', name);
  return ctx.write(`deleteHost ${name}`, async (trx) => {
    const host = await ctx.hostRow(trx, name);
    const tree: Array<{ id: number; uuid: string; name: string; owner: string | null; parent_id: number | null }> = await trx('providers')
      .where('root_id', host.root_provider_id)
      .select('id', 'uuid', 'name', 'owner', 'parent_id');
    const ids = tree.map((p) => p.id);
    const consumers: Array<{ id: number; uuid: string }> = await inChunks(ids, (part) =>
      trx('allocations as a').join('consumers as c', 'c.id', 'a.consumer_id').whereIn('a.provider_id', part).distinct('c.id', 'c.uuid'),
    );
    // The host's instance records, and any record of a consumer that goes (a migration in flight).
    const instances: Array<{ uuid: string }> = await trx('instances')
      .where('host_id', host.id)
      .orWhereIn('uuid', consumers.length > 0 ? consumers.map((c) => c.uuid) : [''])
      .select('uuid');
    if ((consumers.length > 0 || instances.length > 0) && !options.force) {
      throw new StoreError(
        'ERT_STORE_PROVIDER_IN_USE',
        `host ${name} cannot be deleted: ${instances.length} instance record(s) and ${consumers.length} consumer(s) with allocations on its providers (drain them first, or force)`,
        { host: name, instances: instances.length, consumers: consumers.length },
      );
    }
    // Hosts that see a sharing provider of this tree change too.
    await ctx.bumpHostsOf(trx, ids);
    for (const part of chunks(consumers.map((c) => c.id))) await trx('consumers').whereIn('id', part).delete();
    for (const part of chunks(instances.map((i) => i.uuid))) await trx('instances').whereIn('uuid', part).delete();
    await trx('hosts').where('id', host.id).delete();
    // Children before parents: the deepest first.
    const parent = new Map(tree.map((p) => [p.id, p.parent_id]));
    const depth = (id: number): number => {
      let d = 0;
      for (let p = parent.get(id); p !== null && p !== undefined && d < 64; p = parent.get(p)) d++;
      return d;
    };
    const byDepth = [...tree].sort((a, b) => depth(b.id) - depth(a.id));
    for (const p of byDepth) await trx('providers').where('id', p.id).delete();
    return {
      host: name,
      providers: [...byDepth].reverse().map((p) => ({ uuid: p.uuid, name: p.name, ...(p.owner ? { owner: p.owner } : {}) })),
      instances: instances.map((i) => i.uuid).sort(),
      consumers: consumers.map((c) => c.uuid).sort(),
    };
  });
}

export async function setHostStatus(ctx: StoreContext, name: string, status: HostStatus, reason?: string): Promise<void> {
  if (!HOST_STATUSES.has(status)) throw invalid(`host ${name}: unknown status ${JSON.stringify(status)}`, { host: name, status });
  if (reason !== undefined && (typeof reason !== 'string' || reason.length > 1024)) throw invalid(`host ${name}: the status reason must be a string of at most 1024 characters`, { host: name });
  await ctx.write(
    `setHostStatus ${name}`,
    async (trx) => {
      const statusReason = status === 'disabled' && reason !== undefined && reason !== '' ? reason : null;
      const changed = await trx('hosts').where('name', name).update({ status, status_reason: statusReason, generation: trx.raw('generation + 1') });
      if (changed === 0) throw notFound('host', name, { host: name });
    },
    { firstStatementWrites: true },
  );
}

export async function markStaleHosts(ctx: StoreContext, before: number): Promise<string[]> {
  return ctx.write(
    'markStaleHosts',
    async (trx) => {
      // The condition in the locking statements: PostgreSQL tests it again on a row another
      // writer changed meanwhile, so an operator's disable or a fresh report committed first is
      // kept. A read and then an update by id marked such a host stale (test/row-locks.test.ts).
      const stale = (q: Knex.QueryBuilder) => q.where('status', 'up').where('last_update', '<', before);
      await ctx.lockHosts(trx, stale);
      const rows: Array<{ name: string }> = await trx('hosts')
        .where(stale)
        .update({ status: 'stale', generation: trx.raw('generation + 1') })
        .returning('name');
      return rows.map((r) => r.name).sort();
    },
    { firstStatementWrites: true },
  );
}

export async function writeStats(ctx: StoreContext, host: string, plugin: string, schemaVersion: number, data: JsonValue): Promise<void> {
  checkName('plugin', plugin);
  if (!Number.isSafeInteger(schemaVersion) || schemaVersion < 0) {
    throw invalid(`host ${host}: plugin ${plugin} stats schemaVersion must be a non-negative integer, got ${String(schemaVersion)}`, { host, plugin });
  }
  const json = JSON.stringify(data);
  if (json === undefined) throw invalid(`host ${host}: plugin ${plugin} stats are not JSON`, { host, plugin });
  await ctx.write(
    `writeStats ${host} ${plugin}`,
    async (trx) => {
      const changed = await trx('hosts').where('name', host).increment('generation', 1);
      if (changed === 0) throw notFound('host', host, { host, plugin });
      const row = await ctx.hostRow(trx, host);
      await trx('host_stats')
        .insert({ host_id: row.id, plugin, schema_version: schemaVersion, data: json, updated_at: Date.now() })
        .onConflict(['host_id', 'plugin'])
        .merge(['schema_version', 'data', 'updated_at']);
    },
    { firstStatementWrites: true },
  );
}

export async function readStats(ctx: StoreContext, host: string): Promise<Record<string, StatsRecord>> {
  return ctx.read(async (trx) => {
    const row = await ctx.hostRow(trx, host);
    const rows: StatsRow[] = await trx('host_stats').where('host_id', row.id);
    return statsRecords(rows);
  });
}

export async function deleteStats(ctx: StoreContext, host: string, plugin: string): Promise<boolean> {
  return ctx.write(`deleteStats ${host} ${plugin}`, async (trx) => {
    const row = await ctx.hostRow(trx, host);
    const deleted = await trx('host_stats').where({ host_id: row.id, plugin }).delete();
    if (deleted > 0) await trx('hosts').where('id', row.id).increment('generation', 1);
    return deleted > 0;
  });
}

export async function importHosts(ctx: StoreContext, hosts: HostImport[]): Promise<void> {
  validateImport(hosts);
  for (const batch of chunks(hosts, IMPORT_BATCH)) {
    await ctx.write(`importHosts (${batch[0]!.host.name}...)`, (trx) => importBatch(ctx, trx, batch));
  }
}

export async function importBatch(ctx: StoreContext, trx: Trx, hosts: HostImport[]): Promise<void> {
  const providers = hosts.flatMap((h) => h.providers);
  const classIds = await ctx.classIdsFor(trx, providers.flatMap((p) => Object.keys(p.inventories)));
  const traitIds = await ctx.ensureNamed(trx, 'traits', 'name', providers.flatMap((p) => p.traits));
  const aggregateIds = await ctx.ensureNamed(trx, 'aggregates', 'uuid', providers.flatMap((p) => p.aggregates));

  // Providers level by level (roots, then their children, ...) so parent and root ids are known.
  const ids = new Map<string, number>();
  const rootOf = new Map<string, string>();
  for (const host of hosts) for (const p of host.providers) rootOf.set(p.uuid, host.providers[0]!.uuid);
  let level = providers.filter((p) => p.parentUuid === undefined);
  const placed = new Set<string>();
  while (level.length > 0) {
    const rows = level.map((p) => [p.uuid, p.name, p.parentUuid ? ids.get(p.parentUuid)! : null, p.parentUuid ? ids.get(rootOf.get(p.uuid)!)! : null, 0, p.owner ?? null]);
    await insertRows(trx, 'providers', ['uuid', 'name', 'parent_id', 'root_id', 'generation', 'owner'], rows);
    for (const part of chunks(level.map((p) => p.uuid))) {
      const got: Array<{ id: number; uuid: string }> = await trx('providers').select('id', 'uuid').whereIn('uuid', part);
      for (const row of got) ids.set(row.uuid, row.id);
    }
    for (const p of level) placed.add(p.uuid);
    if (level[0]!.parentUuid === undefined) {
      for (const part of chunks(level.map((p) => ids.get(p.uuid)!))) await trx('providers').whereIn('id', part).update({ root_id: trx.ref('id') });
    }
    level = providers.filter((p) => !placed.has(p.uuid) && p.parentUuid !== undefined && placed.has(p.parentUuid));
  }

  await insertObjects(
    trx,
    'inventories',
    providers.flatMap((p) => Object.entries(p.inventories).map(([rc, inv]) => inventoryToRow(ids.get(p.uuid)!, classIds.get(rc)!, inv, p.owner ?? null))),
  );
  await insertRows(
    trx,
    'provider_traits',
    ['provider_id', 'trait_id', 'owner'],
    providers.flatMap((p) => [...new Set(p.traits)].map((t) => [ids.get(p.uuid)!, traitIds.get(t)!, p.owner ?? null])),
  );
  await insertRows(
    trx,
    'provider_aggregates',
    ['provider_id', 'aggregate_id'],
    providers.flatMap((p) => [...new Set(p.aggregates)].map((a) => [ids.get(p.uuid)!, aggregateIds.get(a)!])),
  );

  const now = Date.now();
  await insertRows(
    trx,
    'hosts',
    ['name', 'root_provider_id', 'status', 'last_update', 'generation', 'machine'],
    hosts.map((h) => [h.host.name, ids.get(h.providers[0]!.uuid)!, h.host.status ?? 'up', h.host.lastUpdate ?? now, 0, h.host.machine ?? null]),
  );
  const withStats = hosts.filter((h) => h.stats && Object.keys(h.stats).length > 0);
  if (withStats.length > 0) {
    const hostIds = new Map<string, number>();
    for (const part of chunks(withStats.map((h) => h.host.name))) {
      const got: Array<{ id: number; name: string }> = await trx('hosts').select('id', 'name').whereIn('name', part);
      for (const row of got) hostIds.set(row.name, row.id);
    }
    await insertRows(
      trx,
      'host_stats',
      ['host_id', 'plugin', 'schema_version', 'data', 'updated_at'],
      withStats.flatMap((h) => Object.entries(h.stats!).map(([plugin, s]) => [hostIds.get(h.host.name)!, plugin, s.schemaVersion, JSON.stringify(s.data), now])),
    );
  }
}

/** Hosts per transaction in `importHosts`. */
const IMPORT_BATCH = 1000;
