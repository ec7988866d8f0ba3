import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FilterHooks, RequestSpec, WeigherHooks } from '@ert/plugin-api';
import type { ChangeJournal } from '../src/host-manager.js';
import type { Host } from '../src/host-state.js';
import { Memo, Ranker } from '../src/ranking.js';
import type { HostIndex } from '../src/ranking.js';

/*
 * The indexed ranking (change journal, memoised results, the ordered list of best candidates
 * kept across decisions) and the fresh evaluation of every host, both against `expectedRanking`
 * below: the ranking rules written out again in the test (filter, min-max normalise each raw
 * score over the candidates, times the multiplier, summed; higher weight first, then lower host
 * name), computed from the fake hosts' fields without any code of ranking.ts. Fleets are larger
 * than the kept list, so that hosts leave it, come back, and it runs out and is rebuilt. The
 * scheduler-level equivalence test (equivalence.test.ts) uses fleets too small for that.
 *
 * Mutations seen caught: in `updateTop`, a changed host no longer removed from the kept list
 * (`if (at >= 0) top.splice(at, 1)` dropped): stale entries were returned; in `scaleOf`,
 * `1 / (max - min)` replaced by `1 / max`: the weights differed from the expected ones (the
 * former comparison with a fresh evaluation by the same Ranker could not see that one).
 */

/** What the fake filter and weighers read of a host. */
interface FakeHost {
  name: string;
  slot: number;
  exclusion: string | undefined;
  aggregateMetadata: Record<string, string>;
  passes: boolean;
  a: number;
  b: number;
}

const callHook = <T>(_plugin: string, _hook: string, fn: () => T): T => fn();
const filter: FilterHooks = { filter: (host) => ((host as unknown as FakeHost).passes ? undefined : 'kept out') };
const weighA: WeigherHooks = { weigh: (host) => (host as unknown as FakeHost).a };
const weighB: WeigherHooks = { weigh: (host) => (host as unknown as FakeHost).b };
const spec = {} as RequestSpec;
/** The weighers of the test, as the expected ranking reads them. */
const WEIGHERS: Array<{ score: (h: FakeHost) => number; multiplier: number }> = [
  { score: (h) => h.a, multiplier: 1 },
  { score: (h) => h.b, multiplier: -2 },
];

/**
 * The best `limit` candidates by the ranking rules, from the fake hosts alone. The weight of a
 * host is the sum over weighers of multiplier x (raw - min) x (1 / (max - min)), 0 when every
 * candidate has the same raw score, added in weigher order (the same float operations as the
 * rule, so weights compare exactly and ties stay ties).
 */
function expectedRanking(slots: ReadonlyArray<Host | undefined>, limit: number): { passed: number; candidates: Array<[string, number]> } {
  const hosts = slots.filter((h): h is Host => h !== undefined).map((h) => h as unknown as FakeHost).filter((h) => h.passes);
  const bounds = WEIGHERS.map(({ score }) => {
    const raws = hosts.map(score);
    const min = Math.min(...raws);
    const max = Math.max(...raws);
    return { min, scale: max > min ? 1 / (max - min) : 0 };
  });
  const weighed = hosts.map((h): [string, number] => {
    let weight = 0;
    WEIGHERS.forEach(({ score, multiplier }, i) => (weight += multiplier * (score(h) - bounds[i]!.min) * bounds[i]!.scale));
    return [h.name, weight];
  });
  weighed.sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  return { passed: hosts.length, candidates: weighed.slice(0, limit) };
}

class FakeIndex implements HostIndex {
  slots: Array<Host | undefined> = [];
  versions = new Float64Array(4096).fill(-1);
  changes: ChangeJournal = { slots: [], base: 0 };
  private stamp = 0;

  constructor(private readonly journalLimit: number) {}

  touch(slot: number): void {
    if (this.changes.slots.length >= this.journalLimit) {
      this.changes.base += this.changes.slots.length;
      this.changes.slots = [];
    }
    this.changes.slots.push(slot);
    this.versions[slot] = ++this.stamp;
  }
}

const change = fc.record({
  slot: fc.nat(),
  kind: fc.constantFrom('score', 'score', 'score', 'pass', 'remove', 'add'),
  // Mostly within the fleet's initial range (the normalisation stays), sometimes beyond it.
  a: fc.oneof(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 2 }), fc.integer({ min: -3, max: 20 })),
  b: fc.oneof(fc.integer({ min: 0, max: 1 }), fc.integer({ min: 0, max: 1 }), fc.integer({ min: -5, max: 5 })),
});

describe('indexed ranking', () => {
  it('indexed and fresh rankings return exactly the best candidates the ranking rules give', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 80 }),
        fc.array(fc.array(change, { maxLength: 4 }), { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 8, max: 600 }),
        // Best candidates kept between rankings: fewer or more than the fleet has, more or
        // fewer than a ranking asks for.
        fc.integer({ min: 1, max: 24 }),
        (size, steps, limit, journalLimit, topKept) => {
          const index = new FakeIndex(journalLimit);
          const ranker = new Ranker(
            [{ name: 'f', hooks: filter }],
            [
              { name: 'a', hooks: weighA, multiplier: WEIGHERS[0]!.multiplier },
              { name: 'b', hooks: weighB, multiplier: WEIGHERS[1]!.multiplier },
            ],
            callHook,
            topKept,
          );
          const memo = new Memo(ranker.prepare(spec), 4096);
          let named = 0;
          const put = (slot: number, a: number, b: number): void => {
            // Names with ties in weight: many equal hosts, ordered by name.
            const host: FakeHost = { name: `h${String(named++ % 50).padStart(3, '0')}-${slot}`, slot, exclusion: undefined, aggregateMetadata: {}, passes: true, a, b };
            index.slots[slot] = host as unknown as Host;
            index.touch(slot);
          };
          for (let slot = 0; slot < size; slot++) put(slot, slot % 3, slot % 2);
          for (const step of steps) {
            for (const c of step) {
              const slot = c.slot % (index.slots.length + 1);
              const host = index.slots[slot] as unknown as FakeHost | undefined;
              if (c.kind === 'add' || !host) put(slot, c.a, c.b);
              else if (c.kind === 'remove') {
                index.slots[slot] = undefined;
                index.touch(slot);
              } else {
                if (c.kind === 'pass') host.passes = !host.passes;
                else {
                  host.a = c.a;
                  host.b = c.b;
                }
                index.touch(slot);
              }
            }
            const expected = expectedRanking(index.slots, limit);
            const indexed = ranker.rank(index, memo, limit);
            const fresh = ranker.rank(index, new Memo(ranker.prepare(spec), 4096), limit, true);
            expect(indexed.passed).toBe(expected.passed);
            expect(fresh.passed).toBe(expected.passed);
            expect(indexed.candidates.map((c) => [c.host.name, c.weight])).toEqual(expected.candidates);
            expect(fresh.candidates.map((c) => [c.host.name, c.weight])).toEqual(expected.candidates);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
