import { randomUUID } from 'node:crypto';
import { capacityOf, isValidResourceClass } from '@ert/plugin-api';
import { availabilityZonesOf } from '@ert/placement';
import { TRACKER_OWNER, isStoreConflict, type AggregateRecord, type HostRecord, type SchemaStatus, type Store } from '@ert/store';
import { checkTraitName, describeConnection, unknownHost, uuidOption, type CommandContext } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';

/*
 * The operator's hands on the fleet (issue 14, "host and fleet lifecycle"): disable and enable
 * a host, aggregates and their metadata (what `aggregate_instance_extra_specs` flavors such as
 * the starter's ssd.medium match), and the store's schema and size. Aggregates are Placement's:
 * a set of providers; a host is in an aggregate when its root provider is.
 */

/**
 * `ert host disable HOST [--reason R]`: the scheduler skips the host (the `status` filter);
 * its instances stay, its tracker keeps reporting (a disabled host stays disabled across its
 * syncs). JSON: `{ host, status: "disabled", reason }`.
 */
export async function hostDisableCommand(ctx: CommandContext, name: string, opts: { reason?: string }): Promise<void> {
  const store = await ctx.store();
  await knownHost(store, name);
  await store.setHostStatus(name, 'disabled', opts.reason);
  ctx.out.result({ host: name, status: 'disabled', reason: opts.reason ?? null }, () => `disabled host ${name}${opts.reason ? ` (${opts.reason})` : ''}: the scheduler skips it; its instances stay\n`);
}

/**
 * `ert host enable HOST`: the host is `up` again (stale again at once if its tracker does not
 * report within tracker.staleAfter). JSON: `{ host, status: "up" }`.
 */
export async function hostEnableCommand(ctx: CommandContext, name: string): Promise<void> {
  const store = await ctx.store();
  await knownHost(store, name);
  await store.setHostStatus(name, 'up');
  ctx.out.result({ host: name, status: 'up' }, () => `enabled host ${name}\n`);
}

async function knownHost(store: Store, name: string): Promise<void> {
  if (!(await store.getHost(name))) throw unknownHost(name, (await store.listHosts()).map((h) => h.name));
}

/** An aggregate by name or uuid; a usage error naming it (and the known names) when there is none. */
async function aggregateOf(store: Store, ref: string): Promise<AggregateRecord & { providers: string[] }> {
  const all = await store.listAggregates();
  const found = all.find((a) => a.uuid === ref) ?? all.find((a) => a.name === ref);
  if (found) return found;
  const names = all.map((a) => a.name ?? a.uuid);
  throw new CliError(CliErrorCode.USAGE, `no aggregate ${JSON.stringify(ref)} in the store${names.length > 0 ? `; known: ${names.slice(0, 10).join(', ')}` : ''}`, { aggregate: ref });
}

/** `k=v` pairs into metadata; a pair without `=` is a usage error naming it. */
function parseMetadata(pairs: readonly string[]): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) throw new CliError(CliErrorCode.USAGE, `metadata must be key=value, got ${JSON.stringify(pair)}`, { value: pair });
    metadata[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return metadata;
}

/**
 * `ert aggregate create NAME [--uuid U] [--metadata k=v ...]`: a new aggregate (a name no
 * other aggregate has). JSON: the aggregate `{ uuid, name, metadata, hosts: [] }`.
 */
export async function aggregateCreateCommand(ctx: CommandContext, name: string, opts: { uuid?: string; metadata?: string[] }): Promise<void> {
  // Checked before the store is opened: a refused command writes nothing.
  const uuid = opts.uuid !== undefined ? await uuidOption('--uuid', opts.uuid) : randomUUID();
  const store = await ctx.store();
  const existing = await store.listAggregates();
  if (existing.some((a) => a.name === name)) throw new CliError(CliErrorCode.USAGE, `an aggregate named ${JSON.stringify(name)} exists already`, { aggregate: name });
  if (existing.some((a) => a.uuid === uuid)) throw new CliError(CliErrorCode.USAGE, `an aggregate with uuid ${uuid} exists already`, { aggregate: uuid });
  const metadata = parseMetadata(opts.metadata ?? []);
  await store.upsertAggregate({ uuid, name, metadata });
  ctx.out.result({ uuid, name, metadata, hosts: [] }, () => `created aggregate ${name} (${uuid})${Object.keys(metadata).length > 0 ? ` with ${formatMetadata(metadata)}` : ''}\n`);
}

function formatMetadata(metadata: Record<string, string>): string {
  return Object.entries(metadata)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

/**
 * `ert aggregate list`: every aggregate with its metadata and the hosts whose root provider is
 * in it. JSON: `{ aggregates: [{ uuid, name, metadata, hosts }] }`.
 */
export async function aggregateListCommand(ctx: CommandContext): Promise<void> {
  const store = await ctx.store();
  const [aggregates, hosts] = await Promise.all([store.listAggregates(), store.listHosts()]);
  const hostOfRoot = new Map(hosts.map((h) => [h.rootProviderUuid, h.name]));
  const list = aggregates.map((a) => ({
    uuid: a.uuid,
    name: a.name ?? null,
    metadata: a.metadata,
    hosts: a.providers.flatMap((p) => hostOfRoot.get(p) ?? []).sort(),
  }));
  ctx.out.result({ aggregates: list }, () =>
    ctx.out.table(list, [
      { header: 'NAME', value: (a) => a.name ?? '-' },
      { header: 'UUID', value: (a) => a.uuid },
      { header: 'METADATA', value: (a) => formatMetadata(a.metadata) || '-' },
      { header: 'HOSTS', value: (a) => a.hosts.join(', ') || '-' },
    ]),
  );
}

/**
 * `ert az list`: the availability zones (aggregates with `availability_zone` metadata, as
 * Nova's) with their hosts, and the hosts in no zone (docs/request-filters.md).
 * JSON: `{ zones: [{ name, aggregates, hosts }], hostsWithoutZone }`.
 */
export async function azListCommand(ctx: CommandContext): Promise<void> {
  const store = await ctx.store();
  const [aggregates, hosts] = await Promise.all([store.listAggregates(), store.listHosts()]);
  const zones = availabilityZonesOf(aggregates, hosts);
  const names = new Map(aggregates.map((a) => [a.uuid, a.name ?? a.uuid]));
  ctx.out.result(zones, () => {
    const rows = [
      ...zones.zones.map((z) => ({ zone: z.name, aggregates: z.aggregates.map((a) => names.get(a) ?? a).join(', '), hosts: z.hosts.join(', ') || '-' })),
      ...(zones.hostsWithoutZone.length > 0 ? [{ zone: '(no zone)', aggregates: '-', hosts: zones.hostsWithoutZone.join(', ') }] : []),
    ];
    return ctx.out.table(rows, [
      { header: 'ZONE', value: (r) => r.zone },
      { header: 'AGGREGATES', value: (r) => r.aggregates },
      { header: 'HOSTS', value: (r) => r.hosts },
    ]);
  });
}

/**
 * `ert aggregate add-host AGG HOST` / `remove-host AGG HOST`: the host's root provider joins
 * or leaves the aggregate (a provider generation check; a concurrent change is retried).
 * JSON: `{ aggregate, host, aggregates }` (the root provider's aggregates after).
 */
export async function aggregateMembershipCommand(ctx: CommandContext, change: 'add' | 'remove', ref: string, hostName: string): Promise<void> {
  const store = await ctx.store();
  const aggregate = await aggregateOf(store, ref);
  const host = await store.getHost(hostName);
  if (!host) throw unknownHost(hostName, (await store.listHosts()).map((h) => h.name));
  let after: string[] = [];
  for (let attempt = 1; ; attempt++) {
    const provider = await store.getProvider(host.rootProviderUuid);
    const current = await store.getAggregates(host.rootProviderUuid);
    after = change === 'add' ? [...new Set([...current, aggregate.uuid])] : current.filter((a) => a !== aggregate.uuid);
    try {
      await store.setAggregates(host.rootProviderUuid, provider!.generation, after);
      break;
    } catch (err) {
      if (attempt >= 5 || !isStoreConflict(err)) throw err;
    }
  }
  const label = aggregate.name ?? aggregate.uuid;
  ctx.out.result({ aggregate: aggregate.uuid, host: hostName, aggregates: after }, () => `${change === 'add' ? 'added' : 'removed'} host ${hostName} ${change === 'add' ? 'to' : 'from'} aggregate ${label}\n`);
}

/**
 * `ert aggregate set-metadata AGG k=v ... [--unset k ...]`: merge metadata into the aggregate
 * (and remove `--unset` keys). JSON: the aggregate `{ uuid, name, metadata }`.
 */
export async function aggregateSetMetadataCommand(ctx: CommandContext, ref: string, pairs: string[], opts: { unset?: string[] }): Promise<void> {
  const store = await ctx.store();
  const aggregate = await aggregateOf(store, ref);
  const metadata = { ...aggregate.metadata, ...parseMetadata(pairs) };
  for (const key of opts.unset ?? []) delete metadata[key];
  await store.upsertAggregate({ uuid: aggregate.uuid, ...(aggregate.name !== undefined ? { name: aggregate.name } : {}), metadata });
  ctx.out.result({ uuid: aggregate.uuid, name: aggregate.name ?? null, metadata }, () => `aggregate ${aggregate.name ?? aggregate.uuid}: ${formatMetadata(metadata) || 'no metadata'}\n`);
}

/**
 * `ert db status`: the store's kind and place, its schema version against this ert's, and how
 * many hosts, providers and instances it holds. Reads only (a missing store says so, exit 1).
 * JSON: `{ client, connection, applied, latest, pending, unknown, hosts, providers, instances,
 * aggregates }` (the counts null when the schema is not this ert's).
 */
export async function dbStatusCommand(ctx: CommandContext): Promise<void> {
  const config = await ctx.config();
  // Opened without the schema check (a store with pending migrations is what this reports),
  // but reached: one that cannot be is ERT_CLI_STORE_UNAVAILABLE naming it, as for every command.
  const store = await ctx.store(config, { anySchema: true });
  let counts: { hosts: number; providers: number; instances: number; aggregates: number } | null = null;
  const schema: SchemaStatus = await store.schemaStatus();
  if (!schema.exists || schema.applied.length === 0) await store.checkSchema(); // ERT_STORE_MISSING, naming the store
  if (schema.pending.length === 0 && schema.unknown.length === 0) {
    const [hosts, providers, instances, aggregates] = await Promise.all([store.listHosts(), store.listProviders(), store.listInstances(), store.listAggregates()]);
    counts = { hosts: hosts.length, providers: providers.length, instances: instances.length, aggregates: aggregates.length };
  }
  const status = {
    client: config.store.client,
    connection: describeConnection(config.store),
    applied: schema.applied.length,
    latest: schema.applied[schema.applied.length - 1] ?? null,
    pending: schema.pending,
    unknown: schema.unknown,
    ...(counts ?? { hosts: null, providers: null, instances: null, aggregates: null }),
  };
  ctx.out.result(status, () =>
    [
      `store: ${status.client} ${status.connection}`,
      `schema: ${status.latest ?? 'none'} (${status.applied} migrations applied${status.pending.length > 0 ? `; pending: ${status.pending.join(', ')} (run ert db migrate)` : ', none pending'}${status.unknown.length > 0 ? `; unknown to this ert: ${status.unknown.join(', ')}` : ''})`,
      counts ? `hosts ${counts.hosts}, providers ${counts.providers}, instances ${counts.instances}, aggregates ${counts.aggregates}` : 'contents: not read (the schema is not this ert\'s)',
      '',
    ].join('\n'),
  );
}

/**
 * `ert trait add|remove TRAIT (--host H | --provider NAME)`: an operator's trait on a host's
 * root provider or on a named provider (Placement's rule: CUSTOM_ or a standard trait). The
 * tracker keeps traits other writers set (issue 20, ownership): an added trait survives the
 * host's syncs; removing a trait the host's plugins report lasts until its next sync, which
 * says so. Generation-checked, retried on a concurrent change.
 * JSON: `{ provider, trait, traits, reportedByTracker }` (the provider's traits after).
 */
export async function traitCommand(ctx: CommandContext, change: 'add' | 'remove', trait: string, opts: { host?: string; provider?: string }): Promise<void> {
  if ((opts.host === undefined) === (opts.provider === undefined)) {
    throw new CliError(CliErrorCode.USAGE, `trait ${change}: give exactly one of --host and --provider`, { host: opts.host, provider: opts.provider });
  }
  await checkTraitName(trait);
  const store = await ctx.store();
  let uuid: string;
  let label: string;
  if (opts.host !== undefined) {
    const host = await store.getHost(opts.host);
    if (!host) throw unknownHost(opts.host, (await store.listHosts()).map((h) => h.name));
    uuid = host.rootProviderUuid;
    label = opts.host;
  } else {
    const provider = await store.getProviderByName(opts.provider!);
    if (!provider) throw new CliError(CliErrorCode.USAGE, `no provider named ${JSON.stringify(opts.provider)} in the store`, { provider: opts.provider });
    uuid = provider.uuid;
    label = provider.name;
  }
  // Read before the write: removing the tracker's trait removes its row too.
  const reportedByTracker = (await store.getTraits(uuid, { owner: TRACKER_OWNER })).includes(trait);
  let traits: string[] = [];
  for (let attempt = 1; ; attempt++) {
    const provider = await store.getProvider(uuid);
    const current = await store.getTraits(uuid);
    traits = change === 'add' ? [...new Set([...current, trait])].sort() : current.filter((t) => t !== trait);
    try {
      await store.setTraits(uuid, provider!.generation, traits);
      break;
    } catch (err) {
      if (attempt >= 5 || !isStoreConflict(err)) throw err;
    }
  }
  const note = change === 'remove' && reportedByTracker ? ' (the host\u2019s plugins report it: its next sync adds it again)' : '';
  ctx.out.result({ provider: label, trait, traits, reportedByTracker }, () => `${change === 'add' ? 'added' : 'removed'} trait ${trait} ${change === 'add' ? 'to' : 'from'} ${label}${note}\n`);
}

/**
 * `ert host delete HOST [--force]`: remove the host on purpose, its whole provider tree,
 * stats and records (store.deleteHost, one transaction). Refused (exit 1, nothing removed)
 * while it has instances or allocations, unless --force, which ends them. Says what it
 * removed that other writers (the Placement API, the CLI) had put in the tree. A tracker still
 * running there registers the host again at its next sync.
 * JSON: the deletion `{ host, providers: [{ uuid, name, owner }], instances, consumers }`.
 */
export async function hostDeleteCommand(ctx: CommandContext, name: string, opts: { force?: boolean }): Promise<void> {
  const store = await ctx.store();
  await knownHost(store, name);
  const deletion = await store.deleteHost(name, { force: opts.force === true });
  const others = deletion.providers.filter((p) => p.owner !== TRACKER_OWNER);
  ctx.out.result(deletion, () =>
    [
      `deleted host ${name}: ${deletion.providers.length} provider(s)${deletion.instances.length > 0 ? `, ${deletion.instances.length} instance(s)` : ''}${deletion.consumers.length > 0 ? `, the allocations of ${deletion.consumers.length} consumer(s)` : ''}`,
      ...(others.length > 0 ? [`  written by others (not the host's tracker): ${others.map((p) => p.name).join(', ')}`] : []),
      '',
    ].join('\n'),
  );
}

/** The hosts whose root provider is in the aggregate, by name, sorted. */
async function hostsOf(store: Store, aggregate: AggregateRecord & { providers: string[] }): Promise<HostRecord[]> {
  const members = new Set(aggregate.providers);
  return (await store.listHosts()).filter((h) => members.has(h.rootProviderUuid)).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Read, change and write one provider's state under its generation, retried on a concurrent change. */
async function retried<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (attempt >= 5 || !isStoreConflict(err)) throw err;
    }
  }
}

/**
 * `ert aggregate set-traits AGG TRAIT... [--remove]`: add the traits to the root provider of
 * every host of the aggregate (or, with --remove, take them off), keeping each provider's other
 * traits. As `ert trait add`, these are an outside writer's traits: they survive the hosts'
 * syncs (docs/ownership.md); one the host's plugins report stays the tracker's, and removing it
 * lasts until the host's next sync. Applies to the hosts in the aggregate now (a host added
 * later does not get them). JSON: `{ aggregate, traits, removed, hosts: [{ host, traits }] }`.
 */
export async function aggregateSetTraitsCommand(ctx: CommandContext, ref: string, traits: string[], opts: { remove?: boolean }): Promise<void> {
  for (const trait of traits) {
    await checkTraitName(trait);
  }
  const store = await ctx.store();
  const aggregate = await aggregateOf(store, ref);
  const hosts = await hostsOf(store, aggregate);
  const results: Array<{ host: string; traits: string[] }> = [];
  for (const host of hosts) {
    const uuid = host.rootProviderUuid;
    const after = await retried(async () => {
      const provider = await store.getProvider(uuid);
      const current = await store.getTraits(uuid);
      const next = opts.remove ? current.filter((t) => !traits.includes(t)) : [...new Set([...current, ...traits])].sort();
      await store.setTraits(uuid, provider!.generation, next);
      return next;
    });
    results.push({ host: host.name, traits: after });
  }
  const label = aggregate.name ?? aggregate.uuid;
  ctx.out.result({ aggregate: aggregate.uuid, traits, removed: opts.remove === true, hosts: results }, () =>
    hosts.length === 0
      ? `aggregate ${label} has no hosts: nothing changed\n`
      : `${opts.remove ? 'removed' : 'added'} ${traits.join(' ')} ${opts.remove ? 'from' : 'to'} ${hosts.length} host(s) of aggregate ${label}: ${results.map((r) => r.host).join(', ')}\n`,
  );
}

/**
 * `ert aggregate set-ratio AGG CLASS RATIO`: the allocation ratio of CLASS on every provider,
 * in the tree of every host of the aggregate, that has CLASS (Placement's inventory write,
 * generation-checked, retried). It survives the hosts' syncs unless a host's config sets that
 * ratio explicitly (docs/ownership.md: vcpu's `allocationRatio`, memory's and disk's). A ratio
 * of 0 gives capacity 0: nothing new of CLASS is placed there. A ratio that would put some
 * provider's capacity below its usage is refused before anything is written.
 * JSON: `{ aggregate, resourceClass, allocationRatio, providers: [{ host, provider, previous }] }`.
 */
export async function aggregateSetRatioCommand(ctx: CommandContext, ref: string, resourceClass: string, ratioText: string): Promise<void> {
  if (!isValidResourceClass(resourceClass)) throw new CliError(CliErrorCode.USAGE, `${JSON.stringify(resourceClass)} is not a resource class (a standard class or CUSTOM_...)`, { resourceClass });
  const ratio = Number(ratioText);
  // 0 is Placement's (from 1.26) and the store's: capacity 0, nothing new of the class. Where
  // some of it is allocated, the usage check below refuses it, as any ratio below usage.
  if (!/^\d+(\.\d+)?$/.test(ratioText.trim()) || !Number.isFinite(ratio) || ratio < 0) {
    throw new CliError(CliErrorCode.USAGE, `the allocation ratio must be a number >= 0, got ${JSON.stringify(ratioText)}`, { ratio: ratioText });
  }
  const store = await ctx.store();
  const aggregate = await aggregateOf(store, ref);
  const targets: Array<{ host: string; uuid: string; name: string; previous: number }> = [];
  for (const host of await hostsOf(store, aggregate)) {
    for (const provider of await store.listProviders({ rootUuid: host.rootProviderUuid })) {
      const { inventories } = await store.getInventories(provider.uuid);
      const inventory = inventories[resourceClass];
      if (!inventory) continue;
      const used = (await store.getUsages(provider.uuid))[resourceClass] ?? 0;
      const capacity = capacityOf({ ...inventory, allocationRatio: ratio });
      if (capacity < used) {
        throw new CliError(CliErrorCode.USAGE, `ratio ${ratio} would leave ${resourceClass} of ${provider.name} (host ${host.name}) a capacity of ${capacity}, below its usage ${used}; nothing written`, {
          host: host.name,
          provider: provider.name,
          resourceClass,
          capacity,
          used,
        });
      }
      targets.push({ host: host.name, uuid: provider.uuid, name: provider.name, previous: inventory.allocationRatio });
    }
  }
  for (const target of targets) {
    await retried(async () => {
      const { generation, inventories } = await store.getInventories(target.uuid);
      const inventory = inventories[resourceClass];
      if (!inventory) return; // removed meanwhile
      await store.setInventories(target.uuid, generation, { ...inventories, [resourceClass]: { ...inventory, allocationRatio: ratio } });
    });
  }
  const label = aggregate.name ?? aggregate.uuid;
  ctx.out.result(
    { aggregate: aggregate.uuid, resourceClass, allocationRatio: ratio, providers: targets.map((t) => ({ host: t.host, provider: t.name, previous: t.previous })) },
    () =>
      targets.length === 0
        ? `no provider of aggregate ${label}'s hosts has ${resourceClass}: nothing changed\n`
        : `${resourceClass} allocation ratio ${ratio} on ${targets.length} provider(s) of aggregate ${label}: ${targets.map((t) => `${t.name} (was ${t.previous})`).join(', ')}\n`,
  );
}
