import { withdrawInstance, type InstanceRecord, type InstanceState } from '@ert/store';
import { CliError, CliErrorCode } from '../errors.js';
import { unknownHost, type CommandContext } from '../context.js';

const STATES: readonly InstanceState[] = ['scheduled', 'active', 'resizing', 'error', 'refused', 'expired'];

interface InstancesOptions {
  host?: string;
  state?: string;
}

/**
 * `ert instances [--host H] [--state S]`: the instance records in the store, with their host,
 * state (a reservation is `scheduled` until its host's tracker confirms it: `active`, or
 * `refused`, or `expired` when nobody did in time), flavor, and the reason of a refusal or
 * expiry. A `--host` the store does not hold (and no record names) exits 2 with the closest
 * names. JSON: `{ instances: [{ uuid, host, state, flavor, reason?, createdAt, updatedAt }] }`
 * (times as ISO 8601).
 */
export async function instancesCommand(ctx: CommandContext, opts: InstancesOptions): Promise<void> {
  if (opts.state !== undefined && !STATES.includes(opts.state as InstanceState)) {
    throw new CliError(CliErrorCode.USAGE, `--state must be one of ${STATES.join(', ')}, got "${opts.state}"`, { option: '--state', value: opts.state });
  }
  const config = await ctx.config();
  const store = await ctx.store(config);
  const records = await store.listInstances({ ...(opts.host !== undefined ? { host: opts.host } : {}), ...(opts.state !== undefined ? { state: opts.state as InstanceState } : {}) });
  // A --host the store does not know is a typo, not an empty list (as `ert usage --host`);
  // records kept for a host no longer in the store are still listed.
  if (opts.host !== undefined && records.length === 0 && !(await store.getHost(opts.host)) && (opts.state === undefined || (await store.listInstances({ host: opts.host })).length === 0)) {
    throw unknownHost(opts.host, (await store.listHosts()).map((h) => h.name));
  }
  const instances = records.map((r: InstanceRecord) => ({
    uuid: r.uuid,
    host: r.host,
    state: r.state,
    flavor: r.flavor.name,
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    createdAt: new Date(r.createdAt ?? 0).toISOString(),
    updatedAt: new Date(r.updatedAt ?? 0).toISOString(),
  }));
  ctx.out.result({ instances }, () =>
    ctx.out.table(instances, [
      { header: 'INSTANCE', value: (i) => i.uuid },
      { header: 'HOST', value: (i) => i.host },
      { header: 'STATE', value: (i) => i.state },
      { header: 'FLAVOR', value: (i) => i.flavor },
      { header: 'UPDATED', value: (i) => i.updatedAt },
      { header: 'REASON', value: (i) => i.reason ?? '' },
    ]),
  );
}

/**
 * `ert instance show UUID`: one instance record with its allocations (provider names) and its
 * plugins' assignments and holds. An unknown uuid is exit 2.
 * JSON: `{ instance: { uuid, host, state, flavor, reason?, createdAt, updatedAt, assignments,
 * cpus?, units?, pools?, allocations: [{ provider, providerName, resourceClass, amount }] } }`.
 */
export async function instanceShowCommand(ctx: CommandContext, uuid: string): Promise<void> {
  const store = await ctx.store();
  const record = await store.getInstance(uuid);
  if (!record) throw new CliError(CliErrorCode.UNKNOWN_INSTANCE, `no instance ${uuid} in the store`, { instance: uuid });
  const { allocations } = await store.getAllocations(uuid);
  const names = new Map<string, string>();
  for (const a of allocations) if (!names.has(a.providerUuid)) names.set(a.providerUuid, (await store.getProvider(a.providerUuid))?.name ?? a.providerUuid);
  const instance = {
    uuid: record.uuid,
    host: record.host,
    state: record.state,
    flavor: record.flavor.name,
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
    createdAt: new Date(record.createdAt ?? 0).toISOString(),
    updatedAt: new Date(record.updatedAt ?? 0).toISOString(),
    assignments: record.assignments,
    ...(record.cpus ? { cpus: record.cpus } : {}),
    ...(record.units ? { units: record.units } : {}),
    ...(record.pools ? { pools: record.pools } : {}),
    ...(record.flavor.requestGroups ? { requestGroups: record.flavor.requestGroups } : {}),
    allocations: allocations.map((a) => ({ provider: a.providerUuid, providerName: names.get(a.providerUuid)!, resourceClass: a.resourceClass, amount: a.amount })),
  };
  ctx.out.result({ instance }, () =>
    [
      `instance ${instance.uuid}: ${instance.state} on ${instance.host} (${instance.flavor})${instance.reason ? `: ${instance.reason}` : ''}`,
      ...instance.allocations.map((a) => `  ${a.providerName}  ${a.resourceClass}  ${a.amount}`),
      ...Object.entries(instance.assignments).map(([plugin, value]) => `  ${plugin}: ${JSON.stringify(value)}`),
      ...(instance.cpus ? [`  pinned CPUs: ${instance.cpus.join(',')}`] : []),
      ...(instance.requestGroups ?? []).map((g) => `  request group ${g.requester}: ${Object.entries(g.resources).map(([c, n]) => `${c}=${n}`).join(' ')} on ${g.provider === undefined ? '(not placed)' : (names.get(g.provider) ?? g.provider)}`),
      '',
    ].join('\n'),
  );
}

/**
 * `ert instance delete UUID`: remove a reservation (`scheduled`, its allocations released) or an
 * ended record (`refused`, `expired`) in one store write (store.withdrawInstance). An instance
 * its host's tracker holds (`active`, `resizing`, `error`) is exit 2 pointing at `ert release`;
 * an unknown uuid is exit 2. JSON: `{ instance, deleted: true }`.
 */
export async function instanceDeleteCommand(ctx: CommandContext, uuid: string): Promise<void> {
  const store = await ctx.store();
  const withdrawal = await withdrawInstance(store, uuid);
  if (withdrawal.outcome === 'unknown') throw new CliError(CliErrorCode.UNKNOWN_INSTANCE, `no instance ${uuid} in the store`, { instance: uuid });
  if (withdrawal.outcome === 'held') {
    throw new CliError(
      CliErrorCode.USAGE,
      `instance ${uuid} is ${withdrawal.record.state} on host ${withdrawal.record.host}: its host's tracker releases it (ert release ${uuid} --root <that host's root>)`,
      { instance: uuid, state: withdrawal.record.state, host: withdrawal.record.host },
    );
  }
  ctx.out.result({ instance: uuid, deleted: true }, () => `deleted instance ${uuid}\n`);
}
