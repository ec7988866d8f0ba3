import { definePlugin, UP_SUMMARY } from '@ert/plugin-api';
import type { FilterHooks, HostState, Plugin, RequestSpec, SummaryBound } from '@ert/plugin-api';
import { aggregateExtraSpecsProblem, fitRequest, matchCapability } from '@ert/placement';
import { freeWithoutSummary, reachSummary, traitSummary } from './summaries.js';

/** What the server-group filters need to know beyond one host: where instances are. */
export interface InstanceLocator {
  /** Name of the host an instance is on (from the store or placed by this scheduler). */
  hostOf(instanceUuid: string): string | undefined;
  /**
   * Optional: names of every host whose `HostState.instances` holds the instance ([] when none
   * does), or undefined when unknown; the same-host filter's candidate hosts.
   */
  holdersOf?(instanceUuid: string): string[] | undefined;
}

function filterPlugin(name: string, hooks: FilterHooks): Plugin {
  return definePlugin({ name, filter: () => hooks });
}

/** The host's tree and sharing providers, as `fitRequest` takes them. */
function treeOf(host: HostState) {
  return { providers: host.providers, sharingProviders: host.sharingProviders };
}

/**
 * `traits`: a cheap necessary condition checked before `resources` (which is exact), so it
 * never rejects a host that `resources` would accept. Sharing providers count as Placement
 * counts them: they may serve any group.
 * - every required trait (and one of each any-of list) of every group is on some provider
 *   of the tree or its sharing providers;
 * - every numbered group has one provider (tree or sharing) with all its required traits,
 *   one of each any-of list, and none of its forbidden ones;
 * - a forbidden trait of the unnumbered group is not on every provider it could use.
 */
function traitsProblem(host: HostState, spec: RequestSpec): string | undefined {
  const providers = host.sharingProviders.length === 0 ? host.providers : [...host.providers, ...host.sharingProviders];
  const somewhere = (trait: string): boolean => providers.some((p) => p.traits.has(trait));
  for (const group of spec.groups) {
    const label = group.suffix === '' ? 'the unnumbered group' : `group ${group.suffix}`;
    for (const trait of group.requiredTraits) if (!somewhere(trait)) return `no provider has trait ${trait} required by ${label}`;
    for (const any of group.anyOfTraits ?? []) {
      if (any.length > 0 && !any.some(somewhere)) return `no provider has any of the traits ${any.join(', ')} required by ${label}`;
    }
    if (group.suffix === '') {
      for (const trait of group.forbiddenTraits) {
        if (providers.every((p) => p.traits.has(trait))) return `every provider has trait ${trait} forbidden by ${label}`;
      }
    } else {
      const fits = providers.some(
        (p) =>
          group.requiredTraits.every((t) => p.traits.has(t)) &&
          (group.anyOfTraits ?? []).every((any) => any.length === 0 || any.some((t) => p.traits.has(t))) &&
          !group.forbiddenTraits.some((t) => p.traits.has(t)),
      );
      if (!fits) return `no provider has the traits of ${label} (required ${group.requiredTraits.join(',') || '-'}, forbidden ${group.forbiddenTraits.join(',') || '-'})`;
    }
  }
  return undefined;
}

/**
 * The `resources` filter's bounds: every group's amount of a class comes from the host's
 * providers or its sharing providers, so the amounts of all groups together must fit in the
 * free amount of the class summed over them (the built-in `ert:reach:<CLASS>` summary). A
 * necessary condition only: min_unit, max_unit, step_size, traits and which provider serves
 * which group are left to `fitRequest`.
 */
export function resourceBounds(spec: RequestSpec): SummaryBound[] {
  const totals = new Map<string, number>();
  for (const group of spec.groups) {
    for (const rc in group.resources) {
      const amount = group.resources[rc]!;
      if (amount > 0) totals.set(rc, (totals.get(rc) ?? 0) + amount);
    }
  }
  const bounds = [...totals].map(([rc, amount]) => ({ summary: reachSummary(rc), atLeast: amount }));
  // The unnumbered group's classes come from providers without its forbidden traits.
  const unnumbered = spec.groups[0];
  if (unnumbered !== undefined && unnumbered.suffix === '' && unnumbered.forbiddenTraits.length > 0) {
    for (const rc in unnumbered.resources) {
      const amount = unnumbered.resources[rc]!;
      if (amount > 0) bounds.push({ summary: freeWithoutSummary(rc, unnumbered.forbiddenTraits), atLeast: amount });
    }
  }
  return bounds;
}

/** The `traits` filter's bounds: each required trait of each group is on some provider (`ert:trait:<T>`). */
export function traitBounds(spec: RequestSpec): SummaryBound[] {
  const traits = new Set<string>();
  for (const group of spec.groups) for (const trait of group.requiredTraits) traits.add(trait);
  return [...traits].map((trait) => ({ summary: traitSummary(trait), atLeast: 1 }));
}

function describeValue(value: string | number | undefined): string {
  return value === undefined ? 'absent' : JSON.stringify(value);
}

/**
 * The scheduler's built-in filters, made with `definePlugin` so they load, are named and are
 * called exactly like third-party filters. Configure them by name in `scheduler.filters`.
 * - `status`: the host is `up` (not stale, not disabled); bound: the built-in `ert:up` summary.
 * - `traits`: required/forbidden traits of every group, a cheap pre-check (see traitsProblem);
 *   bounds: each required trait on some provider (`ert:trait:<T>`).
 * - `resources`: placement's `fitRequest` over the host's tree and sharing providers, within
 *   `scheduler.placementSearchBudget` steps (past it the host is refused, the reason names the limit);
 *   bounds: the request's total of each class against `ert:reach:<CLASS>`, and the unnumbered
 *   group's amounts on providers without its forbidden traits (resourceBounds).
 * - `aggregate-extra-specs`: `aggregate_instance_extra_specs:` against the aggregate metadata.
 * - `capabilities`: `capabilities:` against `HostState.capabilities`.
 * - `same-host` / `different-host`: hints naming instances whose hosts are (not) wanted;
 *   `same-host` names its candidate hosts when the locator knows who holds the instances.
 * - `affinity` / `anti-affinity`: server groups (hints.serverGroup) by policy; `affinity` names
 *   its candidate hosts (those of the group's placed members).
 */
export function builtinFilters(locator: InstanceLocator, options: { placementSearchBudget?: number } = {}): Record<string, Plugin> {
  const fitOptions = options.placementSearchBudget === undefined ? {} : { budget: options.placementSearchBudget };
  const plugins: Plugin[] = [
    filterPlugin('status', {
      filter: (host) => (host.status === 'up' ? undefined : `host is ${host.status}`),
      summaryBounds: () => [{ summary: UP_SUMMARY, atLeast: 1 }],
    }),
    filterPlugin('traits', {
      appliesTo: (spec) => spec.groups.some((g) => g.requiredTraits.length > 0 || g.forbiddenTraits.length > 0 || (g.anyOfTraits?.length ?? 0) > 0 || g.suffix !== ''),
      filter: traitsProblem,
      summaryBounds: traitBounds,
    }),
    filterPlugin('resources', {
      filter: (host, spec) => {
        const fit = fitRequest(spec, treeOf(host), fitOptions);
        return fit.ok ? undefined : fit.reason;
      },
      summaryBounds: resourceBounds,
    }),
    filterPlugin('aggregate-extra-specs', {
      appliesTo: (spec) => Object.keys(spec.aggregateExtraSpecs).length > 0,
      filter: (host, spec) => aggregateExtraSpecsProblem(spec.aggregateExtraSpecs, host.aggregateMetadata),
    }),
    filterPlugin('capabilities', {
      appliesTo: (spec) => spec.capabilities.length > 0,
      filter: (host, spec) => {
        const capabilities = host.capabilities;
        for (const requirement of spec.capabilities) {
          const actual = capabilities[requirement.key];
          if (!matchCapability(requirement, actual)) {
            return `capability ${requirement.key} is ${describeValue(actual)}, wanted ${requirement.op} ${requirement.values.join(' ')}`;
          }
        }
        return undefined;
      },
    }),
    filterPlugin('same-host', {
      appliesTo: (spec) => (spec.hints.sameHost?.length ?? 0) > 0,
      candidateHosts: (spec) => {
        if (locator.holdersOf === undefined) return undefined;
        const names = new Set<string>();
        for (const uuid of spec.hints.sameHost!) {
          const holders = locator.holdersOf(uuid);
          if (holders === undefined) return undefined;
          for (const name of holders) names.add(name);
        }
        return [...names];
      },
      filter: (host, spec) =>
        spec.hints.sameHost!.some((uuid) => host.instances.has(uuid)) ? undefined : `host has none of the instances ${spec.hints.sameHost!.join(', ')}`,
    }),
    filterPlugin('different-host', {
      appliesTo: (spec) => (spec.hints.differentHost?.length ?? 0) > 0,
      filter: (host, spec) => {
        const present = spec.hints.differentHost!.find((uuid) => host.instances.has(uuid));
        return present === undefined ? undefined : `host has instance ${present}`;
      },
    }),
    filterPlugin('affinity', {
      appliesTo: (spec) => spec.hints.serverGroup?.policy === 'affinity',
      // The same hosts `filter` reads (and the memo key holds): none placed yet, any host.
      candidateHosts: (spec) => {
        const groupHosts = affinityHosts(spec, locator);
        return groupHosts.length === 0 ? undefined : groupHosts;
      },
      filter: (host, spec) => {
        const group = spec.hints.serverGroup!;
        const groupHosts = affinityHosts(spec, locator);
        if (groupHosts.length === 0 || groupHosts.includes(host.name)) return undefined;
        return `server group ${group.uuid} (affinity) is on ${groupHosts.join(', ')}`;
      },
    }),
    filterPlugin('anti-affinity', {
      appliesTo: (spec) => spec.hints.serverGroup?.policy === 'anti-affinity',
      filter: (host, spec) => {
        const group = spec.hints.serverGroup!;
        const member = group.members.find((uuid) => host.instances.has(uuid));
        return member === undefined ? undefined : `host has member ${member} of server group ${group.uuid} (anti-affinity)`;
      },
    }),
  ];
  return Object.fromEntries(plugins.map((p) => [p.name, p]));
}

/**
 * The hosts of an affinity group's placed members, sorted. The `affinity` filter depends on
 * these besides the host itself, so the scheduler folds them into its memo key.
 */
export function affinityHosts(spec: RequestSpec, locator: InstanceLocator): string[] {
  const group = spec.hints.serverGroup;
  if (!group || group.policy !== 'affinity') return [];
  const hosts = new Set<string>();
  for (const uuid of group.members) {
    const host = locator.hostOf(uuid);
    if (host !== undefined) hosts.add(host);
  }
  return [...hosts].sort();
}

/** Names of the built-in filters, in the order the docs list them. */
export const BUILTIN_FILTERS = [
  'status',
  'traits',
  'resources',
  'aggregate-extra-specs',
  'capabilities',
  'same-host',
  'different-host',
  'affinity',
  'anti-affinity',
] as const;
