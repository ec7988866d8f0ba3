import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { fitRequest, type FitAllocation, type FitProvider, type FitTree } from '@ert/placement';
import { capacityOf, type InventoryInput, type RequestGroup, type RequestSpec } from '@ert/plugin-api';
import { group, provider, spec } from './helpers.js';

// A brute-force oracle, written from the rules rather than from fitRequest: enumerate every
// assignment of "units" (each unnumbered class, each numbered group) to every candidate
// provider and test all of Placement's rules on it.

const CLASSES = ['VCPU', 'MEMORY_MB', 'CUSTOM_X'];
const TRAITS = ['T1', 'T2', 'T3'];
const AGGS = ['A1', 'A2'];

interface Unit {
  group: RequestGroup;
  numbered: boolean;
  amounts: Record<string, number>;
}

function unitsOf(request: RequestSpec): Unit[] {
  const [unnumbered, ...numbered] = request.groups;
  const units: Unit[] = Object.entries(unnumbered!.resources).map(([c, a]) => ({ group: unnumbered!, numbered: false, amounts: { [c]: a } }));
  for (const g of numbered) units.push({ group: g, numbered: true, amounts: { ...g.resources } });
  return units;
}

function candidatesOf(tree: FitTree): Array<{ p: FitProvider; root: FitProvider }> {
  const root = tree.providers.find((p) => p.parentUuid === undefined)!;
  const out = tree.providers.map((p) => ({ p, root }));
  for (const s of tree.sharingProviders ?? []) {
    const anchored = [...s.aggregates].some((a) => tree.providers.some((p) => p.aggregates.has(a)));
    if (s.traits.has('MISC_SHARES_VIA_AGGREGATE') && anchored) out.push({ p: s, root: s });
  }
  return out;
}

function memberOk(c: { p: FitProvider; root: FitProvider }, g: RequestGroup): boolean {
  return g.memberOf.every((list) => list.some((a) => c.p.aggregates.has(a) || c.root.aggregates.has(a)));
}

function unitRulesOk(p: FitProvider, c: string, amount: number): boolean {
  const inv = p.inventories[c];
  return inv !== undefined && amount >= inv.minUnit && amount <= inv.maxUnit && amount % inv.stepSize === 0;
}

/** Is this assignment (unit index -> candidate index) valid under every rule? */
function assignmentOk(request: RequestSpec, tree: FitTree, units: Unit[], cands: ReturnType<typeof candidatesOf>, assign: number[]): boolean {
  const load = new Map<string, number>();
  const unnumberedUsed = new Set<number>();
  for (let u = 0; u < units.length; u++) {
    const unit = units[u]!;
    const c = cands[assign[u]!]!;
    if (!memberOk(c, unit.group)) return false;
    if (unit.group.forbiddenTraits.some((t) => c.p.traits.has(t))) return false;
    if (unit.numbered && !unit.group.requiredTraits.every((t) => c.p.traits.has(t))) return false;
    if (!unit.numbered) unnumberedUsed.add(assign[u]!);
    for (const [cls, amount] of Object.entries(unit.amounts)) {
      if (!unitRulesOk(c.p, cls, amount)) return false;
      const key = `${assign[u]}|${cls}`;
      load.set(key, (load.get(key) ?? 0) + amount);
    }
  }
  for (const [key, amount] of load) {
    const [i, cls] = key.split('|') as [string, string];
    const p = cands[Number(i)]!.p;
    if ((p.usages[cls] ?? 0) + amount > capacityOf(p.inventories[cls]!)) return false;
  }
  if (request.groupPolicy === 'isolate') {
    const numberedProviders = units.map((unit, u) => (unit.numbered ? assign[u]! : -1)).filter((p) => p >= 0);
    if (new Set(numberedProviders).size !== numberedProviders.length) return false;
  }
  const unnumbered = request.groups[0]!;
  const judged = unnumberedUsed.size > 0 ? [...unnumberedUsed].map((i) => cands[i]!.p) : [cands[0]!.p];
  if (!unnumbered.requiredTraits.every((t) => judged.some((p) => p.traits.has(t)))) return false;
  if (unnumbered.forbiddenTraits.some((t) => judged.some((p) => p.traits.has(t)))) return false;
  if (unnumberedUsed.size === 0 && !unnumbered.memberOf.every((list) => list.some((a) => cands[0]!.p.aggregates.has(a)))) return false;
  return true;
}

function bruteForceFits(request: RequestSpec, tree: FitTree): boolean {
  const units = unitsOf(request);
  const cands = candidatesOf(tree);
  const assign = new Array<number>(units.length).fill(0);
  for (;;) {
    if (assignmentOk(request, tree, units, cands, assign)) return true;
    let u = 0;
    while (u < units.length && ++assign[u]! === cands.length) assign[u++] = 0;
    if (u === units.length) return false;
  }
}

// ---------------------------------------- generators ----------------------------------------

const inventoryArb = fc
  .record({ total: fc.integer({ min: 1, max: 8 }), reserved: fc.integer({ min: 0, max: 2 }), minUnit: fc.integer({ min: 1, max: 2 }), stepSize: fc.integer({ min: 1, max: 2 }), ratio: fc.constantFrom(1, 1.5), maxExtra: fc.integer({ min: 0, max: 8 }), used: fc.integer({ min: 0, max: 8 }) })
  .map((r) => ({
    inv: { total: r.total, reserved: Math.min(r.reserved, r.total), minUnit: r.minUnit, maxUnit: r.minUnit + r.maxExtra, stepSize: r.stepSize, allocationRatio: r.ratio },
    used: Math.min(r.used, r.total),
  }));

const providerBodyArb = fc.record({
  inv: fc.dictionary(fc.constantFrom(...CLASSES), inventoryArb, { maxKeys: 3 }),
  traits: fc.subarray(TRAITS),
  aggs: fc.subarray(AGGS),
});

type ProviderBody = { inv: Record<string, { inv: InventoryInput; used: number }>; traits: string[]; aggs: string[] };

const treeArb = fc
  .record({
    root: providerBodyArb,
    children: fc.array(fc.record({ body: providerBodyArb, parentPick: fc.nat() }), { maxLength: 3 }),
    sharing: fc.array(fc.record({ body: providerBodyArb, shares: fc.boolean() }), { maxLength: 2 }),
  })
  .map(({ root, children, sharing }): FitTree => {
    const make = (name: string, body: ProviderBody, parent?: string, extraTraits: string[] = []) =>
      provider(name, {
        parent,
        inv: Object.fromEntries(Object.entries(body.inv).map(([c, v]) => [c, v.inv])),
        used: Object.fromEntries(Object.entries(body.inv).map(([c, v]) => [c, v.used])),
        traits: [...body.traits, ...extraTraits],
        aggs: body.aggs,
      });
    const names = ['root'];
    const providers = [make('root', root)];
    children.forEach((child, i) => {
      const name = `c${i}`;
      providers.push(make(name, child.body, names[child.parentPick % names.length]));
      names.push(name);
    });
    const sharingProviders = sharing.map((s, i) => make(`s${i}`, s.body, undefined, s.shares ? ['MISC_SHARES_VIA_AGGREGATE'] : []));
    return { providers, sharingProviders };
  });

const groupArb = (suffix: string, minClasses: number) =>
  fc
    .record({
      resources: fc.dictionary(fc.constantFrom(...CLASSES), fc.integer({ min: 1, max: 6 }), { minKeys: minClasses, maxKeys: 2 }),
      required: fc.subarray(TRAITS, { maxLength: 2 }),
      forbidden: fc.subarray(TRAITS, { maxLength: 1 }),
      memberOf: fc.option(fc.subarray(AGGS, { minLength: 1 }), { nil: undefined }),
    })
    .map((g) =>
      group(suffix, g.resources, {
        requiredTraits: g.required,
        forbiddenTraits: g.forbidden.filter((t) => !g.required.includes(t)),
        memberOf: g.memberOf === undefined ? [] : [g.memberOf],
      }),
    );

const specArb = fc
  .record({
    unnumbered: groupArb('', 0),
    numbered: fc.array(fc.nat(), { maxLength: 2 }),
    numberedGroups: fc.tuple(groupArb('1', 1), groupArb('2', 1)),
    policy: fc.constantFrom<'none' | 'isolate'>('none', 'isolate'),
  })
  .map(({ unnumbered, numbered, numberedGroups, policy }) => spec([unnumbered, ...numberedGroups.slice(0, numbered.length)], policy));

/** The allocations obey capacity, cover exactly the requested totals, and use only candidates. */
function checkAllocations(request: RequestSpec, tree: FitTree, allocations: FitAllocation[]): void {
  const cands = candidatesOf(tree);
  const requested = new Map<string, number>();
  for (const g of request.groups) for (const [c, a] of Object.entries(g.resources)) requested.set(c, (requested.get(c) ?? 0) + a);
  const granted = new Map<string, number>();
  const seen = new Set<string>();
  for (const a of allocations) {
    const c = cands.find((x) => x.p.uuid === a.providerUuid);
    expect(c, `allocation on ${a.providerUuid} is not a candidate`).toBeDefined();
    expect(seen.has(`${a.providerUuid}|${a.resourceClass}`), 'one entry per provider and class').toBe(false);
    seen.add(`${a.providerUuid}|${a.resourceClass}`);
    const inv = c!.p.inventories[a.resourceClass]!;
    expect((c!.p.usages[a.resourceClass] ?? 0) + a.amount).toBeLessThanOrEqual(capacityOf(inv));
    granted.set(a.resourceClass, (granted.get(a.resourceClass) ?? 0) + a.amount);
  }
  expect(granted).toEqual(requested);
}

function merged(units: Unit[], cands: ReturnType<typeof candidatesOf>, assign: number[]): FitAllocation[] {
  const out = new Map<string, FitAllocation>();
  units.forEach((unit, u) => {
    const providerUuid = cands[assign[u]!]!.p.uuid;
    for (const [resourceClass, amount] of Object.entries(unit.amounts)) {
      const key = `${providerUuid}|${resourceClass}`;
      const prev = out.get(key);
      if (prev) prev.amount += amount;
      else out.set(key, { providerUuid, resourceClass, amount });
    }
  });
  return [...out.values()];
}

const canonical = (allocations: FitAllocation[]): string =>
  allocations.map((a) => `${a.providerUuid}/${a.resourceClass}=${a.amount}`).sort().join(' ');

describe('fitRequest agrees with a brute-force enumerator', () => {
  it('yes/no matches, and every yes is a valid allocation set', () => {
    fc.assert(
      fc.property(treeArb, specArb, (tree, request) => {
        const result = fitRequest(request, tree);
        expect(result.ok, result.ok ? 'fitRequest said yes' : `fitRequest said no: ${result.reason}`).toBe(bruteForceFits(request, tree));
        if (result.ok) checkAllocations(request, tree, result.allocations);
      }),
      { numRuns: 3000 },
    );
  });

  it('the returned allocations are those of an assignment the oracle accepts', () => {
    fc.assert(
      fc.property(treeArb, specArb, (tree, request) => {
        const result = fitRequest(request, tree);
        if (!result.ok) return;
        const units = unitsOf(request);
        const cands = candidatesOf(tree);
        const wanted = canonical(result.allocations);
        const assign = new Array<number>(units.length).fill(0);
        for (;;) {
          if (assignmentOk(request, tree, units, cands, assign) && canonical(merged(units, cands, assign)) === wanted) return;
          let u = 0;
          while (u < units.length && ++assign[u]! === cands.length) assign[u++] = 0;
          expect(u, `no valid assignment yields ${wanted}`).toBeLessThan(units.length);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
