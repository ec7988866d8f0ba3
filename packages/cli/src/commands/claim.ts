import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { createTracker, type Problem } from '@ert/tracker';
import type { JsonValue } from '@ert/plugin-api';
import type { Allocation, Store } from '@ert/store';
import { checkComputeFlavor, checkRoot, findFlavor, parseRequestGroupOption, unknownHost, uuidOption, withImageProperties, withRequestGroups, type CommandContext } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';

interface ClaimOptions {
  flavor: string;
  uuid?: string;
  host?: string;
  root?: string;
  project: string;
  user: string;
  imageProperty?: string[];
  requestGroup?: string[];
}

/** Each problem's message (a hook failure's names the plugin and the hook), joined for the one-line failure. */
function describeProblems(problems: readonly Problem[]): string {
  return problems.map((p) => p.message).join('; ');
}

/** An allocation with the name of its provider (`xeon-1_llc_0`), for people. */
interface NamedAllocation extends Allocation {
  providerName: string;
}

/** The allocations with their providers' names, read from the store (the uuid when a provider is gone). */
async function nameProviders(store: Store, allocations: readonly Allocation[]): Promise<NamedAllocation[]> {
  const names = new Map<string, string>();
  for (const uuid of new Set(allocations.map((a) => a.providerUuid))) names.set(uuid, (await store.getProvider(uuid))?.name ?? uuid);
  return allocations.map((a) => ({ ...a, providerName: names.get(a.providerUuid)! }));
}

/** What a plugin assigned, on one line: `{"domain":0,"ways":[0,1,2,3]}`; a string as it is. */
function describeAssignment(value: JsonValue): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * `ert claim`: claim one instance on this compute host through the tracker: every
 * resource plugin tests it, then the allocation is written atomically. A refusal exits 3
 * with every reason (plugin: reason) and writes nothing. A claim that was written but
 * followed by plugin hook failures (enforcement under `enforcementFailure: report`,
 * addInstance, stats) exits 4 with ERT_CLI_CLAIMED_WITH_PROBLEMS naming each problem; the
 * instance stays claimed. Exit 0 only when nothing went wrong.
 * A flavor whose extra specs do not parse is a configuration error (ERT_SPEC_*, exit 2,
 * naming the flavor and its file), found before the store is opened. The result names each
 * allocation's provider and what each plugin assigned (CPUs, cache ways, pages).
 * `--request-group` (repeatable) claims ports' or devices' request groups with the flavor
 * (docs/request-groups.md).
 * JSON: `{ instance, host, flavor, allocations: [{ providerUuid, providerName, resourceClass, amount }], assignments: { <plugin>: <value> }, cpus? }`.
 */
export async function claimCommand(ctx: CommandContext, opts: ClaimOptions): Promise<void> {
  const config = await ctx.config();
  const flavor = withRequestGroups(withImageProperties(findFlavor(config, opts.flavor), opts.imageProperty), opts.requestGroup);
  await checkComputeFlavor(config, flavor);
  const root = opts.root !== undefined ? await checkRoot(ctx.io, opts.root) : undefined;
  const uuid = opts.uuid !== undefined ? await uuidOption('--uuid', opts.uuid) : randomUUID();
  // The plugins are loaded and checked (createTracker) before the store is opened or created.
  const tracker = await createTracker({ config, store: () => ctx.store(config, { create: true }), logger: await ctx.logger(), ...(root ? { root } : {}), ...(opts.host ? { hostName: opts.host } : {}) });
  try {
    const store = await ctx.store(config, { create: true });
    // The tracker registers the host it runs for; `--host` naming another host must name one
    // the store holds, or a typo would create a phantom host with this machine's resources.
    if (opts.host !== undefined && opts.host !== (config.tracker.hostName ?? hostname()) && !(await store.getHost(opts.host))) {
      const known = (await store.listHosts()).map((h) => h.name);
      throw unknownHost(opts.host, known, ' (a host joins the store with `ert host sync` run on it)');
    }
    await tracker.start();
    const result = await tracker.claim({ uuid, projectId: opts.project, userId: opts.user, flavor });
    if (!result.ok) {
      const reasons = result.reasons.map((r) => (r.plugin ? `${r.plugin}: ${r.reason}` : r.reason));
      throw new CliError(
        CliErrorCode.CLAIM_REJECTED,
        `claim of flavor ${flavor.name} on host ${tracker.hostName} rejected: ${reasons.join('; ')}`,
        { host: tracker.hostName, flavor: flavor.name, instance: uuid, reasons: result.reasons },
      );
    }
    const allocations = await nameProviders(store, result.allocations);
    if (result.problems.length > 0) {
      throw new CliError(
        CliErrorCode.CLAIMED_WITH_PROBLEMS,
        `claimed ${uuid} (${flavor.name}) on host ${tracker.hostName}, but ${result.problems.length} problem(s) followed: ${describeProblems(result.problems)}`,
        { instance: uuid, host: tracker.hostName, flavor: flavor.name, allocations, problems: result.problems },
      );
    }
    const assignments = result.record.assignments;
    const cpus = result.record.cpus;
    const assigned = Object.entries(assignments).map(([plugin, value]) => ({ plugin, value: describeAssignment(value) }));
    if (cpus !== undefined && cpus.length > 0) assigned.push({ plugin: '(pinned cpus)', value: cpus.join(',') });
    const requestGroups = result.record.flavor.requestGroups;
    ctx.out.result({ instance: uuid, host: tracker.hostName, flavor: flavor.name, allocations, assignments, ...(cpus === undefined ? {} : { cpus }), ...(requestGroups ? { requestGroups } : {}) }, () =>
      `claimed ${uuid} (${flavor.name}) on ${tracker.hostName}\n` +
      ctx.out.table(allocations, [
        { header: 'PROVIDER', value: (a) => a.providerName },
        { header: 'CLASS', value: (a) => a.resourceClass },
        { header: 'AMOUNT', value: (a) => a.amount },
      ]) +
      (assigned.length > 0
        ? ctx.out.table(assigned, [
            { header: 'PLUGIN', value: (a) => a.plugin },
            { header: 'ASSIGNED', value: (a) => a.value },
          ])
        : 'no plugin assigned anything (nothing pinned, no cache ways or pages)\n'),
    );
  } finally {
    await tracker.stop();
  }
}

/**
 * `ert release UUID`: release an instance on the host the store records it on, through
 * that host's tracker (plugins forget it, allocations are deleted). What is printed is what
 * the tracker reports: an unknown uuid, or an instance the host's tracker no longer has
 * (released meanwhile), exits 2 having released nothing; a release followed by plugin hook
 * failures (removeInstance, stats, enforcement) exits 4 with ERT_CLI_RELEASED_WITH_PROBLEMS
 * naming each problem (the allocations are gone). Exit 0 only when nothing went wrong.
 * JSON: `{ instance, host, released: true }`.
 */
export async function releaseCommand(ctx: CommandContext, uuid: string, opts: { root?: string }): Promise<void> {
  const config = await ctx.config();
  const root = opts.root !== undefined ? await checkRoot(ctx.io, opts.root) : undefined;
  const store = await ctx.store(config);
  const instance = await store.getInstance(uuid);
  if (!instance) throw new CliError(CliErrorCode.UNKNOWN_INSTANCE, `no instance ${uuid} in the store`, { instance: uuid });
  const tracker = await createTracker({ config, store, logger: await ctx.logger(), hostName: instance.host, ...(root ? { root } : {}) });
  let result;
  try {
    await tracker.start();
    result = await tracker.release(uuid);
  } finally {
    await tracker.stop();
  }
  if (!result.released) {
    throw new CliError(CliErrorCode.NOT_RELEASED, `instance ${uuid} is no longer recorded on host ${instance.host}; nothing was released`, { instance: uuid, host: instance.host });
  }
  if (result.problems.length > 0) {
    throw new CliError(
      CliErrorCode.RELEASED_WITH_PROBLEMS,
      `released ${uuid} on host ${instance.host}, but ${result.problems.length} problem(s) followed: ${describeProblems(result.problems)}`,
      { instance: uuid, host: instance.host, released: true, problems: result.problems },
    );
  }
  ctx.out.result({ instance: uuid, host: instance.host, released: result.released }, () => `released ${uuid} on ${instance.host}\n`);
}

/**
 * `ert instance attach UUID --request-group G` / `ert instance detach UUID --requester ID`:
 * extend or shrink a live instance's allocation in place (a hot-attached or detached port),
 * through the tracker of the host the store records it on (`Tracker.attach` / `detach`,
 * docs/request-groups.md): the host's plugins test the addition, the store checks capacity
 * and the consumer generation, all in one transaction. A refusal exits 3 naming every reason
 * and changes nothing; an unknown uuid exits 2; plugin hook failures after the write exit 4
 * (ERT_CLI_CLAIMED_WITH_PROBLEMS). JSON: `{ instance, host, allocations, requestGroups }`.
 */
export async function changeGroupsCommand(ctx: CommandContext, uuid: string, change: { attach: string } | { detach: string }, opts: { root?: string }): Promise<void> {
  const config = await ctx.config();
  const group = 'attach' in change ? parseRequestGroupOption(change.attach) : undefined;
  const root = opts.root !== undefined ? await checkRoot(ctx.io, opts.root) : undefined;
  const store = await ctx.store(config);
  const record = await store.getInstance(uuid);
  if (!record) throw new CliError(CliErrorCode.UNKNOWN_INSTANCE, `no instance ${uuid} in the store`, { instance: uuid });
  const tracker = await createTracker({ config, store, logger: await ctx.logger(), hostName: record.host, ...(root ? { root } : {}) });
  const verb = group ? `attach of request group ${group.requester} to` : `detach of request group ${(change as { detach: string }).detach} from`;
  try {
    await tracker.start();
    const result = group ? await tracker.attach(uuid, group) : await tracker.detach(uuid, (change as { detach: string }).detach);
    if (!result.ok) {
      const reasons = result.reasons.map((r) => (r.plugin ? `${r.plugin}: ${r.reason}` : r.reason));
      throw new CliError(CliErrorCode.CLAIM_REJECTED, `${verb} instance ${uuid} on host ${record.host} refused: ${reasons.join('; ')}`, { instance: uuid, host: record.host, reasons: result.reasons });
    }
    const allocations = await nameProviders(store, result.allocations);
    const requestGroups = result.record.flavor.requestGroups ?? [];
    if (result.problems.length > 0) {
      throw new CliError(CliErrorCode.CLAIMED_WITH_PROBLEMS, `${verb} instance ${uuid} done, but ${result.problems.length} problem(s) followed: ${describeProblems(result.problems)}`, {
        instance: uuid,
        host: record.host,
        allocations,
        requestGroups,
        problems: result.problems,
      });
    }
    const providerName = (provider: string | undefined) => allocations.find((a) => a.providerUuid === provider)?.providerName ?? provider ?? '';
    ctx.out.result({ instance: uuid, host: record.host, allocations, requestGroups }, () =>
      `${group ? 'attached' : 'detached'} request group ${group ? group.requester : (change as { detach: string }).detach} (instance ${uuid} on ${record.host})\n` +
      ctx.out.table(allocations, [
        { header: 'PROVIDER', value: (a) => a.providerName },
        { header: 'CLASS', value: (a) => a.resourceClass },
        { header: 'AMOUNT', value: (a) => a.amount },
      ]) +
      (requestGroups.length > 0
        ? ctx.out.table(requestGroups, [
            { header: 'REQUESTER', value: (g) => g.requester },
            { header: 'RESOURCES', value: (g) => Object.entries(g.resources).map(([c, n]) => `${c}=${n}`).join(' ') },
            { header: 'PROVIDER', value: (g) => providerName(g.provider) },
          ])
        : 'no request groups left\n'),
    );
  } finally {
    await tracker.stop();
  }
}
