/**
 * The claim of a new consumer on SQLite in three trips to the driver's thread (issue 15):
 * BEGIN IMMEDIATE (the write lock), one statement that reads everything the checks need, and
 * one `exec` of the writes with the COMMIT. The general transaction (`allocations.ts`) sends
 * about fifteen statements one after the other for the same claim, and on node-sqlite3 each
 * is a trip to the thread pool and back: that, more than SQLite's own work, was a claim's cost
 * (`npm run bench -- drivers`).
 *
 * Same checks, same rows, same result as the general path (`packages/store/test/
 * sqlite-claim.test.ts` compares the two on random claims): the consumer generation, every
 * amount against the inventory and the usage read under the write lock, the instance's host,
 * its exclusive holds against the host's others (`HoldLedger`), then the consumer, its
 * allocations, the instance record and its holds written, and the generations of the
 * providers and of the hosts whose trees they are in (and of the instance's host) bumped.
 * The generations the caller is told are exact: nobody else writes while the lock is held.
 *
 * Only what this file can do alone takes this path (`quickClaimable`, then the read): one
 * write of a consumer that does not exist yet, with allocations, resource classes this
 * process already knows, providers that share nothing, and an instance record (if any) that
 * does not exist yet. Anything else (a consumer that exists, a sharing provider, a record to
 * replace) rolls back and goes through the general transaction.
 */
import { TRAIT_SHARING_PROVIDER } from '@ert/plugin-api';
import type { AllocationWrite, AllocationWriteResult } from './api.js';
import { sqliteAll } from './connection.js';
import type { StoreContext } from './context.js';
import { HOLDS_TABLE, HoldLedger, anyHolds, holdsOf, type HoldRow } from './holds.js';
import { INSTANCE_COLUMNS, instanceRowValues } from './instances.js';
import { inventoryFromRow } from './rows.js';
import { insertSql, sqlLiteral } from './sql.js';
import { checkConsumerGeneration, checkFits, notFound } from './validate.js';

/**
 * Everything a claim checks, in one statement (its text never changes, so the connection keeps
 * it prepared): ?1 the consumer, ?2 the sharing trait, ?3 the providers (a JSON array of
 * uuids), ?4 the instance's host, ?5 the instance, ?6 1 when the record names holds.
 */
const CLAIM_READ = `SELECT
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

interface ClaimReadRow {
  consumer_generation: number | null;
  providers: string;
  inventories: string;
  hosts: string;
  instance_exists: number | null;
  holds: string;
}

/** Whether `call` is for this path as far as the call alone tells (no I/O): see the file's comment. */
export function quickClaimable(ctx: StoreContext, call: AllocationWrite[]): boolean {
  if (ctx.client !== 'sqlite3' || ctx.options.quickClaims === false || call.length !== 1) return false;
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
 * Claims `write` (one that `quickClaimable` accepted) in three trips; undefined when the state
 * read puts it out of this path's reach (nothing was written: send it through the general
 * transaction). Throws the general path's errors for the same claims.
 */
export function quickClaim(ctx: StoreContext, write: AllocationWrite): Promise<AllocationWriteResult | undefined> {
  return ctx.sqliteWrite('writeAllocations', async (conn) => {
    const { consumer, allocations, instance } = write;
    const providerUuids = [...new Set(allocations.map((a) => a.providerUuid))];
    const withHolds = instance !== undefined && anyHolds([instance]);
    const [row] = await sqliteAll<ClaimReadRow>(conn, CLAIM_READ, [
      consumer.uuid,
      TRAIT_SHARING_PROVIDER,
      JSON.stringify(providerUuids),
      instance?.host ?? null,
      instance?.uuid ?? null,
      withHolds ? 1 : 0,
    ]);
    const read = row!;
    // A consumer that exists: generation null (new) is the general path's conflict; undefined (no check) replaces it there.
    if (read.consumer_generation !== null && consumer.generation === undefined) return undefined;
    checkConsumerGeneration(write, read.consumer_generation === null ? null : { generation: read.consumer_generation });
    if (read.instance_exists !== null) return undefined;
    const providers = new Map(
      (JSON.parse(read.providers) as Array<[number, string, string, number, number]>).map(([id, uuid, name, rootId, sharing]) => [uuid, { id, uuid, name, rootId, sharing: sharing === 1 }]),
    );
    if ([...providers.values()].some((p) => p.sharing)) return undefined;
    const inventories = new Map(
      (JSON.parse(read.inventories) as Array<[number, number, number, number, number, number, number, string, number | null]>).map(
        ([providerId, classId, total, reserved, minUnit, maxUnit, stepSize, ratio, used]) => [
          `${providerId}:${classId}`,
          {
            inv: inventoryFromRow({ provider_id: providerId, resource_class_id: classId, total, reserved, min_unit: minUnit, max_unit: maxUnit, step_size: stepSize, allocation_ratio: Number(ratio) }),
            used: used ?? 0,
          },
        ],
      ),
    );
    const hosts = (JSON.parse(read.hosts) as Array<[number, string, number, number]>).map(([id, name, generation, rootId]) => ({ id, name, generation, rootId }));

    // The general path's checks, in its order.
    const rows: unknown[][] = [];
    for (const alloc of allocations) {
      const provider = providers.get(alloc.providerUuid);
      if (!provider) throw notFound('provider', alloc.providerUuid, { provider: alloc.providerUuid, consumer: consumer.uuid });
      const classId = ctx.classIds.get(alloc.resourceClass)!;
      checkFits(provider, alloc, inventories.get(`${provider.id}:${classId}`));
      rows.push([provider.id, { sql: `(SELECT id FROM consumers WHERE uuid = ${sqlLiteral(consumer.uuid)})` }, classId, alloc.amount]);
    }
    const instanceHost = instance && hosts.find((h) => h.name === instance.host);
    if (instance && !instanceHost) throw notFound('host', instance.host, { host: instance.host, instance: instance.uuid });
    if (instance && withHolds) {
      const ledger = HoldLedger.fromRows((JSON.parse(read.holds) as Array<[number, string, string, number | null, number | null]>).map(([host_id, instance_uuid, hold, amount, capacity]): HoldRow => ({ host_id, instance_uuid, hold, amount, capacity })));
      ledger.set(instance.uuid, instanceHost!, holdsOf(instance));
    }

    // The hosts told, in the general path's order: those whose trees were claimed on, then the instance's.
    const touched = [...new Set(allocations.map((a) => providers.get(a.providerUuid)!))];
    const bumped = new Map<number, (typeof hosts)[number]>();
    for (const provider of touched) {
      const host = hosts.find((h) => h.rootId === provider.rootId);
      if (host) bumped.set(host.id, host);
    }
    if (instanceHost) bumped.set(instanceHost.id, instanceHost);
    const statements = [
      insertSql('consumers', ['uuid', 'project_id', 'user_id', 'generation', 'consumer_type'], [[consumer.uuid, consumer.projectId, consumer.userId, 1, consumer.consumerType ?? null]]),
      insertSql('allocations', ['provider_id', 'consumer_id', 'resource_class_id', 'used'], rows),
      `UPDATE providers SET generation = generation + 1 WHERE id IN (${touched.map((p) => p.id).join(', ')})`,
    ];
    if (instance) {
      statements.push(insertSql('instances', INSTANCE_COLUMNS, [instanceRowValues(instance, instanceHost!.id, Date.now())]));
      const holds = holdsOf(instance);
      if (holds.length > 0) statements.push(insertSql(HOLDS_TABLE, ['host_id', 'instance_uuid', 'hold', 'amount', 'capacity'], holds.map((h) => [instanceHost!.id, instance.uuid, h.hold, h.amount, h.capacity])));
    }
    if (bumped.size > 0) statements.push(`UPDATE hosts SET generation = generation + 1 WHERE id IN (${[...bumped.keys()].join(', ')})`);
    const result: AllocationWriteResult = {
      hosts: [...bumped.values()].map((h) => ({ name: h.name, generationBefore: h.generation, generation: h.generation + 1, shared: false })),
    };
    return { statements: statements.join(';\n'), value: result };
  });
}
