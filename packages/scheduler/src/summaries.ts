import { freeSummary, summaryName, UP_SUMMARY } from '@ert/plugin-api';
import type { HostSummaries } from '@ert/plugin-api';
import type { Host } from './host-state.js';

/**
 * Scheduler-internal summaries, read by the bounded ranking so that it need not touch the host
 * objects (at 100,000 hosts, reading each host's fields was a quarter of a bounded ranking):
 * - `ert:excluded`: 1 when the host was excluded when its version last changed. A consumer's
 *   `consume` may exclude it just after, so 0 is not a promise: a host the ranking takes for a
 *   potential candidate is evaluated, which checks the exclusion, before it is returned.
 * - `ert:metadata`: 1 when the host's aggregates carry metadata (a weigher's multiplier may be
 *   overridden there); 0: every weigher's multiplier is the configured one.
 */
export const EXCLUDED_SUMMARY = 'ert:excluded';
export const METADATA_SUMMARY = 'ert:metadata';

function hasKeys(record: Readonly<Record<string, string>>): boolean {
  for (const _ in record) return true;
  return false;
}

/**
 * Host summaries in typed arrays: one Float64Array column per summary name, indexed by the
 * host's slot (see @ert/plugin-api's summaries.ts). NaN is "unknown". The host manager keeps
 * them current: the built-in ones (`ert:up`, `ert:free:<CLASS>`, `ert:reach:<CLASS>`, and the
 * derived ones made when first asked for) whenever a host's version changes, a consumer's
 * (`<plugin>.<key>`) after its `consume` and `placed`. A bounded ranking (bounded-ranking.ts) reads
 * them instead of calling filters and weighers on every host.
 */
export class SummaryTable {
  private readonly columns = new Map<string, Float64Array>();
  /** The columns each consumer wrote, so a host's old values can be cleared. */
  private readonly owned = new Map<string, Set<string>>();
  /**
   * Per class: the built-in free columns, `ert:free:<CLASS>` (the tree) and `ert:reach:<CLASS>`
   * (with sharing providers), and per slot which of the host's providers (bit k: the k-th,
   * k < TRAIT_STRIDE) have an inventory of it (`holders`, for the derived columns).
   */
  private readonly freeColumns = new Map<string, { free: Float64Array; reach: Float64Array; holders: Uint8Array }>();
  private size = 1024;

  /**
   * Per slot, the trait sets of the host's providers (ids into `traitSets`, TRAIT_STRIDE per
   * slot, -1 after the last), so that a derived column is made from typed arrays instead of
   * every host object (at 100,000 hosts, reading them took 20-90 ms per column, in the
   * decision that first named it). Trait sets are interned (host-state.ts), so there are few.
   */
  private traitIds = new Int32Array(this.size * TRAIT_STRIDE).fill(-1);
  /** 1 where a derived value is computed from the host object: it reaches sharing providers, or has more than TRAIT_STRIDE providers. */
  private fromHost = new Uint8Array(this.size);
  /** Trait set ids by the set's object, then by its content (the interner makes new objects when it is cleared). */
  private readonly traitSetIds = new WeakMap<ReadonlySet<string>, number>();
  private readonly traitSetByContent = new Map<string, number>();
  /** One set of each id, so as many as the distinct trait sets the hosts had. */
  private readonly traitSets: Array<ReadonlySet<string>> = [];

  /**
   * Built-in columns made when first asked for (a trait's or a class's free amount beside
   * some traits), then kept current like the others: `ert:trait:<T>` and
   * `ert:reach:<CLASS>:without:<T1,T2,...>` (see `traitSummary`, `freeWithoutSummary`).
   */
  private readonly derived = new Map<string, { column: Float64Array; of: (host: Host) => number }>();

  /**
   * The column of a summary, or undefined when nothing published it yet. A derived built-in
   * one is made on the first call, from every host of `slots`.
   */
  column(name: string, slots?: ReadonlyArray<Host | undefined>): Float64Array | undefined {
    const column = this.columns.get(name);
    if (column !== undefined || slots === undefined) return column;
    const derived = derivedSummary(name);
    if (derived === undefined) return undefined;
    this.ensure(slots.length);
    const made = this.create(name, NaN);
    const { of } = derived;
    // From the providers' trait sets: per set, whether it has the trait (or any forbidden one).
    const hit = Uint8Array.from(this.traitSets, (traits) => (derived.traits.some((t) => traits.has(t)) ? 1 : 0));
    const free = derived.kind === 'without' ? this.freeColumns.get(derived.resourceClass) : undefined;
    const reach = free?.reach;
    const holders = free?.holders;
    const ids = this.traitIds;
    for (let slot = 0; slot < slots.length; slot++) {
      const host = slots[slot];
      if (host === undefined) continue;
      if (this.fromHost[slot] === 1) {
        made[slot] = of(host);
        continue;
      }
      let hits = 0;
      let hitMask = 0;
      const base = slot * TRAIT_STRIDE;
      for (let k = 0; k < TRAIT_STRIDE && ids[base + k]! >= 0; k++) {
        const h = hit[ids[base + k]!]!;
        hits += h;
        hitMask |= h << k;
      }
      if (derived.kind === 'trait') {
        made[slot] = hits;
        continue;
      }
      const held = holders?.[slot] ?? 0;
      // No provider that has the class has a forbidden trait (and no sharing provider): each
      // counts, which is the reach column's value, summed in the same order. All of them
      // have one: none counts (0). Some: from the host.
      if (reach !== undefined && (held & hitMask) === 0) made[slot] = reach[slot]!;
      else if ((held & ~hitMask) === 0) made[slot] = 0;
      else made[slot] = of(host);
    }
    this.derived.set(name, { column: made, of });
    return made;
  }

  /** Make room for `slot`. */
  ensure(slot: number): void {
    if (slot < this.size) return;
    const size = Math.max(slot + 1, this.size * 2);
    for (const [name, column] of this.columns) {
      const grown = new Float64Array(size).fill(NaN);
      grown.set(column);
      this.columns.set(name, grown);
      const derived = this.derived.get(name);
      if (derived !== undefined) derived.column = grown;
    }
    for (const [rc, pair] of this.freeColumns) {
      const holders = new Uint8Array(size);
      holders.set(pair.holders);
      this.freeColumns.set(rc, { free: this.columns.get(freeSummary(rc))!, reach: this.columns.get(reachSummary(rc))!, holders });
    }
    const ids = new Int32Array(size * TRAIT_STRIDE).fill(-1);
    ids.set(this.traitIds);
    this.traitIds = ids;
    const fromHost = new Uint8Array(size);
    fromHost.set(this.fromHost);
    this.fromHost = fromHost;
    this.size = size;
  }

  private create(name: string, fill: number): Float64Array {
    const column = new Float64Array(this.size).fill(fill);
    this.columns.set(name, column);
    return column;
  }

  /** Replace what consumer `owner` published for the host in `slot` (undefined: nothing known). */
  publish(owner: string, slot: number, values: HostSummaries | undefined): void {
    this.ensure(slot);
    let owned = this.owned.get(owner);
    if (owned !== undefined) for (const name of owned) this.columns.get(name)![slot] = NaN;
    if (values === undefined) return;
    for (const key of Object.keys(values)) {
      const value = values[key];
      if (typeof value !== 'number' || !Number.isFinite(value)) continue;
      const name = summaryName(owner, key);
      let column = this.columns.get(name);
      if (column === undefined) {
        column = this.create(name, NaN);
        if (owned === undefined) {
          owned = new Set();
          this.owned.set(owner, owned);
        }
        owned.add(name);
      }
      column[slot] = value;
    }
  }

  /** Recompute the built-in summaries of the host in `slot` (undefined: the slot is empty, all unknown). */
  refreshBuiltins(slot: number, host: Host | undefined): void {
    this.ensure(slot);
    this.recordTraits(slot, host);
    if (host === undefined) {
      for (const column of this.columns.values()) column[slot] = NaN;
      return;
    }
    const up = this.columns.get(UP_SUMMARY) ?? this.create(UP_SUMMARY, NaN);
    up[slot] = host.status === 'up' ? 1 : 0;
    const excluded = this.columns.get(EXCLUDED_SUMMARY) ?? this.create(EXCLUDED_SUMMARY, NaN);
    excluded[slot] = host.exclusion === undefined ? 0 : 1;
    const metadata = this.columns.get(METADATA_SUMMARY) ?? this.create(METADATA_SUMMARY, NaN);
    metadata[slot] = hasKeys(host.aggregateMetadata) ? 1 : 0;
    for (const pair of this.freeColumns.values()) {
      pair.free[slot] = 0;
      pair.reach[slot] = 0;
      pair.holders[slot] = 0;
    }
    const add = (providers: Host['providers'], tree: boolean): void => {
      for (let k = 0; k < providers.length; k++) {
        const provider = providers[k]!;
        const inventories = provider.inventories;
        for (const rc in inventories) {
          let pair = this.freeColumns.get(rc);
          if (pair === undefined) {
            // A class no host had before: every other host has none of it (0).
            pair = { free: this.create(freeSummary(rc), 0), reach: this.create(reachSummary(rc), 0), holders: new Uint8Array(this.size) };
            this.freeColumns.set(rc, pair);
          }
          const free = provider.free(rc);
          if (tree) {
            pair.free[slot] = pair.free[slot]! + free;
            if (k < TRAIT_STRIDE) pair.holders[slot] |= 1 << k;
          }
          pair.reach[slot] = pair.reach[slot]! + free;
        }
      }
    };
    add(host.providers, true);
    add(host.sharingProviders, false);
    for (const derived of this.derived.values()) derived.column[slot] = derived.of(host);
  }

  /** The id of a trait set (see `traitIds`). */
  private traitSetId(traits: ReadonlySet<string>): number {
    let id = this.traitSetIds.get(traits);
    if (id === undefined) {
      const content = [...traits].sort().join('\n');
      id = this.traitSetByContent.get(content);
      if (id === undefined) {
        id = this.traitSets.length;
        this.traitSets.push(traits);
        this.traitSetByContent.set(content, id);
      }
      this.traitSetIds.set(traits, id);
    }
    return id;
  }

  /** Keep the slot's provider trait sets (see `traitIds`). */
  private recordTraits(slot: number, host: Host | undefined): void {
    const base = slot * TRAIT_STRIDE;
    this.traitIds[base] = -1;
    this.fromHost[slot] = 0;
    if (host === undefined) return;
    if (host.sharingProviders.length > 0 || host.providers.length > TRAIT_STRIDE) {
      this.fromHost[slot] = 1;
      return;
    }
    let k = base;
    for (const provider of host.providers) this.traitIds[k++] = this.traitSetId(provider.traits);
    if (k < base + TRAIT_STRIDE) this.traitIds[k] = -1;
  }
}

/** Provider trait sets kept per slot (`SummaryTable.traitIds`); hosts with more are computed from the host. */
const TRAIT_STRIDE = 8;

/**
 * Built-in summary: free amount of a class over the host's providers and the sharing providers
 * it reaches (the `resources` filter's bound; `ert:free:<CLASS>` counts the tree only, as
 * `HostState.free` does).
 */
export function reachSummary(resourceClass: string): string {
  return `ert:reach:${resourceClass}`;
}

/** Built-in summary: how many of the host's providers (and sharing providers) have `trait`. */
export function traitSummary(trait: string): string {
  return `ert:trait:${trait}`;
}

/**
 * Built-in summary: free amount of a class summed over the host's providers (and sharing
 * providers) that have none of `traits` (the unnumbered group's forbidden traits).
 */
export function freeWithoutSummary(resourceClass: string, traits: readonly string[]): string {
  return `ert:reach:${resourceClass}:without:${[...traits].sort().join(',')}`;
}

/**
 * A derived built-in summary: how to compute it from a host (`of`), and what it reads of the
 * providers' traits: a count of the providers with `traits[0]` (`trait`), or the free amount
 * of `resourceClass` over the providers with none of `traits` (`without`). Undefined for any
 * other name.
 */
function derivedSummary(
  name: string,
): { of: (host: Host) => number; traits: readonly string[] } & ({ kind: 'trait' } | { kind: 'without'; resourceClass: string }) | undefined {
  if (name.startsWith('ert:trait:')) {
    const trait = name.slice('ert:trait:'.length);
    const count = (providers: Host['providers']): number => {
      let n = 0;
      for (let i = 0; i < providers.length; i++) if (providers[i]!.traits.has(trait)) n++;
      return n;
    };
    return { kind: 'trait', traits: [trait], of: (host) => count(host.providers) + count(host.sharingProviders) };
  }
  const match = /^ert:reach:([^:]+):without:(.+)$/.exec(name);
  if (match === null) return undefined;
  const rc = match[1]!;
  const traits = match[2]!.split(',');
  const sum = (providers: Host['providers']): number => {
    let free = 0;
    for (let i = 0; i < providers.length; i++) {
      const p = providers[i]!;
      if (p.inventories[rc] === undefined) continue;
      const tags = p.traits;
      let forbidden = false;
      for (let t = 0; t < traits.length && !forbidden; t++) forbidden = tags.has(traits[t]!);
      if (!forbidden) free += p.free(rc);
    }
    return free;
  };
  return { kind: 'without', resourceClass: rc, traits, of: (host) => sum(host.providers) + sum(host.sharingProviders) };
}
