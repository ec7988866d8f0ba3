import type { ErtConfig } from '@ert/core';
import type { RequestSpec } from '@ert/plugin-api';
import { AVAILABILITY_ZONE_KEY } from '@ert/placement';

/*
 * Request filters (docs/request-filters.md): Nova's placement request filters. Each looks at
 * the request and the aggregates' metadata, never at a host, and says which aggregates the
 * request's hosts must be in (`member_of=in:...`) or must not be in (`member_of=!in:...`).
 * The scheduler then narrows the candidate hosts by the aggregates of their root provider
 * before any filter or weigher runs (`HostNarrowing`).
 */

/** A request filter's name, as `scheduler.requestFilters` lists it. */
export type RequestFilterName = ErtConfig['scheduler']['requestFilters'][number];

/** An aggregate as the request filters read it. */
export interface AggregateInfo {
  uuid: string;
  name?: string;
  metadata: Readonly<Record<string, string>>;
}

/** What the request filters read of one request. */
export interface RequestScope {
  /** The projects of the batch's instances, distinct, sorted. */
  projects: readonly string[];
  /** The zone the request names (Nova's availability_zone of the request spec). */
  availabilityZone?: string;
  /** Aggregates (uuids or names) the request must stay out of (Nova's requested_destination.forbidden_aggregates). */
  forbiddenAggregates?: readonly string[];
}

/**
 * One request filter's narrowing: the hosts must be in one of `memberOf` (absent: no such
 * condition; empty: no host can be) and in none of `forbidden`.
 */
export interface Narrowing {
  filter: RequestFilterName;
  memberOf?: string[];
  forbidden?: string[];
  /** Why, for every host it removes (and explain). */
  why: string;
}

/** Aggregate metadata keys naming the projects an aggregate takes (Nova: `filter_tenant_id`, `filter_tenant_id_<suffix>`). */
export const TENANT_KEY = 'filter_tenant_id';
/** Aggregate metadata `trait:NAME=required`: the aggregate takes only requests requiring NAME. */
const TRAIT_PREFIX = 'trait:';

const label = (a: AggregateInfo): string => (a.name !== undefined ? `${a.name} (${a.uuid})` : a.uuid);
const labels = (list: readonly AggregateInfo[]): string => list.map(label).join(', ');

/** The projects an aggregate's `filter_tenant_id*` metadata names (comma-separated values, as Nova reads them). */
export function tenantsOf(metadata: Readonly<Record<string, string>>): Set<string> {
  const tenants = new Set<string>();
  for (const [key, value] of Object.entries(metadata)) {
    if (key !== TENANT_KEY && !key.startsWith(`${TENANT_KEY}_`)) continue;
    for (const project of value.split(',')) if (project.trim() !== '') tenants.add(project.trim());
  }
  return tenants;
}

/** The traits an aggregate's `trait:NAME=required` metadata names. */
export function requiredTraitsOf(metadata: Readonly<Record<string, string>>): string[] {
  return Object.entries(metadata)
    .filter(([key, value]) => key.startsWith(TRAIT_PREFIX) && key.length > TRAIT_PREFIX.length && value === 'required')
    .map(([key]) => key.slice(TRAIT_PREFIX.length))
    .sort();
}

/** Every trait the request requires, any group (and the root's), as Nova's all_required_traits. */
function requiredTraitsOfRequest(spec: RequestSpec): Set<string> {
  const traits = new Set<string>(spec.rootRequiredTraits ?? []);
  for (const group of spec.groups) for (const trait of group.requiredTraits) traits.add(trait);
  return traits;
}

type RequestFilter = (spec: RequestSpec, scope: RequestScope, aggregates: readonly AggregateInfo[]) => Omit<Narrowing, 'filter'> | undefined;

const sorted = (list: Iterable<string>): string[] => [...new Set(list)].sort();

/**
 * The built-in request filters:
 * - `availability-zone` (Nova's map_az_to_placement_aggregate): a request naming a zone goes
 *   to the hosts of the aggregates whose `availability_zone` is that zone (none: no host).
 * - `tenant-isolation` (Nova's AggregateMultiTenancyIsolation, as a placement query): an
 *   aggregate whose `filter_tenant_id` / `filter_tenant_id_<suffix>` metadata names projects
 *   takes only their instances; a request with another project must stay out of it.
 * - `isolated-aggregates` (Nova's isolate_aggregates, enable_isolated_aggregate_filtering): an
 *   aggregate with `trait:NAME=required` metadata takes only requests that require NAME (each
 *   such trait), others must stay out.
 * - `forbidden-aggregates`: the aggregates the request names as forbidden (by uuid or name).
 */
export const REQUEST_FILTER_IMPLEMENTATIONS: Readonly<Record<RequestFilterName, RequestFilter>> = {
  'availability-zone': (_spec, scope, aggregates) => {
    const zone = scope.availabilityZone;
    if (zone === undefined) return undefined;
    const inZone = aggregates.filter((a) => a.metadata[AVAILABILITY_ZONE_KEY] === zone);
    if (inZone.length === 0) {
      const known = sorted(aggregates.flatMap((a) => a.metadata[AVAILABILITY_ZONE_KEY] ?? []));
      return { memberOf: [], why: `no aggregate has ${AVAILABILITY_ZONE_KEY}=${zone} (zones: ${known.join(', ') || 'none'})` };
    }
    return { memberOf: sorted(inZone.map((a) => a.uuid)), why: `not in availability zone ${zone} (aggregates ${labels(inZone)})` };
  },
  'tenant-isolation': (_spec, scope, aggregates) => {
    const closed = aggregates.filter((a) => {
      const tenants = tenantsOf(a.metadata);
      return tenants.size > 0 && scope.projects.some((p) => !tenants.has(p));
    });
    if (closed.length === 0) return undefined;
    return {
      forbidden: sorted(closed.map((a) => a.uuid)),
      why: `project ${scope.projects.join(', ')} is not among the projects of tenant-isolated aggregate(s) ${closed.map((a) => `${label(a)}: ${sorted(tenantsOf(a.metadata)).join(', ')}`).join('; ')}`,
    };
  },
  'isolated-aggregates': (spec, _scope, aggregates) => {
    const required = requiredTraitsOfRequest(spec);
    const closed = aggregates.filter((a) => requiredTraitsOf(a.metadata).some((t) => !required.has(t)));
    if (closed.length === 0) return undefined;
    return {
      forbidden: sorted(closed.map((a) => a.uuid)),
      why: `the request does not require the trait(s) of isolated aggregate(s) ${closed.map((a) => `${label(a)}: ${requiredTraitsOf(a.metadata).join(', ')}`).join('; ')}`,
    };
  },
  'forbidden-aggregates': (_spec, scope, aggregates) => {
    const refs = scope.forbiddenAggregates ?? [];
    if (refs.length === 0) return undefined;
    const uuids = refs.map((ref) => aggregates.find((a) => a.uuid === ref)?.uuid ?? aggregates.find((a) => a.name === ref)?.uuid ?? ref);
    return { forbidden: sorted(uuids), why: `the request forbids aggregate(s) ${refs.join(', ')}` };
  },
};

/** The narrowings of the configured request filters, in config order (filters that do not apply are left out). */
export function narrowRequest(names: readonly RequestFilterName[], spec: RequestSpec, scope: RequestScope, aggregates: readonly AggregateInfo[]): Narrowing[] {
  const out: Narrowing[] = [];
  for (const name of names) {
    const narrowing = REQUEST_FILTER_IMPLEMENTATIONS[name](spec, scope, aggregates);
    if (narrowing) out.push({ filter: name, ...narrowing });
  }
  return out;
}

/** The Placement query a narrowing stands for (`member_of=in:a,b&member_of=!in:c`). */
export function narrowingQuery(narrowing: Narrowing): string {
  const parts: string[] = [];
  if (narrowing.memberOf !== undefined) parts.push(`member_of=in:${narrowing.memberOf.join(',')}`);
  if (narrowing.forbidden !== undefined) parts.push(`member_of=!in:${narrowing.forbidden.join(',')}`);
  return parts.join('&');
}

/**
 * A request's narrowings applied to hosts by the aggregates of their root provider. The
 * verdict depends on the aggregate set alone, and hosts share interned sets, so it is worked
 * out once per distinct set (in practice per rack, zone or tenant group), not per host.
 */
export class HostNarrowing {
  private readonly verdicts = new Map<ReadonlySet<string>, { step: number; reason: string } | null>();
  private readonly memberOf: Array<Set<string> | undefined>;
  private readonly forbidden: Array<Set<string> | undefined>;

  constructor(readonly steps: readonly Narrowing[]) {
    this.memberOf = steps.map((s) => (s.memberOf === undefined ? undefined : new Set(s.memberOf)));
    this.forbidden = steps.map((s) => (s.forbidden === undefined ? undefined : new Set(s.forbidden)));
  }

  /** Undefined when a host whose root is in `aggregates` stays a candidate, else the step that removes it and why. */
  judge(aggregates: ReadonlySet<string>): { step: number; reason: string } | undefined {
    let verdict = this.verdicts.get(aggregates);
    if (verdict === undefined) {
      verdict = this.decide(aggregates);
      this.verdicts.set(aggregates, verdict);
    }
    return verdict ?? undefined;
  }

  private decide(aggregates: ReadonlySet<string>): { step: number; reason: string } | null {
    for (let step = 0; step < this.steps.length; step++) {
      const memberOf = this.memberOf[step];
      const forbidden = this.forbidden[step];
      if (memberOf !== undefined && ![...memberOf].some((a) => aggregates.has(a))) return { step, reason: this.steps[step]!.why };
      if (forbidden !== undefined) {
        const inside = [...aggregates].filter((a) => forbidden.has(a)).sort();
        if (inside.length > 0) return { step, reason: `in aggregate ${inside.join(', ')}: ${this.steps[step]!.why}` };
      }
    }
    return null;
  }
}
