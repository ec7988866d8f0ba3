/**
 * Placement-rules benchmark: `npm run bench -- placement [--trees N] [--seed S] [--json]`.
 *
 * Measures `@ert/placement` alone (no store, no scheduler), in three parts:
 * 1. the adversarial shapes that made the old search take seconds (issue 10) and the wide
 *    symmetric trees that make Placement 8.0.0 explode (../shared/PLACEMENT-API.md §4.6):
 *    each decided by `fitRequest` (median of repeated runs, ms) with the answer checked;
 * 2. N seeded random trees of up to 16 providers and requests of up to 16 groups (mixed
 *    none/isolate, traits, aggregates, summed amounts): per-host decision time (median of 5
 *    runs of each tree) p50/p99/max, and how many hit the step budget (counted apart, never
 *    folded into the times);
 * 3. `allocationCandidates` over 5,000 flat providers and over 2,000 hosts with NUMA and
 *    cache children, with limit 1, limit 1,000 (Nova's default) and no limit, first-seen
 *    requests each time (the index is built once per world, as a server would hold it).
 * Every timed answer is also checked for correctness (a wrong answer exits 1).
 */
import { performance } from 'node:perf_hooks';
import { seededRandom } from '@ert/core';
import { allocationCandidates, DEFAULT_SEARCH_BUDGET, fitRequest, indexWorld } from '@ert/placement';
import type { FitProvider } from '@ert/placement';
import { normalizeInventory } from '@ert/plugin-api';
import type { InventoryInput, PlacementRequest, RequestGroup } from '@ert/plugin-api';

interface Args {
  trees: number;
  seed: number;
  json: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { trees: 2_000, seed: 42, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const positive = (): number => {
      const v = argv[++i];
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < 1) throw new Error(`placement-bench: ${arg} must be a positive integer, got "${String(v)}"`);
      return n;
    };
    if (arg === '--trees') args.trees = positive();
    else if (arg === '--seed') args.seed = positive();
    else if (arg === '--json') args.json = true;
    else if (arg === '--help' || arg === '-h') {
      console.log('usage: npm run bench -- placement [--trees N] [--seed S] [--json]');
      process.exit(0);
    } else throw new Error(`placement-bench: unknown option "${arg}" (see --help)`);
  }
  return args;
}

function provider(name: string, parent: string | undefined, inventories: Record<string, InventoryInput>, more: { used?: Record<string, number>; traits?: string[]; aggs?: string[] } = {}): FitProvider {
  return {
    uuid: `00000000-0000-4000-8000-${name.padStart(12, '0').slice(-12)}`,
    name,
    parentUuid: parent === undefined ? undefined : `00000000-0000-4000-8000-${parent.padStart(12, '0').slice(-12)}`,
    inventories: Object.fromEntries(Object.entries(inventories).map(([c, v]) => [c, normalizeInventory(v)])),
    usages: more.used ?? {},
    traits: new Set(more.traits ?? []),
    aggregates: new Set(more.aggs ?? []),
  };
}

const group = (suffix: string, resources: Record<string, number>, more: Partial<RequestGroup> = {}): RequestGroup => ({
  suffix,
  resources,
  requiredTraits: more.requiredTraits ?? [],
  forbiddenTraits: more.forbiddenTraits ?? [],
  memberOf: more.memberOf ?? [],
  ...(more.anyOfTraits ? { anyOfTraits: more.anyOfTraits } : {}),
});

const numbered = (k: number, resources: Record<string, number>): RequestGroup[] => Array.from({ length: k }, (_, i) => group(String(i + 1), resources));

/** Median of `runs` timings of `fn`, ms. */
function median(runs: number, fn: () => void): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    fn();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const round = (n: number, digits = 3): number => Number(n.toFixed(digits));

let wrong = 0;
function check(name: string, ok: boolean): void {
  if (!ok) {
    wrong++;
    console.error(`placement-bench: wrong answer in ${name}`);
  }
}

interface ShapeResult {
  shape: string;
  answer: 'fits' | 'no fit' | 'budget';
  medianMs: number;
  placement800Note?: string;
}

function adversarialShapes(): ShapeResult[] {
  const out: ShapeResult[] = [];
  const wide = (children: number, perChild: Record<string, InventoryInput>, root: Record<string, InventoryInput> = {}): FitProvider[] => [
    provider('root', undefined, root),
    ...Array.from({ length: children }, (_, i) => provider(`c${i}`, 'root', perChild)),
  ];
  const shape = (name: string, providers: FitProvider[], request: PlacementRequest, expected: boolean): void => {
    const first = fitRequest(request, { providers });
    check(name, first.ok === expected && !(first.ok === false && first.budgetExceeded));
    const answer = first.ok ? 'fits' : first.budgetExceeded ? 'budget' : 'no fit';
    out.push({ shape: name, answer, medianMs: round(median(50, () => fitRequest(request, { providers }))) });
  };
  const spec = (groups: RequestGroup[], groupPolicy: 'none' | 'isolate'): PlacementRequest => ({ groups, groupPolicy });

  shape('8 groups, none, unsatisfiable unnumbered required trait (old ert: 2.5 s)', wide(8, { VCPU: { total: 2 } }, { MEMORY_MB: { total: 1024 } }), spec([group('', { MEMORY_MB: 512 }, { requiredTraits: ['CUSTOM_NOWHERE'] }), ...numbered(8, { VCPU: 1 })], 'none'), false);
  shape('10 children, 11 isolate groups (old ert: 11.3 s)', wide(10, { VCPU: { total: 4 } }), spec([group('', {}), ...numbered(11, { VCPU: 1 })], 'isolate'), false);
  shape('1 root + 8 children x 1 VCPU, 7 isolate groups (Placement 8.0.0: > 8 min)', wide(8, { VCPU: { total: 1 } }), spec([group('', {}), ...numbered(7, { VCPU: 1 })], 'isolate'), true);
  shape('1 root + 8 children x 1 VCPU, 9 isolate groups (no fit)', wide(8, { VCPU: { total: 1 } }), spec([group('', {}), ...numbered(9, { VCPU: 1 })], 'isolate'), false);
  for (const k of [5, 6, 7, 8]) {
    shape(`1 root + 8 children x 1 VCPU, ${k} groups, none (Placement 8.0.0: k=5 2.5 s, k=6 32 s, k=7 > 150 s)`, wide(8, { VCPU: { total: 1 } }), spec([group('', {}), ...numbered(k, { VCPU: 1 })], 'none'), true);
  }
  shape('16 children of mixed sizes, 16 groups of mixed sizes, none (bin packing that fits)', [provider('root', undefined, {}), ...Array.from({ length: 16 }, (_, i) => provider(`c${i}`, 'root', { VCPU: { total: 4 + (i % 3) } }))], spec([group('', {}), ...Array.from({ length: 16 }, (_, i) => group(String(i + 1), { VCPU: 1 + (i % 4) }))], 'none'), true);
  return out;
}

/** A random tree of 1-16 providers and a request of 1-16 groups, from `random`. */
function randomCase(random: () => number): { providers: FitProvider[]; request: PlacementRequest } {
  const int = (lo: number, hi: number): number => lo + Math.floor(random() * (hi - lo + 1));
  const pick = <T>(items: readonly T[]): T => items[int(0, items.length - 1)]!;
  const some = <T>(items: readonly T[], p: number): T[] => items.filter(() => random() < p);
  const CLASSES = ['VCPU', 'MEMORY_MB', 'DISK_GB', 'CUSTOM_LLC_WAYS'];
  const TRAITS = ['CUSTOM_A', 'CUSTOM_B', 'CUSTOM_C', 'HW_NUMA_ROOT'];
  const AGGS = ['agg1', 'agg2'];
  const n = int(1, 16);
  const providers: FitProvider[] = [];
  for (let i = 0; i < n; i++) {
    const inventories: Record<string, InventoryInput> = {};
    const used: Record<string, number> = {};
    for (const c of some(CLASSES, 0.6)) {
      const total = int(2, 16);
      inventories[c] = { total, maxUnit: int(1, total), allocationRatio: pick([1, 1, 2]) };
      used[c] = int(0, Math.floor(total / 2));
    }
    providers.push(provider(`p${i}`, i === 0 ? undefined : `p${int(0, i - 1)}`, inventories, { used, traits: some(TRAITS, 0.3), aggs: some(AGGS, 0.3) }));
  }
  const groups: RequestGroup[] = [group('', Object.fromEntries(some(CLASSES, 0.3).map((c) => [c, int(1, 3)])), { requiredTraits: some(TRAITS, 0.05), forbiddenTraits: [] })];
  const k = int(0, 15);
  for (let g = 1; g <= k; g++) {
    const classes = some(CLASSES, 0.25);
    if (classes.length === 0) classes.push(pick(CLASSES));
    groups.push(group(String(g), Object.fromEntries(classes.map((c) => [c, int(1, 2)])), { requiredTraits: some(TRAITS, 0.03), forbiddenTraits: some(TRAITS, 0.03), memberOf: random() < 0.05 ? [[pick(AGGS)]] : [] }));
  }
  return { providers, request: { groups, groupPolicy: random() < 0.5 ? 'isolate' : 'none' } };
}

function randomTrees(trees: number, seed: number) {
  const random = seededRandom(seed);
  const times: number[] = [];
  let fits = 0;
  let budget = 0;
  for (let i = 0; i < trees; i++) {
    const { providers, request } = randomCase(random);
    const fit = fitRequest(request, { providers });
    // Median of 5 runs per tree: one timing would mostly measure garbage-collection pauses.
    const ms = median(5, () => fitRequest(request, { providers }));
    if (!fit.ok && fit.budgetExceeded) {
      budget++;
      continue;
    }
    times.push(ms);
    if (fit.ok) fits++;
  }
  times.sort((a, b) => a - b);
  return { trees, decided: times.length, fits, budgetExceeded: budget, p50Ms: round(percentile(times, 50)), p99Ms: round(percentile(times, 99)), maxMs: round(times[times.length - 1] ?? 0) };
}

function worlds(seed: number) {
  const random = seededRandom(seed);
  const int = (lo: number, hi: number): number => lo + Math.floor(random() * (hi - lo + 1));
  const flat: FitProvider[] = Array.from({ length: 5_000 }, (_, i) =>
    provider(`f${i}`, undefined, { VCPU: { total: 32, allocationRatio: 4 }, MEMORY_MB: { total: 131072 }, DISK_GB: { total: 1000 } }, { used: { VCPU: int(0, 120), MEMORY_MB: int(0, 120000), DISK_GB: int(0, 900) }, traits: random() < 0.3 ? ['HW_CPU_X86_AVX2'] : [] }),
  );
  const nested: FitProvider[] = [];
  for (let h = 0; h < 2_000; h++) {
    const root = `h${h}`;
    nested.push(provider(root, undefined, { DISK_GB: { total: 2000 } }, { used: { DISK_GB: int(0, 1800) }, aggs: h % 10 === 0 ? ['az1'] : [] }));
    for (let n = 0; n < 2; n++) {
      const numa = `${root}n${n}`;
      nested.push(provider(numa, root, { VCPU: { total: 32, allocationRatio: 2 }, MEMORY_MB: { total: 65536 }, CUSTOM_HUGEPAGES_1G: { total: 16 } }, { used: { VCPU: int(0, 60), MEMORY_MB: int(0, 60000), CUSTOM_HUGEPAGES_1G: int(0, 16) }, traits: ['HW_NUMA_ROOT'] }));
      nested.push(provider(`${numa}l`, numa, { CUSTOM_LLC_WAYS: { total: 11 } }, { used: { CUSTOM_LLC_WAYS: int(0, 11) }, traits: ['CUSTOM_RDT_CAT'] }));
    }
  }
  const flatRequests = (i: number): PlacementRequest => ({ groups: [group('', { VCPU: 1 + (i % 8), MEMORY_MB: 1024 * (1 + (i % 16)), DISK_GB: 10 + i })], groupPolicy: 'none' });
  const nestedRequests = (i: number): PlacementRequest => ({
    groups: [group('', { DISK_GB: 20 + i }), group('_NUMA', { VCPU: 2 + (i % 6), MEMORY_MB: 2048 * (1 + (i % 4)) }, { requiredTraits: ['HW_NUMA_ROOT'] }), group('_LLC', { CUSTOM_LLC_WAYS: 1 + (i % 4) })],
    groupPolicy: 'none',
    sameSubtree: [['_NUMA', '_LLC']],
  });
  const measure = (name: string, providers: FitProvider[], requests: (i: number) => PlacementRequest) => {
    const index = indexWorld(providers);
    const row: Record<string, number | string> = { world: name, providers: providers.length };
    for (const [label, limit] of [['limit1', 1], ['limit1000', 1000], ['noLimit', undefined]] as const) {
      const times: number[] = [];
      let candidates = 0;
      for (let i = 0; i < 20; i++) {
        // A first-seen request each time: amounts differ per iteration.
        const request = requests(i);
        const start = performance.now();
        const result = allocationCandidates(request, index, limit === undefined ? {} : { limit });
        times.push(performance.now() - start);
        candidates = result.allocationRequests.length;
        check(`${name} ${label}`, limit === undefined || candidates <= limit);
        for (const r of result.allocationRequests.slice(0, 5)) {
          for (const [uuid, classes] of Object.entries(r.allocations)) {
            const summary = result.providerSummaries[uuid]!;
            for (const [c, n] of Object.entries(classes)) check(`${name} capacity`, summary.resources[c]!.used + n <= summary.resources[c]!.capacity);
          }
        }
      }
      times.sort((a, b) => a - b);
      row[`${label}MedianMs`] = round(percentile(times, 50), 2);
      row[`${label}Candidates`] = candidates;
    }
    return row;
  };
  return [measure('5,000 flat providers', flat, flatRequests), measure('2,000 hosts x (2 NUMA + 2 LLC children)', nested, nestedRequests)];
}

const args = parseArgs(process.argv.slice(2));
const result = {
  node: process.version,
  searchBudget: DEFAULT_SEARCH_BUDGET,
  shapes: adversarialShapes(),
  randomTrees: randomTrees(args.trees, args.seed),
  candidates: worlds(args.seed),
  wrongAnswers: wrong,
};
if (args.json) {
  console.log(JSON.stringify(result, null, 2));
} else {
  console.log(`placement bench (node ${result.node}, search budget ${result.searchBudget} steps)`);
  console.log('\nadversarial shapes (fitRequest, median of 50):');
  for (const s of result.shapes) console.log(`  ${s.medianMs.toFixed(3).padStart(9)} ms  ${s.answer.padEnd(7)} ${s.shape}`);
  const r = result.randomTrees;
  console.log(`\nrandom trees (<= 16 providers, <= 16 groups): ${r.trees} trees, ${r.fits} fit, ${r.budgetExceeded} past the budget; p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, max ${r.maxMs} ms`);
  console.log('\nallocationCandidates (median of 20 first-seen requests):');
  for (const w of result.candidates) console.log(`  ${String(w.world)}: limit=1 ${w['limit1MedianMs']} ms, limit=1000 ${w['limit1000MedianMs']} ms (${w['limit1000Candidates']}), no limit ${w['noLimitMedianMs']} ms (${w['noLimitCandidates']} candidates)`);
}
if (wrong > 0) process.exit(1);
