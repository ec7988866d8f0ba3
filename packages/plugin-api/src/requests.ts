import type { JsonSchema } from './json.js';
import type { ResourceClass } from './resources.js';

/** A flavor: the shape of an instance. `extraSpecs` are Nova-style `key=value` strings. */
export interface Flavor {
  name: string;
  vcpus: number;
  memoryMb: number;
  diskGb: number;
  extraSpecs: Record<string, string>;
}

/** One instance to claim or schedule. */
export interface InstanceRequest {
  uuid: string;
  projectId: string;
  userId: string;
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
  resources: Record<ResourceClass, number>;
  requiredTraits: string[];
  forbiddenTraits: string[];
  /** Each inner list is "any of these aggregates"; all lists must match (Placement member_of). */
  memberOf: string[][];
}

export type GroupPolicy = 'none' | 'isolate';

/** Operators of `capabilities:KEY=<op> VALUE` (Nova's extra-specs ops). */
export type CapabilityOp = '=' | '==' | '!=' | '>=' | '<=' | 's==' | 's!=' | '<in>' | '<or>' | '<all-in>';

export interface CapabilityRequirement {
  key: string;
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
  flavor: Flavor;
  /** groups[0] is always the unnumbered group. */
  groups: RequestGroup[];
  groupPolicy: GroupPolicy;
  /** `aggregate_instance_extra_specs:KEY=VALUE`, matched against aggregate metadata. */
  aggregateExtraSpecs: Record<string, string>;
  capabilities: CapabilityRequirement[];
  /** Values of plugin-owned keys, parsed by their schemas: `{ 'llc:ways': 4 }`. */
  pluginSpecs: Record<string, unknown>;
  /** The opaque `ert:policy` value, handed to plugins untouched. */
  policy?: string;
  hints: SchedulingHints;
}

/**
 * An extra-spec key a plugin owns. Keys no plugin owns are refused before scheduling.
 * The string value is converted by `schema` (integer, number, boolean, string, enum)
 * and then validated by it.
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
   */
  applyResources?(value: T, resources: Record<ResourceClass, number>): void;
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
