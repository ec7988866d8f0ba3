import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Host } from '../src/host-state.js';
import { freeWithoutSummary, SummaryTable, traitSummary } from '../src/summaries.js';

/*
 * The derived built-in summaries (`ert:trait:<T>`, `ert:reach:<CLASS>:without:<T,...>`) are
 * made, when a request first names them, from the providers' trait sets kept per slot rather
 * than from every host object. Here they are compared with their definitions written out from
 * the fake hosts: when made, and after hosts change. Hosts with sharing providers, with more
 * providers than the table keeps per slot, empty slots, equal trait sets held in different
 * objects, and fractional free amounts are all generated.
 * Mutations seen caught: the sharing providers not sent to the host path (their providers
 * not counted); a forbidden provider's free amount counted (the reach column taken whenever
 * the class has one); 0 taken when any provider having the class is forbidden (not all); the
 * forbidden providers' positions not kept apart (bit 0 for all), or the class's providers'
 * positions overwritten instead of added; the providers kept per slot not cut at -1 (a former
 * host's providers counted).
 */

interface FakeProvider {
  inventories: Record<string, unknown>;
  traits: ReadonlySet<string>;
  free(rc: string): number;
}

const TRAITS = ['T0', 'T1', 'T2', 'T3'];
const CLASSES = ['VCPU', 'MEMORY_MB'];

/** Trait sets: the same few shared objects, and sometimes an equal set of its own. */
const SHARED = [new Set<string>(), new Set(['T0']), new Set(['T1', 'T2']), new Set(['T0', 'T3'])];

const providerArb = fc
  .record({
    shared: fc.integer({ min: 0, max: SHARED.length - 1 }),
    own: fc.boolean(),
    classes: fc.subarray(CLASSES),
    free: fc.array(fc.oneof(fc.integer({ min: -4, max: 64 }), fc.double({ min: 0, max: 100, noNaN: true })), { minLength: 2, maxLength: 2 }),
  })
  .map(({ shared, own, classes, free }): FakeProvider => {
    const traits = own ? new Set(SHARED[shared]) : SHARED[shared]!;
    const inventories = Object.fromEntries(classes.map((rc) => [rc, {}]));
    return { inventories, traits, free: (rc) => (rc in inventories ? free[CLASSES.indexOf(rc)]! : 0) };
  });

const hostArb = fc.option(
  fc.record({
    providers: fc.array(providerArb, { minLength: 1, maxLength: 10 }),
    sharing: fc.array(providerArb, { maxLength: 2 }),
  }),
  { freq: 5 },
);

function fakeHost(slot: number, shape: { providers: FakeProvider[]; sharing: FakeProvider[] }): Host {
  return { slot, status: 'up', exclusion: undefined, aggregateMetadata: {}, providers: shape.providers, sharingProviders: shape.sharing } as unknown as Host;
}

/** `ert:trait:<T>` as defined: the providers (and sharing providers) with the trait. */
function traitCount(host: Host, trait: string): number {
  return [...host.providers, ...host.sharingProviders].filter((p) => p.traits.has(trait)).length;
}

/** `ert:reach:<RC>:without:<Ts>` as defined: free over the tree's providers without the traits, plus the sharing providers'. */
function freeWithout(host: Host, rc: string, traits: readonly string[]): number {
  const sum = (providers: Host['providers']) => providers.filter((p) => p.inventories[rc] !== undefined && !traits.some((t) => p.traits.has(t))).reduce((n, p) => n + p.free(rc), 0);
  return sum(host.providers) + sum(host.sharingProviders);
}

describe('derived host summaries', () => {
  it('keep one id per distinct trait set, however many objects hold it', () => {
    // The host manager's interner makes new set objects each time it is cleared: ids kept by
    // object alone grew with every clear. Seen red with the ids kept by object only.
    const table = new SummaryTable();
    const provider = (traits: string[]): FakeProvider => ({ inventories: { VCPU: {} }, traits: new Set(traits), free: () => 1 });
    for (let round = 0; round < 50; round++) {
      table.refreshBuiltins(0, fakeHost(0, { providers: [provider(['T0', 'T1']), provider([])], sharing: [] }));
      table.refreshBuiltins(1, fakeHost(1, { providers: [provider(['T1', 'T0'])], sharing: [] }));
    }
    expect((table as unknown as { traitSets: unknown[] }).traitSets).toHaveLength(2);
    expect(table.column(traitSummary('T0'), [fakeHost(0, { providers: [provider(['T0', 'T1']), provider([])], sharing: [] }), fakeHost(1, { providers: [provider(['T1', 'T0'])], sharing: [] })])).toEqual(
      expect.objectContaining({ 0: 1, 1: 1 }),
    );
  });

  it('equal their definitions when made from the kept trait sets, and after hosts change', () => {
    fc.assert(
      fc.property(
        fc.array(hostArb, { minLength: 1, maxLength: 40 }),
        fc.array(fc.tuple(fc.nat(), hostArb), { maxLength: 10 }),
        fc.subarray(TRAITS, { minLength: 1, maxLength: 2 }),
        (initial, changes, forbidden) => {
          const table = new SummaryTable();
          const slots: Array<Host | undefined> = initial.map((shape, slot) => (shape === null ? undefined : fakeHost(slot, shape)));
          slots.forEach((host, slot) => table.refreshBuiltins(slot, host));
          const names = [...TRAITS.map((t) => [traitSummary(t), t] as const), ...CLASSES.map((rc) => [freeWithoutSummary(rc, forbidden), rc] as const)];
          const check = () => {
            for (const [name, of] of names) {
              const column = table.column(name, slots)!;
              slots.forEach((host, slot) => {
                const expected = host === undefined ? NaN : name.startsWith('ert:trait:') ? traitCount(host, of) : freeWithout(host, of, forbidden);
                expect([name, slot, column[slot]]).toEqual([name, slot, expected]);
              });
            }
          };
          // Half the names made before the changes (then kept current), half after.
          for (const [name] of names.slice(0, 3)) table.column(name, slots);
          for (const [at, shape] of changes) {
            const slot = at % slots.length;
            slots[slot] = shape === null ? undefined : fakeHost(slot, shape);
            table.refreshBuiltins(slot, slots[slot]);
          }
          check();
        },
      ),
      { numRuns: 300 },
    );
  });
});
