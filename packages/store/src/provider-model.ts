import type { ProviderSnapshot } from './api.js';
import type { StoreContext } from './context.js';
import { providerSnapshots } from './snapshots.js';
import type { Trx } from './sql.js';

/** What identifies the state of one provider's snapshot (see `ProviderModel`). */
interface VersionRow {
  id: number;
  uuid: string;
  name: string;
  generation: number;
  parent_id: number | null;
  root_id: number | null;
  owner: string | null;
}

const versionOf = (r: VersionRow): string => `${r.uuid}|${r.generation}|${r.parent_id}|${r.root_id}|${r.owner}|${r.name}`;

/**
 * `Store.loadProviders`, read in proportion to what changed: the whole model (every provider's
 * inventories, usages, traits, aggregates) is kept between calls, and each call reads one row
 * per provider (uuid, generation, name, parent, root, owner) and the resource class names, in
 * one read transaction, then loads only the providers whose row differs, and drops the gone.
 *
 * Why that is enough: every write of a provider's inventories, traits, aggregates or
 * allocations (usages) bumps its generation in the same transaction (providers.ts,
 * allocations.ts); a rename or re-parenting changes the row itself; a resource class renamed
 * (the only write that changes snapshots without touching providers) changes the class names,
 * which reloads everything. Ids reused after a delete differ by uuid. The rows and the
 * snapshots loaded are read in the same transaction (SQLite's read transaction, PostgreSQL's
 * repeatable read), so a snapshot is stored with the version it was read at.
 *
 * On SQLite a first read of `model_version` (migration 0010: bumped by triggers at every
 * provider or resource class change, whoever writes) skips the per-provider rows when nothing
 * moved. On PostgreSQL, after the first read, only the rows whose `change_xid` (migration 0011:
 * the writing transaction, set by a trigger) is at least the previous read's snapshot xmin are
 * read, and the rows counted: every transaction that read did not see has such an id, and a
 * count lower than expected (a delete) falls back to every row.
 *
 * When nothing changed the previous array is returned as is (the same object): callers treat
 * it as read-only, and may cache what they derive from it by identity. Calls run one after the
 * other (each its own read, begun after the previous ended, so a caller sees every write that
 * committed before it called); the cache is never updated by two at once.
 */
export class ProviderModel {
  private readonly versions = new Map<number, string>();
  private readonly snapshots = new Map<number, ProviderSnapshot>();
  private classes: string | undefined;
  private last: ProviderSnapshot[] = [];
  /** Provider id -> uuid, of every provider kept (the parents and roots of those reloaded). */
  private readonly uuids = new Map<number, string>();
  /** SQLite: `model_version.version` when `last` was read (migration 0010). */
  private modelVersion: number | undefined;
  /** PostgreSQL: the xmin of the snapshot `last` was read in (migration 0011). */
  private xmin: string | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly ctx: StoreContext) {}

  load(): Promise<ProviderSnapshot[]> {
    const next = this.queue.then(() => this.loadNow());
    this.queue = next.catch(() => undefined);
    return next;
  }

  private loadNow(): Promise<ProviderSnapshot[]> {
    return this.ctx.read(async (trx) => {
      let modelVersion: number | undefined;
      let xmin: string | undefined;
      if (this.ctx.client === 'sqlite3') {
        const row: { version: number | string } | undefined = await trx('model_version').first('version');
        modelVersion = row === undefined ? undefined : Number(row.version);
        if (modelVersion !== undefined && modelVersion === this.modelVersion) return this.last;
      } else {
        xmin = ((await trx.raw('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin')) as { rows: Array<{ xmin: string }> }).rows[0]!.xmin;
      }
      const classRows: Array<{ id: number; name: string }> = await trx('resource_classes').select('id', 'name').orderBy('id');
      const classes = classRows.map((c) => `${c.id}:${c.name}`).join(',');
      if (classes !== this.classes) {
        // A class renamed (or one this process has not seen): every snapshot names classes.
        for (const c of classRows) this.ctx.rememberClass(c.id, c.name);
        this.versions.clear();
        this.snapshots.clear();
        this.uuids.clear();
        this.xmin = undefined;
        this.classes = classes;
      }
      // PostgreSQL, after a first read: only the rows written by transactions the previous read
      // did not see; the row count says whether any was deleted (then everything is read).
      let rows = this.xmin === undefined ? undefined : await this.rowsSince(trx, this.xmin);
      const complete = rows === undefined;
      rows ??= await this.versionRows(trx);
      const live = complete ? new Set(rows.map((r) => r.id)) : undefined;
      const changed = rows.filter((row) => this.versions.get(row.id) !== versionOf(row));
      const gone = live === undefined ? [] : [...this.versions.keys()].filter((id) => !live.has(id));
      if (changed.length === 0 && gone.length === 0) {
        this.modelVersion = modelVersion;
        this.xmin = xmin;
        return this.last;
      }
      // Until this read has updated the model, what it saw must not be taken as current.
      this.modelVersion = undefined;
      this.xmin = undefined;
      for (const id of gone) {
        this.versions.delete(id);
        this.snapshots.delete(id);
        this.uuids.delete(id);
      }
      for (const row of rows) this.uuids.set(row.id, row.uuid);
      if (changed.length > 0) {
        const loaded = await providerSnapshots(this.ctx, trx, { ids: changed.map((r) => r.id), uuids: this.uuids });
        for (const row of changed) {
          const loadedRow = loaded.byId.get(row.id);
          if (loadedRow === undefined) continue;
          this.snapshots.set(row.id, loadedRow.snapshot);
          this.versions.set(row.id, versionOf(row));
        }
      }
      this.last = [...this.snapshots.keys()].sort((a, b) => a - b).map((id) => this.snapshots.get(id)!);
      this.modelVersion = modelVersion;
      this.xmin = xmin;
      return this.last;
    });
  }

  /**
   * PostgreSQL: the rows with `change_xid` at least `xmin` (migration 0011: every row written
   * since the read whose snapshot had that xmin, and maybe a few before), or undefined when the
   * row count shows a provider was deleted since (the caller then reads every row).
   */
  private async rowsSince(trx: Trx, xmin: string): Promise<VersionRow[] | undefined> {
    const [{ count }] = (await trx('providers').count({ count: '*' })) as Array<{ count: number | string }>;
    const rows: VersionRow[] = await trx('providers')
      .select('id', 'uuid', 'name', 'generation', 'parent_id', 'root_id', 'owner')
      .where('change_xid', '>=', trx.raw('?::xid8', [xmin]))
      .orderBy('id');
    const added = rows.filter((r) => !this.versions.has(r.id)).length;
    return this.versions.size + added === Number(count) ? rows : undefined;
  }

  /** One row per provider, in creation (id) order. SQLite: one JSON value, cheaper than a row object per provider. */
  private async versionRows(trx: Trx): Promise<VersionRow[]> {
    if (this.ctx.client === 'sqlite3') {
      const [row]: Array<{ rows: string }> = await trx.raw(
        'SELECT json_group_array(json_array(id, uuid, name, generation, parent_id, root_id, owner)) AS rows FROM (SELECT * FROM providers ORDER BY id)',
      );
      return (JSON.parse(row!.rows) as Array<[number, string, string, number, number | null, number | null, string | null]>).map(([id, uuid, name, generation, parent_id, root_id, owner]) => ({
        id,
        uuid,
        name,
        generation,
        parent_id,
        root_id,
        owner,
      }));
    }
    return trx('providers').select('id', 'uuid', 'name', 'generation', 'parent_id', 'root_id', 'owner').orderBy('id');
  }
}
