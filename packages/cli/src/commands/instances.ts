import type { InstanceRecord, InstanceState } from '@ert/store';
import { CliError, CliErrorCode } from '../errors.js';
import type { CommandContext } from '../context.js';

const STATES: readonly InstanceState[] = ['scheduled', 'active', 'resizing', 'error', 'refused', 'expired'];

interface InstancesOptions {
  host?: string;
  state?: string;
}

/**
 * `ert instances [--host H] [--state S]`: the instance records in the store, with their host,
 * state (a reservation is `scheduled` until its host's tracker confirms it: `active`, or
 * `refused`, or `expired` when nobody did in time), flavor, and the reason of a refusal or
 * expiry. JSON: `{ instances: [{ uuid, host, state, flavor, reason?, createdAt, updatedAt }] }`
 * (times as ISO 8601).
 */
export async function instancesCommand(ctx: CommandContext, opts: InstancesOptions): Promise<void> {
  if (opts.state !== undefined && !STATES.includes(opts.state as InstanceState)) {
    throw new CliError(CliErrorCode.USAGE, `--state must be one of ${STATES.join(', ')}, got "${opts.state}"`, { option: '--state', value: opts.state });
  }
  const config = await ctx.config();
  const store = await ctx.store(config);
  const records = await store.listInstances({ ...(opts.host !== undefined ? { host: opts.host } : {}), ...(opts.state !== undefined ? { state: opts.state as InstanceState } : {}) });
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
