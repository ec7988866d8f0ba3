/**
 * Allocations and consumers: `writeAllocations` with write-combining (calls in flight committed
 * together, each checked and answered on its own), the claim transaction, and reads.
 */
import type { Allocation, AllocationWrite, AllocationWriteResult, ConsumerRecord, InstanceRecord, ReshapeInventory } from './api.js';
import type { StoreContext } from './context.js';
import { InventoryInUseError, StoreConflictError, StoreError, isStoreError, isStoreUnavailable, type StoreErrorCode } from './errors.js';
import { anyHolds, holdsOf } from './holds.js';
import { inventoryFromRow, inventoryToRow, type InventoryRow } from './rows.js';
import { chunks, groupBy, inChunks, insertObjects, insertRows, type Trx } from './sql.js';
import { checkConsumerGeneration, checkFits, checkInventories, checkName, invalid, notFound, validateWrites } from './validate.js';
import { usagesOf } from './providers.js';
import { holdLedger, lockRecords, upsertInstancesIn } from './instances.js';
import { quickClaimable, quickClaims } from './quick-claim.js';

/** Most writeAllocations calls combined in one transaction. */
const MAX_COMBINED_WRITES = 256;

export class AllocationWriter {
  constructor(private readonly ctx: StoreContext) {}

  /**
   * Write-combining: calls that arrive while a write is in flight, or before the flush a call
   * queues as a microtask (`scheduleFlush`), are committed together in the next transaction
   * (each call's writes checked as a unit, in arrival order, so one call's failure does not
   * affect the others and every caller gets its own result).
   */
  private readonly pendingWrites: PendingWrite[] = [];

  private flushing = false;

  private flushScheduled = false;

  /** The batch in flight (its commit and the flush after it), for `drain`. */
  private inFlight: Promise<void> | undefined;

  async writeAllocations(writes: AllocationWrite[]): Promise<AllocationWriteResult> {
    validateWrites(writes);
    if (writes.length === 0) return { hosts: [] };
    if (this.ctx.closed) throw new StoreError('ERT_STORE_INVALID', 'writeAllocations: the store is closed');
    return new Promise<AllocationWriteResult>((resolve, reject) => {
      this.pendingWrites.push({ writes, resolve, reject });
      this.scheduleFlush();
    });
  }

  /**
   * Flushes once the microtasks queued now have run: callers answered together by the last
   * batch continue in step, and the first to call again would otherwise go alone, ahead of
   * the rest (a lone claim every batch, docs/benchmarks.md). A caller alone waits one microtask.
   */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flushPendingWrites();
    });
  }

  private flushPendingWrites(): void {
    if (this.flushing || this.pendingWrites.length === 0) return;
    this.flushing = true;
    const batch = this.pendingWrites.splice(0, this.ctx.options.combineWrites === false ? 1 : MAX_COMBINED_WRITES);
    this.inFlight = this.commitCombined(batch).finally(() => {
      this.flushing = false;
      this.inFlight = undefined;
      this.flushPendingWrites();
    });
  }

  /**
   * Sends the calls not sent yet (their flush waits for a microtask) and resolves once no batch
   * is in flight: `close()` waits for it, so a call made before `close()` is written, not refused.
   */
  async drain(): Promise<void> {
    this.flushPendingWrites();
    while (this.inFlight) await this.inFlight.catch(() => undefined);
  }

  private async commitCombined(batch: PendingWrite[]): Promise<void> {
    const run = (calls: PendingWrite[]) =>
      this.ctx.write(
        'writeAllocations',
        (trx) =>
          this.applyAllocationCalls(
            trx,
            calls.map((c) => c.writes),
          ),
        // A claim whose COMMIT's answer is lost is settled by asking the server, as on the quick path.
        { firstStatementWrites: true, resolveLostCommit: true },
      );
    const settle = (call: PendingWrite, outcome: CallOutcome) => ('error' in outcome ? call.reject(outcome.error) : call.resolve(outcome.result));
    // The calls one transaction each, so one call's conflict is not the others'.
    const oneByOne = async () => {
      for (const call of batch) {
        try {
          const [outcome] = await run([call]);
          settle(call, outcome!);
        } catch (callErr) {
          call.reject(callErr);
        }
      }
    };
    const writes = batch.map((c) => c.writes);
    if (quickClaimable(this.ctx, writes)) {
      // Claims of new consumers: three round trips on SQLite, two on PostgreSQL, however many
      // are combined, instead of fifteen or so (quick-claim.ts).
      let outcomes: CallOutcome[] | undefined;
      try {
        outcomes = await quickClaims(this.ctx, writes);
      } catch (err) {
        if (batch.length === 1) return batch[0]!.reject(err);
        return failsEveryCall(err) ? batch.forEach((call) => call.reject(err)) : oneByOne();
      }
      if (outcomes !== undefined) return batch.forEach((call, i) => settle(call, outcomes[i]!));
    }
    try {
      const outcomes = await run(batch);
      batch.forEach((call, i) => settle(call, outcomes[i]!));
    } catch (err) {
      if (batch.length === 1) return batch[0]!.reject(err);
      if (failsEveryCall(err)) return batch.forEach((call) => call.reject(err));
      await oneByOne();
    }
  }

  /**
   * Applies several `writeAllocations` calls in one transaction and returns each call's
   * outcome (its error, or the hosts it changed); a call that fails leaves no trace. Locks every provider
   * the calls touch (new allocations and the consumers' current ones) before reading usage:
   * SQLite by taking the write lock with the first statement, PostgreSQL with SELECT ...
   * FOR UPDATE ordered by id (a fixed order, so concurrent claims cannot deadlock), then the
   * consumer rows. Checks run in memory against the usage read under the locks; the result
   * is written with a fixed number of set-based statements, however many calls are combined.
   */
  private async applyAllocationCalls(trx: Trx, calls: AllocationWrite[][]): Promise<CallOutcome[]> {
    const pg = this.ctx.client === 'pg';
    if (!pg) await this.ctx.takeWriteLock(trx);
    const all = calls.flat();
    const consumerUuids = [...new Set(all.map((w) => w.consumer.uuid))];
    const newUuids = [...new Set(all.flatMap((w) => w.allocations.map((a) => a.providerUuid)))].sort();

    let consumers = await this.readConsumers(trx, consumerUuids, false);
    const heldIds = (states: Map<string, ConsumerState>) => [...new Set([...states.values()].flatMap((c) => [...c.allocations.keys()].map(providerOfKey)))];
    const providerQuery = trx('providers as p')
      .select('p.id', 'p.uuid', 'p.name', 'p.root_id', this.ctx.sharingFlag())
      .where((q) => {
        q.whereIn('p.uuid', newUuids);
        const held = heldIds(consumers);
        if (held.length > 0) q.orWhereIn('p.id', held);
      })
      .orderBy('id');
    if (pg) providerQuery.forUpdate();
    const providers: Array<{ id: number; uuid: string; name: string; root_id: number; sharing: number | boolean }> = await providerQuery;
    // The hosts of the instance records written or removed, as they were before this
    // transaction: read once, for the removals and for the moves. PostgreSQL: the rows locked
    // until commit, before the consumers are read again, so a writer that wrote a record of the
    // same uuid (a consumer that did not exist when read above, so no provider of it is locked)
    // has committed by then, and its consumer is seen.
    const recordUuids = all.flatMap((w) => [...(w.instance ? [w.instance.uuid] : []), ...(w.removeInstance ? [w.consumer.uuid] : [])]);
    const recordHosts = await lockRecords(this.ctx, trx, recordUuids);
    if (pg) {
      // Lock the consumers and read them again: they are now stable until commit.
      consumers = await this.readConsumers(trx, consumerUuids, true);
      const locked = new Set(providers.map((p) => p.id));
      if (heldIds(consumers).some((id) => !locked.has(id))) {
        throw new StoreConflictError('ERT_STORE_CONFLICT', 'writeAllocations: a consumer changed providers concurrently', { consumers: consumerUuids });
      }
    }
    const providerByUuid = new Map(providers.map((p) => [p.uuid, p]));
    const newIds = newUuids.flatMap((u) => providerByUuid.get(u)?.id ?? []);
    const classIds = await this.ctx.classIdsFor(trx, all.flatMap((w) => w.allocations.map((a) => a.resourceClass)));

    // Inventories with their usage in one query (usage only exists where inventory does:
    // setInventories refuses to remove a class in use).
    const inventoryRows: Array<InventoryRow & { used: number | string | null }> = await inChunks(newIds, (part) =>
      trx('inventories as i')
        .select('i.*', trx.raw('(select sum(a.used) from allocations a where a.provider_id = i.provider_id and a.resource_class_id = i.resource_class_id) as used'))
        .whereIn('i.provider_id', part),
    );
    const inventories = new Map(inventoryRows.map((r) => [allocationKey(r.provider_id, r.resource_class_id), inventoryFromRow(r)]));
    const usage = new Map(inventoryRows.map((r) => [allocationKey(r.provider_id, r.resource_class_id), Number(r.used ?? 0)]));
    const instanceHosts = [...new Set(all.flatMap((w) => (w.instance ? [w.instance.host] : [])))];
    const hostRows: Array<{ id: number; name: string }> = await inChunks(instanceHosts, (part) => trx('hosts').select('id', 'name').whereIn('name', part));
    const hostIds = new Map(hostRows.map((r) => [r.name, r.id]));
    await this.ctx.lockHostsToBump(
      trx,
      [...new Set(providers.map((p) => p.root_id))],
      [...new Set([...hostIds.values(), ...recordHosts.values()])],
      providers.filter((p) => Boolean(p.sharing)).map((p) => p.id),
    );
    // Exclusive holds (pinned CPUs, cache ways, pools), only when some record names one:
    // releasing never conflicts, and rows of removed records go with them (foreign key).
    const ledger = anyHolds(all.flatMap((w) => (w.instance ? [w.instance] : [])))
      ? await holdLedger(this.ctx, trx, [...hostIds.values()], all.flatMap((w) => (w.instance ? [w.instance.uuid] : w.removeInstance ? [w.consumer.uuid] : [])))
      : undefined;

    // Check each call against the state left by the calls before it.
    const outcomes: Array<{ error: unknown } | { providers: Set<number>; instances: InstanceRecord[]; removed: string[] }> = [];
    const final = new Map<string, ConsumerState | null>();
    const touched = new Set<number>();
    const instances: InstanceRecord[] = [];
    // Each instance record's last state over the successful calls, in order: written, or removed (null).
    const records = new Map<string, InstanceRecord | null>();
    for (const call of calls) {
      const stagedConsumers = new Map<string, ConsumerState | null>();
      const stagedUsage = new Map<string, number>();
      const usedOf = (key: string) => stagedUsage.get(key) ?? usage.get(key) ?? 0;
      const holdsMark = ledger?.mark() ?? 0;
      try {
        for (const write of call) {
          const { uuid } = write.consumer;
          const current = stagedConsumers.has(uuid) ? stagedConsumers.get(uuid)! : final.has(uuid) ? final.get(uuid)! : (consumers.get(uuid) ?? null);
          checkConsumerGeneration(write, current);
          for (const [key, used] of current?.allocations ?? []) stagedUsage.set(key, usedOf(key) - used);
          const allocations = new Map<string, number>();
          for (const alloc of write.allocations) {
            const provider = providerByUuid.get(alloc.providerUuid);
            if (!provider) throw notFound('provider', alloc.providerUuid, { provider: alloc.providerUuid, consumer: uuid });
            const key = allocationKey(provider.id, classIds.get(alloc.resourceClass)!);
            const inv = inventories.get(key);
            checkFits(provider, alloc, inv && { inv, used: usedOf(key) });
            stagedUsage.set(key, usedOf(key) + alloc.amount);
            allocations.set(key, alloc.amount);
          }
          if (write.instance && !hostIds.has(write.instance.host)) throw notFound('host', write.instance.host, { host: write.instance.host, instance: write.instance.uuid });
          if (write.instance) ledger?.set(write.instance.uuid, { id: hostIds.get(write.instance.host)!, name: write.instance.host }, holdsOf(write.instance));
          if (write.removeInstance) ledger?.release(uuid);
          stagedConsumers.set(
            uuid,
            allocations.size === 0
              ? null
              : {
                  id: current?.id,
                  // Placement's count: a consumer is created at 0 and its first write bumps it.
                  generation: current ? current.generation + 1 : 1,
                  projectId: write.consumer.projectId,
                  userId: write.consumer.userId,
                  consumerType: write.consumer.consumerType ?? current?.consumerType ?? null,
                  allocations,
                },
          );
        }
      } catch (err) {
        if (!isStoreError(err)) throw err;
        ledger?.rollback(holdsMark);
        outcomes.push({ error: err });
        continue;
      }
      const callProviders = new Set<number>();
      const callInstances = call.flatMap((write) => (write.instance ? [write.instance] : []));
      const callRemoved = call.flatMap((write) => (write.removeInstance ? [write.consumer.uuid] : []));
      outcomes.push({ providers: callProviders, instances: callInstances, removed: callRemoved });
      for (const write of call) {
        if (write.instance) records.set(write.instance.uuid, write.instance);
        if (write.removeInstance) records.set(write.consumer.uuid, null);
      }
      for (const [key, used] of stagedUsage) usage.set(key, used);
      for (const [uuid, state] of stagedConsumers) {
        const before = final.has(uuid) ? final.get(uuid) : consumers.get(uuid);
        for (const key of [...(before?.allocations.keys() ?? []), ...(state?.allocations.keys() ?? [])]) callProviders.add(providerOfKey(key));
        final.set(uuid, state);
      }
      for (const id of callProviders) touched.add(id);
      instances.push(...callInstances);
    }
    if (final.size > 0) await this.writeConsumers(trx, consumers, final);
    if (touched.size > 0) await trx('providers').whereIn('id', [...touched]).increment('generation', 1);
    // Instance records removed (`removeInstance`): the rows deleted unless a later call of the
    // batch wrote the record again.
    const hostsOf = (uuids: Iterable<string>) => new Map([...uuids].flatMap((uuid) => (recordHosts.has(uuid) ? [[uuid, recordHosts.get(uuid)!] as const] : [])));
    const removedHosts = hostsOf(outcomes.flatMap((o) => ('removed' in o ? o.removed : [])));
    const gone = [...removedHosts.keys()].filter((uuid) => records.get(uuid) === null);
    for (const part of chunks(gone)) await trx('instances').whereIn('uuid', part).delete();
    const written = [...records.values()].filter((r): r is InstanceRecord => r !== null);
    const previousHosts = written.length > 0 ? await upsertInstancesIn(this.ctx, trx, written, hostIds, { bumpHosts: false, previous: hostsOf(written.map((r) => r.uuid)) }) : new Map<string, number>();
    // Host generations, each bumped once: the roots of the trees touched and the instances'
    // hosts (new and previous) in one statement returning the new generations; then the
    // general path for sharing providers (hosts of their aggregates).
    const rootOf = new Map(providers.map((p) => [p.id, p.root_id]));
    const roots = [...new Set([...touched].map((id) => rootOf.get(id)!))];
    const instanceHostIds = [...new Set([...instances.map((i) => hostIds.get(i.host)!), ...previousHosts.values(), ...removedHosts.values()])];
    const bumped: Array<{ id: number; name: string; generation: number; root_provider_id: number }> = [];
    for (let i = 0; i < Math.max(roots.length, instanceHostIds.length); i += 450) {
      const rootPart = roots.slice(i, i + 450);
      const hostPart = instanceHostIds.slice(i, i + 450);
      const rows: Array<{ id: number; name: string; generation: number; root_provider_id: number }> = await trx('hosts')
        .where((q) => {
          // Only non-empty lists: knex turns an empty one into a constant (`1 = 0`), and an OR
          // with a constant makes SQLite scan every host instead of using the two indexes.
          if (rootPart.length > 0) q.orWhereIn('root_provider_id', rootPart);
          if (hostPart.length > 0) q.orWhereIn('id', hostPart);
        })
        .modify((q) => {
          if (bumped.length > 0) q.whereNotIn('id', bumped.map((r) => r.id));
        })
        .update({ generation: trx.raw('generation + 1') })
        .returning(['id', 'name', 'generation', 'root_provider_id']);
      bumped.push(...rows);
    }
    const sharing = [...touched].filter((id) => providers.some((p) => p.id === id && Boolean(p.sharing)));
    if (sharing.length > 0) await this.ctx.bumpHostsOf(trx, sharing);
    // Each successful call: the hosts it changed, `shared` when another call changed them too.
    const hostById = new Map(bumped.map((r) => [r.id, r]));
    // A root may carry more than one host: a claim on it changed them all (told in id order).
    const hostsByRoot = groupBy([...bumped].sort((a, b) => a.id - b.id), (r) => r.root_provider_id);
    const writers = new Map<number, number>();
    const hostsOfCall = outcomes.map((outcome) => {
      if ('error' in outcome) return [];
      const ids = new Set<number>();
      for (const provider of outcome.providers) for (const host of hostsByRoot.get(rootOf.get(provider)!) ?? []) ids.add(host.id);
      for (const instance of outcome.instances) {
        ids.add(hostIds.get(instance.host)!);
        const previous = previousHosts.get(instance.uuid);
        if (previous !== undefined) ids.add(previous);
      }
      for (const uuid of outcome.removed) {
        const host = removedHosts.get(uuid);
        if (host !== undefined) ids.add(host);
      }
      for (const id of ids) writers.set(id, (writers.get(id) ?? 0) + 1);
      return [...ids];
    });
    return outcomes.map((outcome, i): CallOutcome => {
      if ('error' in outcome) return outcome;
      const hosts = hostsOfCall[i]!.flatMap((id) => {
        const host = hostById.get(id);
        if (!host) return [];
        return [{ name: host.name, generationBefore: host.generation - 1, generation: host.generation, shared: writers.get(id)! > 1 || sharing.length > 0 }];
      });
      return { result: { hosts } };
    });
  }

  /** Consumers by uuid with their allocations (`provider:class` -> amount); `lock` locks the rows (PostgreSQL). */
  private async readConsumers(trx: Trx, uuids: string[], lock: boolean): Promise<Map<string, ConsumerState>> {
    const rows: Array<{ id: number; uuid: string; generation: number; project_id: string; user_id: string; consumer_type: string | null; provider_id: number | null; resource_class_id: number | null; used: number | null }> =
      await inChunks(uuids, (part) => {
        const query = trx('consumers as c')
          .leftJoin('allocations as a', 'a.consumer_id', 'c.id')
          .whereIn('c.uuid', part)
          .select('c.id', 'c.uuid', 'c.generation', 'c.project_id', 'c.user_id', 'c.consumer_type', 'a.provider_id', 'a.resource_class_id', 'a.used')
          .orderBy('c.id');
        if (lock) query.forUpdate('c');
        return query;
      });
    const out = new Map<string, ConsumerState>();
    for (const row of rows) {
      let state = out.get(row.uuid);
      if (!state) {
        state = { id: row.id, generation: row.generation, projectId: row.project_id, userId: row.user_id, consumerType: row.consumer_type, allocations: new Map() };
        out.set(row.uuid, state);
      }
      if (row.provider_id !== null && row.resource_class_id !== null) state.allocations.set(allocationKey(row.provider_id, row.resource_class_id), row.used ?? 0);
    }
    return out;
  }

  /** Writes the consumers' final states: set-based deletes and inserts, one update per surviving existing consumer. */
  private async writeConsumers(trx: Trx, before: Map<string, ConsumerState>, final: Map<string, ConsumerState | null>): Promise<void> {
    const existingIds = [...final.keys()].flatMap((uuid) => before.get(uuid)?.id ?? []);
    for (const part of chunks(existingIds)) await trx('allocations').whereIn('consumer_id', part).delete();
    const removed = [...final].flatMap(([uuid, state]) => (state === null ? (before.get(uuid)?.id ?? []) : []));
    for (const part of chunks(removed)) await trx('consumers').whereIn('id', part).delete();
    const kept = [...final].filter((entry): entry is [string, ConsumerState] => entry[1] !== null);
    const ids = new Map<string, number>();
    for (const [uuid, state] of kept) {
      const id = before.get(uuid)?.id;
      if (id === undefined) continue;
      await trx('consumers').where('id', id).update({ generation: state.generation, project_id: state.projectId, user_id: state.userId, consumer_type: state.consumerType });
      ids.set(uuid, id);
    }
    const created = kept.filter(([uuid]) => !ids.has(uuid));
    const rows = await insertRows(
      trx,
      'consumers',
      ['uuid', 'project_id', 'user_id', 'generation', 'consumer_type'],
      created.map(([uuid, s]) => [uuid, s.projectId, s.userId, s.generation, s.consumerType]),
      { returning: ['id', 'uuid'] },
    );
    for (const row of rows as Array<{ id: number; uuid: string }>) ids.set(row.uuid, row.id);
    await insertRows(
      trx,
      'allocations',
      ['provider_id', 'consumer_id', 'resource_class_id', 'used'],
      kept.flatMap(([uuid, s]) => [...s.allocations].map(([key, used]) => [providerOfKey(key), ids.get(uuid)!, classOfKey(key), used])),
    );
  }

  async getAllocations(consumerUuid: string): Promise<{ generation: number | null; allocations: Allocation[] }> {
    return this.ctx.read(async (trx) => {
      const consumer: { id: number; generation: number } | undefined = await trx('consumers').where('uuid', consumerUuid).first('id', 'generation');
      if (!consumer) return { generation: null, allocations: [] };
      const rows: Array<{ uuid: string; resource_class_id: number; used: number }> = await trx('allocations as a')
        .join('providers as p', 'p.id', 'a.provider_id')
        .where('a.consumer_id', consumer.id)
        .select('p.uuid', 'a.resource_class_id', 'a.used')
        .orderBy(['p.uuid', 'a.resource_class_id']);
      await this.ctx.loadClassNames(trx, rows.map((r) => r.resource_class_id));
      return {
        generation: consumer.generation,
        allocations: rows.map((r) => ({ providerUuid: r.uuid, resourceClass: this.ctx.classNames.get(r.resource_class_id)!, amount: r.used })),
      };
    });
  }

  async getConsumer(consumerUuid: string): Promise<ConsumerRecord | undefined> {
    return (await this.consumersWhere({ uuid: consumerUuid }))[0];
  }

  listConsumers(filter: { providerUuid?: string; projectId?: string; userId?: string } = {}): Promise<ConsumerRecord[]> {
    return this.consumersWhere(filter);
  }

  private async consumersWhere(filter: { uuid?: string; providerUuid?: string; projectId?: string; userId?: string }): Promise<ConsumerRecord[]> {
    return this.ctx.read(async (trx) => {
      const query = trx('consumers as c')
        .join('allocations as a', 'a.consumer_id', 'c.id')
        .join('providers as p', 'p.id', 'a.provider_id')
        .select('c.uuid', 'c.generation', 'c.project_id', 'c.user_id', 'c.consumer_type', 'p.uuid as provider_uuid', 'a.resource_class_id', 'a.used')
        .orderBy(['c.uuid', 'p.uuid', 'a.resource_class_id']);
      if (filter.uuid !== undefined) query.where('c.uuid', filter.uuid);
      if (filter.projectId !== undefined) query.where('c.project_id', filter.projectId);
      if (filter.userId !== undefined) query.where('c.user_id', filter.userId);
      if (filter.providerUuid !== undefined) {
        query.whereIn('c.id', trx('allocations as a2').join('providers as p2', 'p2.id', 'a2.provider_id').where('p2.uuid', filter.providerUuid).select('a2.consumer_id'));
      }
      const rows: Array<{ uuid: string; generation: number; project_id: string; user_id: string; consumer_type: string | null; provider_uuid: string; resource_class_id: number; used: number }> = await query;
      await this.ctx.loadClassNames(trx, rows.map((r) => r.resource_class_id));
      const out: ConsumerRecord[] = [];
      for (const r of rows) {
        let last = out.at(-1);
        if (last?.uuid !== r.uuid) {
          last = { uuid: r.uuid, generation: r.generation, projectId: r.project_id, userId: r.user_id, consumerType: r.consumer_type, allocations: [] };
          out.push(last);
        }
        last.allocations.push({ providerUuid: r.provider_uuid, resourceClass: this.ctx.classNames.get(r.resource_class_id)!, amount: Number(r.used) });
      }
      return out;
    });
  }

  /**
   * Placement's reshaper in one transaction: the providers named locked (PostgreSQL: in id
   * order, as claims lock them), each provider's generation checked and bumped, its
   * inventories set to the union of the old and the new (Placement's interim step), the
   * allocations written as one `writeAllocations` call, then the inventories set to the new
   * ones, refusing to remove a class still in use.
   */
  async reshape(inventories: ReshapeInventory[], writes: AllocationWrite[]): Promise<void> {
    validateWrites(writes);
    const seen = new Set<string>();
    for (const r of inventories) {
      checkName('provider', r.providerUuid, 36);
      if (seen.has(r.providerUuid)) throw invalid(`reshape: provider ${r.providerUuid} is listed twice`, { provider: r.providerUuid });
      seen.add(r.providerUuid);
      checkInventories(r.providerUuid, r.inventories);
    }
    if (this.ctx.closed) throw new StoreError('ERT_STORE_INVALID', 'reshape: the store is closed');
    await this.ctx.write('reshape', async (trx) => {
      if (this.ctx.client === 'pg') {
        const uuids = [...new Set([...inventories.map((r) => r.providerUuid), ...writes.flatMap((w) => w.allocations.map((a) => a.providerUuid))])];
        await inChunks(uuids, (part) => trx('providers').select('id').whereIn('uuid', part).orderBy('id').forUpdate());
      }
      const rows: Array<{ id: number; uuid: string; name: string; inventories: ReshapeInventory['inventories']; classIds: Map<string, number>; owners: Map<number, string | null> }> = [];
      for (const r of inventories) {
        const row = await this.ctx.bumpProviderGeneration(trx, r.providerUuid, r.generation);
        const classIds = await this.ctx.classIdsFor(trx, Object.keys(r.inventories));
        // A class kept keeps its owner (a reshape is an API write: setInventories without owner).
        const owned: Array<{ resource_class_id: number; owner: string | null }> = await trx('inventories').where('provider_id', row.id).select('resource_class_id', 'owner');
        const owners = new Map(owned.map((o) => [o.resource_class_id, o.owner]));
        // Interim: the new inventories, and the old ones of the classes the new set drops.
        const newIds = [...classIds.values()];
        if (newIds.length > 0) await trx('inventories').where('provider_id', row.id).whereIn('resource_class_id', newIds).delete();
        await insertObjects(trx, 'inventories', Object.entries(r.inventories).map(([rc, inv]) => inventoryToRow(row.id, classIds.get(rc)!, inv, owners.get(classIds.get(rc)!) ?? null)));
        rows.push({ id: row.id, uuid: r.providerUuid, name: row.name, inventories: r.inventories, classIds, owners });
      }
      if (writes.length > 0) {
        const [outcome] = await this.applyAllocationCalls(trx, [writes]);
        if (outcome && 'error' in outcome) throw outcome.error;
      }
      for (const row of rows) {
        const usages = await usagesOf(this.ctx, trx, row.id);
        const removed = Object.keys(usages).filter((rc) => usages[rc]! > 0 && row.inventories[rc] === undefined);
        if (removed.length > 0) {
          throw new InventoryInUseError({ provider: row.uuid, providerName: row.name, resourceClass: removed[0]!, used: usages[removed[0]!]!, capacity: 0, resourceClasses: removed });
        }
        await trx('inventories').where('provider_id', row.id).delete();
        await insertObjects(trx, 'inventories', Object.entries(row.inventories).map(([rc, inv]) => inventoryToRow(row.id, row.classIds.get(rc)!, inv, row.owners.get(row.classIds.get(rc)!) ?? null)));
      }
      await this.ctx.bumpHostsOf(trx, rows.map((r) => r.id));
    });
  }

  async deleteAllocations(consumerUuid: string): Promise<void> {
    checkName('consumer', consumerUuid, 36);
    await this.writeAllocations([{ consumer: { uuid: consumerUuid, projectId: '', userId: '' }, allocations: [] }]);
  }
}

interface PendingWrite {
  writes: AllocationWrite[];
  resolve(result: AllocationWriteResult): void;
  reject(err: unknown): void;
}

/** Outcome of one call in a combined transaction: its error, or the hosts it changed. */
export type CallOutcome = { error: unknown } | { result: AllocationWriteResult };

/**
 * Whether a batch that failed as a whole may have been written all the same: its COMMIT's
 * answer was lost and the server could not say what became of it (`lost-commit.ts`). Such a
 * batch is not applied again call by call: a call that had committed would be refused as a
 * consumer conflict, its caller told the claim is not its own; each caller gets that
 * ERT_STORE_UNAVAILABLE instead, which says to re-read. (Any other failure came before a
 * COMMIT, or the server said it rolled back: nothing was written.)
 */
function mayHaveCommitted(err: unknown): boolean {
  return isStoreUnavailable(err) && err.details['committed'] === 'unknown';
}

/**
 * Errors of the store as a whole, not of one call, which each call of the batch would meet
 * again: another process's write lock held past the busy timeout, a file this process cannot
 * write. Not ERT_STORE_UNAVAILABLE: a connection lost (nothing written, or the server said it
 * rolled back) is most often that connection's, and the calls are applied again one by one on
 * fresh ones (docs/operations.md). Not ERT_STORE_FULL or ERT_STORE_CORRUPT: a batch needs more
 * pages than one call, or touches a damaged page one call does not, and each fails at once, so
 * one by one costs little and may write the calls that fit.
 */
const STORE_WIDE_ERRORS: ReadonlySet<StoreErrorCode> = new Set<StoreErrorCode>(['ERT_STORE_LOCKED', 'ERT_STORE_READ_ONLY']);

/**
 * Whether a combined batch that failed as a whole answers every call with its error, rather
 * than sending the calls again one transaction each: when the batch may have committed (a lost
 * COMMIT answer: sending them again would apply them twice), and when the error is the store's
 * (STORE_WIDE_ERRORS: one by one, each call would wait the busy timeout again, a batch of N
 * taking N + 1 times as long to fail). A race with another process, a statement one call's
 * input broke, a lost connection, a full or damaged file: sent again one by one.
 */
function failsEveryCall(err: unknown): boolean {
  return mayHaveCommitted(err) || (isStoreError(err) && STORE_WIDE_ERRORS.has(err.code));
}

/** A consumer inside writeAllocations: `id` undefined until created; allocations by allocationKey. */
interface ConsumerState {
  id: number | undefined;
  generation: number;
  projectId: string;
  userId: string;
  consumerType: string | null;
  allocations: Map<string, number>;
}

function allocationKey(providerId: number, classId: number): string {
  return `${providerId}:${classId}`;
}

function providerOfKey(key: string): number {
  return Number(key.slice(0, key.indexOf(':')));
}

function classOfKey(key: string): number {
  return Number(key.slice(key.indexOf(':') + 1));
}
