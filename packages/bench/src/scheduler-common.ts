/** What the scheduler benches share: the fixed flavor mix, the plugins, and their checks. */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type ErtConfig } from '@ert/core';
import { capacityOf, type Flavor } from '@ert/plugin-api';
import type { Store } from '@ert/store';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** The first-party plugins the benches load (`--plugins` chooses among them). */
export const FIRST_PARTY = ['vcpu', 'memory', 'compute-units', 'llc', 'pstate'];

/** The workload: general-purpose flavors plus one per plugin's extra specs (no disk: the fleet has none). */
export const WORKLOAD: Array<Flavor & { needs?: string }> = [
  { name: 'm1.small', vcpus: 1, memoryMb: 2048, diskGb: 0, extraSpecs: {} },
  { name: 'm1.medium', vcpus: 2, memoryMb: 4096, diskGb: 0, extraSpecs: {} },
  { name: 'cu.medium', vcpus: 4, memoryMb: 8192, diskGb: 0, extraSpecs: { 'cu:units': '40' }, needs: 'compute-units' },
  { name: 'llc.gold', vcpus: 4, memoryMb: 8192, diskGb: 0, extraSpecs: { 'llc:ways': '2' }, needs: 'llc' },
  { name: 'perf.turbo', vcpus: 2, memoryMb: 4096, diskGb: 0, extraSpecs: { 'pstate:governor': 'performance' }, needs: 'pstate' },
];

/** A workload entry as a flavor (without the plugin it needs). */
export function flavorOf(entry: Flavor & { needs?: string }): Flavor {
  const { needs: _needs, ...flavor } = entry;
  return flavor;
}

/** The config with only the chosen first-party plugins. */
function withPlugins(config: ErtConfig, chosen: readonly string[]): ErtConfig {
  const keep = <T extends { name: string }>(refs: T[]): T[] => refs.filter((r) => !FIRST_PARTY.includes(r.name) || chosen.includes(r.name));
  return {
    ...config,
    tracker: { ...config.tracker, resources: keep(config.tracker.resources) },
    scheduler: { ...config.scheduler, consumers: keep(config.scheduler.consumers), filters: keep(config.scheduler.filters), weighers: keep(config.scheduler.weighers) },
  };
}

/**
 * The scheduler benches' config: config/ert.config.yaml with the chosen first-party plugins, on
 * `store`, silent. No trackers run in a bench: nothing confirms the reservations, and none may
 * expire mid-run (the scheduler's reaper would free capacity the benchmark still holds).
 */
export async function benchConfig(store: ErtConfig['store'], plugins: readonly string[] = FIRST_PARTY): Promise<ErtConfig> {
  const base = await loadConfig({ path: path.join(repoRoot, 'config', 'ert.config.yaml'), env: {} });
  return { ...withPlugins(base, plugins), store, log: { level: 'silent' }, reservations: { ...base.reservations, timeout: 2_147_483_647 } };
}

export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export const round = (n: number, digits = 3): number => Number(n.toFixed(digits));

/** Providers and classes whose usage exceeds capacity in the store (a correct run has none). */
export async function overCapacityCount(store: Store): Promise<number> {
  let over = 0;
  for (const host of await store.loadHosts()) {
    for (const provider of host.providers) {
      for (const [resourceClass, inventory] of Object.entries(provider.inventories)) {
        if ((provider.usages[resourceClass] ?? 0) > capacityOf(inventory)) over++;
      }
    }
  }
  return over;
}
