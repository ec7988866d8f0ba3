/**
 * A tracker with the five real first-party plugins on a host profile of config/hosts, a
 * real SQLite store, and the invariant every step of an instance's lifecycle must keep
 * (docs/lifecycle.md): every resource's usage within capacity, the store's usage equal to
 * the allocations of the host's instance and migration records, and every plugin's own view
 * (huge pages per node, way masks and classes of service, pinned CPUs, counted amounts)
 * equal to what the store holds.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { configFromObject, type ErtConfig } from '@ert/core';
import {
  capacityOf,
  definePlugin,
  type ClaimRequest,
  type Flavor,
  type JsonValue,
  type Plugin,
  type RequestSpec,
  type ResourceHooks,
} from '@ert/plugin-api';
import type { InstanceRecord, Store, StoreOptions } from '@ert/store';
import computeUnits from '@ert/plugin-compute-units/compute';
import llc from '@ert/plugin-llc/compute';
import memory from '@ert/plugin-memory/compute';
import pstate from '@ert/plugin-pstate/compute';
import vcpu from '@ert/plugin-vcpu/compute';
import { parseCpuList } from '@ert/sysfs';
import type { SyncReport, Tracker } from '../src/index.js';
import type { Bench } from './harness.js';

export const PROFILES = fileURLToPath(new URL('../../../config/hosts', import.meta.url));

export type Profile = 'xeon-2s-cat' | 'xeon-4s-numa' | 'epyc-1s' | 'cloud-vm';

/** Dedicated (PCPU) CPUs per profile in these tests: part of one NUMA node, plus one CPU of another. */
export const DEDICATED: Record<Profile, string> = {
  'xeon-2s-cat': '20-27,40',
  'xeon-4s-numa': '8-13,16',
  'epyc-1s': '8-15',
  'cloud-vm': '3',
};

export interface RealHost {
  readonly hostName: string;
  readonly profile: Profile;
  readonly store: Store;
  readonly config: ErtConfig;
  /** The running tracker (a new one after `restart`). */
  tracker: Tracker;
  /** The hooks objects the real plugins returned to the running tracker, by plugin name. */
  hooks: Map<string, ResourceHooks>;
  /** Stop the tracker and start a new one on the same store and profile (views rebuilt from the store); the new start's report. */
  restart(): Promise<SyncReport>;
  /** Stop the tracker (the host is down): `violations` then checks only what the store holds for it. */
  stop(): Promise<void>;
}

/**
 * The real plugin, unchanged, except that the hooks object its `resource` factory returns is
 * also put in `sink` so that a test can read the plugin's view (`stats`) and ask it (`test`).
 */
function observed(plugin: Plugin<any, any>, sink: () => Map<string, ResourceHooks>): Plugin<any, any> {
  const factory = plugin.resource!;
  return definePlugin({
    ...plugin,
    async resource(ctx) {
      const hooks = await factory(ctx);
      sink().set(plugin.name, hooks as ResourceHooks);
      return hooks;
    },
  });
}

/**
 * Start a tracker on `profile` with vcpu (allocation ratio 1, so that the counted-amount probe
 * reaches max_unit; `DEDICATED` CPUs as PCPU), memory, compute-units, llc and pstate, on a
 * fresh SQLite file of `bench`.
 */
export async function realHost(bench: Bench, profile: Profile, options: { hostName?: string; shared?: { store: Store; options: StoreOptions } } = {}): Promise<RealHost> {
  const hostName = options.hostName ?? profile;
  const storeOptions = options.shared?.options ?? bench.storeOptions();
  const store = options.shared?.store ?? (await bench.openStore(storeOptions));
  let hooks = new Map<string, ResourceHooks>();
  const plugins = [vcpu, memory, computeUnits, llc, pstate].map((p) => observed(p as Plugin<any, any>, () => hooks));
  const config = configFromObject(
    {
      store: storeOptions,
      log: { level: 'silent' },
      tracker: { hostName, root: path.join(PROFILES, profile), resources: plugins, interval: '1h', hookTimeout: '5s' },
      plugins: { vcpu: { allocationRatio: 1, dedicatedCpus: DEDICATED[profile] } },
    },
    { configDir: bench.dir },
  );
  const host: RealHost = {
    hostName,
    profile,
    store,
    config,
    hooks,
    tracker: await bench.tracker(config, store),
    async restart() {
      await host.tracker.stop();
      hooks = new Map();
      host.hooks = hooks;
      host.tracker = await bench.tracker(config, store);
      const report = await host.tracker.start();
      if (report.problems.length > 0) throw new Error(`restart problems: ${JSON.stringify(report.problems)}`);
      return report;
    },
    async stop() {
      await host.tracker.stop();
      hooks = new Map();
      host.hooks = hooks;
    },
  };
  const report = await host.tracker.start();
  if (report.problems.length > 0) throw new Error(`start problems: ${JSON.stringify(report.problems)}`);
  return host;
}

/* ------------------------------------------------------------------ flavors */

let seq = 0;
/** A fresh instance uuid. */
export function newUuid(): string {
  seq += 1;
  return `20000000-0000-4000-8000-${String(seq).padStart(12, '0')}`;
}

export function realFlavor(name: string, vcpus: number, memoryMb: number, extraSpecs: Record<string, string> = {}): Flavor {
  return { name, vcpus, memoryMb, diskGb: 0, extraSpecs };
}

/* ------------------------------------------------------------------ the invariant */

const PCPU = 'PCPU';
const WAYS = 'CUSTOM_LLC_WAYS';

interface PagePool {
  sizeKb: number;
  total: number;
  claimed: number;
}
interface MemoryStats {
  numaNodes: Array<{ id: number; hugePages: PagePool[] }>;
  hugePages: PagePool[];
}
interface LlcStats {
  available: boolean;
  resctrl: { numClosids: number; foreignGroups: number; freeClosids: number } | null;
  domains: Array<{ id: number; key: string; cbmMask: string; reservedMask: string; freeMask: string; instances: Array<{ uuid: string; mask: string; closid: number }> }>;
}
interface VcpuStats {
  dedicatedCpus: string;
  freeDedicatedCpus: string;
}

const hex = (mask: string) => parseInt(mask, 16) >>> 0;
const bits = (mask: number) => {
  let n = 0;
  for (let m = mask >>> 0; m !== 0; m = (m & (m - 1)) >>> 0) n++;
  return n;
};
/** One run of consecutive set bits (resctrl's rule for a capacity mask). */
const contiguous = (mask: number) => mask !== 0 && bits(((mask >>> 0) / (mask & -mask)) + 1) === 1;

/** A request for `amount` of one class and nothing else, as a plugin's `test` receives it. */
function probe(resourceClass: string, amount: number): ClaimRequest {
  const flavor: Flavor = { name: 'probe', vcpus: 0, memoryMb: 0, diskGb: 0, extraSpecs: {} };
  const spec: RequestSpec = {
    flavor,
    groups: [{ suffix: '', resources: { [resourceClass]: amount }, requiredTraits: [], forbiddenTraits: [], memberOf: [] }],
    groupPolicy: 'none',
    aggregateExtraSpecs: {},
    capabilities: [],
    pluginSpecs: {},
    hints: {},
  } as RequestSpec;
  return { instance: { uuid: '2fffffff-0000-4000-8000-000000000000', projectId: 'probe', userId: 'probe', flavor }, spec, kind: 'claim' };
}

/** Which plugin counts which class on the root provider (the probe asks it). */
const COUNTED: Record<string, string> = { VCPU: 'vcpu', PCPU: 'vcpu', MEMORY_MB: 'memory', CUSTOM_CU: 'compute-units' };

/**
 * Every way `host` breaks the lifecycle invariant right now (empty when it holds):
 * 1. store: each provider's usage of each class <= its capacity, and equal to the sum of the
 *    allocations of the instance records on the host (a pending resize's migration record
 *    included); a resizing instance and its migration record come in pairs;
 * 2. the stats in the store are the plugins' current stats;
 * 3. memory: claimed huge pages per node and size equal the pages of the records'
 *    assignments, and are <= the pool's pages;
 * 4. llc: per domain, the held masks are exactly the records' assignments, each one run of
 *    ways inside the usable ways, pairwise disjoint, as many ways as the record's allocation
 *    on that domain; the free mask is what they leave; classes of service are distinct and
 *    no more than resctrl has;
 * 5. vcpu: the records' pinned CPUs are dedicated CPUs, pairwise disjoint, as many as the
 *    record's PCPU allocation; the free dedicated CPUs are what they leave;
 * 6. counted classes (VCPU, PCPU, MEMORY_MB, CUSTOM_CU): the owning plugin's `test` accepts
 *    exactly the free capacity the store shows and refuses one more (when max_unit allows
 *    asking), so its count equals the store's.
 */
export async function violations(host: RealHost): Promise<string[]> {
  const out: string[] = [];
  const { store, hostName } = host;
  const [snapshot] = await store.loadHosts([hostName]);
  if (!snapshot) return [`host ${hostName} is not in the store`];
  const records = await store.listInstances({ host: hostName });
  const allocations = new Map<string, Array<{ providerUuid: string; resourceClass: string; amount: number }>>();
  for (const r of records) allocations.set(r.uuid, (await store.getAllocations(r.uuid)).allocations);
  const byUuid = new Map(records.map((r) => [r.uuid, r]));
  const providerName = new Map(snapshot.providers.map((p) => [p.uuid, p.name]));
  const allocated = (r: InstanceRecord, cls: string, provider?: string) =>
    (allocations.get(r.uuid) ?? []).filter((a) => a.resourceClass === cls && (provider === undefined || providerName.get(a.providerUuid) === provider)).reduce((n, a) => n + a.amount, 0);

  // 1. The store.
  for (const p of snapshot.providers) {
    for (const [cls, inv] of Object.entries(p.inventories)) {
      const used = p.usages[cls] ?? 0;
      if (used > capacityOf(inv)) out.push(`${p.name} ${cls}: used ${used} > capacity ${capacityOf(inv)}`);
      const sum = records.reduce((n, r) => n + (allocations.get(r.uuid) ?? []).filter((a) => a.providerUuid === p.uuid && a.resourceClass === cls).reduce((m, a) => m + a.amount, 0), 0);
      if (sum !== used) out.push(`${p.name} ${cls}: usage ${used} but the host's records hold ${sum}`);
    }
  }
  // Pairs, across hosts: an instance referring to a migration record, and the record held
  // for it -- on this host for a resize, on the source host for a migration or evacuation.
  const everywhere = await store.listInstances();
  const status = (await store.getHost(hostName))?.status;
  for (const r of records) {
    if (r.migrationUuid && everywhere.find((o) => o.uuid === r.migrationUuid)?.state !== 'resizing') out.push(`instance ${r.uuid} refers to migration record ${r.migrationUuid}, which is not held`);
    if (r.migrationUuid && r.state === 'active' && !everywhere.some((o) => o.uuid === r.migrationUuid && o.host !== hostName)) out.push(`active instance ${r.uuid} refers to a migration record that is not an evacuation's`);
    if (r.state === 'resizing' && !r.migrationUuid) {
      const owner = everywhere.find((o) => o.migrationUuid === r.uuid);
      if (!owner) out.push(`migration record ${r.uuid} has no instance`);
      // An evacuated instance's old allocations stay held only while this host is down.
      else if (owner.state === 'active' && (status === 'up' || host.hooks.size > 0)) out.push(`migration record ${r.uuid} of evacuated ${owner.uuid} still held on a host that is up`);
    }
  }

  // 2. Stored stats = the plugins' views.
  const stored = await store.readStats(hostName);
  const current: Record<string, JsonValue> = {};
  const available = new Set(host.tracker.lastSync?.discovery.plugins.filter((p) => p.available).map((p) => p.plugin));
  for (const [name, hooks] of host.hooks) {
    // The tracker writes the stats of available plugins only (cloud-vm has no cpufreq: pstate is not).
    if (!hooks.stats || !available.has(name)) continue;
    try {
      current[name] = (await hooks.stats()) as JsonValue;
    } catch {
      continue; // unavailable on this profile: no stats
    }
    if (JSON.stringify(stored[name]?.data) !== JSON.stringify(current[name])) out.push(`stats of ${name} in the store differ from its view`);
  }

  // 3. Huge pages.
  const mem = current['memory'] as unknown as MemoryStats | undefined;
  if (mem) {
    for (const node of mem.numaNodes) {
      for (const pool of node.hugePages) {
        const held = records.reduce((n, r) => {
          const a = r.assignments['memory'] as { node?: number; sizeKb?: number; pages?: number } | undefined;
          return n + (a && a.node === node.id && a.sizeKb === pool.sizeKb ? a.pages ?? 0 : 0);
        }, 0);
        if (pool.claimed !== held) out.push(`memory node ${node.id} ${pool.sizeKb} kB pages: view claims ${pool.claimed}, records hold ${held}`);
        if (pool.claimed > pool.total) out.push(`memory node ${node.id} ${pool.sizeKb} kB pages: claimed ${pool.claimed} > total ${pool.total}`);
      }
    }
  }

  // 4. Cache ways.
  const ways = current['llc'] as unknown as LlcStats | undefined;
  if (ways?.available && ways.resctrl) {
    const closids = new Map<number, string>();
    for (const d of ways.domains) {
      const provider = `${hostName}_${d.key}`;
      const usable = (hex(d.cbmMask) & ~hex(d.reservedMask)) >>> 0;
      const wanted = records.filter((r) => (r.assignments['llc'] as { domain?: number } | undefined)?.domain === d.id);
      const heldUuids = d.instances.map((i) => i.uuid).sort();
      if (JSON.stringify(heldUuids) !== JSON.stringify(wanted.map((r) => r.uuid).sort())) out.push(`llc domain ${d.id}: view holds ${heldUuids.join(',')}, records ${wanted.map((r) => r.uuid).join(',')}`);
      let union = 0;
      for (const i of d.instances) {
        const mask = hex(i.mask);
        const record = byUuid.get(i.uuid);
        const a = record?.assignments['llc'] as { mask?: string; closid?: number } | undefined;
        if (!a || a.mask !== i.mask || a.closid !== i.closid) out.push(`llc ${i.uuid}: view ${i.mask}/${i.closid}, record ${a?.mask}/${a?.closid}`);
        if (!contiguous(mask)) out.push(`llc ${i.uuid}: mask ${i.mask} is not one run of ways`);
        if ((mask & ~usable) >>> 0 !== 0) out.push(`llc ${i.uuid}: mask ${i.mask} outside the usable ways ${usable.toString(16)}`);
        if ((union & mask) !== 0) out.push(`llc domain ${d.id}: mask ${i.mask} of ${i.uuid} overlaps another instance's ways`);
        union = (union | mask) >>> 0;
        if (record && bits(mask) !== allocated(record, WAYS, provider)) out.push(`llc ${i.uuid}: ${bits(mask)} ways in its mask, ${allocated(record, WAYS, provider)} allocated on ${provider}`);
        const other = closids.get(i.closid);
        if (other !== undefined) out.push(`llc: class of service ${i.closid} held by ${other} and ${i.uuid}`);
        closids.set(i.closid, i.uuid);
      }
      if (hex(d.freeMask) !== (usable & ~union) >>> 0) out.push(`llc domain ${d.id}: free mask ${d.freeMask}, but the held masks leave ${((usable & ~union) >>> 0).toString(16)}`);
      const usage = snapshot.providers.find((p) => p.name === provider)?.usages[WAYS] ?? 0;
      if (usage !== bits(union)) out.push(`llc domain ${d.id}: store uses ${usage} ways, masks hold ${bits(union)}`);
    }
    if (closids.size > ways.resctrl.numClosids - 1 - ways.resctrl.foreignGroups) out.push(`llc: ${closids.size} classes of service held, resctrl has ${ways.resctrl.numClosids - 1 - ways.resctrl.foreignGroups}`);
  }

  // 5. Pinned CPUs.
  const cpus = current['vcpu'] as unknown as VcpuStats | undefined;
  if (cpus) {
    const dedicated = new Set(parseCpuList(cpus.dedicatedCpus));
    const pinned = new Set<number>();
    for (const r of records) {
      for (const cpu of r.cpus ?? []) {
        if (!dedicated.has(cpu)) out.push(`instance ${r.uuid} pinned to CPU ${cpu}, which is not dedicated`);
        if (pinned.has(cpu)) out.push(`CPU ${cpu} pinned twice (again by ${r.uuid})`);
        pinned.add(cpu);
      }
      if ((r.cpus ?? []).length !== allocated(r, PCPU)) out.push(`instance ${r.uuid}: pinned to ${(r.cpus ?? []).length} CPUs, ${allocated(r, PCPU)} PCPU allocated`);
    }
    const free = [...dedicated].filter((c) => !pinned.has(c)).sort((a, b) => a - b);
    if (JSON.stringify(parseCpuList(cpus.freeDedicatedCpus)) !== JSON.stringify(free)) out.push(`vcpu: free dedicated CPUs ${cpus.freeDedicatedCpus}, records leave ${free.join(',')}`);
  }

  // 6. Counted classes.
  const root = snapshot.providers.find((p) => p.name === hostName)!;
  for (const [cls, plugin] of Object.entries(COUNTED)) {
    const inv = root.inventories[cls];
    const test = host.hooks.get(plugin)?.test;
    if (!inv || !test) continue;
    const free = capacityOf(inv) - (root.usages[cls] ?? 0);
    const ask = Math.min(free, inv.maxUnit);
    if (ask >= inv.minUnit && ask % inv.stepSize === 0) {
      const answer = await test(probe(cls, ask));
      if (typeof answer === 'string') out.push(`${plugin} refuses ${ask} ${cls} although the store has ${free} free: ${answer}`);
    }
    if (free + 1 <= inv.maxUnit) {
      const answer = await test(probe(cls, free + 1));
      if (typeof answer !== 'string') out.push(`${plugin} accepts ${free + 1} ${cls} although the store has ${free} free`);
    }
  }
  return out;
}
