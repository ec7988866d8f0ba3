/**
 * Exclusive assignments (issue 11, point 4): what an instance holds of its host beyond
 * inventory amounts. A pinned CPU, a cache way or a class of service is a *unit* that one
 * instance of the host holds at most; huge pages come from counted *pools*. Amounts are
 * checked against inventories by the allocation path; these are checked here, in the same
 * transaction as the instance record that names them, so two processes writing for one host
 * (a restarted agent beside a stale one, `ert claim` beside `host run`) cannot double-book.
 *
 * The table `instance_holds` has one row per hold: `amount` null for a unit (a partial
 * unique index on host and unit is the backstop), the amount and the pool's capacity for a
 * pool. Rows are derived from the instance record and written with it; deleting the record
 * deletes them (foreign key, and explicitly).
 */
import type { InstanceRecord } from './api.js';
import { AssignmentTakenError, StoreError } from './errors.js';
import { chunks, IN_CHUNK, inChunks, insertRows, type Trx } from './sql.js';

export const HOLDS_TABLE = 'instance_holds';

/** A row of `instance_holds`. */
export interface HoldRow {
  host_id: number;
  instance_uuid: string;
  hold: string;
  amount: number | string | null;
  capacity: number | string | null;
}

/** One hold: a unit (`amount` null) or an amount of a pool of `capacity`. */
export interface Hold {
  hold: string;
  amount: number | null;
  capacity: number | null;
}

/** The holds an instance record names: its pinned CPUs (`cpu/<n>`), its units, its pools. */
export function holdsOf(record: InstanceRecord): Hold[] {
  return [
    ...(record.cpus ?? []).map((cpu) => ({ hold: `cpu/${cpu}`, amount: null, capacity: null })),
    ...(record.units ?? []).map((unit) => ({ hold: unit, amount: null, capacity: null })),
    ...Object.entries(record.pools ?? {}).map(([pool, p]) => ({ hold: pool, amount: p.amount, capacity: p.capacity })),
  ];
}

/** ERT_STORE_INVALID unless the record's cpus, units and pools are well-formed and distinct. */
export function checkHolds(record: InstanceRecord): void {
  const bad = (what: string) => new StoreError('ERT_STORE_INVALID', `instance ${record.uuid}: ${what}`, { instance: record.uuid });
  if (record.cpus !== undefined && (!Array.isArray(record.cpus) || !record.cpus.every((c) => Number.isSafeInteger(c) && c >= 0))) {
    throw bad('cpus must be a list of non-negative integers');
  }
  if (record.units !== undefined && (!Array.isArray(record.units) || !record.units.every((u) => typeof u === 'string' && u.length > 0 && u.length <= 255))) {
    throw bad('units must be a list of non-empty strings of at most 255 characters');
  }
  if (record.pools !== undefined) {
    if (typeof record.pools !== 'object' || record.pools === null || Array.isArray(record.pools)) throw bad('pools must be an object');
    for (const [pool, p] of Object.entries(record.pools)) {
      if (pool.length === 0 || pool.length > 255) throw bad(`pool name ${JSON.stringify(pool)} must have 1 to 255 characters`);
      if (typeof p !== 'object' || p === null || !Number.isSafeInteger(p.amount) || p.amount < 1 || !Number.isSafeInteger(p.capacity) || p.capacity < 0) {
        throw bad(`pool ${pool}: amount must be a positive integer and capacity a non-negative integer`);
      }
    }
  }
  const names = holdsOf(record).map((h) => h.hold);
  const repeated = names.find((name, i) => names.indexOf(name) !== i);
  if (repeated !== undefined) throw bad(`holds ${repeated} twice (cpus, units and pools must be distinct)`);
}

/**
 * The holds of some hosts as one transaction sees them, changed call by call. `set` checks a
 * record's holds against the others' and applies them; `mark`/`rollback` undo a failed call's
 * changes, so each combined call is checked against the calls before it that succeeded.
 */
export class HoldLedger {
  /** `host \t unit` -> the instance holding it. */
  private readonly unitHolder = new Map<string, string>();
  /** `host \t pool` -> the amount all instances hold. */
  private readonly poolHeld = new Map<string, number>();
  /** Instance uuid -> its host and holds. */
  private readonly current = new Map<string, { hostId: number; holds: Hold[] }>();
  private readonly undoLog: Array<() => void> = [];

  /**
   * The holds on `hostIds` and those of the instances `uuids` (wherever they are). On
   * PostgreSQL the caller must have locked the hosts' rows first: a pool is checked by sum.
   */
  static async read(trx: Trx, hostIds: number[], uuids: string[]): Promise<HoldLedger> {
    // One statement when both lists fit one IN chunk (a claim: its host and its instance), the
    // rows both ways at once; else by host, then by instance. Rows read twice are skipped in fromRows.
    const rows: HoldRow[] =
      hostIds.length > 0 && uuids.length > 0 && hostIds.length + uuids.length <= IN_CHUNK
        ? await trx(HOLDS_TABLE).where((q) => q.whereIn('host_id', hostIds).orWhereIn('instance_uuid', uuids))
        : [...(await inChunks(hostIds, (part) => trx(HOLDS_TABLE).whereIn('host_id', part))), ...(await inChunks(uuids, (part) => trx(HOLDS_TABLE).whereIn('instance_uuid', part)))];
    return HoldLedger.fromRows(rows);
  }

  /** The ledger of these `instance_holds` rows (a row listed twice counts once). */
  static fromRows(rows: Iterable<HoldRow>): HoldLedger {
    const ledger = new HoldLedger();
    const seen = new Set<string>();
    for (const row of rows) {
      const id = `${row.instance_uuid}\t${row.hold}`;
      if (seen.has(id)) continue;
      seen.add(id);
      const hold: Hold = { hold: row.hold, amount: row.amount === null ? null : Number(row.amount), capacity: row.capacity === null ? null : Number(row.capacity) };
      const entry = ledger.current.get(row.instance_uuid) ?? { hostId: row.host_id, holds: [] };
      entry.holds.push(hold);
      ledger.current.set(row.instance_uuid, entry);
      ledger.add(row.host_id, row.instance_uuid, hold);
    }
    ledger.undoLog.length = 0;
    return ledger;
  }

  /**
   * Instance `uuid` now holds `holds` on host `host` (nothing: `holds` empty). Throws
   * AssignmentTakenError, changing nothing, when a unit is another instance's of that host or
   * a pool would exceed its capacity.
   */
  set(uuid: string, host: { id: number; name: string }, holds: Hold[]): void {
    const before = this.current.get(uuid);
    const ownOnHost = (hold: string) => (before && before.hostId === host.id ? (before.holds.find((h) => h.hold === hold)?.amount ?? 0) : 0);
    for (const h of holds) {
      const key = `${host.id}\t${h.hold}`;
      if (h.amount === null) {
        const holder = this.unitHolder.get(key);
        if (holder !== undefined && holder !== uuid) throw new AssignmentTakenError({ host: host.name, instance: uuid, unit: h.hold, holder });
      } else {
        const others = (this.poolHeld.get(key) ?? 0) - ownOnHost(h.hold);
        if (others + h.amount > h.capacity!) throw new AssignmentTakenError({ host: host.name, instance: uuid, pool: h.hold, amount: h.amount, held: others, capacity: h.capacity! });
      }
    }
    if (before) for (const h of before.holds) this.remove(before.hostId, h);
    this.assign(uuid, holds.length > 0 ? { hostId: host.id, holds } : undefined);
    for (const h of holds) this.add(host.id, uuid, h);
  }

  /** The instance holds nothing any more (its record was removed). */
  release(uuid: string): void {
    const before = this.current.get(uuid);
    if (!before) return;
    for (const h of before.holds) this.remove(before.hostId, h);
    this.assign(uuid, undefined);
  }

  /** A point to roll back to. */
  mark(): number {
    return this.undoLog.length;
  }

  /** Undo every change since `mark`. */
  rollback(mark: number): void {
    while (this.undoLog.length > mark) this.undoLog.pop()!();
  }

  private assign(uuid: string, entry: { hostId: number; holds: Hold[] } | undefined): void {
    const previous = this.current.get(uuid);
    this.undoLog.push(() => (previous ? this.current.set(uuid, previous) : this.current.delete(uuid)));
    if (entry) this.current.set(uuid, entry);
    else this.current.delete(uuid);
  }

  private add(hostId: number, uuid: string, h: Hold): void {
    const key = `${hostId}\t${h.hold}`;
    if (h.amount === null) this.put(this.unitHolder, key, uuid);
    else this.put(this.poolHeld, key, (this.poolHeld.get(key) ?? 0) + h.amount);
  }

  private remove(hostId: number, h: Hold): void {
    const key = `${hostId}\t${h.hold}`;
    if (h.amount === null) this.put(this.unitHolder, key, undefined);
    else this.put(this.poolHeld, key, (this.poolHeld.get(key) ?? 0) - h.amount);
  }

  private put<V>(map: Map<string, V>, key: string, value: V | undefined): void {
    const had = map.has(key);
    const previous = map.get(key);
    this.undoLog.push(() => (had ? map.set(key, previous as V) : map.delete(key)));
    if (value === undefined) map.delete(key);
    else map.set(key, value);
  }
}

/** True when any record names a hold (a batch without any needs no ledger). */
export function anyHolds(records: Iterable<InstanceRecord>): boolean {
  for (const r of records) if ((r.cpus?.length ?? 0) > 0 || (r.units?.length ?? 0) > 0 || Object.keys(r.pools ?? {}).length > 0) return true;
  return false;
}

/**
 * Persist the holds of the records written (`InstanceRecord`) and removed (null) in this
 * transaction: each instance's rows are replaced by its record's. Call after the instance
 * rows are written (the holds reference them). `existing`: the uuids that had a record
 * before (only they can have rows to remove).
 */
export async function writeHolds(trx: Trx, records: Map<string, InstanceRecord | null>, hostIds: Map<string, number>, existing: ReadonlySet<string>): Promise<void> {
  const uuids = [...records.keys()].filter((uuid) => existing.has(uuid));
  for (const part of chunks(uuids)) await trx(HOLDS_TABLE).whereIn('instance_uuid', part).delete();
  const rows = [...records.values()].flatMap((record) => (record === null ? [] : holdRowValues(record, hostIds.get(record.host)!)));
  await insertRows(trx, HOLDS_TABLE, HOLD_COLUMNS, rows);
}

/** The `instance_holds` columns, in the order of `holdRowValues`. */
export const HOLD_COLUMNS = ['host_id', 'instance_uuid', 'hold', 'amount', 'capacity'];

/** The rows (HOLD_COLUMNS) of the holds `record` names, on host `hostId`. */
export function holdRowValues(record: InstanceRecord, hostId: number): unknown[][] {
  return holdsOf(record).map((h) => [hostId, record.uuid, h.hold, h.amount, h.capacity]);
}
