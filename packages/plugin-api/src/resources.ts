/**
 * Resource classes, traits and inventory arithmetic, with Placement's semantics.
 * Both sides and the store use these functions so that "does it fit" has one answer.
 */

/** Standard resource classes (os-resource-classes). Custom classes match `CUSTOM_[A-Z0-9_]+`. */
export const STANDARD_RESOURCE_CLASSES = [
  'VCPU',
  'PCPU',
  'MEMORY_MB',
  'DISK_GB',
  'PCI_DEVICE',
  'SRIOV_NET_VF',
  'NUMA_SOCKET',
  'NUMA_CORE',
  'NUMA_THREAD',
  'NUMA_MEMORY_MB',
  'IPV4_ADDRESS',
  'VGPU',
  'VGPU_DISPLAY_HEAD',
  'NET_BW_EGR_KILOBIT_PER_SEC',
  'NET_BW_IGR_KILOBIT_PER_SEC',
  'PGPU',
  'FPGA',
  'MEM_ENCRYPTION_CONTEXT',
] as const;

/** The name of one of `STANDARD_RESOURCE_CLASSES`. */
export type StandardResourceClass = (typeof STANDARD_RESOURCE_CLASSES)[number];
/** A resource class name: a standard one or `CUSTOM_...`. */
export type ResourceClass = string;

/** A custom resource class or trait name: `CUSTOM_` then upper-case letters, digits and underscores. */
export const CUSTOM_NAME_PATTERN = /^CUSTOM_[A-Z0-9_]+$/;
/** Standard trait names (os-traits) are upper-case words joined by underscores. */
export const TRAIT_NAME_PATTERN = /^[A-Z][A-Z0-9_]*$/;

const standardClasses: ReadonlySet<string> = new Set(STANDARD_RESOURCE_CLASSES);

/** True when `name` matches `CUSTOM_NAME_PATTERN` (a custom class or trait). Pure. */
export function isCustomName(name: string): boolean {
  return CUSTOM_NAME_PATTERN.test(name);
}

/** A class is valid when it is standard or a well-formed custom name. */
export function isValidResourceClass(name: string): boolean {
  return standardClasses.has(name) || isCustomName(name);
}

/** Any well-formed trait (standard os-traits style or CUSTOM_). */
export function isValidTraitName(name: string): boolean {
  return name.length <= 255 && TRAIT_NAME_PATTERN.test(name);
}

/** Trait a sharing provider carries (Placement). */
export const TRAIT_SHARING_PROVIDER = 'MISC_SHARES_VIA_AGGREGATE';

/**
 * Inventory of one resource class on one provider.
 * capacity = floor((total - reserved) * allocationRatio); an amount fits when
 * used + amount <= capacity, minUnit <= amount <= maxUnit and amount % stepSize == 0.
 */
export interface Inventory {
  /** Amount the provider has, in the class's unit (e.g. MiB for MEMORY_MB); at least 1. */
  total: number;
  /** Part of `total` kept back from consumers (e.g. for the host itself); 0..total. */
  reserved: number;
  /** Smallest amount one allocation may take; at least 1. */
  minUnit: number;
  /** Largest amount one allocation may take; at least `minUnit`. */
  maxUnit: number;
  /** Allocations must be multiples of it; at least 1. */
  stepSize: number;
  /**
   * Overcommit factor applied to `total - reserved`; 0 < ratio <= MAX_ALLOCATION_RATIO, or 0
   * (capacity 0) where `inventoryProblem` is told `zeroRatio` (the store, as Placement).
   */
  allocationRatio: number;
}

/** What a plugin or config may state: `total` and any fields it wants to override. */
export type InventoryInput = { total: number } & Partial<Omit<Inventory, 'total'>>;

/** Placement's defaults: reserved 0, minUnit 1, maxUnit total, stepSize 1, ratio 1.0. */
export function normalizeInventory(input: InventoryInput): Inventory {
  return {
    total: input.total,
    reserved: input.reserved ?? 0,
    minUnit: input.minUnit ?? 1,
    maxUnit: input.maxUnit ?? Math.max(input.total, 1),
    stepSize: input.stepSize ?? 1,
    allocationRatio: input.allocationRatio ?? 1,
  };
}

/** Largest allocation ratio an inventory may have (Placement has none; 1e308 meant infinite capacity). */
export const MAX_ALLOCATION_RATIO = 1000;

/**
 * Largest total, reserved, unit and capacity: 2^53-1, the largest integer JavaScript holds
 * exactly, and below what both stores hold (SQLite INTEGER and PostgreSQL bigint, 2^63-1).
 */
export const MAX_INVENTORY_AMOUNT = Number.MAX_SAFE_INTEGER;

/**
 * Returns why an inventory is invalid, or undefined when it is valid. The message starts
 * with the field at fault. Bounds: integers 0..MAX_INVENTORY_AMOUNT, 0 < allocationRatio <=
 * MAX_ALLOCATION_RATIO, and the capacity itself at most MAX_INVENTORY_AMOUNT. With
 * `zeroRatio`, an allocationRatio of 0 is valid too: capacity 0, nothing can be allocated.
 * Placement stores it (its schema has no minimum), so the store accepts it; what plugins and
 * provider config files state is checked without it.
 */
export function inventoryProblem(inv: Inventory, options: { zeroRatio?: boolean } = {}): string | undefined {
  const ints: Array<keyof Inventory> = ['total', 'reserved', 'minUnit', 'maxUnit', 'stepSize'];
  for (const key of ints) {
    const v = inv[key];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_INVENTORY_AMOUNT) {
      return `${key} must be an integer from 0 to ${MAX_INVENTORY_AMOUNT}, got ${String(v)}`;
    }
  }
  if (inv.total < 1) return `total must be at least 1, got ${inv.total}`;
  if (inv.minUnit < 1) return `minUnit must be at least 1, got ${inv.minUnit}`;
  if (inv.stepSize < 1) return `stepSize must be at least 1, got ${inv.stepSize}`;
  if (inv.maxUnit < inv.minUnit) return `maxUnit (${inv.maxUnit}) must not be below minUnit (${inv.minUnit})`;
  if (inv.reserved > inv.total) return `reserved (${inv.reserved}) must not exceed total (${inv.total})`;
  const ratio = inv.allocationRatio;
  if (!(typeof ratio === 'number' && Number.isFinite(ratio) && (ratio > 0 || (options.zeroRatio === true && ratio === 0)))) {
    return `allocationRatio must be a ${options.zeroRatio ? 'non-negative' : 'positive'} number, got ${String(ratio)}`;
  }
  if (inv.allocationRatio > MAX_ALLOCATION_RATIO) return `allocationRatio must be at most ${MAX_ALLOCATION_RATIO}, got ${String(inv.allocationRatio)}`;
  const capacity = capacityOf(inv);
  if (capacity > MAX_INVENTORY_AMOUNT) {
    return `allocationRatio ${inv.allocationRatio} times total - reserved (${inv.total - inv.reserved}) gives capacity ${capacity}, above ${MAX_INVENTORY_AMOUNT}`;
  }
  return undefined;
}

/** floor((total - reserved) * allocationRatio), as Placement computes it. */
export function capacityOf(inv: Inventory): number {
  return Math.floor((inv.total - inv.reserved) * inv.allocationRatio);
}

/**
 * Why `amount` more of this inventory cannot be used when `used` is already in use,
 * or undefined when it fits. The reason names the rule that failed.
 */
export function amountProblem(inv: Inventory, used: number, amount: number): string | undefined {
  if (!Number.isSafeInteger(amount) || amount < 1) return `amount must be a positive integer, got ${String(amount)}`;
  if (amount < inv.minUnit) return `amount ${amount} is below min_unit ${inv.minUnit}`;
  if (amount > inv.maxUnit) return `amount ${amount} is above max_unit ${inv.maxUnit}`;
  if (amount % inv.stepSize !== 0) return `amount ${amount} is not a multiple of step_size ${inv.stepSize}`;
  const capacity = capacityOf(inv);
  if (used + amount > capacity) return `needs ${amount}, ${Math.max(capacity - used, 0)} free of capacity ${capacity}`;
  return undefined;
}
