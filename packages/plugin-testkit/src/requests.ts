/**
 * Flavors, request specs and the claim-side objects a resource plugin is handed: a spec
 * parsed from a flavor by the real parser (`@ert/placement`'s `parseFlavor`, Nova's rules,
 * the plugin's own extra-spec keys), or built lightly from resource amounts; and the
 * `ClaimRequest` / `ClaimedInstance` the tracker passes to `test` and `addInstance`.
 */
import { parseFlavor } from '@ert/placement';
import type {
  ClaimGrant,
  ClaimRequest,
  ClaimedInstance,
  Discovery,
  ExtraSpecKey,
  Flavor,
  InstanceRequest,
  PluginDefinition,
  RequestGroup,
  RequestSpec,
  SchedulingHints,
  TestResult,
} from '@ert/plugin-api';
import { TestkitError, TestkitErrorCodes } from './errors.js';

/** A flavor: `test`, 1 vCPU, 512 MB, no disk, no extra specs, unless given. */
export function flavor(init: Partial<Flavor> = {}): Flavor {
  return { name: 'test', vcpus: 1, memoryMb: 512, diskGb: 0, ...init, extraSpecs: { ...(init.extraSpecs ?? {}) } };
}

/** The extra-spec keys of plugins (or the keys themselves). */
export type KeySource = PluginDefinition<any, any, any> | readonly PluginDefinition<any, any, any>[] | readonly ExtraSpecKey<any>[];

function keysOf(source: KeySource): ExtraSpecKey[] {
  if (!Array.isArray(source)) return [...((source as PluginDefinition).extraSpecs ?? [])];
  const list = source as readonly (PluginDefinition | ExtraSpecKey)[];
  return list.flatMap((item) => ('key' in item && typeof item.key === 'string' ? [item as ExtraSpecKey] : [...((item as PluginDefinition).extraSpecs ?? [])]));
}

/**
 * The `RequestSpec` both sides build from `flavor`: `@ert/placement`'s `parseFlavor` with
 * the extra-spec keys of `keys` (a plugin, several, or the keys). Throws the parser's
 * RequestSpecError (ERT_SPEC_UNKNOWN_KEY, ERT_SPEC_INVALID_VALUE, ...) as the host would.
 */
export function specFromFlavor(f: Flavor | Partial<Flavor>, keys: KeySource = [], hints: SchedulingHints = {}): RequestSpec {
  return parseFlavor('vcpus' in f && 'memoryMb' in f && 'diskGb' in f && 'name' in f ? (f as Flavor) : flavor(f), { keys: keysOf(keys), hints });
}

/** A request group with no traits or aggregates ('' is the unnumbered group). */
export function requestGroup(suffix: string, resources: Record<string, number>, more: Partial<Omit<RequestGroup, 'suffix' | 'resources'>> = {}): RequestGroup {
  return { suffix, resources: { ...resources }, requiredTraits: [], forbiddenTraits: [], memberOf: [], ...more };
}

/** What `requestSpec` accepts besides the unnumbered group's resources. */
export interface RequestSpecInit {
  /** The flavor's memory (default: the MEMORY_MB asked for, else 0). */
  memoryMb?: number;
  /** Parsed values of plugin-owned keys (`{ 'llc:ways': 4 }`), as the parser would put them. */
  pluginSpecs?: Record<string, unknown>;
  /** Numbered groups `1`, `2`, ... with these resources. */
  extraGroups?: Array<Record<string, number>>;
  /** Fields of the flavor to set (its vcpus default to the VCPU or PCPU asked for). */
  flavor?: Partial<Flavor>;
  /** The spec's group policy (default `none`). */
  groupPolicy?: RequestSpec['groupPolicy'];
  /** The request's scheduler hints (default none). */
  hints?: SchedulingHints;
}

/**
 * A light `RequestSpec` whose unnumbered group asks for `resources`, without the parser (no
 * extra specs are read: give their parsed values as `pluginSpecs`). Use `specFromFlavor` to
 * test what a flavor really turns into.
 */
export function requestSpec(resources: Record<string, number> = {}, init: RequestSpecInit = {}): RequestSpec {
  return {
    flavor: flavor({
      vcpus: resources.VCPU ?? resources.PCPU ?? 0,
      memoryMb: init.memoryMb ?? resources.MEMORY_MB ?? 0,
      diskGb: resources.DISK_GB ?? 0,
      ...init.flavor,
    }),
    groups: [requestGroup('', resources), ...(init.extraGroups ?? []).map((r, i) => requestGroup(String(i + 1), r))],
    groupPolicy: init.groupPolicy ?? 'none',
    aggregateExtraSpecs: {},
    capabilities: [],
    pluginSpecs: { ...(init.pluginSpecs ?? {}) },
    hints: { ...(init.hints ?? {}) },
  };
}

/** A deterministic uuid for test instance `n` (`00000000-0000-4000-8000-00000000000n`). */
export function testUuid(n: number): string {
  return `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
}

/** The `InstanceRequest` for `spec` (project `p`, user `u`). */
export function instanceRequest(spec: RequestSpec, uuid: string = testUuid(1)): InstanceRequest {
  return { uuid, projectId: 'p', userId: 'u', flavor: spec.flavor };
}

/** The `ClaimRequest` a tracker passes to `test` (a claim unless `kind` says resize). */
export function claimRequest(spec: RequestSpec, init: { uuid?: string; kind?: ClaimRequest['kind'] } = {}): ClaimRequest {
  return { instance: instanceRequest(spec, init.uuid), spec, kind: init.kind ?? 'claim' };
}

/** The amount of each class a spec asks for, summed over its groups. */
export function requestedResources(spec: RequestSpec): Record<string, number> {
  const out: Record<string, number> = {};
  for (const group of spec.groups) for (const [cls, amount] of Object.entries(group.resources)) if (amount > 0) out[cls] = (out[cls] ?? 0) + amount;
  return out;
}

/** What `claimedInstance` accepts. */
export interface ClaimedInit {
  /** The instance's uuid (default `testUuid(1)`). */
  uuid?: string;
  /** The tracker's host name, which names the providers (default `compute-1`). */
  hostName?: string;
  /** The plugin's answer to `test` for this spec: its grant's allocations, assignment and CPUs are used. */
  grant?: TestResult;
  /**
   * Where classes the grant does not place are allocated: the discovery that reports them
   * (each class goes to the provider with its inventory, the root first). Without it, the root.
   */
  discovery?: Discovery;
  /** Allocations as written, instead of the derived ones. */
  allocations?: ClaimedInstance['allocations'];
  /** Pinned host CPUs, instead of the grant's (sorted either way). */
  cpus?: number[];
}

/**
 * The `ClaimedInstance` a tracker passes to `addInstance` after writing a claim of `spec`:
 * the plugin's grant allocations on the providers it named (`<host>_<key>`), every other
 * requested class on the provider that reports it, the grant's assignment and sorted CPUs.
 * Throws ERT_TESTKIT_INVALID_INPUT for a grant that is a refusal (a string).
 */
export function claimedInstance(spec: RequestSpec, init: ClaimedInit = {}): ClaimedInstance {
  const hostName = init.hostName ?? 'compute-1';
  if (typeof init.grant === 'string') {
    throw new TestkitError(TestkitErrorCodes.INVALID_INPUT, `claimedInstance: the plugin refused the claim: ${init.grant}`, { what: 'grant' });
  }
  const grant: ClaimGrant = init.grant ?? {};
  const providerName = (key: string | undefined) => (key === undefined ? hostName : `${hostName}_${key}`);
  let allocations = init.allocations;
  if (allocations === undefined) {
    allocations = (grant.allocations ?? []).map((a) => ({ providerName: providerName(a.provider), resourceClass: a.resourceClass, amount: a.amount }));
    const granted = new Set(allocations.map((a) => a.resourceClass));
    for (const [resourceClass, amount] of Object.entries(requestedResources(spec))) {
      if (granted.has(resourceClass)) continue;
      const d = init.discovery;
      const onRoot = d?.host?.inventories?.[resourceClass] !== undefined;
      const child = onRoot ? undefined : d?.children?.find((c) => c.inventories?.[resourceClass] !== undefined);
      allocations.push({ providerName: providerName(child?.key), resourceClass, amount });
    }
  }
  const cpus = init.cpus ?? grant.cpus;
  return {
    uuid: init.uuid ?? testUuid(1),
    request: instanceRequest(spec, init.uuid ?? testUuid(1)),
    spec,
    allocations,
    ...(grant.assignment === undefined ? {} : { assignment: structuredClone(grant.assignment) }),
    ...(cpus === undefined ? {} : { cpus: [...cpus].sort((a, b) => a - b) }),
  };
}
