import { performance } from 'node:perf_hooks';
import { isErtError, type Flavor, type Logger } from '@ert/plugin-api';
import type { ErtConfig } from '@ert/core';
import type { HostImport, Store } from '@ert/store';
import { buildFleet, uuidV5 } from '@ert/tracker';
import { createScheduler, type Scheduler } from '@ert/scheduler';
import { randomUuid, seededRandom } from './random.js';
import { hostUsage, utilization } from './usage.js';

/** Inputs of `runSimulation`. */
export interface SimulationOptions {
  /** The config whose plugins, filters, weighers and flavors are used; its store is `store`. */
  config: ErtConfig;
  /** A migrated store holding no `sim-*` hosts yet. */
  store: Store;
  /** Directory of host profiles (one fixture root per subdirectory). */
  profilesDir: string;
  hosts: number;
  requests: number;
  /** Seeds the fleet, the workload and the scheduler's random choices. */
  seed: number;
  /** Mean lifetime of an instance, counted in arrivals (exponential). Default requests / 2. */
  meanLifetime?: number;
  logger?: Logger;
  /** Called after each request with the number done. */
  onProgress?: (done: number) => void;
}

export interface SimulatedPlacement {
  request: number;
  instance: string;
  flavor: string;
  host: string;
}

export interface SimulatedRejection {
  request: number;
  flavor: string;
  reason: string;
}

/** What `ert simulate` prints (its JSON shape, documented in docs/cli.md). */
export interface SimulationReport {
  seed: number;
  hosts: number;
  /** Hosts per profile. */
  profiles: Record<string, number>;
  requests: number;
  placed: number;
  rejected: number;
  /** Instances that left (were released) during the run. */
  departed: number;
  /** Instances still placed at the end. */
  live: number;
  placements: SimulatedPlacement[];
  rejections: SimulatedRejection[];
  /** Rejections per flavor. */
  rejectedByFlavor: Record<string, number>;
  /** Per resource class, the fraction of fleet capacity used at the end. */
  utilization: Record<string, number>;
  /**
   * For the largest flavor: how many hosts could still take it at the end, and per class the
   * share of free capacity that sits on hosts that cannot (stranded capacity).
   */
  fragmentation: { flavor: string; hostsThatFit: number; strandedFreeShare: Record<string, number> };
  /** Scheduling decisions (placements and rejections) per second of time spent in `select`. */
  decisionsPerSecond: number;
  elapsedMs: number;
}

/** Metadata of the aggregate half the simulated hosts join (for aggregate_instance_extra_specs). */
export const SIMULATED_AGGREGATE = { name: 'ssd', metadata: { ssd: 'true' } } as const;

/** A uuid derived from a name, so the simulated aggregate is the same in every run. */
function nameUuid(name: string): string {
  return uuidV5(`ert-sim:${name}`);
}

/** Profile of a simulated host named `sim-<profile>-<i>`. */
function profileOf(name: string): string {
  return name.replace(/^sim-/, '').replace(/-\d+$/, '');
}

/**
 * The fragmentation probe: the flavor asking for the most (vCPUs, then memory, then disk)
 * among those without extra specs (a plain size, which any host could take if it had the
 * room), or among all flavors when every one has extra specs.
 */
export function largestFlavor(flavors: readonly Flavor[]): Flavor | undefined {
  const plain = flavors.filter((f) => Object.keys(f.extraSpecs).length === 0);
  return [...(plain.length > 0 ? plain : flavors)].sort((a, b) => b.vcpus - a.vcpus || b.memoryMb - a.memoryMb || b.diskGb - a.diskGb)[0];
}

/**
 * Build a fleet of `hosts` hosts from the profiles through the real discovery code
 * (`buildFleet`), import it, then run `requests` arrivals drawn uniformly from the config's
 * flavors; each placed instance leaves after an exponentially distributed number of later
 * arrivals. Every host with an even index joins the `ssd` aggregate. Departures release
 * allocations in the store and the scheduler refreshes before the next arrival, so the run
 * is a pure function of the seed: the same seed gives the same placements.
 */
export async function runSimulation(options: SimulationOptions): Promise<SimulationReport> {
  const { config, store, hosts, requests, seed } = options;
  const random = seededRandom(seed);
  const meanLifetime = options.meanLifetime ?? Math.max(requests / 2, 1);
  const started = performance.now();

  const fleet = await buildFleet({ config, profilesDir: options.profilesDir, hosts, seed });
  await joinAggregate(store, fleet);
  await store.importHosts(fleet);

  // A simulated fleet has no trackers: nothing confirms its reservations, and none may expire
  // in the middle of a run (which would free capacity the workload still holds).
  const simulated = { ...config, reservations: { ...config.reservations, timeout: 2_147_483_647 } };
  const scheduler = await createScheduler({ config: simulated, store, random, ...(options.logger ? { logger: options.logger } : {}) });
  const placements: SimulatedPlacement[] = [];
  const rejections: SimulatedRejection[] = [];
  const departures = new Map<number, string[]>();
  let departed = 0;
  let selectMs = 0;
  try {
    const flavors = config.flavors;
    if (flavors.length === 0) throw new Error(`no flavors in ${config.configFile ?? 'the config'}: nothing to simulate`);
    for (let request = 0; request < requests; request++) {
      const leaving = departures.get(request) ?? [];
      departures.delete(request);
      for (const uuid of leaving) {
        await store.deleteAllocations(uuid);
        await store.deleteInstance(uuid);
        departed++;
      }
      if (leaving.length > 0) await scheduler.refresh();

      const flavor = flavors[Math.floor(random() * flavors.length)]!;
      const instance = randomUuid(random);
      const lifetime = 1 + Math.floor(-Math.log(1 - random()) * meanLifetime);
      const t0 = performance.now();
      try {
        const [selection] = await scheduler.select({ flavor, instances: [{ uuid: instance, projectId: 'sim', userId: 'sim' }] });
        selectMs += performance.now() - t0;
        placements.push({ request, instance, flavor: flavor.name, host: selection!.host });
        const at = request + lifetime;
        if (at < requests) departures.set(at, [...(departures.get(at) ?? []), instance]);
      } catch (err) {
        selectMs += performance.now() - t0;
        if (!isErtError(err) || err.code !== 'ERT_SCHEDULER_NO_VALID_HOST') throw err;
        rejections.push({ request, flavor: flavor.name, reason: err.message });
      }
      options.onProgress?.(request + 1);
    }

    const snapshots = await store.loadHosts();
    const simulated = snapshots.filter((s) => s.host.name.startsWith('sim-'));
    const usage = hostUsage(simulated);
    const profiles: Record<string, number> = {};
    for (const s of simulated) profiles[profileOf(s.host.name)] = (profiles[profileOf(s.host.name)] ?? 0) + 1;
    const rejectedByFlavor: Record<string, number> = {};
    for (const r of rejections) rejectedByFlavor[r.flavor] = (rejectedByFlavor[r.flavor] ?? 0) + 1;

    return {
      seed,
      hosts: simulated.length,
      profiles,
      requests,
      placed: placements.length,
      rejected: rejections.length,
      departed,
      live: placements.length - departed,
      placements,
      rejections,
      rejectedByFlavor,
      utilization: utilization(usage),
      fragmentation: await fragmentation(scheduler, largestFlavor(flavors)!, usage),
      decisionsPerSecond: selectMs > 0 ? requests / (selectMs / 1000) : 0,
      elapsedMs: Math.round(performance.now() - started),
    };
  } finally {
    await scheduler.close?.();
  }
}

/** Put every even-numbered host's root provider in the simulated `ssd` aggregate. */
async function joinAggregate(store: Store, fleet: HostImport[]): Promise<void> {
  const uuid = nameUuid(SIMULATED_AGGREGATE.name);
  await store.upsertAggregate({ uuid, name: SIMULATED_AGGREGATE.name, metadata: { ...SIMULATED_AGGREGATE.metadata } });
  fleet.forEach((host, i) => {
    const root = host.providers[0];
    if (i % 2 === 0 && root && !root.aggregates.includes(uuid)) root.aggregates = [...root.aggregates, uuid];
  });
}

/**
 * Which simulated hosts could still take `flavor` (every filter, as the scheduler decides)
 * and, per class, the share of the fleet's free capacity on hosts that cannot.
 */
async function fragmentation(
  scheduler: Scheduler,
  flavor: Flavor,
  usage: ReturnType<typeof hostUsage>,
): Promise<SimulationReport['fragmentation']> {
  const explanation = await scheduler.explain({ flavor, instances: [{ uuid: nameUuid('fragmentation-probe'), projectId: 'sim', userId: 'sim' }] });
  const fit = new Set(passingHosts(explanation));
  const free = new Map<string, { all: number; stranded: number }>();
  for (const row of usage) {
    const f = free.get(row.resourceClass) ?? { all: 0, stranded: 0 };
    f.all += row.free;
    if (!fit.has(row.host)) f.stranded += row.free;
    free.set(row.resourceClass, f);
  }
  const strandedFreeShare = Object.fromEntries(
    [...free].sort(([a], [b]) => a.localeCompare(b)).map(([rc, f]) => [rc, f.all > 0 ? f.stranded / f.all : 0]),
  );
  return { flavor: flavor.name, hostsThatFit: [...fit].filter((h) => h.startsWith('sim-')).length, strandedFreeShare };
}

/** Names of the hosts an explanation says passed every filter. */
function passingHosts(explanation: Awaited<ReturnType<Scheduler['explain']>>): string[] {
  return explanation.weighed.map((w) => w.host);
}
