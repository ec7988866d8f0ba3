import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { allocationCandidates, fitRequest, type FitProvider } from '@ert/placement';
import { capacityOf, type InventoryInput, type RequestGroup, type RequestSpec } from '@ert/plugin-api';
import { group, provider, spec } from './helpers.js';

// A brute-force model of Placement 8.0.0's allocation candidates, written from the rules
// (docs/placement.md, placement/objects/allocation_candidate.py and research_context.py),
// not from the engine: for every anchor root, enumerate every assignment of "units" (each
// unnumbered class, each numbered group) to every provider the anchor may draw on, keep
// the assignments that pass every rule, and collect them as Placement's (allocations,
// mappings) set. Worlds are small (a tree of at most 4 providers and 2 sharing providers,
// at most 5 units) so the enumeration is exhaustive.
//
// Mutations this suite was seen to catch (each broke the engine once, then reverted):
// - summed amounts checked against capacity but not max_unit (search.ts fitsNow);
// - numbered member_of allowed through the root (search.ts ineligibility);
// - unnumbered required traits judged per provider instead of together;
// - group_policy=isolate ignored in the matching bound (numberedMatchable returning true);
// - same_subtree checked with "ancestor of any" instead of "of all";
// - the failure memo recording sub-searches that found candidates (mode 'all');
// - fit.ts simpleFit checking capacity but not min_unit/max_unit/step_size (the shortcut's
//   kind boundaries are guarded by rules.test.ts).
// - candidates.ts deduplicating only when the world has sharing providers (the empty
//   candidate of a request with nothing to place came once per tree);
// - search.ts allocationsByProvider listing a resourceless group's provider with no classes.

const CLASSES = ['VCPU', 'MEMORY_MB', 'DISK_GB'];
const TRAITS = ['T1', 'T2', 'T3'];
const AGGS = ['A1', 'A2'];
const SHARES = 'MISC_SHARES_VIA_AGGREGATE';

interface Unit {
  suffix: string;
  group: RequestGroup;
  numbered: boolean;
  amounts: Record<string, number>;
}

function unitsOf(request: RequestSpec): Unit[] {
  const [unnumbered, ...numbered] = request.groups;
  const units: Unit[] = Object.entries(unnumbered!.resources).map(([c, a]) => ({ suffix: '', group: unnumbered!, numbered: false, amounts: { [c]: a } }));
  for (const g of numbered) units.push({ suffix: g.suffix, group: g, numbered: true, amounts: { ...g.resources } });
  return units;
}

interface World {
  all: FitProvider[];
  rootOf: (p: FitProvider) => FitProvider;
  ancestors: (p: FitProvider) => Set<string>;
}

function worldOf(providers: FitProvider[]): World {
  const byUuid = new Map(providers.map((p) => [p.uuid, p]));
  const rootOf = (p: FitProvider): FitProvider => (p.parentUuid === undefined ? p : rootOf(byUuid.get(p.parentUuid)!));
  const ancestors = (p: FitProvider): Set<string> => (p.parentUuid === undefined ? new Set([p.uuid]) : new Set([p.uuid, ...ancestors(byUuid.get(p.parentUuid)!)]));
  return { all: providers, rootOf, ancestors };
}

const inAll = (p: FitProvider, lists: string[][]): boolean => lists.every((l) => l.some((a) => p.aggregates.has(a)));
const inAny = (p: FitProvider, aggs: string[] | undefined): boolean => (aggs ?? []).some((a) => p.aggregates.has(a));
const anyOf = (lists: string[][] | undefined, has: (t: string) => boolean): boolean => (lists ?? []).every((l) => l.some(has));

/** The providers a candidate anchored at `root` may use: its tree, then sharing providers sharing an aggregate with the tree. */
function anchorProviders(world: World, root: FitProvider): FitProvider[] {
  const tree = world.all.filter((p) => world.rootOf(p) === root);
  const treeAggs = new Set(tree.flatMap((p) => [...p.aggregates]));
  const sharing = world.all.filter((s) => world.rootOf(s) !== root && s.traits.has(SHARES) && [...s.aggregates].some((a) => treeAggs.has(a)));
  return [...tree, ...sharing];
}

function assignmentOk(request: RequestSpec, world: World, root: FitProvider, units: Unit[], cands: FitProvider[], assign: number[]): boolean {
  const load = new Map<string, number>();
  const unnumberedUsed = new Set<FitProvider>();
  const byUuid = new Map(world.all.map((p) => [p.uuid, p]));
  for (let u = 0; u < units.length; u++) {
    const unit = units[u]!;
    const p = cands[assign[u]!]!;
    const g = unit.group;
    const inTree = world.rootOf(p) === root;
    if (g.forbiddenTraits.some((t) => p.traits.has(t))) return false;
    if (unit.numbered) {
      if (!g.requiredTraits.every((t) => p.traits.has(t))) return false;
      if (!anyOf(g.anyOfTraits, (t) => p.traits.has(t))) return false;
      if (!inAll(p, g.memberOf) || inAny(p, g.forbiddenAggregates)) return false;
      if (g.inTree !== undefined && (!byUuid.has(g.inTree) || world.rootOf(byUuid.get(g.inTree)!) !== world.rootOf(p))) return false;
    } else {
      if (g.memberOf.length > 0 && !inAll(p, g.memberOf) && !(inTree && inAll(root, g.memberOf))) return false;
      if (inAny(p, g.forbiddenAggregates) || inAny(root, g.forbiddenAggregates)) return false;
      if (g.inTree !== undefined && !(inTree && byUuid.has(g.inTree) && world.rootOf(byUuid.get(g.inTree)!) === root)) return false;
      unnumberedUsed.add(p);
    }
    for (const [cls, amount] of Object.entries(unit.amounts)) {
      const inv = p.inventories[cls];
      if (inv === undefined || amount < inv.minUnit || amount > inv.maxUnit || amount % inv.stepSize !== 0) return false;
      if ((p.usages[cls] ?? 0) + amount > capacityOf(inv)) return false;
      const key = `${assign[u]}|${cls}`;
      load.set(key, (load.get(key) ?? 0) + amount);
    }
  }
  for (const [key, amount] of load) {
    const [i, cls] = key.split('|') as [string, string];
    const p = cands[Number(i)]!;
    const inv = p.inventories[cls]!;
    if ((p.usages[cls] ?? 0) + amount > capacityOf(inv) || amount > inv.maxUnit) return false;
  }
  if (request.groupPolicy === 'isolate') {
    const numbered = units.flatMap((unit, u) => (unit.numbered ? [assign[u]!] : []));
    if (new Set(numbered).size !== numbered.length) return false;
  }
  const unnumbered = request.groups[0]!;
  const judged = unnumberedUsed.size > 0 ? [...unnumberedUsed] : [root];
  const has = (t: string): boolean => judged.some((p) => p.traits.has(t));
  if (!unnumbered.requiredTraits.every(has) || !anyOf(unnumbered.anyOfTraits, has)) return false;
  if (unnumberedUsed.size === 0 && (unnumbered.forbiddenTraits.some(has) || !inAll(root, unnumbered.memberOf) || inAny(root, unnumbered.forbiddenAggregates))) return false;
  for (const list of request.sameSubtree ?? []) {
    const chosen = units.flatMap((unit, u) => (list.includes(unit.suffix) ? [cands[assign[u]!]!] : []));
    if (chosen.length > 1 && !chosen.some((top) => chosen.every((p) => world.ancestors(p).has(top.uuid)))) return false;
  }
  return true;
}

function keyOf(units: Unit[], cands: FitProvider[], assign: number[]): string {
  const amounts = new Map<string, number>();
  const mappings = new Map<string, Set<string>>();
  units.forEach((unit, u) => {
    const uuid = cands[assign[u]!]!.uuid;
    for (const [c, a] of Object.entries(unit.amounts)) amounts.set(`${uuid}/${c}`, (amounts.get(`${uuid}/${c}`) ?? 0) + a);
    if (!mappings.has(unit.suffix)) mappings.set(unit.suffix, new Set());
    mappings.get(unit.suffix)!.add(uuid);
  });
  const a = [...amounts].map(([k, n]) => `${k}=${n}`).sort().join(' ');
  const m = [...mappings].map(([s, set]) => `${s}:${[...set].sort().join(',')}`).sort().join(' ');
  return `${a}|${m}`;
}

/** Every candidate of the world, by anchor root uuid, as Placement would list them. */
function bruteForce(request: RequestSpec, providers: FitProvider[]): Map<string, Set<string>> {
  const world = worldOf(providers);
  const units = unitsOf(request);
  const out = new Map<string, Set<string>>();
  for (const root of providers.filter((p) => p.parentUuid === undefined)) {
    const found = new Set<string>();
    out.set(root.uuid, found);
    if ((request.rootRequiredTraits ?? []).some((t) => !root.traits.has(t))) continue;
    if ((request.rootForbiddenTraits ?? []).some((t) => root.traits.has(t))) continue;
    const cands = anchorProviders(world, root);
    const assign = new Array<number>(units.length).fill(0);
    for (;;) {
      if (assignmentOk(request, world, root, units, cands, assign)) found.add(keyOf(units, cands, assign));
      let u = 0;
      while (u < units.length && ++assign[u]! === cands.length) assign[u++] = 0;
      if (u === units.length) break;
    }
  }
  return out;
}

function engineKeys(result: ReturnType<typeof allocationCandidates>): Set<string> {
  return new Set(
    result.allocationRequests.map((r) => {
      const a = Object.entries(r.allocations)
        .flatMap(([uuid, classes]) => Object.entries(classes).map(([c, n]) => `${uuid}/${c}=${n}`))
        .sort()
        .join(' ');
      const m = Object.entries(r.mappings)
        .map(([s, uuids]) => `${s}:${[...uuids].sort().join(',')}`)
        .sort()
        .join(' ');
      return `${a}|${m}`;
    }),
  );
}

// ---------------------------------------- generators ----------------------------------------

const inventoryArb = fc
  .record({
    total: fc.integer({ min: 1, max: 8 }),
    reserved: fc.integer({ min: 0, max: 2 }),
    minUnit: fc.constantFrom(1, 1, 1, 2),
    stepSize: fc.constantFrom(1, 1, 1, 2),
    ratio: fc.constantFrom(1, 1.5, 4),
    maxExtra: fc.integer({ min: 0, max: 6 }),
    used: fc.integer({ min: 0, max: 6 }),
  })
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

function make(name: string, body: ProviderBody, parent?: string, extraTraits: string[] = []): FitProvider {
  return provider(name, {
    parent,
    inv: Object.fromEntries(Object.entries(body.inv).map(([c, v]) => [c, v.inv])),
    used: Object.fromEntries(Object.entries(body.inv).map(([c, v]) => [c, v.used])),
    traits: [...body.traits, ...extraTraits],
    aggs: body.aggs,
  });
}

const worldArb = fc
  .record({
    root: providerBodyArb,
    children: fc.array(fc.record({ body: providerBodyArb, parentPick: fc.nat() }), { maxLength: 3 }),
    sharing: fc.array(fc.record({ body: providerBodyArb, shares: fc.boolean() }), { maxLength: 2 }),
  })
  .map(({ root, children, sharing }) => {
    const names = ['root'];
    const tree = [make('root', root)];
    children.forEach((child, i) => {
      const name = `c${i}`;
      tree.push(make(name, child.body, names[child.parentPick % names.length]));
      names.push(name);
    });
    const sharingProviders = sharing.map((s, i) => make(`s${i}`, s.body, undefined, s.shares ? [SHARES] : []));
    return { tree, sharingProviders, names };
  });

const groupArb = (suffix: string, minClasses: number, maxClasses: number) =>
  fc
    .record({
      resources: fc.dictionary(fc.constantFrom(...CLASSES), fc.integer({ min: 1, max: 4 }), { minKeys: minClasses, maxKeys: maxClasses }),
      // Conditions are each present about one time in three or less, so that many requests fit.
      required: fc.oneof({ arbitrary: fc.constant<string[]>([]), weight: 2 }, { arbitrary: fc.subarray(TRAITS, { minLength: 1, maxLength: 2 }), weight: 1 }),
      anyOf: fc.option(fc.subarray(TRAITS, { minLength: 2, maxLength: 2 }), { nil: undefined, freq: 4 }),
      forbidden: fc.oneof({ arbitrary: fc.constant<string[]>([]), weight: 3 }, { arbitrary: fc.subarray(TRAITS, { minLength: 1, maxLength: 1 }), weight: 1 }),
      memberOf: fc.oneof({ arbitrary: fc.constant<string[][]>([]), weight: 2 }, { arbitrary: fc.array(fc.subarray(AGGS, { minLength: 1 }), { minLength: 1, maxLength: 2 }), weight: 1 }),
      forbiddenAggs: fc.oneof({ arbitrary: fc.constant<string[]>([]), weight: 3 }, { arbitrary: fc.subarray(AGGS, { minLength: 1, maxLength: 1 }), weight: 1 }),
      inTreePick: fc.option(fc.nat(), { nil: undefined, freq: 6 }),
    })
    .map((g) => ({
      g,
      make: (names: string[]): RequestGroup => {
        const out = group(suffix, g.resources, {
          requiredTraits: g.required,
          forbiddenTraits: g.forbidden.filter((t) => !g.required.includes(t)),
          memberOf: g.memberOf,
        });
        if (g.anyOf !== undefined) out.anyOfTraits = [g.anyOf];
        if (g.forbiddenAggs.length > 0) out.forbiddenAggregates = g.forbiddenAggs;
        if (g.inTreePick !== undefined) out.inTree = `uuid-${names[g.inTreePick % names.length]}`;
        return out;
      },
    }));

const requestArb = fc.record({
  unnumbered: groupArb('', 0, 2),
  numbered: fc.array(groupArb('_N', 1, 2), { maxLength: 2 }),
  resourceless: fc.option(groupArb('_R', 0, 0), { nil: undefined, freq: 4 }),
  policy: fc.constantFrom<'none' | 'isolate'>('none', 'isolate'),
  /** Make the second numbered group a copy of the first (interchangeable groups). */
  twin: fc.boolean(),
  subtree: fc.boolean(),
  rootRequired: fc.oneof({ arbitrary: fc.constant<string[]>([]), weight: 4 }, { arbitrary: fc.subarray(TRAITS, { minLength: 1, maxLength: 1 }), weight: 1 }),
  rootForbidden: fc.oneof({ arbitrary: fc.constant<string[]>([]), weight: 4 }, { arbitrary: fc.subarray(TRAITS, { minLength: 1, maxLength: 1 }), weight: 1 }),
});

type RequestDraft = typeof requestArb extends fc.Arbitrary<infer T> ? T : never;

function buildRequest(r: RequestDraft, names: string[]): RequestSpec {
  const drafts = r.twin && r.numbered.length === 2 ? [r.numbered[0]!, r.numbered[0]!] : r.numbered;
  const numbered: RequestGroup[] = drafts.map((g, i) => ({ ...g.make(names), suffix: `_N${i}` }));
  const groups = [r.unnumbered.make(names), ...numbered];
  const request = spec(groups, r.policy);
  if (r.resourceless !== undefined && numbered.length > 0) {
    // A resourceless group exists only inside a same_subtree (Placement 1.36).
    groups.push({ ...r.resourceless.make(names), suffix: '_R' });
    request.sameSubtree = [['_R', ...numbered.map((g) => g.suffix)]];
  } else if (r.subtree && numbered.length === 2) {
    request.sameSubtree = [numbered.map((g) => g.suffix)];
  }
  const forbidden = r.rootForbidden.filter((t) => !r.rootRequired.includes(t));
  if (r.rootRequired.length > 0) request.rootRequiredTraits = r.rootRequired;
  if (forbidden.length > 0) request.rootForbiddenTraits = forbidden;
  return request;
}

describe('the engine agrees with a brute-force model of Placement 8.0.0', () => {
  it('allocationCandidates lists exactly the brute-force candidates (as a set), and fitRequest says yes exactly when the host has one', () => {
    let withCandidates = 0;
    let withoutCandidates = 0;
    fc.assert(
      fc.property(worldArb, requestArb, ({ tree, sharingProviders, names }, r) => {
        const request = buildRequest(r, names);
        const providers = [...tree, ...sharingProviders];
        const expected = bruteForce(request, providers);
        const all = new Set([...expected.values()].flatMap((s) => [...s]));
        const result = allocationCandidates(request, { providers });
        expect(engineKeys(result)).toEqual(all);
        expect(result.allocationRequests.length).toBe(all.size);
        // The same with the failure memo on from the first step (small worlds never reach the default threshold).
        expect(engineKeys(allocationCandidates(request, { providers }, { memoAfterSteps: 0 }))).toEqual(all);

        const hostExpected = expected.get('uuid-root')!;
        const fit = fitRequest(request, { providers: tree, sharingProviders });
        expect(fit.ok, `fitRequest: ${fit.ok ? 'yes' : fit.reason}`).toBe(hostExpected.size > 0);
        expect(fitRequest(request, { providers: tree, sharingProviders }, { memoAfterSteps: 0 }).ok).toBe(fit.ok);
        // The shortcut for unconditioned unnumbered requests gives the search's own answer and reason.
        expect(fit).toEqual(fitRequest(request, { providers: tree, sharingProviders }, { noShortcut: true }));
        if (sharingProviders.length > 0) expect(fitRequest(request, { providers: tree })).toEqual(fitRequest(request, { providers: tree }, { noShortcut: true }));
        if (fit.ok) {
          // The allocations of the answer are those of one of the host's candidates.
          const allocations = fit.allocations.map((a) => `${a.providerUuid}/${a.resourceClass}=${a.amount}`).sort().join(' ');
          expect([...hostExpected].some((k) => k.startsWith(`${allocations}|`))).toBe(true);
          withCandidates++;
        } else {
          withoutCandidates++;
        }
      }),
      { numRuns: 600, seed: 20261125 },
    );
    // Both answers were exercised, so neither side of the comparison is vacuous.
    expect(withCandidates).toBeGreaterThan(20);
    expect(withoutCandidates).toBeGreaterThan(20);
  });

  it('limit cuts generation and returns a subset of the full list with summaries of only the trees used', () => {
    fc.assert(
      fc.property(worldArb, requestArb, fc.integer({ min: 1, max: 3 }), ({ tree, sharingProviders, names }, r, limit) => {
        const request = buildRequest(r, names);
        const providers = [...tree, ...sharingProviders];
        const full = engineKeys(allocationCandidates(request, { providers }));
        const limited = allocationCandidates(request, { providers }, { limit });
        expect(limited.allocationRequests.length).toBe(Math.min(limit, full.size));
        for (const k of engineKeys(limited)) expect(full.has(k)).toBe(true);
        const roots = new Set(limited.allocationRequests.flatMap((c) => Object.keys(c.allocations)).map((u) => limited.providerSummaries[u]!.rootProviderUuid));
        for (const summary of Object.values(limited.providerSummaries)) expect(roots.has(summary.rootProviderUuid)).toBe(true);
      }),
      { numRuns: 150, seed: 7 },
    );
  });
});
