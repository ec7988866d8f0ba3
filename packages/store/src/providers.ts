/** Resource classes, providers, inventories, usages, traits and aggregates (Placement's provider model). */
import { STANDARD_RESOURCE_CLASSES, capacityOf, isCustomName, isValidResourceClass, isValidTraitName, type Inventory, type ResourceClass } from '@ert/plugin-api';
import type { AggregateRecord, NewProvider, ProviderRecord } from './api.js';
import type { StoreContext } from './context.js';
import { InventoryInUseError, StoreConflictError, StoreError, isStoreError } from './errors.js';
import { inventoryFromRow, inventoryToRow, providerRecordFromRow, type InventoryRow, type ProviderRow } from './rows.js';
import { chunks, insertObjects, insertRows, type Db } from './sql.js';
import { checkInventories, checkName, checkTraits, invalid, notFound } from './validate.js';

export async function listResourceClasses(ctx: StoreContext): Promise<string[]> {
  const rows: Array<{ name: string }> = await ctx.knex('resource_classes').select('name').orderBy('name');
  return rows.map((r) => r.name);
}

export async function ensureResourceClasses(ctx: StoreContext, names: string[]): Promise<void> {
  for (const name of names) {
    if (typeof name !== 'string' || !isValidResourceClass(name)) {
      throw invalid(`${JSON.stringify(name)} is not a standard or CUSTOM_ resource class`, { resourceClass: name });
    }
  }
  await ctx.write('ensureResourceClasses', (trx) => ctx.classIdsFor(trx, names));
}

const STANDARD_CLASS_SET: ReadonlySet<string> = new Set(STANDARD_RESOURCE_CLASSES);

function checkCustomClass(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length > 255 || !isCustomName(name)) {
    throw invalid(`${JSON.stringify(name)} is not a custom resource class (CUSTOM_[A-Z0-9_]+, at most 255 characters)`, { resourceClass: name });
  }
}

async function classRow(trx: Db, name: string): Promise<{ id: number; name: string }> {
  const row: { id: number; name: string } | undefined = await trx('resource_classes').where('name', name).first('id', 'name');
  if (!row) throw notFound('resource class', name, { resourceClass: name });
  return row;
}

export async function createResourceClass(ctx: StoreContext, name: string): Promise<boolean> {
  checkCustomClass(name);
  return ctx.write(`createResourceClass ${name}`, async (trx) => {
    if (await trx('resource_classes').where('name', name).first('id')) return false;
    await trx('resource_classes').insert({ name });
    return true;
  });
}

export async function renameResourceClass(ctx: StoreContext, from: string, to: string): Promise<void> {
  if (STANDARD_CLASS_SET.has(from)) throw invalid(`${from} is a standard resource class: it cannot be renamed`, { resourceClass: from });
  checkCustomClass(to);
  await ctx.write(`renameResourceClass ${from}`, async (trx) => {
    const old = await classRow(trx, from);
    if (from === to) return;
    if (await trx('resource_classes').where('name', to).first('id')) {
      throw new StoreConflictError('ERT_STORE_CONFLICT', `resource class ${to} already exists`, { resourceClass: to, duplicate: 'name' });
    }
    // A new id for the new name: a class id's name never changes, so caches of id -> name
    // (every process has one) stay right; `from` disappears.
    const [inserted] = await trx('resource_classes').insert({ name: to }).returning('id');
    const id = (inserted as { id: number }).id;
    const providerIds = (await trx('inventories').where('resource_class_id', old.id).select('provider_id')).map((r: { provider_id: number }) => r.provider_id);
    await trx('inventories').where('resource_class_id', old.id).update({ resource_class_id: id });
    await trx('allocations').where('resource_class_id', old.id).update({ resource_class_id: id });
    await trx('resource_classes').where('id', old.id).delete();
    await ctx.bumpHostsOf(trx, providerIds);
    ctx.classIds.delete(from);
    ctx.rememberClass(id, to);
  });
}

export async function deleteResourceClass(ctx: StoreContext, name: string): Promise<void> {
  if (STANDARD_CLASS_SET.has(name)) throw invalid(`${name} is a standard resource class: it cannot be deleted`, { resourceClass: name });
  await ctx.write(`deleteResourceClass ${name}`, async (trx) => {
    const row = await classRow(trx, name);
    const used = (await trx('inventories').where('resource_class_id', row.id).first('provider_id')) ?? (await trx('allocations').where('resource_class_id', row.id).first('provider_id'));
    if (used) throw new StoreError('ERT_STORE_IN_USE', `resource class ${name} is in use by an inventory`, { resourceClass: name });
    await trx('resource_classes').where('id', row.id).delete();
    ctx.classIds.delete(name);
  });
}

export async function listTraits(ctx: StoreContext): Promise<Array<{ name: string; associated: boolean }>> {
  const rows: Array<{ name: string; associated: number | string | boolean }> = await ctx
    .knex('traits as t')
    .select('t.name', ctx.knex.raw('exists (select 1 from provider_traits pt where pt.trait_id = t.id) as associated'))
    .orderBy('t.name');
  return rows.map((r) => ({ name: r.name, associated: r.associated === true || Number(r.associated) === 1 }));
}

export async function createTrait(ctx: StoreContext, name: string): Promise<boolean> {
  if (typeof name !== 'string' || !isValidTraitName(name)) throw invalid(`${JSON.stringify(name)} is not a valid trait name`, { trait: name });
  return ctx.write(`createTrait ${name}`, async (trx) => {
    if (await trx('traits').where('name', name).first('id')) return false;
    await trx('traits').insert({ name });
    return true;
  });
}

export async function deleteTrait(ctx: StoreContext, name: string): Promise<void> {
  await ctx.write(`deleteTrait ${name}`, async (trx) => {
    const row: { id: number } | undefined = await trx('traits').where('name', name).first('id');
    if (!row) throw notFound('trait', name, { trait: name });
    if (!isCustomName(name)) throw invalid(`${name} is a standard trait: it cannot be deleted`, { trait: name });
    if (await trx('provider_traits').where('trait_id', row.id).first('provider_id')) {
      throw new StoreError('ERT_STORE_IN_USE', `trait ${name} is in use by a resource provider`, { trait: name });
    }
    await trx('traits').where('id', row.id).delete();
  });
}

export async function createProvider(ctx: StoreContext, provider: NewProvider): Promise<ProviderRecord> {
  checkName('uuid', provider.uuid, 36);
  checkName('name', provider.name, 200);
  if (provider.owner !== undefined) checkName('owner', provider.owner, 64);
  return ctx.write(`createProvider ${provider.name}`, async (trx) => {
    let parent: ProviderRow | undefined;
    // Locked: a parent moved to another tree meanwhile would leave the child under the old root.
    if (provider.parentUuid !== undefined) parent = await ctx.providerRow(trx, provider.parentUuid, 'share');
    const existing = await trx('providers').select('uuid', 'name').where('uuid', provider.uuid).orWhere('name', provider.name).first();
    if (existing) {
      const duplicate = existing.uuid === provider.uuid ? 'uuid' : 'name';
      throw new StoreConflictError('ERT_STORE_CONFLICT', `provider ${duplicate === 'uuid' ? provider.uuid : provider.name} already exists`, {
        provider: provider.uuid,
        name: provider.name,
        duplicate,
      });
    }
    const [inserted] = await trx('providers')
      .insert({ uuid: provider.uuid, name: provider.name, parent_id: parent?.id ?? null, root_id: parent ? parent.root_id : null, generation: 0, owner: provider.owner ?? null })
      .returning('id');
    const id = (inserted as { id: number }).id;
    if (parent) {
      await ctx.bumpHostsOf(trx, [parent.id]);
    } else {
      await trx('providers').where('id', id).update({ root_id: id });
    }
    return ctx.providerRecord(trx, provider.uuid);
  });
}

export async function getProvider(ctx: StoreContext, uuid: string): Promise<ProviderRecord | undefined> {
  const row = await ctx.providerQuery(ctx.knex).where('p.uuid', uuid).first();
  return row ? providerRecordFromRow(row) : undefined;
}

export async function getProviderByName(ctx: StoreContext, name: string): Promise<ProviderRecord | undefined> {
  const row = await ctx.providerQuery(ctx.knex).where('p.name', name).first();
  return row ? providerRecordFromRow(row) : undefined;
}

export async function listProviders(ctx: StoreContext, filter: { rootUuid?: string } = {}): Promise<ProviderRecord[]> {
  const query = ctx.providerQuery(ctx.knex).orderBy('p.id');
  if (filter.rootUuid !== undefined) query.where('rp.uuid', filter.rootUuid);
  const rows = await query;
  return rows.map((row) => providerRecordFromRow(row));
}

export async function updateProvider(ctx: StoreContext, uuid: string, changes: { name?: string; parentUuid?: string | null }): Promise<ProviderRecord> {
  if (changes.name !== undefined) checkName('name', changes.name, 200);
  if (changes.parentUuid !== undefined && changes.parentUuid !== null) checkName('parentUuid', changes.parentUuid, 36);
  return ctx.write(`updateProvider ${uuid}`, async (trx) => {
    const row = await ctx.providerRow(trx, uuid);
    if (changes.name !== undefined && changes.name !== row.name) {
      const clash: { uuid: string } | undefined = await trx('providers').where('name', changes.name).first('uuid');
      if (clash) {
        throw new StoreConflictError('ERT_STORE_CONFLICT', `provider name ${changes.name} is taken by ${clash.uuid}`, { provider: uuid, name: changes.name, duplicate: 'name' });
      }
      await trx('providers').where('id', row.id).update({ name: changes.name });
    }
    if (changes.parentUuid !== undefined) {
      if (ctx.client === 'pg') {
        // The tree and the new parent are locked first (in id order, as claims lock providers), so a child created
        // under one of its providers meanwhile (it locks its parent) is either committed and
        // read below, or waits and takes its parent's new root; and the row is read again. No
        // KEY: that child's foreign-key check on its root must not wait for this lock while this
        // waits for its parent (a deadlock).
        await trx('providers')
          .where('root_id', row.root_id)
          .modify((q) => {
            // The new parent in the same statement, so every lock is taken in id order.
            if (changes.parentUuid) q.orWhere('uuid', changes.parentUuid);
          })
          .orderBy('id')
          .select('id')
          .forNoKeyUpdate();
        const now = await ctx.providerRow(trx, uuid);
        if (now.root_id !== row.root_id || now.parent_id !== row.parent_id) {
          throw new StoreConflictError('ERT_STORE_CONFLICT', `provider ${row.name} (${uuid}) was moved by another writer meanwhile`, { provider: uuid });
        }
      }
      const parent = changes.parentUuid === null ? undefined : await ctx.providerRow(trx, changes.parentUuid);
      if ((parent?.id ?? null) !== (row.parent_id ?? null)) {
        const host: { name: string } | undefined = await trx('hosts').where('root_provider_id', row.id).first('name');
        if (host && parent) throw invalid(`provider ${row.name} (${uuid}) is the root of host ${host.name}: it cannot get a parent`, { provider: uuid, host: host.name });
        // The subtree: the tree's providers below this one (and itself).
        const tree: Array<{ id: number; parent_id: number | null }> = await trx('providers').where('root_id', row.root_id).select('id', 'parent_id');
        const subtree = new Set([row.id]);
        for (let grew = true; grew; ) {
          grew = false;
          for (const p of tree) {
            if (p.parent_id !== null && subtree.has(p.parent_id) && !subtree.has(p.id)) {
              subtree.add(p.id);
              grew = true;
            }
          }
        }
        if (parent && subtree.has(parent.id)) {
          throw invalid(`provider ${row.name} (${uuid}) cannot move under ${parent.name} (${parent.uuid}), which is in its own subtree`, { provider: uuid, parent: parent.uuid });
        }
        await ctx.bumpHostsOf(trx, [row.id]);
        await trx('providers').where('id', row.id).update({ parent_id: parent?.id ?? null });
        for (const part of chunks([...subtree], 500)) await trx('providers').whereIn('id', part).update({ root_id: parent ? parent.root_id : row.id });
        await ctx.bumpHostsOf(trx, [row.id]);
      }
    }
    return ctx.providerRecord(trx, uuid);
  });
}

export async function deleteProvider(ctx: StoreContext, uuid: string): Promise<void> {
  await ctx.write(`deleteProvider ${uuid}`, async (trx) => {
    const row = await ctx.providerRow(trx, uuid);
    const inUse = (why: 'children' | 'allocations' | 'host', text: string) =>
      new StoreError('ERT_STORE_PROVIDER_IN_USE', `provider ${row.name} (${uuid}) cannot be deleted: ${text}`, { provider: uuid, providerName: row.name, reason: why });
    if (await trx('providers').where('parent_id', row.id).first('id')) throw inUse('children', 'it has child providers');
    if (await trx('allocations').where('provider_id', row.id).first('id')) throw inUse('allocations', 'it has allocations');
    const host = await trx('hosts').where('root_provider_id', row.id).first('name');
    if (host) throw inUse('host', `host ${host.name} is rooted on it`);
    await ctx.bumpHostsOf(trx, [row.id]);
    await trx('providers').where('id', row.id).delete();
  });
}

export async function getInventories(
  ctx: StoreContext,
  uuid: string,
  options: { owner?: string } = {},
): Promise<{ generation: number; inventories: Record<ResourceClass, Inventory> }> {
  return ctx.read(async (trx) => {
    const row = await ctx.providerRow(trx, uuid);
    const query = trx('inventories').where('provider_id', row.id);
    if (options.owner !== undefined) query.where('owner', options.owner);
    const rows: InventoryRow[] = await query;
    await ctx.loadClassNames(trx, rows.map((r) => r.resource_class_id));
    const inventories: Record<ResourceClass, Inventory> = {};
    for (const r of rows) inventories[ctx.classNames.get(r.resource_class_id)!] = inventoryFromRow(r);
    return { generation: row.generation, inventories };
  });
}

export async function setInventories(
  ctx: StoreContext,
  uuid: string,
  generation: number | undefined,
  inventories: Record<ResourceClass, Inventory>,
  options: { allowOverCapacity?: boolean; owner?: string } = {},
): Promise<ProviderRecord> {
  if (options.owner !== undefined) checkName('owner', options.owner, 64);
  try {
    checkInventories(uuid, inventories);
  } catch (err) {
    // Name the provider as operators know it, with its uuid.
    const provider = isStoreError(err) ? await getProvider(ctx, uuid).catch(() => undefined) : undefined;
    if (!provider || !isStoreError(err)) throw err;
    throw invalid(err.message.replace(`provider ${uuid}:`, `provider ${provider.name} (${uuid}):`), { ...err.details, provider: provider.name, providerUuid: uuid });
  }
  return ctx.write(
    `setInventories ${uuid}`,
    async (trx) => {
      const row = await ctx.bumpProviderGeneration(trx, uuid, generation);
      // Looked up afresh: another process may have deleted or renamed a class this one cached.
      for (const name of Object.keys(inventories)) ctx.classIds.delete(name);
      const classIds = await ctx.classIdsFor(trx, Object.keys(inventories));
      // Ownership (api.ts): the rows before, to keep owners and, for an owner's write, others' rows.
      const before: InventoryRow[] = await trx('inventories').where('provider_id', row.id);
      const ownerOf = new Map(before.map((r) => [r.resource_class_id, r.owner ?? null]));
      const rows = Object.entries(inventories).map(([rc, inv]) => {
        const classId = classIds.get(rc)!;
        return inventoryToRow(row.id, classId, inv, options.owner ?? ownerOf.get(classId) ?? null);
      });
      if (options.owner !== undefined) {
        const written = new Set(rows.map((r) => r.resource_class_id));
        rows.push(...before.filter((r) => (r.owner ?? null) !== options.owner && !written.has(r.resource_class_id)));
      }
      await ctx.loadClassNames(trx, rows.map((r) => r.resource_class_id));
      const final = new Map(rows.map((r) => [ctx.classNames.get(r.resource_class_id)!, inventoryFromRow(r)]));
      const usages = await usagesOf(ctx, trx, row.id);
      const removed = Object.keys(usages).filter((rc) => usages[rc]! > 0 && !final.has(rc));
      for (const [resourceClass, used] of Object.entries(usages)) {
        const inv = final.get(resourceClass);
        const capacity = inv ? capacityOf(inv) : 0;
        if (used > 0 && !inv) throw new InventoryInUseError({ provider: uuid, providerName: row.name, resourceClass, used, capacity, resourceClasses: removed });
        if (used > capacity && !options.allowOverCapacity) throw new InventoryInUseError({ provider: uuid, providerName: row.name, resourceClass, used, capacity });
      }
      await trx('inventories').where('provider_id', row.id).delete();
      await insertObjects(trx, 'inventories', rows);
      await ctx.bumpHostsOf(trx, [row.id]);
      return ctx.providerRecord(trx, uuid);
    },
    { firstStatementWrites: true },
  );
}

export async function getUsages(ctx: StoreContext, uuid: string): Promise<Record<ResourceClass, number>> {
  return ctx.read(async (trx) => usagesOf(ctx, trx, (await ctx.providerRow(trx, uuid)).id));
}

export async function usagesOf(ctx: StoreContext, db: Db, providerId: number): Promise<Record<ResourceClass, number>> {
  const rows: Array<{ resource_class_id: number; used: number | string }> = await db('allocations')
    .select('resource_class_id')
    .sum({ used: 'used' })
    .where('provider_id', providerId)
    .groupBy('resource_class_id');
  await ctx.loadClassNames(db, rows.map((r) => r.resource_class_id));
  const usages: Record<ResourceClass, number> = {};
  for (const r of rows) usages[ctx.classNames.get(r.resource_class_id)!] = Number(r.used);
  return usages;
}

/** A provider's membership table (traits, aggregates): its link column, the named table and the name column, and the write's name. */
interface Membership {
  write: 'setTraits' | 'setAggregates';
  table: 'provider_traits' | 'provider_aggregates';
  link: 'trait_id' | 'aggregate_id';
  named: 'traits' | 'aggregates';
  name: 'name' | 'uuid';
}
const TRAITS: Membership = { write: 'setTraits', table: 'provider_traits', link: 'trait_id', named: 'traits', name: 'name' };
const AGGREGATES: Membership = { write: 'setAggregates', table: 'provider_aggregates', link: 'aggregate_id', named: 'aggregates', name: 'uuid' };

/** The names a provider is linked to through `m`, sorted; with `owner`, only the links that writer owns. */
function linkedNames(ctx: StoreContext, m: Membership, uuid: string, owner: string | undefined): Promise<string[]> {
  return ctx.read(async (trx) => {
    const row = await ctx.providerRow(trx, uuid);
    const query = trx(`${m.table} as l`).join(`${m.named} as n`, 'n.id', `l.${m.link}`).where('l.provider_id', row.id);
    if (owner !== undefined) query.where('l.owner', owner);
    const rows: Array<{ name: string }> = await query.select(`n.${m.name} as name`).orderBy(`n.${m.name}`);
    return rows.map((r) => r.name);
  });
}

/**
 * Replaces a provider's links through `m` with `names` by ownership (api.ts, `setTraits`): an
 * owner's write replaces its own links and adopts the ones it names, every other writer's kept;
 * a write without owner replaces the set, each kept link keeping its owner. Bumps the provider's
 * generation (checked against `generation`) and, before and after, the hosts that see it (a
 * sharing provider's trait or aggregates change who sees it).
 */
function replaceLinks(ctx: StoreContext, m: Membership, uuid: string, generation: number | undefined, names: string[], owner: string | undefined): Promise<ProviderRecord> {
  if (owner !== undefined) checkName('owner', owner, 64);
  return ctx.write(
    `${m.write} ${uuid}`,
    async (trx) => {
      const row = await ctx.bumpProviderGeneration(trx, uuid, generation);
      await ctx.bumpHostsOf(trx, [row.id]);
      const ids = await ctx.ensureNamed(trx, m.named, m.name, names);
      const before: Array<{ id: number; owner: string | null }> = await trx(m.table).where('provider_id', row.id).select(`${m.link} as id`, 'owner');
      const wanted = new Set(ids.values());
      const kept = owner === undefined ? [] : before.filter((r) => (r.owner ?? null) !== owner && !wanted.has(r.id));
      const ownerOf = new Map(before.map((r) => [r.id, r.owner ?? null]));
      await trx(m.table).where('provider_id', row.id).delete();
      await insertRows(trx, m.table, ['provider_id', m.link, 'owner'], [
        ...[...wanted].map((id) => [row.id, id, owner ?? ownerOf.get(id) ?? null]),
        ...kept.map((r) => [row.id, r.id, r.owner ?? null]),
      ]);
      await ctx.bumpHostsOf(trx, [row.id]);
      return ctx.providerRecord(trx, uuid);
    },
    { firstStatementWrites: true },
  );
}

export function getTraits(ctx: StoreContext, uuid: string, options: { owner?: string } = {}): Promise<string[]> {
  return linkedNames(ctx, TRAITS, uuid, options.owner);
}

export async function setTraits(ctx: StoreContext, uuid: string, generation: number | undefined, traits: string[], options: { owner?: string } = {}): Promise<ProviderRecord> {
  checkTraits(uuid, traits);
  return replaceLinks(ctx, TRAITS, uuid, generation, traits, options.owner);
}

export function getAggregates(ctx: StoreContext, uuid: string, options: { owner?: string } = {}): Promise<string[]> {
  return linkedNames(ctx, AGGREGATES, uuid, options.owner);
}

export async function setAggregates(ctx: StoreContext, uuid: string, generation: number | undefined, aggregates: string[], options: { owner?: string } = {}): Promise<ProviderRecord> {
  for (const agg of aggregates) checkName('aggregate', agg, 36);
  return replaceLinks(ctx, AGGREGATES, uuid, generation, aggregates, options.owner);
}

export async function listAggregates(ctx: StoreContext): Promise<Array<AggregateRecord & { providers: string[] }>> {
  return ctx.read(async (trx) => {
    const rows: Array<{ uuid: string; name: string | null; metadata: string }> = await trx('aggregates').select('uuid', 'name', 'metadata').orderBy('uuid');
    const members: Array<{ aggregate: string; provider: string }> = await trx('provider_aggregates as pa')
      .join('aggregates as a', 'a.id', 'pa.aggregate_id')
      .join('providers as p', 'p.id', 'pa.provider_id')
      .select('a.uuid as aggregate', 'p.uuid as provider')
      .orderBy('p.uuid');
    return rows.map((r) => ({
      uuid: r.uuid,
      ...(r.name !== null ? { name: r.name } : {}),
      metadata: JSON.parse(r.metadata) as Record<string, string>,
      providers: members.filter((m) => m.aggregate === r.uuid).map((m) => m.provider),
    }));
  });
}

export async function upsertAggregate(ctx: StoreContext, aggregate: AggregateRecord): Promise<void> {
  checkName('aggregate', aggregate.uuid, 36);
  const metadata = aggregate.metadata ?? {};
  for (const [key, value] of Object.entries(metadata)) {
    if (typeof value !== 'string') throw invalid(`aggregate ${aggregate.uuid}: metadata ${key} must be a string`, { aggregate: aggregate.uuid, key });
  }
  await ctx.write(`upsertAggregate ${aggregate.uuid}`, async (trx) => {
    await trx('aggregates')
      .insert({ uuid: aggregate.uuid, name: aggregate.name ?? null, metadata: JSON.stringify(metadata) })
      .onConflict('uuid')
      .merge(['name', 'metadata']);
    // The metadata of a root's aggregates is part of its host's snapshot.
    await trx('hosts')
      .whereIn('root_provider_id', (q) =>
        q.select('pa.provider_id').from('provider_aggregates as pa').join('aggregates as a', 'a.id', 'pa.aggregate_id').where('a.uuid', aggregate.uuid),
      )
      .increment('generation', 1);
  });
}
