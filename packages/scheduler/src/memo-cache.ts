/**
 * The scheduler's memos by request key (`memoFor` in scheduler.ts), kept as a segmented LRU
 * cache. A new memo enters on probation; asked for again, it moves to the protected segment;
 * when the protected segment is full, its least recently used memo goes back on probation
 * (at the most recent end); a memo is evicted only from probation, least recently used first.
 *
 * Why not one LRU list: a real cloud sends many shapes only once (every server-group member is
 * a new shape, its group's members being in the key; so is a tenant's own flavor size), and
 * each of those pushed out the least recently used memo, often one of a flavor asked for every
 * few dozen decisions, which then ranked anew. Here the one-off shapes push out each other.
 * On the mixed workload's 2,000 requests (463 distinct shapes), replayed through both policies
 * with 16 memos (100,000 hosts): 935 memos made with one LRU list, 652 with this one
 * (docs/benchmarks.md).
 */
import { allocateMemoArrays } from './memo.js';
import type { Memo, MemoArrays } from './memo.js';

/** Share of the memos kept on probation (at least PROBATION_MIN). */
const PROBATION_SHARE = 0.2;
const PROBATION_MIN = 2;

export class MemoCache {
  /** Memos asked for once since they entered (or since they left the protected segment), least recently used first. */
  private readonly probation = new Map<string, Memo>();
  /** Memos asked for again while on probation, least recently used first. */
  private readonly protectedMemos = new Map<string, Memo>();

  /** How many memos are kept. */
  get size(): number {
    return this.probation.size + this.protectedMemos.size;
  }

  /** The memo of `key`, now the most recently used (moved to the protected segment when on probation); undefined if none. */
  get(key: string, limit: number): Memo | undefined {
    const kept = this.protectedMemos.get(key);
    if (kept !== undefined) {
      this.protectedMemos.delete(key);
      this.protectedMemos.set(key, kept);
      return kept;
    }
    const tried = this.probation.get(key);
    if (tried === undefined) return undefined;
    this.probation.delete(key);
    this.protect(key, tried, limit);
    return tried;
  }

  /**
   * Keep `memo` under `key`: on probation when the key is new, in the protected segment when it
   * replaces a memo of that key. Returns the memo evicted to stay within `limit` memos (the
   * last one, when several go), whose arrays the caller may give to its next new memo.
   */
  add(key: string, memo: Memo, limit: number): Memo | undefined {
    const replaced = this.probation.delete(key) || this.protectedMemos.delete(key);
    if (replaced) this.protectedMemos.set(key, memo);
    // Memos demoted (the limit may have shrunk) go on probation before a new one, which stays
    // the most recently used there: evicted last.
    this.demote(limit);
    if (!replaced) this.probation.set(key, memo);
    let evicted: Memo | undefined;
    while (this.size > limit && this.probation.size > 0) {
      const oldest = this.probation.keys().next().value!;
      evicted = this.probation.get(oldest);
      this.probation.delete(oldest);
    }
    return evicted;
  }

  /** Forget every memo. */
  clear(): void {
    this.probation.clear();
    this.protectedMemos.clear();
  }

  /** Forget the memo of `key`, if any. */
  delete(key: string): void {
    if (!this.probation.delete(key)) this.protectedMemos.delete(key);
  }

  private protect(key: string, memo: Memo, limit: number): void {
    this.protectedMemos.set(key, memo);
    this.demote(limit);
  }

  /** The protected segment's least recently used memos back on probation, past its share of `limit`. */
  private demote(limit: number): void {
    const room = Math.max(1, limit - Math.max(PROBATION_MIN, Math.round(limit * PROBATION_SHARE)));
    while (this.protectedMemos.size > room) {
      const oldest = this.protectedMemos.keys().next().value!;
      const demoted = this.protectedMemos.get(oldest)!;
      this.protectedMemos.delete(oldest);
      this.probation.set(oldest, demoted);
    }
  }
}

/**
 * Memo arrays nobody reads any more (evicted memos'), and spares allocated when the hosts were
 * loaded, for the scheduler's next new memos. Why allocate ahead: at 100,000 hosts a memo's
 * arrays are about 8 MB, and the first memos' new arrays, written for the first time during the
 * first decisions, took 1-8 ms each and twice 76 ms (while a store checkpoint synced): those
 * were 9 of the 10 slowest decisions of a mixed run (docs/benchmarks.md).
 */
export class SpareMemoArrays {
  private readonly spares: MemoArrays[] = [];
  /** The capacity of the spares kept (every set has this one). */
  private capacity = -1;

  /** How many sets are kept. */
  get size(): number {
    return this.spares.length;
  }

  /**
   * Keep `count` sets of `capacity` slots (for up to `weigherSlots` weighers), allocated now.
   * Sets of another capacity are dropped; does nothing when the capacity is the one kept.
   */
  reserve(capacity: number, count: number, weigherSlots: number): void {
    if (capacity === this.capacity) return;
    this.capacity = capacity;
    this.spares.length = 0;
    for (let i = 0; i < count; i++) this.spares.push(allocateMemoArrays(capacity, weigherSlots));
  }

  /** A set for a memo of `capacity` slots, if one is kept (the memo resets it unless `clean`). */
  take(capacity: number): MemoArrays | undefined {
    return capacity === this.capacity ? this.spares.pop() : undefined;
  }

  /** Keep the arrays of `memo`, which nobody will read again, when they have the capacity kept. */
  give(memo: Memo): void {
    if (memo.capacity === this.capacity) this.spares.push(memo.arrays);
  }
}
