/**
 * What the host has, as its resource plugins and provider config files say: one discovery
 * (every plugin's `discover`, merged into the host's provider tree) and the plugins' stats.
 * Writes nothing. Keeps what the claim path needs from the last discovery: the CPUs online,
 * the plugins available, and which plugins vouch for which classes (availability.ts).
 */
import { performance } from 'node:perf_hooks';
import { statsCopy, type JsonValue } from '@ert/plugin-api';
import { validateStats } from '@ert/core';
import { TrackerErrorCodes } from './errors.js';
import { dataCopy, type HostPlugins } from './host-plugins.js';
import { childProviderName, providerUuid } from './ids.js';
import { onlineCpus } from './machine.js';
import { PluginAvailability } from './availability.js';
import type { ProviderConfigEntry } from './provider-config.js';
import { problemFrom } from './problems.js';
import { buildTree, normalizeDiscovery, type DesiredProvider, type NormalizedDiscovery } from './tree.js';
import type { DiscoveryReport, PluginDiscoveryReport, Problem } from './types.js';

/** One discovery: its report and the host's desired provider tree (the plugins available: `HostDiscovery.available`). */
export interface Discovered {
  report: DiscoveryReport;
  providers: DesiredProvider[];
}

/** One plugin's stats as collected (validated), or why they were refused, and the time its hook took. */
export interface StatsReport {
  stats?: { schemaVersion: number; data: JsonValue };
  statsProblem?: Problem;
  ms: number;
}

/** Discovers the host and collects its stats; keeps what the last discovery found for the claim path. */
export class HostDiscovery {
  /** The CPUs online at the last discovery (undefined: unknown); a grant pinning another is refused. */
  online: ReadonlySet<number> | undefined;
  /** The plugins available at the last discovery. */
  available = new Set<string>();
  /** Which plugins are unavailable and the classes they own: claims of those classes are refused (availability.ts). */
  readonly availability = new PluginAvailability();

  constructor(
    private readonly plugins: HostPlugins,
    private readonly rootUuid: string,
    /** The directory standing for `/`. */
    private readonly root: string,
    private readonly entries: ProviderConfigEntry[],
  ) {}

  /** Every plugin's `discover` and the provider config files, merged; a plugin that fails publishes no capacity (a problem naming it). */
  async discover(): Promise<Discovered> {
    const { hostName } = this.plugins;
    this.online = await onlineCpus(this.root);
    const plugins: PluginDiscoveryReport[] = [];
    const discoveries: Array<{ plugin: string; discovery: NormalizedDiscovery }> = [];
    const problems: Problem[] = [];
    for (const resource of this.plugins.resources) {
      const started = performance.now();
      let discovery: NormalizedDiscovery;
      try {
        // Copied inside the call: a getter or a Proxy that throws when read is the plugin's
        // invalid result, not an error naming no one; the normalization reads plain data.
        const raw = await this.plugins.call(resource, 'discover', () => resource.hooks.discover(), { copy: dataCopy });
        discovery = normalizeDiscovery(resource.name, raw);
      } catch (err) {
        const problem = problemFrom(err, { plugin: resource.name, hook: 'discover' });
        this.plugins.logger.error({ err, plugin: resource.name }, 'discover failed; the plugin publishes no capacity');
        problems.push(problem);
        discovery = { available: false, reason: problem.message, host: { inventories: {}, traits: [] }, children: [] };
      }
      discoveries.push({ plugin: resource.name, discovery });
      const providers: PluginDiscoveryReport['providers'] = [];
      if (discovery.available) {
        const hostPart = discovery.host;
        if (Object.keys(hostPart.inventories).length > 0 || hostPart.traits.length > 0) {
          providers.push({ name: hostName, uuid: this.rootUuid, ...hostPart });
        }
        for (const child of discovery.children) {
          const name = childProviderName(hostName, child.key);
          const parentName = child.parent === undefined ? hostName : childProviderName(hostName, child.parent);
          providers.push({ name, uuid: providerUuid(name), parentName, inventories: child.inventories, traits: child.traits });
        }
      }
      plugins.push({
        plugin: resource.name,
        available: discovery.available,
        ...(discovery.reason !== undefined ? { reason: discovery.reason } : {}),
        providers,
        timingMs: performance.now() - started,
      });
    }
    const { providers, unmatched } = buildTree(hostName, discoveries, this.entries);
    this.availability.update(plugins, providers, new Set(problems.flatMap((p) => (p.hook === 'discover' && p.plugin !== undefined ? [p.plugin] : []))));
    for (const entry of unmatched) {
      problems.push({
        code: TrackerErrorCodes.PROVIDER_CONFIG_UNMATCHED,
        message: `${entry.file} providers[${entry.index}] matches no provider of host ${hostName}; it was skipped`,
        file: entry.file,
      });
    }
    this.available = new Set(plugins.filter((p) => p.available).map((p) => p.plugin));
    return {
      providers,
      report: {
        host: hostName,
        rootUuid: this.rootUuid,
        plugins,
        providers,
        providerConfigs: { entries: this.entries.length, unmatched: unmatched.map(({ file, index, identification }) => ({ file, index, identification })) },
        problems,
      },
    };
  }

  /**
   * Call `stats` of every plugin available at the last discovery that has it and validate the
   * data; refused stats become problems. What is validated, reported and written is a JSON copy
   * taken inside the hook's call (`statsCopy`), never the plugin's object: stats JSON cannot hold
   * as they are (NaN, a BigInt, a cycle, a getter that throws) or over `MAX_STATS_BYTES` are
   * ERT_PLUGIN_HOOK_INVALID_RESULT naming the plugin and `stats`.
   */
  async collectStats(): Promise<{ reports: Map<string, StatsReport>; problems: Problem[] }> {
    const reports = new Map<string, StatsReport>();
    const problems: Problem[] = [];
    for (const resource of this.plugins.resources) {
      const statsHook = resource.hooks.stats;
      if (!statsHook || !this.available.has(resource.name)) continue;
      const started = performance.now();
      try {
        const data = await this.plugins.call(resource, 'stats', () => statsHook.call(resource.hooks), { copy: jsonCopy });
        validateStats(resource.plugin, data);
        reports.set(resource.name, { stats: { schemaVersion: resource.plugin.stats!.version, data: data as JsonValue }, ms: performance.now() - started });
      } catch (err) {
        const problem = problemFrom(err, { plugin: resource.name, hook: 'stats' });
        this.plugins.logger.error({ err, plugin: resource.name }, 'stats refused');
        problems.push(problem);
        reports.set(resource.name, { statsProblem: problem, ms: performance.now() - started });
      }
    }
    return { reports, problems };
  }

  /** `collectStats`, added to a discovery's report: each plugin's stats (or their problem) and time, and the problems. */
  async collectStatsInto(report: DiscoveryReport): Promise<{ reports: Map<string, StatsReport>; problems: Problem[] }> {
    const collected = await this.collectStats();
    for (const plugin of report.plugins) {
      const s = collected.reports.get(plugin.plugin);
      if (!s) continue;
      if (s.stats) plugin.stats = s.stats;
      if (s.statsProblem) plugin.statsProblem = s.statsProblem;
      plugin.timingMs += s.ms;
    }
    report.problems.push(...collected.problems);
    return collected;
  }
}

/** The stats as the store will hold them (`statsCopy`); a throw refuses them, naming plugin and hook. */
function jsonCopy(stats: unknown): unknown {
  const copy = statsCopy(stats);
  if ('problem' in copy) throw new Error(copy.problem);
  return copy.data;
}
