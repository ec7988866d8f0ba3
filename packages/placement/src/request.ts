import { isValidResourceClass, isValidTraitName, type Flavor, type PlacementRequest, type RequestGroup, type RequestSpec, type SchedulingHints } from '@ert/plugin-api';
import { PlacementErrorCodes, RequestSpecError } from './errors.js';

/** Name of the flavor that stands for a Placement-style request in records and reasons. */
export const PLACEMENT_REQUEST_FLAVOR = 'placement-request';

const SUFFIX = /^[a-zA-Z0-9_-]{1,64}$/;
const UUID_LIKE = /^[0-9a-fA-F-]{32,36}$/;
const AGGREGATE = /^[A-Za-z0-9_.:-]+$/;

function fail(key: string, value: unknown, expected: string): never {
  const shown = typeof value === 'string' ? value : JSON.stringify(value);
  throw new RequestSpecError(PlacementErrorCodes.INVALID_VALUE, `placement request ${key}=${shown}: expected ${expected}`, { key, value: shown, expected });
}

function stringList(key: string, value: unknown, valid: (s: string) => boolean, expected: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || !valid(v))) fail(key, value, `a list of ${expected}`);
  return [...(value as string[])];
}

function listOfLists(key: string, value: unknown, valid: (s: string) => boolean, expected: string): string[][] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) fail(key, value, `a list of lists of ${expected}`);
  return (value as unknown[]).map((inner, i) => {
    const list = stringList(`${key}[${i}]`, inner, valid, expected);
    if (list.length === 0) fail(`${key}[${i}]`, inner, `a non-empty list of ${expected}`);
    return list;
  });
}

/** One group of a request received as JSON, checked field by field. */
function checkGroup(raw: unknown, index: number): RequestGroup {
  const at = `groups[${index}]`;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) fail(at, raw, 'an object');
  const g = raw as Record<string, unknown>;
  const known = ['suffix', 'resources', 'requiredTraits', 'anyOfTraits', 'forbiddenTraits', 'memberOf', 'forbiddenAggregates', 'inTree'];
  for (const key of Object.keys(g)) if (!known.includes(key)) fail(`${at}.${key}`, g[key], `one of the fields ${known.join(', ')}`);
  const suffix = g['suffix'] ?? '';
  if (typeof suffix !== 'string' || (index === 0 ? suffix !== '' : !SUFFIX.test(suffix))) {
    fail(`${at}.suffix`, suffix, index === 0 ? "'' (the first group is the unnumbered one)" : '1-64 of [a-zA-Z0-9_-]');
  }
  const resources: Record<string, number> = {};
  const rawResources = g['resources'] ?? {};
  if (rawResources === null || typeof rawResources !== 'object' || Array.isArray(rawResources)) fail(`${at}.resources`, rawResources, 'an object of class: amount');
  for (const [resourceClass, amount] of Object.entries(rawResources as Record<string, unknown>)) {
    if (!isValidResourceClass(resourceClass)) fail(`${at}.resources.${resourceClass}`, amount, 'a standard resource class or CUSTOM_[A-Z0-9_]+');
    if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 1) fail(`${at}.resources.${resourceClass}`, amount, 'a positive integer');
    resources[resourceClass] = amount;
  }
  const group: RequestGroup = {
    suffix,
    resources,
    requiredTraits: stringList(`${at}.requiredTraits`, g['requiredTraits'], isValidTraitName, 'trait names'),
    forbiddenTraits: stringList(`${at}.forbiddenTraits`, g['forbiddenTraits'], isValidTraitName, 'trait names'),
    memberOf: listOfLists(`${at}.memberOf`, g['memberOf'], (a) => AGGREGATE.test(a), 'aggregate uuids'),
  };
  const anyOf = listOfLists(`${at}.anyOfTraits`, g['anyOfTraits'], isValidTraitName, 'trait names');
  if (anyOf.length > 0) group.anyOfTraits = anyOf;
  const forbiddenAggregates = stringList(`${at}.forbiddenAggregates`, g['forbiddenAggregates'], (a) => AGGREGATE.test(a), 'aggregate uuids');
  if (forbiddenAggregates.length > 0) group.forbiddenAggregates = forbiddenAggregates;
  if (g['inTree'] !== undefined) {
    if (typeof g['inTree'] !== 'string' || !UUID_LIKE.test(g['inTree'])) fail(`${at}.inTree`, g['inTree'], 'a provider uuid');
    group.inTree = g['inTree'];
  }
  const conflict = group.requiredTraits.find((t) => group.forbiddenTraits.includes(t));
  if (conflict !== undefined) fail(`${at}.forbiddenTraits`, conflict, 'no trait that is also required');
  return group;
}

/**
 * Check a Placement-style request received as data (a scheduler's `placement` input, a JSON
 * body) and return it in canonical form: groups[0] is the unnumbered group (suffix ''), the
 * others have distinct suffixes; classes and traits are well formed; amounts are positive
 * integers; group_policy is given when two or more numbered groups have resources (as
 * Placement requires); same_subtree names existing suffixes. Throws RequestSpecError
 * (ERT_SPEC_INVALID_VALUE) naming the field at fault.
 */
export function checkPlacementRequest(raw: unknown): PlacementRequest {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) fail('placement', raw, 'an object with groups');
  const r = raw as Record<string, unknown>;
  if (!Array.isArray(r['groups']) || r['groups'].length === 0) fail('groups', r['groups'], 'a non-empty list whose first entry is the unnumbered group');
  const groups = (r['groups'] as unknown[]).map(checkGroup);
  const suffixes = groups.map((g) => g.suffix);
  const duplicate = suffixes.find((s, i) => suffixes.indexOf(s) !== i);
  if (duplicate !== undefined) fail('groups', duplicate, 'distinct suffixes');
  const policy = r['groupPolicy'];
  if (policy !== undefined && policy !== 'none' && policy !== 'isolate') fail('groupPolicy', policy, 'none or isolate');
  const numberedWithResources = groups.slice(1).filter((g) => Object.keys(g.resources).length > 0).length;
  if (numberedWithResources >= 2 && policy === undefined) fail('groupPolicy', policy, 'none or isolate (required with two or more numbered groups)');
  const request: PlacementRequest = { groups, groupPolicy: (policy as 'none' | 'isolate' | undefined) ?? 'none' };
  const sameSubtree = listOfLists('sameSubtree', r['sameSubtree'], (s) => suffixes.slice(1).includes(s), 'suffixes of numbered groups');
  if (sameSubtree.length > 0) request.sameSubtree = sameSubtree;
  const inSubtree = new Set(sameSubtree.flat());
  const orphan = groups.slice(1).find((g) => Object.keys(g.resources).length === 0 && !inSubtree.has(g.suffix));
  if (orphan !== undefined) fail(`groups[${suffixes.indexOf(orphan.suffix)}].resources`, {}, 'resources, unless the group is named in sameSubtree');
  const rootRequired = stringList('rootRequiredTraits', r['rootRequiredTraits'], isValidTraitName, 'trait names');
  const rootForbidden = stringList('rootForbiddenTraits', r['rootForbiddenTraits'], isValidTraitName, 'trait names');
  if (rootRequired.length > 0) request.rootRequiredTraits = rootRequired;
  if (rootForbidden.length > 0) request.rootForbiddenTraits = rootForbidden;
  for (const key of Object.keys(r)) {
    if (!['groups', 'groupPolicy', 'sameSubtree', 'rootRequiredTraits', 'rootForbiddenTraits'].includes(key)) fail(key, r[key], 'one of groups, groupPolicy, sameSubtree, rootRequiredTraits, rootForbiddenTraits');
  }
  return request;
}

/**
 * The RequestSpec of a Placement-style request that has no flavor (the scheduler's
 * `placement` input, `ert schedule --request`, and the API's requests): its groups as given,
 * no plugin keys, and a flavor named `placement-request` whose amounts are the totals of the
 * groups (so records and plugins that read the flavor see what is asked for). Pure.
 */
export function specFromPlacementRequest(request: PlacementRequest, hints: SchedulingHints = {}): RequestSpec {
  const total = (resourceClass: string): number => request.groups.reduce((sum, g) => sum + (g.resources[resourceClass] ?? 0), 0);
  const flavor: Flavor = { name: PLACEMENT_REQUEST_FLAVOR, vcpus: total('VCPU'), memoryMb: total('MEMORY_MB'), diskGb: total('DISK_GB'), extraSpecs: {} };
  const spec: RequestSpec = {
    flavor,
    groups: request.groups,
    groupPolicy: request.groupPolicy,
    aggregateExtraSpecs: {},
    capabilities: [],
    pluginSpecs: {},
    hints,
  };
  if (request.sameSubtree !== undefined) spec.sameSubtree = request.sameSubtree;
  if (request.rootRequiredTraits !== undefined) spec.rootRequiredTraits = request.rootRequiredTraits;
  if (request.rootForbiddenTraits !== undefined) spec.rootForbiddenTraits = request.rootForbiddenTraits;
  return spec;
}

/**
 * The request as a Placement `GET /allocation_candidates` query string (microversion 1.39
 * syntax, parameters in a fixed order, values unescaped for reading): what `ert schedule
 * --explain` prints, and what `curl` against Placement would send for the same request.
 */
export function toCandidatesQuery(request: PlacementRequest): string {
  const params: string[] = [];
  for (const group of request.groups) {
    const s = group.suffix;
    const resources = Object.entries(group.resources).map(([c, n]) => `${c}:${n}`);
    if (resources.length > 0) params.push(`resources${s}=${resources.join(',')}`);
    const required = [...group.requiredTraits, ...group.forbiddenTraits.map((t) => `!${t}`)];
    if (required.length > 0) params.push(`required${s}=${required.join(',')}`);
    for (const any of group.anyOfTraits ?? []) params.push(`required${s}=in:${any.join(',')}`);
    for (const list of group.memberOf) params.push(`member_of${s}=${list.length === 1 ? list[0] : `in:${list.join(',')}`}`);
    if ((group.forbiddenAggregates ?? []).length > 0) params.push(`member_of${s}=!in:${group.forbiddenAggregates!.join(',')}`);
    if (group.inTree !== undefined) params.push(`in_tree${s}=${group.inTree}`);
  }
  if (request.groups.length > 2) params.push(`group_policy=${request.groupPolicy}`);
  for (const list of request.sameSubtree ?? []) params.push(`same_subtree=${list.join(',')}`);
  const root = [...(request.rootRequiredTraits ?? []), ...(request.rootForbiddenTraits ?? []).map((t) => `!${t}`)];
  if (root.length > 0) params.push(`root_required=${root.join(',')}`);
  return params.join('&');
}
