/**
 * What both entries of the memory plugin share: options, stats schema, the
 * `hw:mem_page_size` key and the huge page choice both sides must agree on. Imports no
 * hardware code, so the scheduler entry never loads sysfs readers.
 */
import { requestedAmount, type ExtraSpecKey, type JsonSchema, type RequestSpec, type StatsSchema } from '@ert/plugin-api';

export const PLUGIN_NAME = 'memory';
export const PAGE_SIZE_KEY = 'hw:mem_page_size';
/** The base page size (kB) of x86: an explicit `4KB` request means small pages. */
export const SMALL_PAGE_KB = 4;

export interface MemoryOptions {
  /** MEMORY_MB kept for the host (reported as `reserved`), default 512. */
  reservedMb: number;
  /** MEMORY_MB allocation ratio, default 1.0. */
  allocationRatio: number;
  /**
   * Huge pages kept from instances per NUMA node and page size (Nova's
   * `reserved_huge_pages`): pages something other than ert's instances uses or will use
   * (DPDK, OVS). Default none. An entry for a node or size the host lacks, more pages than
   * the pool holds, or one node and size listed twice makes the plugin unavailable.
   */
  reservedHugePages: HugePageReservation[];
}

/** One `reservedHugePages` entry: `count` pages of `sizeKb` on NUMA node `node`. */
export interface HugePageReservation {
  node: number;
  sizeKb: number;
  count: number;
}

export const optionsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    reservedMb: { type: 'integer', minimum: 0, default: 512 },
    allocationRatio: { type: 'number', exclusiveMinimum: 0, default: 1.0 },
    reservedHugePages: {
      type: 'array',
      default: [],
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['node', 'sizeKb', 'count'],
        properties: { node: { type: 'integer', minimum: 0 }, sizeKb: { type: 'integer', minimum: 1 }, count: { type: 'integer', minimum: 0 } },
      },
    },
  },
};

/** One huge page pool as the stats describe it. */
export interface PagePoolStats {
  sizeKb: number;
  /** Pages in the pool (`nr_hugepages`). */
  total: number;
  /** Pages the kernel reports free (`free_hugepages`). */
  free: number;
  surplus: number;
  /** Pages held by the instances ert placed in this pool (started or not). */
  claimed: number;
  /** Pages the `reservedHugePages` option keeps from instances (absent in stats of older trackers: 0). */
  reserved?: number;
  /**
   * Pages counted as used by something other than ert's instances: the most ever seen in use
   * beyond the instances' pages since the tracker started, never more than the pages in use
   * at the last reading (absent in stats of older trackers: 0). See `availablePages`.
   */
  usedOutside?: number;
}

/** Stats v1: memory size, per-NUMA memory and huge pages. */
export interface MemoryStatsV1 {
  /** MemTotal in MB (floor). */
  totalMb: number;
  /** MemFree in MB (floor) when discovered. */
  freeMb: number;
  /** `Hugepagesize` of /proc/meminfo (the default huge page size), null when absent. */
  defaultHugePageSizeKb: number | null;
  /** System-wide pools (/sys/kernel/mm/hugepages); `claimed` summed over nodes. */
  hugePages: PagePoolStats[];
  /** NUMA nodes; one node 0 holding everything on a kernel without NUMA. */
  numaNodes: Array<{ id: number; totalMb: number; freeMb: number; hugePages: PagePoolStats[] }>;
}

const poolSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['sizeKb', 'total', 'free', 'surplus', 'claimed'],
  properties: {
    sizeKb: { type: 'integer', minimum: 1 },
    total: { type: 'integer', minimum: 0 },
    free: { type: 'integer', minimum: 0 },
    surplus: { type: 'integer', minimum: 0 },
    claimed: { type: 'integer', minimum: 0 },
    reserved: { type: 'integer', minimum: 0 },
    usedOutside: { type: 'integer', minimum: 0 },
  },
};

export const statsSchema: StatsSchema = {
  version: 1,
  schema: {
    type: 'object',
    additionalProperties: false,
    required: ['totalMb', 'freeMb', 'defaultHugePageSizeKb', 'hugePages', 'numaNodes'],
    properties: {
      totalMb: { type: 'integer', minimum: 0 },
      freeMb: { type: 'integer', minimum: 0 },
      defaultHugePageSizeKb: { type: ['integer', 'null'] },
      hugePages: { type: 'array', items: poolSchema },
      numaNodes: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['id', 'totalMb', 'freeMb', 'hugePages'],
          properties: {
            id: { type: 'integer', minimum: 0 },
            totalMb: { type: 'integer', minimum: 0 },
            freeMb: { type: 'integer', minimum: 0 },
            hugePages: { type: 'array', items: poolSchema },
          },
        },
      },
    },
  },
};

/** A parsed `hw:mem_page_size`. */
export type PageSizeRequest = { kind: 'small' } | { kind: 'large' } | { kind: 'any' } | { kind: 'size'; sizeKb: number };

const UNIT_KB: Record<string, number> = { '': 1, k: 1, m: 1024, g: 1024 * 1024 };
// At most nine significant digits: a size in GB stays a safe integer of kB.
const SIZE_PATTERN = /^0*([1-9]\d{0,8})\s*(?:([kmg])(?:i?b)?)?$/i;

/** `hw:mem_page_size`: `small`, `large`, `any`, or a size (`2MB`, `1GB`, `2048` = kB). */
export const pageSizeKey: ExtraSpecKey<string> = {
  key: PAGE_SIZE_KEY,
  description: 'guest memory page size: small, large (any huge page size), any, or a size such as 2MB, 1GB, 2048 (KB)',
  schema: { type: 'string', pattern: '^(small|large|any|0*[1-9][0-9]{0,8}\\s*([KkMmGg]([Ii]?[Bb])?)?)$' },
};

export const extraSpecs: readonly ExtraSpecKey<any>[] = [pageSizeKey];

/** Parse a `hw:mem_page_size` value; undefined when it is not one. `4KB` is `small`. */
export function parsePageSize(value: string): PageSizeRequest | undefined {
  const word = value.trim().toLowerCase();
  if (word === 'small' || word === 'large' || word === 'any') return { kind: word };
  const match = SIZE_PATTERN.exec(word);
  if (!match) return undefined;
  const sizeKb = Number(match[1]) * UNIT_KB[(match[2] ?? '').toLowerCase()]!;
  return sizeKb === SMALL_PAGE_KB ? { kind: 'small' } : { kind: 'size', sizeKb };
}

/** The page size a request asks for (undefined when it has no `hw:mem_page_size`). */
export function pageSizeOf(spec: RequestSpec): PageSizeRequest | undefined {
  const value = spec.pluginSpecs[PAGE_SIZE_KEY];
  return typeof value === 'string' ? parsePageSize(value) : undefined;
}

/** `2MB`, `1GB`, `64KB`. */
export function formatPageSize(sizeKb: number): string {
  if (sizeKb % (1024 * 1024) === 0) return `${sizeKb / (1024 * 1024)}GB`;
  if (sizeKb % 1024 === 0) return `${sizeKb / 1024}MB`;
  return `${sizeKb}KB`;
}

/** Huge pages of one size an instance can still take on one node. */
export interface PagePool {
  sizeKb: number;
  available: number;
}
export interface PageNode {
  id: number;
  pools: PagePool[];
}

/** Where an instance's memory goes in huge pages: `pages` pages of `sizeKb` on node `node`. */
export interface PageChoice {
  node: number;
  sizeKb: number;
  pages: number;
}

/**
 * Pages an instance can still take from a pool: its pages less those held by ert's instances
 * (`claimed`, started or not) and those kept from them (`reserved` by the operator, or
 * `usedOutside`, whichever is larger), and never more than the kernel reports free.
 *
 * Why not the kernel's `free` alone: an instance claimed but not started yet holds no page
 * in the kernel, so `free` still counts its pages; `free - claimed` in turn takes a started
 * instance's pages twice. Nova counts total - reserved - claimed and trusts the operator's
 * `reserved_huge_pages`; ert does too, and also keeps the pages it has seen in use outside
 * its instances (`usedOutside`), so pages used by something else are never handed out.
 */
export function availablePages(pool: { total: number; free: number; claimed: number; reserved?: number; usedOutside?: number }): number {
  return Math.max(0, Math.min(pool.free, pool.total - keptFromInstances(pool) - pool.claimed));
}

/** Pages of a pool kept from ert's instances: the operator's `reserved` or the `usedOutside` seen, the larger. */
export function keptFromInstances(pool: { reserved?: number; usedOutside?: number }): number {
  return Math.max(pool.reserved ?? 0, pool.usedOutside ?? 0);
}

/**
 * Choose the huge pages for `memoryMb` of guest memory, the same way on both sides: the
 * lowest-numbered node that has enough available pages, preferring the largest size for
 * `large`/`any`. All memory of an instance comes from one size on one node, and the size
 * must divide it. Returns null when the request uses small pages (no page size, `small`,
 * or `any` without a fitting huge page pool), the choice, or the reason it cannot be met.
 */
export function choosePages(nodes: readonly PageNode[], request: PageSizeRequest | undefined, memoryMb: number): PageChoice | null | string {
  if (request === undefined || request.kind === 'small') return null;
  const memoryKb = memoryMb * 1024;
  const fits = (sizeKb: number): PageChoice | undefined => {
    if (memoryKb === 0 || memoryKb % sizeKb !== 0) return undefined;
    const pages = memoryKb / sizeKb;
    const node = nodes.find((n) => n.pools.some((p) => p.sizeKb === sizeKb && p.available >= pages));
    return node ? { node: node.id, sizeKb, pages } : undefined;
  };
  const sizes = [...new Set(nodes.flatMap((n) => n.pools.map((p) => p.sizeKb)))].filter((s) => s > SMALL_PAGE_KB).sort((a, b) => b - a);
  if (request.kind === 'large' || request.kind === 'any') {
    for (const sizeKb of sizes) {
      const choice = fits(sizeKb);
      if (choice) return choice;
    }
    if (request.kind === 'any') return null;
    if (sizes.length === 0) return 'the host has no huge pages';
    return `no NUMA node has ${memoryMb} MB free in huge pages of one size (${sizes.map((s) => `${formatPageSize(s)}: ${mostAvailable(nodes, s)} free on the best node`).join(', ')})`;
  }
  const size = formatPageSize(request.sizeKb);
  if (!sizes.includes(request.sizeKb)) return `the host has no ${size} huge pages`;
  if (memoryKb % request.sizeKb !== 0) return `flavor memory ${memoryMb} MB is not a multiple of the ${size} page size`;
  return fits(request.sizeKb) ?? `no NUMA node has ${memoryKb / request.sizeKb} free ${size} huge pages (best node: ${mostAvailable(nodes, request.sizeKb)})`;
}

function mostAvailable(nodes: readonly PageNode[], sizeKb: number): number {
  return Math.max(0, ...nodes.flatMap((n) => n.pools.filter((p) => p.sizeKb === sizeKb).map((p) => p.available)));
}

/** Take a choice's pages out of `nodes` (a new array; the input is not changed). */
export function withoutPages(nodes: readonly PageNode[], choice: PageChoice): PageNode[] {
  return nodes.map((n) =>
    n.id !== choice.node ? n : { id: n.id, pools: n.pools.map((p) => (p.sizeKb === choice.sizeKb ? { sizeKb: p.sizeKb, available: p.available - choice.pages } : p)) },
  );
}

/** Guest memory that huge pages must back: the flavor's RAM, else the MEMORY_MB asked for. */
export function guestMemoryMb(spec: RequestSpec): number {
  return spec.flavor.memoryMb > 0 ? spec.flavor.memoryMb : requestedAmount(spec, 'MEMORY_MB');
}
