import { effectiveStatus } from '@ert/plugin-api';
import { unknownHost, type CommandContext } from '../context.js';
import { hostUsage } from '../usage.js';

/** `12s`, `5m`, `3h`, `2d`: how long ago, for the STATS column. */
function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

/**
 * `ert hosts`: every host in the store with status, last update, provider and instance
 * counts, and each plugin's stats with their age. The status is the scheduler's
 * (`effectiveStatus`): an `up` host not updated within tracker.staleAfter is `stale`. A
 * plugin's stats are written when they change, so their age is the time since the last
 * change; they are `stale` when nothing has confirmed them within tracker.staleAfter, i.e.
 * when the host's own update is older than that (the tracker re-reads every plugin on each
 * update and rewrites what changed).
 * JSON: `{ hosts: [{ name, status, statusReason (a disabled host's, when given), lastUpdate, generation, providers, instances,
 * stats: [{ plugin, schemaVersion, updatedAt, ageMs, stale }] }] }` (times as ISO 8601).
 */
export async function hostsCommand(ctx: CommandContext): Promise<void> {
  const config = await ctx.config();
  const store = await ctx.store(config);
  const snapshots = await store.loadHosts();
  const now = Date.now();
  const staleAfter = config.tracker.staleAfter;
  const hosts = snapshots
    .map((s) => ({
      name: s.host.name,
      status: effectiveStatus(s.host.status, s.host.lastUpdate, now, staleAfter),
      ...(s.host.statusReason !== undefined ? { statusReason: s.host.statusReason } : {}),
      lastUpdate: new Date(s.host.lastUpdate).toISOString(),
      generation: s.host.generation,
      providers: s.providers.length,
      instances: s.instances.length,
      stats: Object.values(s.stats)
        .map((st) => ({
          plugin: st.plugin,
          schemaVersion: st.schemaVersion,
          updatedAt: new Date(st.updatedAt).toISOString(),
          ageMs: now - st.updatedAt,
          stale: staleAfter > 0 && now - Math.max(st.updatedAt, s.host.lastUpdate) > staleAfter,
        }))
        .sort((a, b) => a.plugin.localeCompare(b.plugin)),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
  ctx.out.result({ hosts }, () =>
    ctx.out.table(hosts, [
      { header: 'HOST', value: (h) => h.name },
      { header: 'STATUS', value: (h) => (h.statusReason !== undefined ? `${h.status} (${h.statusReason})` : h.status) },
      { header: 'LAST UPDATE', value: (h) => h.lastUpdate },
      { header: 'PROVIDERS', value: (h) => h.providers },
      { header: 'INSTANCES', value: (h) => h.instances },
      { header: 'STATS (AGE)', value: (h) => h.stats.map((st) => `${st.plugin} ${age(st.ageMs)}${st.stale ? ' STALE' : ''}`).join(', ') },
    ]),
  );
}

/**
 * `ert usage [--host H]`: capacity, used and free per host and resource class. A `--host`
 * the store does not hold exits 2 naming it.
 * JSON: `{ usage: [{ host, resourceClass, capacity, used, free }] }`.
 */
export async function usageCommand(ctx: CommandContext, opts: { host?: string }): Promise<void> {
  const store = await ctx.store();
  const snapshots = await store.loadHosts(opts.host !== undefined ? [opts.host] : undefined);
  if (opts.host !== undefined && snapshots.length === 0) {
    throw unknownHost(opts.host, (await store.listHosts()).map((h) => h.name));
  }
  const usage = hostUsage(snapshots);
  ctx.out.result({ usage }, () =>
    ctx.out.table(usage, [
      { header: 'HOST', value: (u) => u.host },
      { header: 'CLASS', value: (u) => u.resourceClass },
      { header: 'CAPACITY', value: (u) => u.capacity },
      { header: 'USED', value: (u) => u.used },
      { header: 'FREE', value: (u) => u.free },
    ]),
  );
}

/**
 * `ert flavors`: the configured flavors.
 * JSON: `{ flavors: [{ name, vcpus, memoryMb, diskGb, extraSpecs }] }` (the contract's Flavor).
 */
export async function flavorsCommand(ctx: CommandContext): Promise<void> {
  const config = await ctx.config();
  const flavors = config.flavors;
  ctx.out.result({ flavors }, () =>
    ctx.out.table(flavors, [
      { header: 'NAME', value: (f) => f.name },
      { header: 'VCPUS', value: (f) => f.vcpus },
      { header: 'MEMORY_MB', value: (f) => f.memoryMb },
      { header: 'DISK_GB', value: (f) => f.diskGb },
      { header: 'EXTRA SPECS', value: (f) => Object.entries(f.extraSpecs).map(([k, v]) => `${k}=${v}`).join(' ') },
    ]),
  );
}
