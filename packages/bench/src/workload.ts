/**
 * A realistic scheduling workload, seeded: what a public cloud's users send, not five fixed
 * flavors. Used by `npm run bench -- scheduler --workload mixed`.
 *
 * - A catalogue of general (1 vCPU : 4 GiB), compute (1 : 2) and memory (1 : 8) flavors in
 *   sizes from 1 to 32 vCPUs, drawn with small sizes most often, as public clouds report;
 *   plus flavors using every first-party plugin's extra specs (huge pages, dedicated CPUs,
 *   LLC ways through the plugin and through Placement's granular spelling, P-state, compute
 *   units) and required / forbidden traits.
 * - Server groups of 2 to 10 members with affinity or anti-affinity: each member's request
 *   names the members placed before it, so every member is a request shape never seen before.
 * - different_host / same_host hints naming instances already placed (each a new shape).
 * - Requests that must fail, counted apart: oversized flavors and unsatisfiable traits.
 * - `newShapeShare` (default 0.2): the share of requests whose shape (flavor and hints) the
 *   scheduler has never seen; besides server groups, a first-seen shape is a catalogue
 *   flavor with a custom size (a tenant's own flavor) or a new combination of extra specs.
 */
import type { Flavor, SchedulingHints } from '@ert/plugin-api';

export interface WorkloadRequest {
  flavor: Flavor;
  hints?: SchedulingHints;
  /** Serialised flavor and hints: the shape the scheduler memoises on. */
  shape: string;
  /** Set on requests built to fail (counted apart from the figures of placed requests). */
  mustFail?: 'oversized' | 'unsatisfiable';
  /** The catalogue family or kind of request, for the report. */
  kind: string;
}

export interface WorkloadOptions {
  random: () => number;
  /** First-party plugins in the config: flavors needing others are left out. */
  plugins: readonly string[];
  /** Share of requests of a never-seen shape, 0..1 (default 0.2). */
  newShapeShare?: number;
  /** Share of requests built to fail (default 0.02). */
  failingShare?: number;
}

interface CatalogueEntry {
  flavor: Flavor;
  weight: number;
  needs?: string;
  kind: string;
}

const SIZES: Array<[string, number, number]> = [
  // name suffix, vCPUs, weight (small sizes dominate, as on public clouds)
  ['small', 1, 30],
  ['medium', 2, 25],
  ['large', 4, 20],
  ['xlarge', 8, 12],
  ['2xlarge', 16, 6],
  ['4xlarge', 32, 2],
];

/** The flavor catalogue (at least 30 flavors). */
export function catalogue(plugins: readonly string[]): CatalogueEntry[] {
  const out: CatalogueEntry[] = [];
  for (const [family, gibPerVcpu, familyWeight] of [
    ['m', 4, 5],
    ['c', 2, 3],
    ['r', 8, 2],
  ] as const) {
    for (const [size, vcpus, weight] of SIZES) {
      out.push({ flavor: { name: `${family}5.${size}`, vcpus, memoryMb: vcpus * gibPerVcpu * 1024, diskGb: 0, extraSpecs: {} }, weight: weight * familyWeight, kind: `${family}5` });
    }
  }
  const special: CatalogueEntry[] = [
    { flavor: { name: 'hp.large', vcpus: 4, memoryMb: 8192, diskGb: 0, extraSpecs: { 'hw:mem_page_size': 'large' } }, weight: 8, needs: 'memory', kind: 'hugepages' },
    { flavor: { name: 'hp.1g.xlarge', vcpus: 8, memoryMb: 16384, diskGb: 0, extraSpecs: { 'hw:mem_page_size': '1GB' } }, weight: 4, needs: 'memory', kind: 'hugepages' },
    { flavor: { name: 'd.large', vcpus: 4, memoryMb: 8192, diskGb: 0, extraSpecs: { 'hw:cpu_policy': 'dedicated' } }, weight: 6, needs: 'vcpu', kind: 'dedicated' },
    { flavor: { name: 'llc.silver', vcpus: 2, memoryMb: 4096, diskGb: 0, extraSpecs: { 'llc:ways': '1' } }, weight: 6, needs: 'llc', kind: 'llc' },
    { flavor: { name: 'llc.gold', vcpus: 4, memoryMb: 8192, diskGb: 0, extraSpecs: { 'llc:ways': '2' } }, weight: 5, needs: 'llc', kind: 'llc' },
    { flavor: { name: 'llc.platinum', vcpus: 8, memoryMb: 16384, diskGb: 0, extraSpecs: { 'llc:ways': '4' } }, weight: 2, needs: 'llc', kind: 'llc' },
    { flavor: { name: 'llc.granular', vcpus: 2, memoryMb: 4096, diskGb: 0, extraSpecs: { 'resources1:CUSTOM_LLC_WAYS': '2', 'trait1:CUSTOM_RDT_CAT': 'required' } }, weight: 3, needs: 'llc', kind: 'granular' },
    { flavor: { name: 'perf.turbo', vcpus: 4, memoryMb: 8192, diskGb: 0, extraSpecs: { 'pstate:governor': 'performance' } }, weight: 5, needs: 'pstate', kind: 'pstate' },
    { flavor: { name: 'perf.fixed', vcpus: 2, memoryMb: 4096, diskGb: 0, extraSpecs: { 'pstate:min_freq_mhz': '2000', 'pstate:epp': 'performance' } }, weight: 3, needs: 'pstate', kind: 'pstate' },
    { flavor: { name: 'cu.medium', vcpus: 4, memoryMb: 8192, diskGb: 0, extraSpecs: { 'cu:units': '40' } }, weight: 5, needs: 'compute-units', kind: 'cu' },
    { flavor: { name: 'cu.large', vcpus: 8, memoryMb: 16384, diskGb: 0, extraSpecs: { 'cu:units': '100' } }, weight: 2, needs: 'compute-units', kind: 'cu' },
    { flavor: { name: 'avx2.large', vcpus: 4, memoryMb: 16384, diskGb: 0, extraSpecs: { 'trait:HW_CPU_X86_AVX2': 'required' } }, weight: 6, kind: 'traits' },
    { flavor: { name: 'noavx512.medium', vcpus: 2, memoryMb: 8192, diskGb: 0, extraSpecs: { 'trait:HW_CPU_X86_AVX512F': 'forbidden' } }, weight: 3, kind: 'traits' },
  ];
  out.push(...special.filter((e) => e.needs === undefined || plugins.includes(e.needs)));
  return out;
}

function pickWeighted<T extends { weight: number }>(items: readonly T[], random: () => number): T {
  const total = items.reduce((sum, i) => sum + i.weight, 0);
  let at = random() * total;
  for (const item of items) {
    at -= item.weight;
    if (at < 0) return item;
  }
  return items[items.length - 1]!;
}

/** A seeded stream of requests; `placed` tells it where earlier requests went (for hints). */
export class Workload {
  private readonly entries: CatalogueEntry[];
  private readonly placedUuids: string[] = [];
  private group: { uuid: string; policy: 'affinity' | 'anti-affinity'; size: number; members: string[] } | undefined;
  private customSizes = 0;
  private groups = 0;

  constructor(private readonly options: WorkloadOptions) {
    this.entries = catalogue(options.plugins);
  }

  get flavors(): readonly Flavor[] {
    return this.entries.map((e) => e.flavor);
  }

  /** The next request for instance `uuid`. */
  next(uuid: string): WorkloadRequest {
    const random = this.options.random;
    const failing = this.options.failingShare ?? 0.02;
    const fresh = this.options.newShapeShare ?? 0.2;
    const roll = random();
    if (roll < failing) return this.failing(random() < 0.5 ? 'oversized' : 'unsatisfiable');
    if (roll < failing + fresh) return this.firstSeen(uuid);
    // A repeated shape: a catalogue flavor as it is.
    const entry = pickWeighted(this.entries, random);
    return this.request(entry.flavor, undefined, entry.kind);
  }

  /** Record that `uuid` was placed (hints may name it later). */
  placed(uuid: string): void {
    this.placedUuids.push(uuid);
    if (this.group !== undefined && this.group.members.includes(uuid) && this.group.members.length >= this.group.size) this.group = undefined;
  }

  /**
   * A shape never sent before: a server group member (a group of 2-10 stays open until all
   * its members were sent), a host hint naming a placed instance, a tenant's custom size, or
   * a new extra-spec combination.
   */
  private firstSeen(uuid: string): WorkloadRequest {
    const random = this.options.random;
    const r = random();
    if (r < 0.15 && this.placedUuids.length > 0) {
      const other = this.placedUuids[Math.floor(random() * this.placedUuids.length)]!;
      const entry = pickWeighted(this.entries, random);
      const hints: SchedulingHints = r < 0.1 ? { differentHost: [other] } : { sameHost: [other] };
      return this.request(entry.flavor, hints, r < 0.1 ? 'different_host' : 'same_host');
    }
    if (this.group === undefined && r < 0.55) {
      this.groups++;
      this.group = { uuid: `00000000-0000-4000-8000-${String(this.groups).padStart(12, '0')}`, policy: random() < 0.6 ? 'anti-affinity' : 'affinity', size: 2 + Math.floor(random() * 9), members: [] };
    }
    if (this.group !== undefined) {
      const group = this.group;
      group.members.push(uuid);
      const entry = pickWeighted(this.entries.filter((e) => e.kind === 'm5' || e.kind === 'c5'), random);
      // Members placed before this one are named; the scheduler adds the batch's own.
      const hints: SchedulingHints = { serverGroup: { uuid: group.uuid, policy: group.policy, members: [...group.members] } };
      if (group.members.length >= group.size) this.group = undefined;
      return this.request(entry.flavor, hints, `server-group-${group.policy}`);
    }
    const entry = pickWeighted(this.entries, random);
    this.customSizes++;
    if (random() < 0.5) {
      // A tenant's own flavor: a catalogue shape with its own memory size.
      const flavor: Flavor = { ...entry.flavor, name: `custom-${this.customSizes}`, memoryMb: entry.flavor.memoryMb + 256 * (1 + (this.customSizes % 64)) };
      return this.request(flavor, undefined, 'custom-size');
    }
    // A new combination: the catalogue flavor with a trait requirement added.
    const trait: Record<string, string> = random() < 0.5 ? { 'trait:HW_CPU_X86_AVX2': 'required' } : { 'trait:HW_CPU_X86_AVX512F': 'forbidden' };
    const flavor: Flavor = { ...entry.flavor, name: `${entry.flavor.name}+${this.customSizes}`, extraSpecs: { ...entry.flavor.extraSpecs, ...trait } };
    return this.request(flavor, undefined, 'custom-combination');
  }

  private failing(mustFail: 'oversized' | 'unsatisfiable'): WorkloadRequest {
    const flavor: Flavor =
      mustFail === 'oversized'
        ? { name: 'x.huge', vcpus: 4096, memoryMb: 16 * 1024 * 1024, diskGb: 0, extraSpecs: {} }
        : { name: 'x.nowhere', vcpus: 2, memoryMb: 4096, diskGb: 0, extraSpecs: { 'trait:CUSTOM_NO_HOST_HAS_THIS': 'required' } };
    return { ...this.request(flavor, undefined, mustFail), mustFail };
  }

  private request(flavor: Flavor, hints: SchedulingHints | undefined, kind: string): WorkloadRequest {
    const shape = JSON.stringify([flavor, hints ?? null]);
    return hints === undefined ? { flavor, shape, kind } : { flavor, hints, shape, kind };
  }
}
