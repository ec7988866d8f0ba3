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
 * that needs one of the classes it owns, or uses one of its extra-spec keys, is refused,
 * naming it, until it discovers again. The `test` of a plugin whose discovery *failed*
 * (threw, hung, garbage) is skipped meanwhile: what it owns is refused here, and a plugin
 * that hangs must not make every other claim wait for its timeout. A plugin that reported
 * itself unavailable is healthy: its `test` still runs (and gives its own reasons).
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
  private failed = new Set<string>();
  private discovered = new Set<string>();

  /**
   * Record a discovery: every plugin's part, the classes of the merged tree, and the plugins
   * whose `discover` failed (threw, timed out, returned something that is not a Discovery).
   */
  update(plugins: readonly PluginDiscoveryReport[], tree: ReadonlyArray<{ inventories: Record<string, unknown> }>, failed: ReadonlySet<string>): void {
    this.unavailable.clear();
    this.failed = new Set(failed);
    for (const report of plugins) {
      if (report.available) {
        this.owned.set(report.plugin, new Set(report.providers.flatMap((p) => Object.keys(p.inventories))));
      } else {
        this.unavailable.set(report.plugin, report.reason ?? 'unavailable');
      }
    }
    this.discovered = new Set(tree.flatMap((p) => Object.keys(p.inventories)));
  }

  /**
   * The classes `plugin` reported at its last available discovery in this process; undefined
   * when it has not reported since the tracker started.
   */
  ownedBy(plugin: string): ReadonlySet<string> | undefined {
    return this.owned.get(plugin);
  }

  /** Names of the plugins unavailable at the last discovery. */
  get unavailablePlugins(): string[] {
    return [...this.unavailable.keys()];
  }

  /** Whether the plugin's `test` is skipped: its last discovery failed. */
  skipsTest(plugin: string): boolean {
    return this.failed.has(plugin) && this.unavailable.has(plugin);
  }

  /**
   * Why `spec` cannot be claimed now: one refusal per unavailable plugin owning a class it
   * asks for (amount > 0 in any group) or an extra-spec key it uses (`keysOf`: the keys a
   * plugin owns). `storeClasses` reads the classes of the host's tree in the store; it is
   * called only for a plugin whose classes are unknown.
   */
  async refusals(spec: RequestSpec, storeClasses: () => Promise<Set<string>>, keysOf: (plugin: string) => readonly string[] = () => []): Promise<AvailabilityRefusal[]> {
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
      const keys = keysOf(plugin).filter((key) => key in spec.pluginSpecs).sort();
      if (needed.length === 0 && keys.length === 0) continue;
      const what = [
        ...(needed.length > 0 ? [`${needed.join(', ')}, which it owns, cannot be claimed against its last known inventory`] : []),
        ...(keys.length > 0 ? [`its extra specs ${keys.join(', ')} cannot be checked`] : []),
      ];
      refusals.push({ plugin, reason: `plugin ${plugin} is unavailable since its last discovery (${why}): ${what.join('; ')}` });
    }
    return refusals;
  }
}
