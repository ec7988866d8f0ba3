/** The scheduler's reads: host generations, and whole-host snapshots in a fixed number of set-based queries. */
import type { Knex } from 'knex';
import { TRAIT_SHARING_PROVIDER } from '@ert/plugin-api';
import type { HostChangeSet, HostSnapshot, ProviderSnapshot } from './api.js';
import type { StoreContext } from './context.js';
import { ENDED_STATES, hostFromRow, inventoryFromRow, statsRecords, type HostRow, type InventoryRow, type ProviderRow, type StatsRow } from './rows.js';
import { groupBy, inChunks, type Trx } from './sql.js';

/** `Store.hostGenerations`: the whole list `hostChanges` reads without a token. */
export async function hostGenerations(ctx: StoreContext): Promise<Map<string, number>> {
  return (await hostChanges(ctx)).hosts;
}

/** A `hostChanges` token: the backend's counter (`seq:` SQLite's host_change_counter, `xid:` PostgreSQL's snapshot xmin). */
const TOKEN = /^(seq|xid):(\d{1,20})$/;

/**
 * `Store.hostChanges` (migration 0013). SQLite: the rows stamped after the token's counter
 * value, the counter and the count in one statement (one snapshot). PostgreSQL, in one
 * repeatable-read snapshot: the rows whose `change_xid` is at least the token's xmin (every
 * transaction the token's snapshot did not see has an id at least its xmin), the count, and
 * this snapshot's xmin as the next token. A token ahead of the store (a restored backup, a
 * recreated database) or of the other backend reads every host.
 */
export async function hostChanges(ctx: StoreContext, since?: string): Promise<HostChangeSet> {
  const token = since === undefined ? undefined : TOKEN.exec(since);
  const kind = ctx.client === 'sqlite3' ? 'seq' : 'xid';
  const from = token && token[1] === kind ? token[2]! : undefined;
  if (ctx.client === 'sqlite3') {
    // One JSON value rather than a row per host: the SQLite driver's per-row objects cost
    // about three times more, on the connection every write waits for, once per refresh.
    const [row]: Array<{ seq: number; total: number; pairs: string }> = await ctx.knex.raw(
      `SELECT (SELECT seq FROM host_change_counter WHERE id = 1) AS seq, (SELECT count(*) FROM hosts) AS total,
        (SELECT json_group_array(json_array(name, generation)) FROM hosts WHERE change_seq > ?) AS pairs`,
      // Every host when there is no usable token (no stamp is negative).
      [from === undefined ? -1 : Number(from)],
    );
    const { seq, total, pairs } = row!;
    if (from !== undefined && Number(from) > seq) return hostChanges(ctx);
    return { token: `seq:${seq}`, hosts: new Map(JSON.parse(pairs) as Array<[string, number]>), complete: from === undefined, total };
  }
  const read = await ctx.read(async (trx) => {
    const [snapshot] = ((await trx.raw('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax')) as { rows: Array<{ xmin: string; xmax: string }> }).rows;
    if (from !== undefined && BigInt(from) > BigInt(snapshot!.xmax)) return undefined;
    const query = trx('hosts').select('name', 'generation');
    if (from !== undefined) query.where('change_xid', '>=', trx.raw('?::xid8', [from]));
    const rows: Array<{ name: string; generation: number }> = await query;
    // The whole list counts itself.
    const total = from === undefined ? rows.length : Number(((await trx('hosts').count({ total: '*' })) as Array<{ total: number | string }>)[0]!.total);
    return { token: `xid:${snapshot!.xmin}`, hosts: new Map(rows.map((r) => [r.name, r.generation])), complete: from === undefined, total };
  });
  return read ?? hostChanges(ctx);
}

export async function loadHosts(ctx: StoreContext, names?: string[]): Promise<HostSnapshot[]> {
  return ctx.read(async (trx) => {
    // A fixed number of set-based queries, whatever the number of hosts (IN lists chunked).
    const hostRows: HostRow[] =
      names === undefined
        ? await trx('hosts').select('*').orderBy('name')
        : (await inChunks([...new Set(names)], (part) => trx('hosts').select('*').whereIn('name', part))).sort((a, b) => (a.name < b.name ? -1 : 1));
    if (hostRows.length === 0) return [];
    const rootIds = hostRows.map((h) => h.root_provider_id);
    const scope: ProviderScope = names === undefined ? { all: true } : { rootIds };
    const snapshots = await providerSnapshots(ctx, trx, scope);

    const sharing = await providerSnapshots(ctx, trx, { sharing: true });
    const sharingByAggregate = new Map<number, ProviderSnapshotWithIds[]>();
    for (const s of sharing.list) for (const agg of s.aggregateIds) sharingByAggregate.set(agg, [...(sharingByAggregate.get(agg) ?? []), s]);

    const hostIds = hostRows.map((h) => h.id);
    const statsRows: StatsRow[] = names === undefined ? await trx('host_stats').select('*') : await inChunks(hostIds, (part) => trx('host_stats').select('*').whereIn('host_id', part));
    const instanceRows: Array<{ uuid: string; host_id: number }> =
      names === undefined
        ? await trx('instances').select('uuid', 'host_id').whereNotIn('state', ENDED_STATES).orderBy('uuid')
        : await inChunks(hostIds, (part) => trx('instances').select('uuid', 'host_id').whereIn('host_id', part).whereNotIn('state', ENDED_STATES).orderBy('uuid'));
    const rootAggregateIds = [...new Set(hostRows.flatMap((h) => snapshots.byId.get(h.root_provider_id)?.aggregateIds ?? []))];
    const metadataRows: Array<{ id: number; metadata: string }> = await inChunks(rootAggregateIds, (part) =>
      trx('aggregates').select('id', 'metadata').whereIn('id', part).orderBy('uuid'),
    );
    const metadataById = new Map(metadataRows.map((r) => [r.id, JSON.parse(r.metadata) as Record<string, string>]));

    const statsByHost = groupBy(statsRows, (r) => r.host_id);
    const instancesByHost = groupBy(instanceRows, (r) => r.host_id);
    return hostRows.map((h): HostSnapshot => {
      const tree = snapshots.byRoot.get(h.root_provider_id) ?? [];
      const treeIds = new Set(tree.map((p) => p.id));
      const seen = new Set<number>();
      const sharingProviders: ProviderSnapshot[] = [];
      for (const p of tree) {
        for (const agg of p.aggregateIds) {
          for (const s of sharingByAggregate.get(agg) ?? []) {
            if (!treeIds.has(s.id) && !seen.has(s.id)) {
              seen.add(s.id);
              sharingProviders.push(s.snapshot);
            }
          }
        }
      }
      const aggregateMetadata: Record<string, string> = {};
      for (const agg of snapshots.byId.get(h.root_provider_id)?.aggregateIds ?? []) Object.assign(aggregateMetadata, metadataById.get(agg));
      return {
        host: hostFromRow(h, snapshots.byId.get(h.root_provider_id)!.snapshot.uuid),
        providers: tree.map((p) => p.snapshot),
        sharingProviders,
        aggregateMetadata,
        stats: statsRecords(statsByHost.get(h.id) ?? []),
        instances: (instancesByHost.get(h.id) ?? []).map((r) => r.uuid),
      };
    });
  });
}

/**
 * Snapshots (inventories, usages, traits, aggregates) of a set of providers, in five
 * set-based queries: every provider, the trees of some roots, or the sharing providers.
 */
export async function providerSnapshots(ctx: StoreContext, trx: Trx, scope: ProviderScope): Promise<ProviderSnapshots> {
  // Each query joins `providers as p` and is restricted to the scope.
  const scoped = async <T>(build: (q: Knex.QueryBuilder) => Knex.QueryBuilder): Promise<T[]> => {
    if ('all' in scope) return build(trx.queryBuilder());
    if ('ids' in scope) return inChunks(scope.ids, (part) => build(trx.queryBuilder()).whereIn('p.id', part));
    if ('sharing' in scope) {
      return build(trx.queryBuilder()).whereIn('p.id', (q) =>
        q.select('pt.provider_id').from('provider_traits as pt').join('traits as t', 't.id', 'pt.trait_id').where('t.name', TRAIT_SHARING_PROVIDER),
      );
    }
    return inChunks(scope.rootIds, (part) => build(trx.queryBuilder()).whereIn('p.root_id', part));
  };
  const providerRows = await scoped<ProviderRow>((q) => q.from('providers as p').select('p.*'));
  const inventoryRows = await scoped<InventoryRow>((q) => q.from('inventories as i').join('providers as p', 'p.id', 'i.provider_id').select('i.*'));
  const usageRows = await scoped<{ provider_id: number; resource_class_id: number; used: number | string }>((q) =>
    q
      .from('allocations as a')
      .join('providers as p', 'p.id', 'a.provider_id')
      .select('a.provider_id', 'a.resource_class_id')
      .sum({ used: 'a.used' })
      .groupBy('a.provider_id', 'a.resource_class_id'),
  );
  const traitRows = await scoped<{ provider_id: number; name: string }>((q) =>
    q.from('provider_traits as pt').join('providers as p', 'p.id', 'pt.provider_id').join('traits as t', 't.id', 'pt.trait_id').select('pt.provider_id', 't.name'),
  );
  const aggregateRows = await scoped<{ provider_id: number; aggregate_id: number; uuid: string }>((q) =>
    q
      .from('provider_aggregates as pa')
      .join('providers as p', 'p.id', 'pa.provider_id')
      .join('aggregates as ag', 'ag.id', 'pa.aggregate_id')
      .select('pa.provider_id', 'pa.aggregate_id', 'ag.uuid'),
  );
  await ctx.loadClassNames(trx, [...inventoryRows, ...usageRows].map((r) => r.resource_class_id));

  const rowsById = new Map(providerRows.map((r) => [r.id, r]));
  // A provider's parent and root may be outside an `ids` scope: the scope names their uuids.
  const uuidOf = (id: number | null): string | undefined => (id === null ? undefined : (rowsById.get(id)?.uuid ?? ('uuids' in scope ? scope.uuids.get(id) : undefined)));
  const byId = new Map<number, ProviderSnapshotWithIds>();
  for (const row of providerRows) {
    const parentUuid = uuidOf(row.parent_id);
    const snapshot: ProviderSnapshot = {
      uuid: row.uuid,
      name: row.name,
      rootUuid: uuidOf(row.root_id) ?? row.uuid,
      generation: row.generation,
      inventories: {},
      usages: {},
      traits: [],
      aggregates: [],
    };
    if (parentUuid !== undefined) snapshot.parentUuid = parentUuid;
    byId.set(row.id, { id: row.id, rootId: row.root_id ?? row.id, depth: depthOf(row, rowsById), aggregateIds: [], snapshot });
  }
  for (const r of inventoryRows) {
    const p = byId.get(r.provider_id);
    if (p) p.snapshot.inventories[ctx.classNames.get(r.resource_class_id)!] = inventoryFromRow(r);
  }
  for (const r of usageRows) {
    const p = byId.get(r.provider_id);
    if (p) p.snapshot.usages[ctx.classNames.get(r.resource_class_id)!] = Number(r.used);
  }
  for (const r of traitRows) byId.get(r.provider_id)?.snapshot.traits.push(r.name);
  for (const r of aggregateRows) {
    const p = byId.get(r.provider_id);
    if (!p) continue;
    p.snapshot.aggregates.push(r.uuid);
    p.aggregateIds.push(r.aggregate_id);
  }
  const list = [...byId.values()].sort((a, b) => a.depth - b.depth || a.id - b.id);
  const byRoot = new Map<number, ProviderSnapshotWithIds[]>();
  for (const p of list) {
    p.snapshot.traits.sort();
    p.snapshot.aggregates.sort();
    byRoot.set(p.rootId, [...(byRoot.get(p.rootId) ?? []), p]);
  }
  return { list, byId, byRoot };
}

/** Which providers `providerSnapshots` reads: all, the sharing ones, some roots' trees, or some providers by id (with every provider's uuid by id, for their parents and roots). */
type ProviderScope = { all: true } | { sharing: true } | { rootIds: number[] } | { ids: number[]; uuids: ReadonlyMap<number, string> };

interface ProviderSnapshotWithIds {
  id: number;
  rootId: number;
  depth: number;
  aggregateIds: number[];
  snapshot: ProviderSnapshot;
}

interface ProviderSnapshots {
  list: ProviderSnapshotWithIds[];
  byId: Map<number, ProviderSnapshotWithIds>;
  byRoot: Map<number, ProviderSnapshotWithIds[]>;
}

/** Depth of a provider in its tree (0 for a root), from rows read together. */
function depthOf(row: ProviderRow, rowsById: Map<number, ProviderRow>): number {
  let depth = 0;
  for (let p = row; p.parent_id !== null && depth < 64; depth++) {
    const parent = rowsById.get(p.parent_id);
    if (!parent) break;
    p = parent;
  }
  return depth;
}
