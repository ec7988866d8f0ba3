import type { CommandContext } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';
import { hostUsage } from '../usage.js';

/**
 * `ert hosts`: every host in the store with status, last update, provider and instance
 * counts. JSON: `{ hosts: [{ name, status, lastUpdate, generation, providers, instances }] }`
 * (lastUpdate as an ISO 8601 string).
 */
export async function hostsCommand(ctx: CommandContext): Promise<void> {
  const store = await ctx.store();
  const snapshots = await store.loadHosts();
  const hosts = snapshots
    .map((s) => ({
      name: s.host.name,
      status: s.host.status,
      lastUpdate: new Date(s.host.lastUpdate).toISOString(),
      generation: s.host.generation,
      providers: s.providers.length,
      instances: s.instances.length,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
  ctx.out.result({ hosts }, () =>
    ctx.out.table(hosts, [
      { header: 'HOST', value: (h) => h.name },
      { header: 'STATUS', value: (h) => h.status },
      { header: 'LAST UPDATE', value: (h) => h.lastUpdate },
      { header: 'PROVIDERS', value: (h) => h.providers },
      { header: 'INSTANCES', value: (h) => h.instances },
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
    throw new CliError(CliErrorCode.UNKNOWN_HOST, `no host ${opts.host} in the store`, { host: opts.host });
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
