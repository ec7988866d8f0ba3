import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { allocationCandidates, indexWorld, type FitProvider } from '@ert/placement';
import { group, provider, spec } from './helpers.js';

// WorldIndex.replaced (the API keeps its index between candidates requests and re-indexes only
// the trees of the providers a claim or write changed) must answer exactly as an index built
// from scratch on the same providers, whatever changed: usages, inventories, traits, aggregates
// (which decide which sharing providers a tree may draw on).
//
// Mutations seen red: replaced() keeping a changed tree's old aggregate set (a sharing
// provider's DISK_GB still offered to a tree that left the aggregate); replaced() leaving
// `sharing` with the old versions of sharing providers (their old usage offered).

const SHARES = 'MISC_SHARES_VIA_AGGREGATE';

function world(): FitProvider[] {
  const out: FitProvider[] = [];
  for (let h = 0; h < 4; h++) {
    out.push(provider(`h${h}`, { inv: { DISK_GB: 100 }, aggs: h % 2 === 0 ? ['A1'] : ['A2'], traits: ['T1'] }));
    for (let n = 0; n < 2; n++) out.push(provider(`h${h}n${n}`, { parent: `h${h}`, inv: { VCPU: 8, MEMORY_MB: 4096 } }));
  }
  out.push(provider('share1', { inv: { DISK_GB: 500 }, aggs: ['A1'], traits: [SHARES] }));
  out.push(provider('share2', { inv: { DISK_GB: 50 }, aggs: ['A2'], traits: [SHARES] }));
  return out;
}

const change = fc.record({
  index: fc.nat(),
  used: fc.option(fc.record({ VCPU: fc.integer({ min: 0, max: 8 }), DISK_GB: fc.integer({ min: 0, max: 100 }) }), { nil: undefined }),
  aggs: fc.option(fc.subarray(['A1', 'A2']), { nil: undefined }),
  traits: fc.option(fc.subarray(['T1', 'T2']), { nil: undefined }),
  total: fc.option(fc.integer({ min: 1, max: 600 }), { nil: undefined }),
});

const REQUESTS = [
  spec([group('', { DISK_GB: 120 }), group('1', { VCPU: 2, MEMORY_MB: 1024 })], 'none'),
  spec([group('', { VCPU: 4, DISK_GB: 40 }, { requiredTraits: ['T1'] })]),
  spec([group('', { DISK_GB: 30 }, { memberOf: [['A2']] })]),
  spec([group('', {}), group('1', { VCPU: 1 }), group('2', { VCPU: 1 })], 'isolate'),
];

describe('WorldIndex.replaced', () => {
  it('answers every request as an index built from scratch, after any changes of providers', () => {
    fc.assert(
      fc.property(fc.array(change, { minLength: 1, maxLength: 5 }), (changes) => {
        const before = world();
        const index = indexWorld(before);
        const after = [...before];
        const changed = new Map<string, FitProvider>();
        for (const c of changes) {
          const i = c.index % after.length;
          const p = after[i]!;
          const next: FitProvider = {
            ...p,
            usages: c.used ? Object.fromEntries(Object.entries(c.used).filter(([rc]) => rc in p.inventories)) : p.usages,
            aggregates: c.aggs ? new Set(c.aggs) : p.aggregates,
            // Sharing stays as it was (a change of it is structural: replaced() declines).
            traits: c.traits ? new Set([...c.traits, ...(p.traits.has(SHARES) ? [SHARES] : [])]) : p.traits,
            inventories: c.total && p.inventories['DISK_GB'] ? { ...p.inventories, DISK_GB: { ...p.inventories['DISK_GB']!, total: c.total } } : p.inventories,
          };
          after[i] = next;
          changed.set(next.uuid, next);
        }
        const replaced = index.replaced([...changed.values()]);
        expect(replaced).toBeDefined();
        const fresh = indexWorld(after);
        for (const request of REQUESTS) {
          expect(allocationCandidates(request, replaced!, { nestedAware: true })).toEqual(allocationCandidates(request, fresh, { nestedAware: true }));
        }
        // The index it came from is left as it was.
        for (const request of REQUESTS) expect(allocationCandidates(request, index, { nestedAware: true })).toEqual(allocationCandidates(request, indexWorld(before), { nestedAware: true }));
      }),
      { numRuns: 200 },
    );
  });

  it('declines structural changes: an unknown provider, another parent, a provider that starts sharing', () => {
    const providers = world();
    const index = indexWorld(providers);
    expect(index.replaced([provider('new', { inv: { VCPU: 1 } })])).toBeUndefined();
    expect(index.replaced([{ ...providers[1]!, parentUuid: 'uuid-h1' }])).toBeUndefined();
    expect(index.replaced([{ ...providers[0]!, traits: new Set(['T1', SHARES]) }])).toBeUndefined();
  });
});
