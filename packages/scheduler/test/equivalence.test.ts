import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import type { Store } from '@ert/store';
import { createScheduler, NoValidHostError } from '../src/index.js';
import type { RankingStrategy, Scheduler } from '../src/index.js';
import { freeRam, freeVcpu, level } from './fixtures.js';
import { flavor, hostImport, openStore, schedulerConfig, tempDir, uuidFor } from './helpers.js';
import type { HostSpec } from './helpers.js';

/*
 * The indexed strategy (memoised per request and host version) must choose exactly the host a
 * full scan (every filter and weigher on every host, every decision) chooses. Both run the same
 * random sequence of requests against identical fleets in separate stores, with writes of a
 * foreign scheduler interleaved, and must agree on every selection and every failure.
 * Requests may name an availability zone and forbid an aggregate (request filters); seen red
 * with the full scan dropping the forbidden-aggregates narrowing. The fixtures publish host
 * summaries (the level consumer's, the built-in free amounts the weighers score), so the
 * indexed scheduler's first rankings of a request are bounded rankings (bounded-ranking.ts), pruned
 * by the filters' summary bounds and the affinity filter's candidate hosts; seen red with the
 * `resources` filter's bound asking one more than the request (hosts that fit dropped), and
 * with the bounded ranking's best list not evaluating the candidates after the first.
 */

const hostArb = fc.record({
  vcpus: fc.integer({ min: 1, max: 16 }),
  memory: fc.integer({ min: 1, max: 8 }).map((n) => n * 1024),
  ways: fc.option(fc.integer({ min: 1, max: 11 }), { nil: undefined }),
  avx: fc.boolean(),
  gold: fc.boolean(),
  level: fc.integer({ min: 0, max: 5 }),
  zone: fc.constantFrom<'az1' | 'az2' | undefined>('az1', 'az2', undefined),
});

const requestArb = fc.record({
  vcpus: fc.integer({ min: 1, max: 4 }),
  memory: fc.integer({ min: 1, max: 4 }).map((n) => n * 512),
  ways: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
  avx: fc.constantFrom<'required' | 'forbidden' | undefined>('required', 'forbidden', undefined, undefined),
  gold: fc.boolean(),
  count: fc.integer({ min: 1, max: 3 }),
  /** A server group of the batch (the batch's own members join it one by one). */
  group: fc.constantFrom<'affinity' | 'anti-affinity' | undefined>('affinity', 'anti-affinity', undefined),
  /** The availability zone named (the availability-zone request filter), and whether the gold aggregate is forbidden. */
  zone: fc.constantFrom<'az1' | 'az2' | undefined>('az1', 'az2', undefined, undefined),
  forbidGold: fc.boolean(),
  /** Before this request, a foreign writer takes one vCPU of host #n (when it fits). */
  foreign: fc.option(fc.nat(), { nil: undefined }),
});

describe('indexed ranking chooses what a full scan chooses', () => {
  const tmp = tempDir('ert-equiv-');
  const open: Array<Store | Scheduler> = [];
  afterAll(async () => {
    for (const x of open) await x.close();
    tmp.cleanup();
  });

  it('on random fleets and request sequences', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(hostArb, { minLength: 1, maxLength: 8 }), fc.array(requestArb, { minLength: 1, maxLength: 8 }), async (hostSpecs, requests) => {
        run++;
        const fleet: HostSpec[] = hostSpecs.map((h, i) => ({
          name: `e${run}-h${i}`,
          inventories: { VCPU: h.vcpus, MEMORY_MB: h.memory },
          traits: h.avx ? ['HW_CPU_X86_AVX2'] : [],
          aggregates: [...(h.gold ? [uuidFor('gold')] : []), ...(h.zone ? [uuidFor(h.zone)] : [])],
          children: h.ways ? [{ key: 'llc_0', inventories: { CUSTOM_LLC_WAYS: h.ways } }] : [],
          stats: { level: { schemaVersion: 2, data: { level: h.level } } },
        }));
        const setups = await Promise.all(
          (['indexed', 'full-scan'] as RankingStrategy[]).map(async (strategy) => {
            const { store, options } = await openStore('sqlite3', tmp.dir, `eq-${strategy}`);
            open.push(store);
            await store.importHosts(fleet.map(hostImport));
            await store.upsertAggregate({ uuid: uuidFor('gold'), name: 'gold', metadata: { tier: 'gold', 'free-ram_weight_multiplier': '3' } });
            for (const zone of ['az1', 'az2']) await store.upsertAggregate({ uuid: uuidFor(zone), name: zone, metadata: { availability_zone: zone } });
            const config = schedulerConfig(options, tmp.dir, {
              consumers: [level],
              filters: ['status', 'traits', 'resources', 'aggregate-extra-specs', 'affinity', 'anti-affinity', level],
              weighers: [
                { name: 'free-ram', plugin: freeRam, multiplier: 1 },
                { name: 'free-vcpu', plugin: freeVcpu, multiplier: -0.5 },
                { name: 'level', plugin: level, multiplier: 2 },
              ],
              // Refresh before every request, so foreign writes are seen through the incremental path.
              refreshInterval: 0,
            }, { plugins: { level: { maxPerHost: 3 } } });
            const scheduler = await createScheduler({ config, store, strategy, random: () => 0 });
            open.push(scheduler);
            return { store, scheduler };
          }),
        );
        const outcomes: string[][] = [[], []];
        let foreignCount = 0;
        for (const [r, req] of requests.entries()) {
          const extraSpecs: Record<string, string> = {};
          if (req.ways) extraSpecs['resources:CUSTOM_LLC_WAYS'] = String(req.ways);
          if (req.avx) extraSpecs['trait:HW_CPU_X86_AVX2'] = req.avx;
          if (req.gold) extraSpecs['aggregate_instance_extra_specs:tier'] = 'gold';
          const f = flavor(`f${r}`, req.vcpus, req.memory, extraSpecs);
          const batch = Array.from({ length: req.count }, (_, i) => ({ uuid: uuidFor(`run${run}-r${r}-i${i}`), projectId: 'p', userId: 'u' }));
          const hints = req.group ? { serverGroup: { uuid: `sg-${r}`, policy: req.group, members: [] } } : undefined;
          const scope = { ...(req.zone ? { availabilityZone: req.zone } : {}), ...(req.forbidGold ? { forbiddenAggregates: ['gold'] } : {}) };
          const foreign = req.foreign === undefined ? undefined : fleet[req.foreign % fleet.length]!.name;
          for (const [s, setup] of setups.entries()) {
            if (foreign && setup.scheduler.host(foreign)!.free('VCPU') > 0) {
              await setup.store.writeAllocations([
                { consumer: { uuid: uuidFor(`run${run}-foreign-${foreignCount + s}`), projectId: 'p', userId: 'u', generation: null }, allocations: [{ providerUuid: uuidFor(foreign), resourceClass: 'VCPU', amount: 1 }] },
              ]);
            }
            try {
              const selections = await setup.scheduler.select({ flavor: f, instances: batch, hints, ...scope });
              outcomes[s]!.push(selections.map((x) => `${x.host}[${x.alternates.join(',')}]`).join(' '));
            } catch (error) {
              if (!(error instanceof NoValidHostError)) throw error;
              outcomes[s]!.push(`none: ${(error.details as { summary: { passed: number } }).summary.passed}`);
            }
            // Every candidate's weight and every rejection must agree too, not only the winner.
            const explanation = await setup.scheduler.explain({ flavor: f, instances: [{ uuid: uuidFor(`run${run}-explain`), projectId: 'p', userId: 'u' }], ...scope });
            outcomes[s]!.push(JSON.stringify([explanation.weighed.map((w) => [w.host, w.weight]), explanation.rejected]));
          }
          foreignCount += 2;
        }
        expect(outcomes[0]).toEqual(outcomes[1]);
      }),
      // endOnFailure: report the first counterexample (shrinking stores and schedulers outlasts the test timeout).
      { numRuns: 30, endOnFailure: true },
    );
  });
});
