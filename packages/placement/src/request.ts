import { isValidResourceClass, isValidTraitName, type Flavor, type PlacementRequest, type RequestGroup, type RequestSpec, type SchedulingHints } from '@ert/plugin-api';
import { PlacementErrorCodes, RequestSpecError } from './errors.js';
import { parseFlavor } from './parse.js';

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
  // Placement's _check_forbidden: an any-of list whose traits are all forbidden can never be met.
  const impossible = anyOf.find((list) => list.every((t) => group.forbiddenTraits.includes(t)));
  if (impossible !== undefined) fail(`${at}.anyOfTraits`, impossible, 'a list with at least one trait that is not forbidden');
  return group;
}

/**
 * Check a Placement-style request received as data (a scheduler's `placement` input, a JSON
 * body) and return it in canonical form: groups[0] is the unnumbered group (suffix ''), the
 * others have distinct suffixes; classes and traits are well formed; amounts are positive
 * integers; group_policy is given when there are two or more numbered groups (as
 * Placement requires); same_subtree names existing suffixes; no trait is both required and
 * forbidden, and no any-of list is entirely forbidden. Throws RequestSpecError
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
  // As Placement: every suffixed group counts, with resources or not.
  if (groups.length - 1 >= 2 && policy === undefined) fail('groupPolicy', policy, 'none or isolate (required with two or more numbered groups)');
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
 * The flavor that records a Placement-style request on an instance: amounts 0 and the
 * request in Nova's extra-spec spelling (`resources[S]:CLASS`, `trait[S]:NAME`,
 * `member_of[S]`, `group_policy`), so that `parseFlavor` of it gives back the same groups.
 * The tracker that confirms, resizes or migrates the instance later reads its flavor: a
 * request the flavor spelling cannot carry (any-of traits, in_tree, same_subtree,
 * root_required) is refused here (RequestSpecError naming the field) rather than recorded
 * as something else.
 */
export function flavorFromPlacementRequest(request: PlacementRequest): Flavor {
  const extraSpecs: Record<string, string> = {};
  request.groups.forEach((group, index) => {
    const at = `groups[${index}]`;
    if ((group.anyOfTraits ?? []).length > 0) fail(`${at}.anyOfTraits`, group.anyOfTraits, 'no any-of traits in a request an instance records (a flavor cannot spell them)');
    if (group.inTree !== undefined) fail(`${at}.inTree`, group.inTree, 'no in_tree in a request an instance records (a flavor cannot spell it)');
    const s = group.suffix;
    for (const [resourceClass, amount] of Object.entries(group.resources)) extraSpecs[`resources${s}:${resourceClass}`] = String(amount);
    for (const trait of group.requiredTraits) extraSpecs[`trait${s}:${trait}`] = 'required';
    for (const trait of group.forbiddenTraits) extraSpecs[`trait${s}:${trait}`] = 'forbidden';
    if (group.memberOf.length > 1) fail(`${at}.memberOf`, group.memberOf, 'one member_of list in a request an instance records (a flavor has one member_of key per group)');
    if (group.memberOf.length === 1) extraSpecs[`member_of${s}`] = `in:${group.memberOf[0]!.join(',')}`;
    if ((group.forbiddenAggregates ?? []).length > 0) {
      if (group.memberOf.length > 0) fail(`${at}.forbiddenAggregates`, group.forbiddenAggregates, 'either memberOf or forbiddenAggregates in a request an instance records');
      extraSpecs[`member_of${s}`] = `!in:${group.forbiddenAggregates!.join(',')}`;
    }
  });
  if ((request.sameSubtree ?? []).length > 0) fail('sameSubtree', request.sameSubtree, 'no same_subtree in a request an instance records (a flavor cannot spell it)');
  if ((request.rootRequiredTraits ?? []).length + (request.rootForbiddenTraits ?? []).length > 0) {
    fail('rootRequiredTraits', request.rootRequiredTraits ?? request.rootForbiddenTraits, 'no root_required in a request an instance records (a flavor cannot spell it)');
  }
  if (request.groups.length > 1) extraSpecs['group_policy'] = request.groupPolicy;
  return { name: PLACEMENT_REQUEST_FLAVOR, vcpus: 0, memoryMb: 0, diskGb: 0, extraSpecs };
}

/**
 * The RequestSpec of a Placement-style request that has no flavor (the scheduler's
 * `placement` input): the flavor `flavorFromPlacementRequest` records, parsed back with
 * `parseFlavor`, so the scheduler and every later reader of the instance's flavor work from
 * the same groups. Pure; throws RequestSpecError for what a flavor cannot carry.
 */
export function specFromPlacementRequest(request: PlacementRequest, hints: SchedulingHints = {}): RequestSpec {
  return parseFlavor(flavorFromPlacementRequest(request), { keys: [], hints });
}

/** The part of a spec that decides where it fits, as a Placement-style request. */
export function placementRequestOf(spec: PlacementRequest): PlacementRequest {
  const { groups, groupPolicy, sameSubtree, rootRequiredTraits, rootForbiddenTraits } = spec;
  const request: PlacementRequest = { groups, groupPolicy };
  if (sameSubtree !== undefined) request.sameSubtree = sameSubtree;
  if (rootRequiredTraits !== undefined) request.rootRequiredTraits = rootRequiredTraits;
  if (rootForbiddenTraits !== undefined) request.rootForbiddenTraits = rootForbiddenTraits;
  return request;
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
