/**
 * memory, compute side: MEMORY_MB from /proc/meminfo, and per-NUMA memory and huge page
 * pools, which claims asking for `hw:mem_page_size` take pages from.
 */
import { amountProblem, definePlugin, normalizeInventory, requestedAmount, type ClaimedInstance, type Discovery, type Inventory, type JsonValue } from '@ert/plugin-api';
import { HUGEPAGES_DIR, HostFs, describeFailure, readHugePagePools, readMemInfo, readNumaNodes, type HugePagePool } from '@ert/sysfs';
import { MemoryError, MemoryErrorCodes } from './errors.js';
import {
  PLUGIN_NAME,
  availablePages,
  choosePages,
  extraSpecs,
  formatPageSize,
  guestMemoryMb,
  keptFromInstances,
  optionsSchema,
  pageSizeOf,
  statsSchema,
  type HugePageReservation,
  type MemoryOptions,
  type MemoryStatsV1,
  type PageChoice,
  type PageNode,
  type PagePoolStats,
} from './shared.js';

interface Hardware {
  inventory: Inventory;
  totalMb: number;
  freeMb: number;
  defaultHugePageSizeKb: number | null;
  systemPools: HugePagePool[];
  nodes: Array<{ id: number; totalMb: number; freeMb: number; pools: HugePagePool[] }>;
}
type View = { available: true; hardware: Hardware } | { available: false; reason: string };
interface Held {
  memoryMb: number;
  pages: PageChoice | null;
}

const kbToMb = (kb: number) => Math.floor(kb / 1024);
const poolKey = (node: number, sizeKb: number) => `${node}/${sizeKb}`;

/** Above this much work (instances x pages in use), `largestSumAtMost` answers the weaker bound. */
const SUBSET_SUM_WORK_LIMIT = 20_000_000;

/**
 * The largest sum of some of `sizes` (each used at most once) that is at most `limit`: the
 * most pages the started instances can account for. Exact (a reachability table over
 * 0..limit) unless that would take more than SUBSET_SUM_WORK_LIMIT steps, then min(limit,
 * the sum of all): never less than the exact answer, so outside use is never overstated.
 */
export function largestSumAtMost(sizes: readonly number[], limit: number): number {
  const total = sizes.reduce((sum, size) => sum + size, 0);
  if (total <= limit) return total;
  if (sizes.length * (limit + 1) > SUBSET_SUM_WORK_LIMIT) return limit;
  const reachable = new Uint8Array(limit + 1);
  reachable[0] = 1;
  for (const size of sizes) for (let sum = limit; sum >= size; sum--) if (reachable[sum - size]) reachable[sum] = 1;
  let best = limit;
  while (!reachable[best]) best--;
  return best;
}

/** Why `reservedHugePages` cannot apply to the host's pools, naming the entry; undefined when it can. */
function reservationProblem(reservations: readonly HugePageReservation[], nodes: Hardware['nodes']): string | undefined {
  const seen = new Set<string>();
  for (const [i, r] of reservations.entries()) {
    const entry = `option reservedHugePages[${i}] (node ${r.node}, ${formatPageSize(r.sizeKb)}, count ${r.count})`;
    const key = poolKey(r.node, r.sizeKb);
    if (seen.has(key)) return `${entry}: node ${r.node} and ${formatPageSize(r.sizeKb)} are listed twice`;
    seen.add(key);
    const node = nodes.find((n) => n.id === r.node);
    if (!node) return `${entry}: the host has no NUMA node ${r.node} (nodes: ${nodes.map((n) => n.id).join(', ')})`;
    const pool = node.pools.find((p) => p.sizeKb === r.sizeKb);
    if (!pool) return `${entry}: node ${r.node} has no ${formatPageSize(r.sizeKb)} huge pages`;
    if (r.count > pool.total) return `${entry}: exceeds the ${pool.total} pages of that pool`;
  }
  return undefined;
}

function isPageChoice(value: JsonValue | undefined): value is JsonValue & PageChoice {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  return ['node', 'sizeKb', 'pages'].every((key) => Number.isSafeInteger(value[key]));
}

export default definePlugin<MemoryOptions, MemoryStatsV1>({
  name: PLUGIN_NAME,
  optionsSchema,
  stats: statsSchema,
  extraSpecs,
  // Nova's ram_allocation_ratio / initial_ram_allocation_ratio (docs/ownership.md).
  inventoryFields: { fromOptions: { reservedMb: { MEMORY_MB: ['reserved'] }, allocationRatio: { MEMORY_MB: ['allocationRatio'] } } },
  resource(ctx) {
    const fs = new HostFs(ctx.root);
    let view: View = { available: false, reason: 'the host has not been discovered yet' };
    const instances = new Map<string, Held>();
    const reserved = new Map(ctx.options.reservedHugePages.map((r) => [poolKey(r.node, r.sizeKb), r.count]));
    // Pages used by something other than ert's instances, per pool: the most a reading proved
    // (`settleReading`), kept until a reading shows fewer pages in use than that. Proven only
    // once the view holds the host's instances (`reset` was called): until then every page in
    // use counts as outside.
    const usedOutside = new Map<string, number>();
    let viewLoaded = false;
    let readingToSettle = false;

    /** The page counts of the instances in the view holding pages of one pool, except `skip`. */
    const heldPages = (node: number, sizeKb: number, skip?: string): number[] => {
      const pages: number[] = [];
      for (const [uuid, held] of instances) if (uuid !== skip && held.pages?.node === node && held.pages.sizeKb === sizeKb) pages.push(held.pages.pages);
      return pages;
    };

    /** A pool as `availablePages` and the stats see it. */
    const poolCounts = (node: number, pool: HugePagePool, skip?: string) => {
      const key = poolKey(node, pool.sizeKb);
      const inUse = pool.total - pool.free;
      return {
        total: pool.total,
        free: pool.free,
        claimed: heldPages(node, pool.sizeKb, skip).reduce((sum, pages) => sum + pages, 0),
        reserved: reserved.get(key) ?? 0,
        usedOutside: viewLoaded ? (usedOutside.get(key) ?? 0) : Math.max(0, inUse),
      };
    };
    const pageNodes = (hardware: Hardware, skip?: string): PageNode[] =>
      hardware.nodes.map((n) => ({
        id: n.id,
        pools: n.pools.map((p) => ({ sizeKb: p.sizeKb, available: availablePages(poolCounts(n.id, p, skip)) })),
      }));

    /**
     * Fold the last reading into `usedOutside` once the view holds the instances. An instance
     * uses all its pages once started (libvirt preallocates huge-page guest memory) and none
     * before, so the pages in use are the outside use plus the pages of some of the
     * instances: outside use is at least the pages in use less the largest sum of instances'
     * pages that fits in them (`largestSumAtMost`). So a fresh tracker proves it even while
     * instances are pending: 2,048 pages in use beside one pending instance of 4,096 are
     * outside ert. Outside use is never more than the pages in use. Called before the view is
     * used, so a claim or stats after a discovery see it.
     */
    function settleReading(): void {
      if (!readingToSettle || !viewLoaded || !view.available) return;
      readingToSettle = false;
      for (const node of view.hardware.nodes) {
        for (const pool of node.pools) {
          const key = poolKey(node.id, pool.sizeKb);
          const inUse = Math.max(0, pool.total - pool.free);
          const proven = inUse - largestSumAtMost(heldPages(node.id, pool.sizeKb), inUse);
          const kept = Math.min(inUse, Math.max(usedOutside.get(key) ?? 0, proven));
          if (kept > (usedOutside.get(key) ?? 0)) {
            ctx.logger.warn({ node: node.id, sizeKb: pool.sizeKb, pages: kept }, 'huge pages in use outside ert\'s instances: kept from claims (reserve them with reservedHugePages)');
          }
          usedOutside.set(key, kept);
        }
      }
    }

    async function readHardware(): Promise<View> {
      const [meminfo, numa, systemPools] = await Promise.all([readMemInfo(fs), readNumaNodes(fs), readHugePagePools(fs, HUGEPAGES_DIR)]);
      if (!meminfo.ok) return { available: false, reason: describeFailure(meminfo) };
      if (!numa.ok) return { available: false, reason: describeFailure(numa) };
      if (!systemPools.ok) return { available: false, reason: describeFailure(systemPools) };
      const totalMb = kbToMb(meminfo.value.MemTotal!);
      if (totalMb < 1) return { available: false, reason: `/proc/meminfo: MemTotal ${meminfo.value.MemTotal} kB is less than 1 MB` };
      if (ctx.options.reservedMb > totalMb) {
        return { available: false, reason: `option reservedMb ${ctx.options.reservedMb} exceeds the host's ${totalMb} MB (/proc/meminfo MemTotal)` };
      }
      const freeMb = kbToMb(meminfo.value.MemFree ?? 0);
      // A kernel without NUMA has one implicit node holding everything.
      const nodes =
        numa.value.length > 0
          ? numa.value.map((n) => ({ id: n.id, totalMb: kbToMb(n.memTotalKb), freeMb: kbToMb(n.memFreeKb), pools: n.hugePages }))
          : [{ id: 0, totalMb, freeMb, pools: systemPools.value }];
      const problem = reservationProblem(ctx.options.reservedHugePages, nodes);
      if (problem) return { available: false, reason: problem };
      return {
        available: true,
        hardware: {
          inventory: normalizeInventory({ total: totalMb, reserved: ctx.options.reservedMb, allocationRatio: ctx.options.allocationRatio }),
          totalMb,
          freeMb,
          defaultHugePageSizeKb: meminfo.value.Hugepagesize ?? null,
          systemPools: systemPools.value,
          nodes,
        },
      };
    }

    return {
      async discover(): Promise<Discovery> {
        view = await readHardware();
        readingToSettle = view.available;
        settleReading();
        if (!view.available) {
          ctx.logger.warn({ reason: view.reason }, 'memory unavailable');
          return { available: false, reason: view.reason };
        }
        return { available: true, host: { inventories: { MEMORY_MB: { ...view.hardware.inventory } } } };
      },

      reset() {
        instances.clear();
        viewLoaded = true;
      },

      test(request) {
        settleReading();
        const memoryMb = requestedAmount(request.spec, 'MEMORY_MB');
        const pageSize = pageSizeOf(request.spec);
        if (memoryMb === 0 && pageSize === undefined) return undefined;
        if (!view.available) return `memory is unavailable on this host: ${view.reason}`;
        // Everything in the view is held, a resize's old allocation included (the tracker
        // holds it under the migration uuid until the resize is confirmed or reverted).
        if (memoryMb > 0) {
          let used = 0;
          for (const held of instances.values()) used += held.memoryMb;
          const problem = amountProblem(view.hardware.inventory, used, memoryMb);
          if (problem) return `MEMORY_MB: ${problem}`;
        }
        const choice = choosePages(pageNodes(view.hardware), pageSize, guestMemoryMb(request.spec));
        if (typeof choice === 'string') return `hw:mem_page_size: ${choice}`;
        if (choice === null) return undefined;
        // The pages come from a pool the store counts per host, so two trackers of one host
        // cannot both hand out its last pages: its capacity is what instances may hold, the
        // pool's pages less those kept from them (as availablePages counts).
        const pool = view.hardware.nodes.find((n) => n.id === choice.node)?.pools.find((p) => p.sizeKb === choice.sizeKb);
        const capacity = pool ? pool.total - keptFromInstances(poolCounts(choice.node, pool)) : choice.pages;
        return { assignment: { ...choice }, pools: { [`node${choice.node}/${choice.sizeKb}kB`]: { amount: choice.pages, capacity } } };
      },

      addInstance(instance: ClaimedInstance) {
        const allocated = instance.allocations.filter((a) => a.resourceClass === 'MEMORY_MB').reduce((sum, a) => sum + a.amount, 0);
        const memoryMb = instance.allocations.length > 0 ? allocated : requestedAmount(instance.spec, 'MEMORY_MB');
        let pages: PageChoice | null = null;
        if (isPageChoice(instance.assignment)) {
          pages = { node: instance.assignment.node, sizeKb: instance.assignment.sizeKb, pages: instance.assignment.pages };
        } else if (view.available) {
          // No recorded assignment (e.g. an instance from before the plugin was enabled): place it as a claim would.
          const choice = choosePages(pageNodes(view.hardware, instance.uuid), pageSizeOf(instance.spec), guestMemoryMb(instance.spec));
          if (typeof choice === 'string') ctx.logger.warn({ instance: instance.uuid, reason: choice }, 'instance huge pages not counted');
          else pages = choice;
        }
        instances.set(instance.uuid, { memoryMb, pages });
      },

      removeInstance(uuid) {
        instances.delete(uuid);
      },

      stats(): MemoryStatsV1 {
        settleReading();
        if (!view.available) {
          throw new MemoryError(MemoryErrorCodes.unavailable, `plugin ${ctx.name} has no stats: ${view.reason}`, { plugin: ctx.name, reason: view.reason });
        }
        const hw = view.hardware;
        const numaNodes = hw.nodes.map((n) => ({
          id: n.id,
          totalMb: n.totalMb,
          freeMb: n.freeMb,
          hugePages: n.pools.map((p): PagePoolStats => ({ sizeKb: p.sizeKb, surplus: p.surplus, ...poolCounts(n.id, p) })),
        }));
        // The system-wide pools' counts from the kernel; what ert counts, summed over the nodes' pools.
        const systemPool = (pool: HugePagePool): PagePoolStats => {
          const onNodes = numaNodes.flatMap((n) => n.hugePages.filter((p) => p.sizeKb === pool.sizeKb));
          const sum = (field: 'claimed' | 'reserved' | 'usedOutside') => onNodes.reduce((total, p) => total + (p[field] ?? 0), 0);
          return { sizeKb: pool.sizeKb, total: pool.total, free: pool.free, surplus: pool.surplus, claimed: sum('claimed'), reserved: sum('reserved'), usedOutside: sum('usedOutside') };
        };
        return { totalMb: hw.totalMb, freeMb: hw.freeMb, defaultHugePageSizeKb: hw.defaultHugePageSizeKb, hugePages: hw.systemPools.map(systemPool), numaNodes };
      },
    };
  },
});
