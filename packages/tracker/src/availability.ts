import type { RequestSpec } from '@ert/plugin-api';
import type { PluginDiscoveryReport } from './types.js';

/** A reason to refuse a claim, naming the plugin at fault. */
export interface AvailabilityRefusal {
  plugin: string;
  reason: string;
}

/**
 * Discovery failures fail closed. A resource plugin whose `discover` threw, hung past its
 * timeout, returned garbage or said `available: false` no longer vouches for its classes:
 * the store may still hold its last known inventory (sync keeps inventory that allocations
 * use), and its `test` may have nothing to test against. Any claim, resize or migration
 * that needs one of the classes it owns is refused, naming it, until it discovers again.
 *
 * Which classes a plugin owns: those it reported at its last available discovery in this
 * process. A plugin that has been unavailable since the tracker started (a restart while
 * its hardware or its file is gone) never said: it is taken to own every class of the
 * host's tree in the store that the current discovery (plugins and provider configs) no
 * longer reports.
 */
export class PluginAvailability {
  private readonly owned = new Map<string, Set<string>>();
  private readonly unavailable = new Map<string, string>();
  private discovered = new Set<string>();

  /** Record a discovery (every plugin's part, and the classes of the merged tree). */
  update(plugins: readonly PluginDiscoveryReport[], tree: ReadonlyArray<{ inventories: Record<string, unknown> }>): void {
    this.unavailable.clear();
    for (const report of plugins) {
      if (report.available) {
        this.owned.set(report.plugin, new Set(report.providers.flatMap((p) => Object.keys(p.inventories))));
      } else {
        this.unavailable.set(report.plugin, report.reason ?? 'unavailable');
      }
    }
    this.discovered = new Set(tree.flatMap((p) => Object.keys(p.inventories)));
  }

  /** Names of the plugins unavailable at the last discovery. */
  get unavailablePlugins(): string[] {
    return [...this.unavailable.keys()];
  }

  /**
   * Why `spec` cannot be claimed now: one refusal per unavailable plugin owning a class it
   * asks for (amount > 0 in any group). `storeClasses` reads the classes of the host's tree
   * in the store; it is called only for a plugin whose classes are unknown.
   */
  async refusals(spec: RequestSpec, storeClasses: () => Promise<Set<string>>): Promise<AvailabilityRefusal[]> {
    if (this.unavailable.size === 0) return [];
    const wanted = new Set(spec.groups.flatMap((g) => Object.entries(g.resources).filter(([, amount]) => amount > 0).map(([cls]) => cls)));
    const refusals: AvailabilityRefusal[] = [];
    let orphans: Set<string> | undefined;
    for (const [plugin, why] of this.unavailable) {
      let owned = this.owned.get(plugin);
      if (!owned) {
        orphans ??= new Set([...(await storeClasses())].filter((cls) => !this.discovered.has(cls)));
        owned = orphans;
      }
      const needed = [...owned].filter((cls) => wanted.has(cls)).sort();
      if (needed.length === 0) continue;
      refusals.push({
        plugin,
        reason: `plugin ${plugin} is unavailable since its last discovery (${why}): ${needed.join(', ')}, which it owns, cannot be claimed against its last known inventory`,
      });
    }
    return refusals;
  }
}
