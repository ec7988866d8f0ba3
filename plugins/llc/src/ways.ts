/**
 * Cache-way bitmaps and the choice of a contiguous run of ways. Pure: both the compute
 * side (claim test) and the scheduler side (filter, weigher, placed) call these, so the
 * two sides answer "does it fit, and where" the same way.
 *
 * A mask is a capacity bitmask as resctrl writes it (bit i = way i), held in a number;
 * resctrl masks are at most 32 bits wide, so `>>> 0` keeps them unsigned.
 */

/** A run of consecutive set bits. */
export interface WayRun {
  start: number;
  length: number;
}

/** One cache domain as the chooser sees it. */
export interface DomainWays {
  id: number;
  /** Free ways (usable, not reserved for the host, not held by an instance). */
  free: number;
}

/** What placing ways needs to know about a host. */
export interface WayView {
  minCbmBits: number;
  freeClosids: number;
  domains: readonly DomainWays[];
}

/** Where a request's ways go. */
export interface WayChoice {
  domain: number;
  mask: number;
  /** The host's largest free run (over every domain) once `mask` is taken. */
  largestRunAfter: number;
}

export const MAX_MASK_BITS = 32;

/** A mask of `count` ways starting at way `start`. */
export function runMask(start: number, count: number): number {
  if (count <= 0) return 0;
  return (count >= MAX_MASK_BITS ? 0xffffffff : ((1 << count) - 1) << start) >>> 0;
}

/** Number of set bits. */
export function bitCount(mask: number): number {
  let n = 0;
  for (let m = mask >>> 0; m !== 0; m = (m & (m - 1)) >>> 0) n++;
  return n;
}

/** Maximal runs of set bits, lowest first. */
export function runsOf(mask: number): WayRun[] {
  const runs: WayRun[] = [];
  let start = -1;
  for (let bit = 0; bit <= MAX_MASK_BITS; bit++) {
    const set = bit < MAX_MASK_BITS && ((mask >>> bit) & 1) === 1;
    if (set && start < 0) start = bit;
    if (!set && start >= 0) {
      runs.push({ start, length: bit - start });
      start = -1;
    }
  }
  return runs;
}

/** Length of the longest run of set bits (0 for an empty mask). */
export function largestRun(mask: number): number {
  // Each step shortens every run by one (a bit stays set only if the one above it is set too).
  let n = 0;
  for (let m = mask >>> 0; m !== 0; m = (m & (m >>> 1)) >>> 0) n++;
  return n;
}

/** True when the set bits form one run (resctrl requires contiguous masks). */
export function isContiguous(mask: number): boolean {
  return mask !== 0 && runsOf(mask).length === 1;
}

/** Parse a hex mask (`7ff`) as the kernel prints it; undefined when malformed or too wide. */
export function parseMask(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^[0-9a-fA-F]{1,8}$/.test(trimmed)) return undefined;
  return Number.parseInt(trimmed, 16) >>> 0;
}

/** Format a mask in the kernel's hex form. */
export function formatMask(mask: number): string {
  return (mask >>> 0).toString(16);
}

/**
 * Choose `ways` contiguous free ways on one domain, or say why none fit. Best fit: the
 * smallest free run that holds the request, taken from its low end, so large runs stay
 * whole; ties go to the choice that leaves the host's largest free run longest, then to the
 * lowest domain id and way. Refuses requests below `minCbmBits` and hosts without a free
 * CLOSID. Free ways that are not contiguous never count, however many there are.
 */
export function chooseWays(view: WayView, ways: number): WayChoice | string {
  if (!Number.isSafeInteger(ways) || ways < 1) return `requested ${ways} cache ways; need a positive integer`;
  if (ways < view.minCbmBits) return `requested ${ways} cache ways, below min_cbm_bits ${view.minCbmBits}`;
  if (view.freeClosids < 1) return `no free CLOSID (every class of service is in use)`;
  // Summaries call this for every way count of every host placed on or reloaded: no arrays,
  // and an object only for each better choice found. The two longest runs over the domains
  // give each domain "the others' longest" without a pass over the others.
  const domains = view.domains;
  let longest = 0;
  let second = 0;
  let longestAt = -1;
  for (let i = 0; i < domains.length; i++) {
    const run = largestRun(domains[i]!.free);
    if (run > longest) {
      second = longest;
      longest = run;
      longestAt = i;
    } else if (run > second) second = run;
  }
  let best: WayChoice | undefined;
  let bestLeftover = 0;
  for (let i = 0; i < domains.length; i++) {
    const { id, free } = domains[i]!;
    const othersLargest = i === longestAt ? second : longest;
    // Each maximal run of free ways, lowest first.
    let start = -1;
    for (let bit = 0; bit <= MAX_MASK_BITS; bit++) {
      if (bit < MAX_MASK_BITS && ((free >>> bit) & 1) === 1) {
        if (start < 0) start = bit;
        continue;
      }
      if (start < 0) continue;
      const length = bit - start;
      const runStart = start;
      start = -1;
      if (length < ways) continue;
      const mask = runMask(runStart, ways);
      const leftover = length - ways;
      const largestRunAfter = Math.max(othersLargest, largestRun((free & ~mask) >>> 0));
      if (!best || better(leftover, largestRunAfter, id, mask, bestLeftover, best)) {
        best = { domain: id, mask, largestRunAfter };
        bestLeftover = leftover;
      }
    }
  }
  if (!best) {
    const free = domains.map((d) => `${d.id}:${bitCount(d.free)}`).join(', ');
    return `no cache domain has ${ways} contiguous free ways (largest free run ${longest}; free ways per domain ${free || 'none'})`;
  }
  return best;
}

/** Smallest leftover first, then the longest free run left, the lowest domain, the lowest mask. */
function better(leftover: number, largestRunAfter: number, domain: number, mask: number, bestLeftover: number, best: WayChoice): boolean {
  if (leftover !== bestLeftover) return leftover < bestLeftover;
  if (largestRunAfter !== best.largestRunAfter) return largestRunAfter > best.largestRunAfter;
  if (domain !== best.domain) return domain < best.domain;
  return mask < best.mask;
}
