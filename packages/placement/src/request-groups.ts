import { isValidResourceClass, isValidTraitName, type Flavor, type RequestGroup, type ResourceRequestGroup } from '@ert/plugin-api';
import { PlacementErrorCodes, RequestSpecError, type PlacementErrorCode } from './errors.js';

// A requester is a group suffix as Placement (>= 1.33) accepts it.
const REQUESTER = /^[a-zA-Z0-9_-]{1,64}$/;

function groupError(code: PlacementErrorCode, key: string, value: unknown, expected: string, why?: string): RequestSpecError {
  const shown = value === undefined ? undefined : typeof value === 'string' ? value : JSON.stringify(value);
  return new RequestSpecError(code, `request group ${key}${shown === undefined ? '' : `=${shown}`}: ${why ?? `expected ${expected}`}`, {
    key,
    value: shown,
    expected,
    source: 'requestGroups',
  });
}

function traitList(value: unknown, key: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw groupError(PlacementErrorCodes.INVALID_VALUE, key, value, 'a list of trait names');
  value.forEach((trait, j) => {
    if (typeof trait !== 'string' || !isValidTraitName(trait)) throw groupError(PlacementErrorCodes.INVALID_VALUE, `${key}[${j}]`, trait, 'a trait name [A-Z][A-Z0-9_]*');
  });
  return [...new Set(value as string[])];
}

/**
 * Request groups beyond the flavor (`flavor.requestGroups`: ports' and devices' resource
 * requests, docs/request-groups.md) as numbered Placement groups whose suffix is the
 * requester. Each is checked here, naming `requestGroups[i].<field>`: a requester that is not
 * a group suffix (`[A-Za-z0-9_-]{1,64}`) or appears twice, no resources, a class or trait
 * name that is not one, an amount that is not a positive integer, a trait both required and
 * forbidden. Conflicts with the flavor's own numbered groups are the parser's to find.
 *
 * Returns them as numbered RequestGroups, in the order given; [] when the flavor has none.
 * Pure; throws RequestSpecError.
 */
export function requestGroupsOf(flavor: Flavor): RequestGroup[] {
  const given: unknown = flavor.requestGroups;
  if (given === undefined) return [];
  if (!Array.isArray(given)) throw groupError(PlacementErrorCodes.INVALID_VALUE, 'requestGroups', given, 'a list of { requester, resources, required?, forbidden? }');
  const seen = new Set<string>();
  return given.map((raw: unknown, i): RequestGroup => {
    const at = `requestGroups[${i}]`;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw groupError(PlacementErrorCodes.INVALID_VALUE, at, raw, '{ requester, resources, required?, forbidden? }');
    const group = raw as Partial<ResourceRequestGroup> & Record<string, unknown>;
    for (const field of Object.keys(group)) {
      if (!['requester', 'resources', 'required', 'forbidden', 'provider'].includes(field)) {
        throw groupError(PlacementErrorCodes.UNKNOWN_KEY, `${at}.${field}`, undefined, 'requester, resources, required, forbidden', `"${field}" is not a field of a request group`);
      }
    }
    const requester = group.requester;
    if (typeof requester !== 'string' || !REQUESTER.test(requester)) {
      throw groupError(PlacementErrorCodes.INVALID_VALUE, `${at}.requester`, requester, 'a group suffix [A-Za-z0-9_-]{1,64} (e.g. the port uuid)');
    }
    if (seen.has(requester)) throw groupError(PlacementErrorCodes.CONFLICT, `${at}.requester`, requester, 'a requester unique within the instance', `requester ${requester} has two request groups`);
    seen.add(requester);
    const resources = group.resources;
    if (resources === null || typeof resources !== 'object' || Array.isArray(resources) || Object.keys(resources).length === 0) {
      throw groupError(PlacementErrorCodes.INVALID_VALUE, `${at}.resources`, resources, 'amounts by resource class, at least one');
    }
    for (const [resourceClass, amount] of Object.entries(resources)) {
      if (!isValidResourceClass(resourceClass)) throw groupError(PlacementErrorCodes.INVALID_VALUE, `${at}.resources.${resourceClass}`, undefined, 'a standard resource class or CUSTOM_[A-Z0-9_]+', `"${resourceClass}" is not a resource class`);
      if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount <= 0) throw groupError(PlacementErrorCodes.INVALID_VALUE, `${at}.resources.${resourceClass}`, amount, 'a positive integer amount');
    }
    const required = traitList(group.required, `${at}.required`);
    const forbidden = traitList(group.forbidden, `${at}.forbidden`);
    const both = required.filter((t) => forbidden.includes(t));
    if (both.length > 0) throw groupError(PlacementErrorCodes.CONFLICT, `${at}.forbidden`, both.join(','), 'traits not also required', `${both.join(', ')} both required and forbidden`);
    return { suffix: requester, resources: { ...resources }, requiredTraits: required, forbiddenTraits: forbidden, memberOf: [] };
  });
}

/**
 * `flavor` with the `provider` of each request group that `mappings` (a fit's, group suffix
 * -> provider uuids; a numbered group has one) names set from it; the other groups as they
 * are (an attach maps only the group it adds). The same flavor object when it has no request
 * groups. Pure.
 */
export function withGroupProviders(flavor: Flavor, mappings: Readonly<Record<string, readonly string[]>> | undefined): Flavor {
  if (flavor.requestGroups === undefined || flavor.requestGroups.length === 0) return flavor;
  return {
    ...flavor,
    requestGroups: flavor.requestGroups.map((group) => {
      const provider = mappings?.[group.requester]?.[0];
      return provider === undefined ? group : { ...group, provider };
    }),
  };
}
