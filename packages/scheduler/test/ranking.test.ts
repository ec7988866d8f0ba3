import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FilterHooks, RequestSpec, WeigherHooks } from '@ert/plugin-api';
import type { ChangeJournal } from '../src/host-manager.js';
import type { Host } from '../src/host-state.js';
import { Memo, Ranker } from '../src/ranking.js';
import type { HostIndex } from '../src/ranking.js';

/*
 * The indexed ranking (change journal, memoised results, the ordered list of best candidates
 * kept across decisions) against a fresh evaluation of every host, on fleets larger than the
 * list, so that hosts leave it, come back, and it runs out and is rebuilt. The scheduler-level
 * equivalence test (equivalence.test.ts) uses fleets too small for that.
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
  it('returns exactly the best candidates a fresh evaluation of every host returns', () => {
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
              { name: 'a', hooks: weighA, multiplier: 1 },
              { name: 'b', hooks: weighB, multiplier: -2 },
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
            const indexed = ranker.rank(index, memo, limit);
            const fresh = ranker.rank(index, new Memo(ranker.prepare(spec), 4096), limit, true);
            expect(indexed.passed).toBe(fresh.passed);
            expect(indexed.candidates.map((c) => [c.host.name, c.weight])).toEqual(fresh.candidates.map((c) => [c.host.name, c.weight]));
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
