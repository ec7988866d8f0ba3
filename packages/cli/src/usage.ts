import { capacityOf } from '@ert/plugin-api';
import type { HostSnapshot } from '@ert/store';

/** Capacity, usage and free amount of one resource class, summed over a host's tree. */
export interface ClassUsage {
  host: string;
  resourceClass: string;
  capacity: number;
  used: number;
  free: number;
}

/**
 * Per host and class: capacity (Placement's floor((total - reserved) * ratio)), used and
 * free, summed over the host's own tree. Sharing providers are not counted per host (they
 * serve several hosts). Rows are sorted by host, then class.
 */
export function hostUsage(snapshots: readonly HostSnapshot[]): ClassUsage[] {
  const rows: ClassUsage[] = [];
  for (const snapshot of snapshots) {
    const byClass = new Map<string, { capacity: number; used: number }>();
    for (const provider of snapshot.providers) {
      for (const [rc, inventory] of Object.entries(provider.inventories)) {
        const entry = byClass.get(rc) ?? { capacity: 0, used: 0 };
        entry.capacity += capacityOf(inventory);
        entry.used += provider.usages[rc] ?? 0;
        byClass.set(rc, entry);
      }
    }
    for (const [resourceClass, { capacity, used }] of byClass) {
      rows.push({ host: snapshot.host.name, resourceClass, capacity, used, free: Math.max(capacity - used, 0) });
    }
  }
  return rows.sort((a, b) => a.host.localeCompare(b.host) || a.resourceClass.localeCompare(b.resourceClass));
}

/** Fraction of capacity used per class over all rows (0 when a class has no capacity). */
export function utilization(rows: readonly ClassUsage[]): Record<string, number> {
  const totals = new Map<string, { capacity: number; used: number }>();
  for (const row of rows) {
    const t = totals.get(row.resourceClass) ?? { capacity: 0, used: 0 };
    t.capacity += row.capacity;
    t.used += row.used;
    totals.set(row.resourceClass, t);
  }
  return Object.fromEntries(
    [...totals].sort(([a], [b]) => a.localeCompare(b)).map(([rc, t]) => [rc, t.capacity > 0 ? t.used / t.capacity : 0]),
  );
}
