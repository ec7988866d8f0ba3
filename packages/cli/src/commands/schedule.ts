import { createScheduler } from '@ert/scheduler';
import { randomUUID } from 'node:crypto';
import { isErtError } from '@ert/plugin-api';
import { parseDuration } from '@ert/core';
import { CliError, CliErrorCode } from '../errors.js';
import { findFlavor, inFlavor, positiveInt, withImageProperties, withRequestGroups, type CommandContext } from '../context.js';
import { renderExplanation } from '../render.js';

interface ScheduleOptions {
  flavor: string;
  count?: string;
  explain?: boolean;
  wait?: boolean;
  confirmTimeout?: string;
  availabilityZone?: string;
  forbidAggregate?: string[];
  project?: string;
  imageProperty?: string[];
  requestGroup?: string[];
}

/**
 * `ert schedule`: place `--count` instances of a flavor on the fleet in the store (all or
 * none), claiming each in the store. `--explain` instead reports, without placing, which
 * filter removed each host and the weights of the survivors.
 * JSON: `{ flavor, selections: [{ instanceUuid, host, allocations, alternates }] }`, or
 * with --explain the scheduler's explanation. No valid host exits 3; the explanation is in
 * the error's details (and printed as a table without --json).
 * With `--wait`, each reservation is confirmed by its host's tracker (which asks its plugins)
 * before the command succeeds: a host that refuses (or does not confirm within
 * `--confirm-timeout`, default `reservations.timeout`) is replaced by another; the
 * selections then carry `state: "active"` and the hosts that refused (`refusals`).
 * `--availability-zone`, `--forbid-aggregate` and `--project` (the instances' project, default
 * `ert-cli`) are what the request filters read (docs/request-filters.md). `--image-property
 * KEY=VALUE` (repeatable) gives the image's properties, merged with the flavor's extra specs
 * (docs/images.md); the reservations keep them for the hosts' trackers. `--request-group
 * REQUESTER:CLASS=N[;required=T]` (repeatable) adds a port's or device's request group, claimed
 * with the flavor on one provider of the chosen host (docs/request-groups.md); each selection
 * then names the provider serving each requester (`mappings`).
 */
export async function scheduleCommand(ctx: CommandContext, opts: ScheduleOptions): Promise<void> {
  const config = await ctx.config();
  const flavor = withRequestGroups(withImageProperties(findFlavor(config, opts.flavor), opts.imageProperty), opts.requestGroup);
  const count = positiveInt('--count', opts.count, 1);
  let confirmTimeout: number | undefined;
  if (opts.confirmTimeout !== undefined) {
    try {
      confirmTimeout = parseDuration(opts.confirmTimeout);
    } catch {
      throw new CliError(CliErrorCode.USAGE, `--confirm-timeout must be a duration (500ms, 60s, 2m), got "${opts.confirmTimeout}"`, { option: '--confirm-timeout', value: opts.confirmTimeout });
    }
  }
  // A zone or forbidden aggregate that no configured request filter reads is the operator's to fix (exit 2).
  for (const [option, given, filter] of [
    ['--availability-zone', opts.availabilityZone !== undefined, 'availability-zone'],
    ['--forbid-aggregate', (opts.forbidAggregate?.length ?? 0) > 0, 'forbidden-aggregates'],
  ] as const) {
    if (given && !config.scheduler.requestFilters.includes(filter)) {
      throw new CliError(CliErrorCode.USAGE, `${option} needs the request filter ${filter}, which scheduler.requestFilters does not list (configured: ${config.scheduler.requestFilters.join(', ') || 'none'})`, { option });
    }
  }
  const store = await ctx.store(config);
  const scheduler = await createScheduler({ config, store, logger: await ctx.logger() });
  try {
    const instances = Array.from({ length: count }, () => ({ uuid: randomUUID(), projectId: opts.project ?? 'ert-cli', userId: 'ert-cli' }));
    const scope = {
      ...(opts.availabilityZone !== undefined ? { availabilityZone: opts.availabilityZone } : {}),
      ...(opts.forbidAggregate !== undefined ? { forbiddenAggregates: opts.forbidAggregate } : {}),
    };
    if (opts.explain) {
      const explanation = await scheduler.explain({ flavor, instances, ...scope }).catch((err: unknown) => {
        throw inFlavor(err, config, flavor);
      });
      ctx.out.result(explanation, () => renderExplanation(ctx.out, explanation));
      return;
    }
    try {
      const selections = await scheduler.select({ flavor, instances, ...scope }, opts.wait ? { awaitConfirmation: true, ...(confirmTimeout !== undefined ? { confirmTimeout } : {}) } : {});
      ctx.out.result({ flavor: flavor.name, selections }, () =>
        ctx.out.table(selections, [
          { header: 'INSTANCE', value: (s) => s.instanceUuid },
          { header: 'HOST', value: (s) => s.host },
          { header: 'ALLOCATIONS', value: (s) => s.allocations.map((a) => `${a.resourceClass}=${a.amount}`).join(' ') },
          { header: 'ALTERNATES', value: (s) => s.alternates.join(',') },
          ...(flavor.requestGroups ? [{ header: 'GROUPS', value: (s: (typeof selections)[number]) => Object.entries(s.mappings ?? {}).map(([requester, providers]) => `${requester}@${providers.join(',')}`).join(' ') }] : []),
          ...(opts.wait ? [{ header: 'REFUSED BY', value: (s: (typeof selections)[number]) => (s.refusals ?? []).map((r) => `${r.host} (${r.state}: ${r.reason})`).join('; ') }] : []),
        ]),
      );
    } catch (err) {
      if (!ctx.out.json && isErtError(err) && err.code === 'ERT_SCHEDULER_NO_VALID_HOST' && err.details.summary) {
        ctx.io.stdout.write(renderExplanation(ctx.out, err.details.summary as never));
      }
      throw inFlavor(err, config, flavor);
    }
  } finally {
    await scheduler.close?.();
  }
}
