import type { JsonSchema } from './json.js';
import type { ResourceClass } from './resources.js';

/** A flavor: the shape of an instance. `extraSpecs` are Nova-style `key=value` strings. */
export interface Flavor {
  /** The flavor's name, as configured (e.g. `m1.small`). */
  name: string;
  /** Virtual CPUs: the request's VCPU unless an extra spec replaces it (`hw:cpu_policy=dedicated`: PCPU). */
  vcpus: number;
  /** Memory in MiB: the request's MEMORY_MB unless `resources:MEMORY_MB` overrides it. */
  memoryMb: number;
  /** Disk in GiB (root + ephemeral + swap, as Nova counts it): the request's DISK_GB; 0 asks for none. */
  diskGb: number;
  /** Extra specs by key, values unparsed (`{ 'hw:cpu_policy': 'dedicated' }`). */
  extraSpecs: Record<string, string>;
  /**
   * The image the instance boots from, when the request named its properties: they are merged
   * with `extraSpecs` by Nova's rules when the flavor is parsed (`@ert/placement`'s
   * `parseFlavor`, docs/images.md). It travels with the flavor into the instance record, so
   * the host's tracker confirms a reservation (and rebuilds, resizes, migrates the instance)
   * with the same merged request the scheduler placed.
   */
  image?: ImageMeta;
  /**
   * Request groups beyond the flavor: ports' and devices' resource requests (Neutron's
   * `resource_request`, a device profile's group), claimed together with the flavor in one
   * allocation, each a numbered group of its own (docs/request-groups.md). Like `image`,
   * they travel with the flavor into the instance record, so the host's tracker confirms,
   * resizes and migrates the instance with them, and `attach` / `detach` change them on a
   * live instance.
   */
  requestGroups?: ResourceRequestGroup[];
}

/**
 * A port's or a device's resource request: a numbered request group whose suffix is
 * `requester`. As any numbered group (Placement's rules), all its resources come from one
 * provider of the host's tree (e.g. a bandwidth provider another service created under the
 * compute host), which has every `required` trait and no `forbidden` one. The flavor's
 * `group_policy` applies to them with its own numbered groups (`isolate`: each on a provider
 * of its own); a flavor that sets none lets request groups share providers (`none`), where
 * Nova would refuse two ports without it (docs/request-groups.md).
 */
export interface ResourceRequestGroup {
  /** Who asks (a port or device uuid): the group's suffix, `[A-Za-z0-9_-]{1,64}`, unique within the instance. */
  requester: string;
  /** Amount per resource class (positive integers); at least one class. */
  resources: Record<ResourceClass, number>;
  /** Traits the serving provider must have (e.g. `CUSTOM_PHYSNET_PUBLIC`, `CUSTOM_VNIC_TYPE_NORMAL`). */
  required?: string[];
  /** Traits the serving provider must not have. */
  forbidden?: string[];
  /**
   * Written by ert when the instance is placed (never read from a request): the uuid of the
   * provider that serves the group (Placement 1.34's mapping; Nova's `provider_uuids`), which
   * a network service needs to bind the port.
   */
  provider?: string;
}

/** An image's scheduling-relevant metadata, as Glance gives it to Nova. */
export interface ImageMeta {
  /**
   * Image properties by name, values unparsed: `trait:NAME=required|forbidden`, and `hw_X`
   * for each flavor extra spec `hw:X` a loaded plugin owns (`hw_cpu_policy`, `hw_mem_page_size`).
   */
  properties: Record<string, string>;
}

/** One instance to claim or schedule. */
export interface InstanceRequest {
  /** The instance's uuid: its allocations' consumer. */
  uuid: string;
  /** Project (tenant) that owns the instance, recorded with its allocations. */
  projectId: string;
  /** User that asked for the instance, recorded with its allocations. */
  userId: string;
  /** The flavor asked for; its extra specs are parsed into the `RequestSpec`. */
  flavor: Flavor;
}

/**
 * A group of resources that Placement fits together. The unnumbered group (suffix '')
 * may spread its classes over the host's tree (each class's amount on one provider);
 * a numbered group puts all its classes on one provider.
 */
export interface RequestGroup {
  /** '' for the unnumbered group, otherwise the suffix after `resources` (e.g. '1', '_NET'). */
  suffix: string;
  /** Amount asked for per resource class (positive integers), after extra specs were applied. */
  resources: Record<ResourceClass, number>;
  /**
   * Traits that must all be present: on the group's one provider for a numbered group; on
   * the providers serving the unnumbered group, together.
   */
  requiredTraits: string[];
  /**
   * Placement 1.39's `required=in:A,B`: each inner list needs at least one of its traits,
   * judged like `requiredTraits`. Absent or empty: no any-of condition.
   */
  anyOfTraits?: string[][];
  /** Traits that no provider serving the group may have. */
  forbiddenTraits: string[];
  /**
   * Each inner list is "any of these aggregates"; all lists must match (Placement
   * member_of). A numbered group's provider must itself be in the aggregate; a provider
   * serving the unnumbered group matches when it or its root is (sharing providers: itself).
   */
  memberOf: string[][];
  /**
   * Placement 1.32's `member_of=!a` / `!in:a,b`: no provider serving the group may be in
   * any of these (for the unnumbered group, nor may its root).
   */
  forbiddenAggregates?: string[];
  /**
   * Placement 1.31's `in_tree`: uuid of any provider; the group's providers must be in that
   * provider's tree (which excludes sharing providers from outside it).
   */
  inTree?: string;
}

/**
 * Placement's `group_policy`: `isolate` puts each numbered group on a different provider,
 * `none` lets them share one. Required with two or more numbered groups; `none` otherwise.
 */
export type GroupPolicy = 'none' | 'isolate';

/** Operators of `capabilities:KEY=<op> VALUE` (Nova's extra-specs ops). */
export type CapabilityOp = '=' | '==' | '!=' | '>=' | '<=' | 's==' | 's!=' | '<in>' | '<or>' | '<all-in>';

/** One `capabilities:KEY=<op> VALUE` extra spec, matched against `HostState.capabilities`. */
export interface CapabilityRequirement {
  /** The capability name after `capabilities:` (e.g. `cpu_info:vendor`). */
  key: string;
  /** How the host's value is compared with `values`. */
  op: CapabilityOp;
  /** One value, or several for `<or>` and `<all-in>`. */
  values: string[];
}

/** Scheduler hints that come with a request rather than a flavor. */
export interface SchedulingHints {
  /** Place on one of these hosts (instance uuids whose host is taken). */
  sameHost?: string[];
  /** Place on none of the hosts of these instances. */
  differentHost?: string[];
  /** Server group: members' uuids and the policy between them. */
  serverGroup?: { uuid: string; policy: 'affinity' | 'anti-affinity'; members: string[] };
}

/**
 * What a flavor and a request ask for, after their extra specs were parsed and
 * validated. Both sides build it with `@ert/placement`'s parser; plugins read it.
 */
export interface RequestSpec {
  /** The flavor the spec was parsed from. */
  flavor: Flavor;
  /** groups[0] is always the unnumbered group. */
  groups: RequestGroup[];
  /** How the numbered groups share providers (`none` when the flavor does not say). */
  groupPolicy: GroupPolicy;
  /** `aggregate_instance_extra_specs:KEY=VALUE`, matched against aggregate metadata. */
  aggregateExtraSpecs: Record<string, string>;
  /** The `capabilities:` extra specs, each a condition on the host's capabilities; all must hold. */
  capabilities: CapabilityRequirement[];
  /** Values of plugin-owned keys, parsed by their schemas: `{ 'llc:ways': 4 }`. */
  pluginSpecs: Record<string, unknown>;
  /** The opaque `ert:policy` value, handed to plugins untouched. */
  policy?: string;
  /** The request's scheduler hints; `{}` when it gave none. */
  hints: SchedulingHints;
  /**
   * Placement 1.36's `same_subtree`: each inner list names group suffixes (e.g. `['_NIC',
   * '_ACC']`) whose providers must all descend from one of those same providers.
   */
  sameSubtree?: string[][];
  /** Placement 1.35's `root_required=T`: traits the root of the host's tree must have. */
  rootRequiredTraits?: string[];
  /** Placement 1.35's `root_required=!T`: traits the root of the host's tree must not have. */
  rootForbiddenTraits?: string[];
}

/**
 * The part of a request that decides where it fits, as Placement's allocation candidates
 * see it: a `RequestSpec` is one, and so is a request built from a Placement query string
 * (`@ert/placement`'s `parseCandidatesQuery`) that has no flavor.
 */
export type PlacementRequest = Pick<RequestSpec, 'groups' | 'groupPolicy' | 'sameSubtree' | 'rootRequiredTraits' | 'rootForbiddenTraits'>;

/**
 * An extra-spec key a plugin owns. Keys no plugin owns are refused before scheduling.
 * The string value is converted by `schema` (integer, number, boolean, string, enum)
 * and then validated by it. An error about the key names the plugin declaring it
 * (`extraSpecKeyOwner`: the plugin `definePlugin` made with this key object).
 */
export interface ExtraSpecKey<T = unknown> {
  /** The full key, e.g. `llc:ways` or `hw:cpu_policy`. */
  key: string;
  /** One line for `--help` and docs. */
  description: string;
  /**
   * JSON Schema of the parsed value; `type` picks the conversion from the string (integer:
   * strict decimal; number; boolean: true/false/yes/no/1/0, any case; string, the default).
   * Supported keywords: type, enum, minimum, maximum, pattern, and the annotations title,
   * description, default, examples, $comment; any other keyword is refused
   * (`@ert/placement`'s `extraSpecKeyProblem`).
   */
  schema: JsonSchema;
  /**
   * Adjust the unnumbered group's resources when the key is present, e.g. `cu:units=N`
   * adds `CUSTOM_CU: N`, `hw:cpu_policy=dedicated` moves VCPU to PCPU. Must be pure.
   * `resources` already holds the flavor's amounts and its `resources:CLASS=N` keys (and what
   * plugins loaded earlier applied); `extraSpecs` are the flavor's extra specs as written,
   * merged with its image's properties (`hw_X` as `hw:X`), for a rule that depends on which
   * keys the flavor set. Return a string instead to refuse the flavor when the value
   * contradicts them (`llc:ways=3` with `resources:CUSTOM_LLC_WAYS=5`): the reason, naming
   * the other key and its value; the parser throws ERT_SPEC_CONFLICT naming the plugin, this
   * key and its value, then the reason. Return nothing otherwise. `flavor` is the flavor
   * being parsed, for a rule that needs its own amounts (`hw:cpu_policy=dedicated` asks
   * `flavor.vcpus` PCPU even where `resources:VCPU=0` took the VCPU out). A throw refuses
   * the flavor too (ERT_SPEC_PLUGIN_FAILED, naming the plugin).
   */
  applyResources?(value: T, resources: Record<ResourceClass, number>, extraSpecs: Readonly<Record<string, string>>, flavor: Readonly<Flavor>): string | void;
}

/**
 * The amount of `resourceClass` a request asks for, summed over all its request groups
 * (unnumbered and numbered); 0 when no group asks for it. Pure: reads `spec.groups` only,
 * so it is the amount after extra specs were applied (e.g. `hw:cpu_policy=dedicated` has
 * moved VCPU to PCPU).
 */
export function requestedAmount(spec: RequestSpec, resourceClass: ResourceClass): number {
  return spec.groups.reduce((sum, group) => sum + (group.resources[resourceClass] ?? 0), 0);
}
