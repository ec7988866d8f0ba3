import { describe, expect, it } from 'vitest';
import { EMPTY_SLOT, Memo } from '../src/memo.js';
import type { Prepared } from '../src/memo.js';
import { MemoCache, SpareMemoArrays } from '../src/memo-cache.js';

/** A stand-in memo: the cache never looks inside one. */
const memo = (name: string): Memo => ({ name }) as unknown as Memo;

describe('MemoCache', () => {
  it('keeps the shapes that repeat while one-off shapes stream through', () => {
    // The case it exists for: two flavors asked for again and again between server-group
    // members, each a shape of its own, more of them between two requests of a flavor than
    // there are memos. Seen red with a memo asked for again left on probation (one LRU list:
    // the flavors evicted by the members between their requests, made again each round).
    const limit = 8;
    const cache = new MemoCache();
    const made: string[] = [];
    const ask = (key: string): void => {
      if (cache.get(key, limit) !== undefined) return;
      made.push(key);
      cache.add(key, memo(key), limit);
    };
    for (let round = 0; round < 50; round++) {
      ask('m1.small');
      ask('m1.large');
      // A quiet start (one member a round), then groups of ten.
      const members = round < 2 ? 1 : 10;
      for (let k = 0; k < members; k++) ask(`member-${round}-${k}`);
    }
    // Each flavor made once; every member once (none is asked for again).
    expect(made.filter((key) => key.startsWith('m1.'))).toEqual(['m1.small', 'm1.large']);
    expect(made).toHaveLength(2 + 2 + 48 * 10);
    expect(cache.size).toBe(limit);
  });

  it('evicts from probation, least recently used first, and gives back the memo evicted', () => {
    const cache = new MemoCache();
    const limit = 4;
    const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map(memo);
    expect(cache.add('a', a!, limit)).toBeUndefined();
    cache.add('b', b!, limit);
    cache.add('c', c!, limit);
    // 'a' asked for again: protected (the share of 4 is 2 on probation, 2 protected).
    expect(cache.get('a', limit)).toBe(a);
    expect(cache.add('d', d!, limit)).toBeUndefined();
    // Five memos for four places: the oldest on probation goes ('b'), not 'a'.
    expect(cache.add('e', e!, limit)).toBe(b);
    expect(cache.get('b', limit)).toBeUndefined();
    expect(cache.get('a', limit)).toBe(a);
    expect(cache.size).toBe(limit);
  });

  it('sends the protected segment\'s least recently used back on probation when it is full', () => {
    const cache = new MemoCache();
    const limit = 4; // 2 protected
    for (const key of ['a', 'b', 'c']) cache.add(key, memo(key), limit);
    for (const key of ['a', 'b', 'c']) cache.get(key, limit);
    // 'a', the least recently used of the three asked for twice, is on probation again: the
    // next new memos evict it after what was on probation before it.
    cache.add('d', memo('d'), limit);
    cache.add('e', memo('e'), limit);
    expect(cache.get('a', limit)).toBeUndefined();
    expect(cache.get('b', limit)).toBeDefined();
    expect(cache.get('c', limit)).toBeDefined();
  });

  it('keeps a new memo when a smaller limit sends protected memos back on probation', () => {
    // Found in review: with the demoted memos put on probation after the new one, the new one
    // was evicted first (and handed back for reuse while the scheduler was about to use it).
    // Seen red with the demotion after the insertion.
    const cache = new MemoCache();
    for (let k = 0; k < 64; k++) cache.add(`k${k}`, memo(`k${k}`), 64);
    for (let k = 0; k < 51; k++) cache.get(`k${k}`, 64);
    const fresh = memo('new');
    expect(cache.add('new', fresh, 51)).not.toBe(fresh);
    expect(cache.get('new', 51)).toBe(fresh);
    expect(cache.size).toBe(51);
  });

  it('replaces a memo of a key it holds, and shrinks to a smaller limit', () => {
    const cache = new MemoCache();
    for (const key of ['a', 'b', 'c', 'd', 'e', 'f']) cache.add(key, memo(key), 8);
    const newer = memo('a2');
    cache.add('a', newer, 8);
    expect(cache.get('a', 8)).toBe(newer);
    expect(cache.size).toBe(6);
    cache.add('g', memo('g'), 3);
    expect(cache.size).toBe(3);
    cache.delete('a');
    expect(cache.get('a', 3)).toBeUndefined();
  });
});

describe('SpareMemoArrays', () => {
  /** A request with `w` weighers: a memo reads nothing else of it when built. */
  const prepared = (w: number): Prepared => ({ weighers: Array.from({ length: w }, () => ({})) }) as unknown as Prepared;

  it('allocates the spares when asked to reserve, hands each out once, and keeps only arrays of its capacity', () => {
    const spares = new SpareMemoArrays();
    spares.reserve(100, 3, 2);
    expect(spares.size).toBe(3);
    const set = spares.take(100)!;
    expect(set).toMatchObject({ capacity: 100, clean: true });
    expect(set.raw).toHaveLength(200);
    expect(set.pruneStamps).toHaveLength(100);
    expect(set.boundedStates).toHaveLength(100);
    expect(spares.take(99)).toBeUndefined();
    expect(spares.size).toBe(2);
    // The same capacity again: the sets kept stay (nothing allocated anew).
    spares.reserve(100, 3, 2);
    expect(spares.size).toBe(2);
    const memo = new Memo(prepared(2), 100, set, 2);
    expect(memo.arrays).toBe(set);
    expect(set.clean).toBe(false);
    spares.give(memo);
    spares.give(new Memo(prepared(2), 50));
    expect(spares.size).toBe(3);
    expect(spares.take(100)).toBe(set);
    // Another capacity: the sets of the old one go.
    spares.reserve(200, 1, 2);
    expect(spares.take(100)).toBeUndefined();
    expect(spares.take(200)?.capacity).toBe(200);
    expect(spares.take(200)).toBeUndefined();
  });

  it('gives a memo built on used arrays the state of a memo built on new ones', () => {
    // A spare or an evicted memo carries its last request's results; a memo that read one of
    // them as its own would skip evaluating hosts (stamps) or rank by stale scores. Seen red
    // with the stamps, the raw scores or the prune stamps left as they were, and with used
    // arrays taken as clean.
    const capacity = 64;
    const spares = new SpareMemoArrays();
    spares.reserve(capacity, 1, 3);
    const used = new Memo(prepared(3), capacity, spares.take(capacity), 3).arrays;
    for (const array of [used.stamps, used.raw, used.multipliers, used.weights, used.pruneStamps]) array.fill(7);
    used.outcomes.fill(2);
    used.boundRejected.fill(1);
    used.pruneStates.fill(1);
    const reused = new Memo(prepared(2), capacity, used);
    const fresh = new Memo(prepared(2), capacity);
    expect(reused.raw).toBe(used.raw);
    for (const field of ['stamps', 'outcomes', 'boundRejected', 'weights', 'pruneStamps', 'pruneStates'] as const) expect([...reused[field]]).toEqual([...fresh[field]]);
    // Past capacity * 2 weighers, the third weigher's entries are never read by this memo.
    expect([...reused.raw.subarray(0, capacity * 2)]).toEqual([...fresh.raw]);
    expect([...reused.multipliers.subarray(0, capacity * 2)]).toEqual([...fresh.multipliers]);
    expect(reused.outcomes[0]).toBe(EMPTY_SLOT);
    expect(reused.pruneStamps[0]).toBe(-1);
  });
});
