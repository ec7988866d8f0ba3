import type { GroupPolicy, PlacementRequest, RequestGroup, ResourceClass } from '@ert/plugin-api';
import { PlacementErrorCodes, PlacementQueryError, type PlacementQueryErrorCode } from './errors.js';

/**
 * GET /allocation_candidates query strings, parsed exactly as OpenStack Placement 8.0.0 does
 * (placement/handlers/allocation_candidate.py, lib.py, util.py,
 * schemas/allocation_candidate.py), for microversions 1.10-1.39. Messages are Placement's,
 * word for word, because clients match substrings of them; Python's own behaviour is
 * reproduced where it shows through (`int()` and `str.strip()` semantics, `repr()` in
 * messages, `$` matching before a final newline in the schema's regexes).
 */

/** A Placement microversion, `1.39` = `{ major: 1, minor: 39 }`. */
export interface Microversion {
  major: number;
  minor: number;
}

/** What a GET /allocation_candidates query string asks for. */
export interface CandidatesQuery {
  request: PlacementRequest;
  /** `limit` (1.16+): return at most this many allocation requests. Absent: no limit. */
  limit?: number;
}

/** The lowest and highest microversion at which GET /allocation_candidates exists. */
export const CANDIDATES_MIN_MICROVERSION: Readonly<Microversion> = Object.freeze({ major: 1, minor: 10 });
export const CANDIDATES_MAX_MICROVERSION: Readonly<Microversion> = Object.freeze({ major: 1, minor: 39 });

const PREFIXES = ['resources', 'required', 'member_of', 'in_tree'] as const;
type Prefix = (typeof PREFIXES)[number];

// Placement's schemas/common.py GROUP_PAT and GROUP_PAT_1_33.
const GROUP_PAT = '[1-9][0-9]*';
const GROUP_PAT_1_33 = '[a-zA-Z0-9_-]{1,64}';
const LIMIT_PATTERN = '^[1-9][0-9]*$';
const GROUP_POLICIES = ['none', 'isolate'] as const;

/**
 * A Python regular expression's `$` also matches just before a final newline (re.search and
 * re.match as Placement and jsonschema use them); JavaScript's does not. Every pattern below
 * ends in `$` and contains no other newline-sensitive part, so `\n?$` is the translation.
 */
function pyRegex(pattern: string): RegExp {
  if (!pattern.endsWith('$')) throw new Error(`pattern must end in $: ${pattern}`);
  return new RegExp(`${pattern.slice(0, -1)}\\n?$`);
}

const LIMIT_REGEX = pyRegex(LIMIT_PATTERN);

/** The query-string schema of one microversion (Placement's GET_SCHEMA_1_*). */
interface QuerySchema {
  /** `properties`, in the schema's order. */
  properties: readonly string[];
  /** `required` (only 1.10-1.24: `resources`). */
  required: readonly string[];
  /** `patternProperties` (1.25+), as written in Placement's schema. */
  patternProperties: readonly string[];
}

function atLeast(mv: Microversion, minor: number): boolean {
  return mv.major > 1 || (mv.major === 1 && mv.minor >= minor);
}

function schemaFor(mv: Microversion): QuerySchema {
  if (!atLeast(mv, 25)) {
    const properties = ['resources'];
    if (atLeast(mv, 16)) properties.push('limit');
    if (atLeast(mv, 17)) properties.push('required');
    if (atLeast(mv, 21)) properties.push('member_of');
    return { properties, required: ['resources'], patternProperties: [] };
  }
  const properties = ['limit', 'group_policy'];
  if (atLeast(mv, 35)) properties.push('root_required');
  if (atLeast(mv, 36)) properties.push('same_subtree');
  const groupPat = atLeast(mv, 33) ? GROUP_PAT_1_33 : GROUP_PAT;
  const prefixes: Prefix[] = ['resources', 'required', 'member_of'];
  if (atLeast(mv, 31)) prefixes.push('in_tree');
  return { properties, required: [], patternProperties: prefixes.map((p) => `^${p}(${groupPat})?$`) };
}

// ---------------------------------------------------------------------------------------------
// Python semantics that show through Placement's answers.

// str.isspace(): \t \n \v \f \r, the separators U+001C-U+001F, space, U+0085, U+00A0 and
// the Unicode spaces (String.prototype.trim's set lacks U+001C-U+001F and U+0085 and adds U+FEFF).
const PY_WHITESPACE = new Set([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
  0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

function isPySpace(ch: string): boolean {
  return PY_WHITESPACE.has(ch.codePointAt(0)!);
}

/** Python's `str.strip()` (its whitespace set differs from String.prototype.trim's). */
function pyStrip(value: string): string {
  const chars = [...value];
  let start = 0;
  let end = chars.length;
  while (start < end && isPySpace(chars[start]!)) start++;
  while (end > start && isPySpace(chars[end - 1]!)) end--;
  return chars.slice(start, end).join('');
}

/** Python's `str.lstrip(ch)` for one character. */
function lstripChar(value: string, ch: string): string {
  let i = 0;
  while (value.startsWith(ch, i)) i += ch.length;
  return value.slice(i);
}

/** Python's `str.strip(chars)`. */
function stripChars(value: string, chars: string): string {
  const list = [...value];
  let start = 0;
  let end = list.length;
  while (start < end && chars.includes(list[start]!)) start++;
  while (end > start && chars.includes(list[end - 1]!)) end--;
  return list.slice(start, end).join('');
}

const ND = /^\p{Nd}$/u;

/** The value of a Unicode decimal digit (Nd digits come in runs of 0..9). */
function digitValue(ch: string): number {
  let cp = ch.codePointAt(0)!;
  let steps = 0;
  while (cp > 0 && ND.test(String.fromCodePoint(cp - 1))) {
    cp--;
    steps++;
  }
  return steps % 10;
}

/**
 * Python's `int(text)` (base 10): surrounding whitespace, a sign, any Unicode decimal digits,
 * single underscores between digits. Undefined where Python raises ValueError.
 */
function pyInt(text: string): bigint | undefined {
  const chars = [...pyStrip(text)];
  let i = 0;
  let negative = false;
  if (chars[i] === '+' || chars[i] === '-') {
    negative = chars[i] === '-';
    i++;
  }
  if (i >= chars.length) return undefined;
  let value = 0n;
  let lastWasDigit = false;
  for (; i < chars.length; i++) {
    const ch = chars[i]!;
    if (ch === '_') {
      if (!lastWasDigit) return undefined;
      lastWasDigit = false;
      continue;
    }
    if (!ND.test(ch)) return undefined;
    value = value * 10n + BigInt(digitValue(ch));
    lastWasDigit = true;
  }
  if (!lastWasDigit) return undefined;
  return negative ? -value : value;
}

function isPyPrintable(ch: string): boolean {
  if (ch === ' ') return true;
  return !/^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u.test(ch);
}

/** Python's `repr()` of a str. */
function pyRepr(value: string): string {
  const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of value) {
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (isPyPrintable(ch)) out += ch;
    else {
      const cp = ch.codePointAt(0)!;
      if (cp < 0x100) out += `\\x${cp.toString(16).padStart(2, '0')}`;
      else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, '0')}`;
      else out += `\\U${cp.toString(16).padStart(8, '0')}`;
    }
  }
  return out + quote;
}

/** Python's `repr()` of a list of str. */
function pyListRepr(values: readonly string[]): string {
  return `[${values.map(pyRepr).join(', ')}]`;
}

/** Python's ordering of str (by code point, not by UTF-16 unit). */
function pyCompare(a: string, b: string): number {
  const ca = [...a];
  const cb = [...b];
  for (let i = 0; i < Math.min(ca.length, cb.length); i++) {
    const d = ca[i]!.codePointAt(0)! - cb[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return ca.length - cb.length;
}

function pySorted(values: Iterable<string>): string[] {
  return [...values].sort(pyCompare);
}

/**
 * oslo_utils.uuidutils.is_uuid_like: after dropping `urn:` and `uuid:`, stripping braces
 * and removing dashes, 32 hex digits (either case). `{...}`, dash-free and upper-case forms
 * pass; Placement then compares the value as given, so they match nothing stored.
 */
function isUuidLike(value: string): boolean {
  const hex = stripChars(value.replaceAll('urn:', '').replaceAll('uuid:', ''), '{}').replaceAll('-', '');
  return /^[0-9a-fA-F]{32}$/.test(hex);
}

// ---------------------------------------------------------------------------------------------
// Errors

function fail(message: string, key?: string, value?: string, code: PlacementQueryErrorCode = PlacementErrorCodes.QUERY_UNDEFINED): never {
  throw new PlacementQueryError(code, message, { key, value });
}

function schemaFail(message: string, key?: string, value?: string): never {
  fail(`Invalid query string parameters: ${message}`, key, value);
}

// ---------------------------------------------------------------------------------------------
// Query access, webob MultiDict style.

type Items = ReadonlyArray<readonly [string, string]>;

function getAll(items: Items, key: string): string[] {
  return items.filter(([k]) => k === key).map(([, v]) => v);
}

/**
 * jsonschema.validate(dict(req.GET), schema) and its best_match: dict() keeps each key's
 * last value; top-level errors (a missing `resources`, unknown keys) win over a property's
 * value error; among equals, the first in the schema's keyword order.
 */
function validateSchema(items: Items, mv: Microversion): void {
  const schema = schemaFor(mv);
  const instance = new Map<string, string>();
  for (const [k, v] of items) instance.set(k, v);

  for (const property of schema.required) {
    if (!instance.has(property)) schemaFail(`${pyRepr(property)} is a required property`, property);
  }
  const patterns = schema.patternProperties.map(pyRegex);
  const extras = [...instance.keys()].filter((k) => !schema.properties.includes(k) && !patterns.some((p) => p.test(k)));
  if (extras.length > 0) {
    const sorted = pySorted(new Set(extras));
    const joined = sorted.map(pyRepr).join(', ');
    if (schema.patternProperties.length > 0) {
      const regexes = pySorted(schema.patternProperties).map(pyRepr).join(', ');
      schemaFail(`${joined} ${sorted.length === 1 ? 'does' : 'do'} not match any of the regexes: ${regexes}`, sorted[0]);
    }
    schemaFail(`Additional properties are not allowed (${joined} ${sorted.length === 1 ? 'was' : 'were'} unexpected)`, sorted[0]);
  }
  for (const property of schema.properties) {
    const value = instance.get(property);
    if (value === undefined) continue;
    if (property === 'limit' && !LIMIT_REGEX.test(value)) {
      schemaFail(`${pyRepr(value)} does not match ${pyRepr(LIMIT_PATTERN)}`, property, value);
    }
    if (property === 'group_policy' && !(GROUP_POLICIES as readonly string[]).includes(value)) {
      schemaFail(`${pyRepr(value)} is not one of ${pyListRepr(GROUP_POLICIES)}`, property, value);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Value parsers (placement/util.py).

/** util.normalize_resources_qs_param. */
function parseResources(key: string, qs: string): Record<ResourceClass, number> {
  if (pyStrip(qs) === '') {
    fail(
      'Badly formed resources parameter. Expected resources query string parameter in form: ' +
        '?resources=VCPU:2,MEMORY_MB:1024. Got: empty string.',
      key,
      qs,
    );
  }
  const result: Record<ResourceClass, number> = {};
  for (const rt of qs.split(',')) {
    const parts = rt.split(':');
    if (parts.length !== 2) {
      fail(
        'Badly formed resources parameter. Expected resources query string parameter in form: ' +
          `?resources=VCPU:2,MEMORY_MB:1024. Got: ${rt}.`,
        key,
        qs,
      );
    }
    const [rcName, amountText] = parts as [string, string];
    const amount = pyInt(amountText);
    if (amount === undefined) {
      fail(`Requested resource ${rcName} expected positive integer amount. Got: ${amountText}.`, key, qs);
    }
    if (amount < 1n) fail(`Requested resource ${rcName} requires amount >= 1. Got: ${amount}.`, key, qs);
    // Python keeps the insertion position of a repeated class and takes its last amount.
    result[rcName] = Number(amount);
  }
  return result;
}

interface TraitsValue {
  /** Each set is "any of"; the list is "all of" (Placement's required_traits). */
  required: Array<Set<string>>;
  forbidden: Set<string>;
}

/** util.normalize_traits_qs_param. */
function parseTraits(key: string, val: string, allowForbidden: boolean, allowAnyTraits: boolean): TraitsValue {
  if (val.startsWith('in:')) {
    if (!allowAnyTraits) {
      fail(
        "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported " +
          `since microversion 1.39. Got: ${val}`,
        key,
        val,
      );
    }
    const anyTraits = new Set(val.slice(3).split(',').map(pyStrip));
    if ([...anyTraits].some((t) => t === '')) {
      fail(
        "Invalid query string parameters: Expected 'required' parameter value of the form: " +
          `in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: ${val}`,
        key,
        val,
      );
    }
    if ([...anyTraits].some((t) => t.startsWith('!'))) {
      fail(
        "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support " +
          `forbidden traits. Got: ${val}`,
        key,
        val,
      );
    }
    return { required: [anyTraits], forbidden: new Set() };
  }
  const allTraits = val.split(',').map(pyStrip);
  // Leading '!'s are all stripped: `!!!T` forbids T (a Placement bug kept for compatibility).
  const forbidden = new Set(allTraits.filter((t) => t.startsWith('!')).map((t) => lstripChar(t, '!')));
  if ([...forbidden, ...allTraits].some((t) => t === '')) {
    const expectedForm = allowForbidden ? 'HW_CPU_X86_VMX,!CUSTOM_MAGIC' : 'HW_CPU_X86_VMX,CUSTOM_MAGIC';
    fail(
      "Invalid query string parameters: Expected 'required' parameter value of the form: " +
        `${expectedForm}. Got an empty trait in: ${val}`,
      key,
      val,
    );
  }
  const required = allTraits.filter((t) => !t.startsWith('!')).map((t) => new Set([t]));
  if (forbidden.size > 0 && !allowForbidden) {
    fail(
      "Invalid query string parameters: Expected 'required' parameter value of the form: " +
        `HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: ${val}`,
      key,
      val,
    );
  }
  return { required, forbidden };
}

/** util.normalize_traits_qs_params: every `required<suffix>` from 1.39, the last one before. */
function parseRequiredParams(items: Items, suffix: string, mv: Microversion): TraitsValue {
  const key = `required${suffix}`;
  let values = getAll(items, key);
  if (!atLeast(mv, 39)) values = values.slice(-1);
  const out: TraitsValue = { required: [], forbidden: new Set() };
  for (const value of values) {
    const parsed = parseTraits(key, value, atLeast(mv, 22), atLeast(mv, 39));
    out.required.push(...parsed.required);
    for (const t of parsed.forbidden) out.forbidden.add(t);
  }
  return out;
}

interface MemberOfValue {
  required: Array<Set<string>>;
  forbidden: Set<string>;
}

/** util.normalize_member_of_qs_param. */
function parseMemberOf(key: string, value: string): MemberOfValue {
  if (value.includes(',') && !(value.startsWith('in:') || value.startsWith('!in:'))) {
    fail(
      "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword using the valid " +
        `microversion. Got: ${value}`,
      key,
      value,
    );
  }
  let required = new Set<string>();
  let forbidden = new Set<string>();
  if (value.startsWith('!in:')) forbidden = new Set(value.slice(4).split(','));
  else if (value.startsWith('!')) forbidden = new Set([value.slice(1)]);
  else if (value.startsWith('in:')) required = new Set(value.slice(3).split(','));
  else required = new Set([value]);
  for (const aggregate of [...required, ...forbidden]) {
    if (!isUuidLike(aggregate)) {
      fail(`Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: ${aggregate}`, key, value);
    }
  }
  return { required: required.size > 0 ? [required] : [], forbidden };
}

/** util.normalize_member_of_qs_params: repetition from 1.24, `!` forms from 1.32. */
function parseMemberOfParams(items: Items, suffix: string, mv: Microversion): MemberOfValue {
  const key = `member_of${suffix}`;
  const values = getAll(items, key);
  if (!atLeast(mv, 24) && values.length > 1) fail(`Multiple member_of${suffix} parameters are not supported`, key);
  const out: MemberOfValue = { required: [], forbidden: new Set() };
  for (const value of values) {
    const parsed = parseMemberOf(key, value);
    out.required.push(...parsed.required);
    if (parsed.forbidden.size > 0) {
      if (!atLeast(mv, 32)) {
        fail(`Forbidden member_of${suffix} parameters are not supported in the specified microversion`, key, value);
      }
      for (const a of parsed.forbidden) out.forbidden.add(a);
    }
  }
  return out;
}

/** util.normalize_in_tree_qs_params. */
function parseInTree(key: string, value: string): string {
  const ret = pyStrip(value);
  if (!isUuidLike(ret)) {
    fail(`Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: ${value}`, key, value);
  }
  return ret;
}

// ---------------------------------------------------------------------------------------------
// Request-wide parameters (lib.RequestWideParams.from_request).

interface WideParams {
  limit?: number;
  groupPolicy?: string;
  rootRequired?: string[];
  rootForbidden?: string[];
  sameSubtrees: Array<Set<string>>;
}

function parseWideParams(items: Items): WideParams {
  const out: WideParams = { sameSubtrees: [] };

  // Placement reads the first `limit` and `group_policy` but its schema checked only the
  // last (dict(req.GET)); a different first value then gives a 500 (limit=abc), no limit
  // (limit=0), a cut from the end (limit=-2) or an unknown policy treated as `none`. ert
  // refuses every bad value with the schema's own message instead.
  const limits = getAll(items, 'limit');
  for (const value of limits) {
    if (!LIMIT_REGEX.test(value)) schemaFail(`${pyRepr(value)} does not match ${pyRepr(LIMIT_PATTERN)}`, 'limit', value);
  }
  if (limits.length > 0) out.limit = Number(pyInt(limits[0]!));
  const policies = getAll(items, 'group_policy');
  for (const value of policies) {
    if (!(GROUP_POLICIES as readonly string[]).includes(value)) {
      schemaFail(`${pyRepr(value)} is not one of ${pyListRepr(GROUP_POLICIES)}`, 'group_policy', value);
    }
  }
  if (policies.length > 0) out.groupPolicy = policies[0];

  const rootRequired = getAll(items, 'root_required');
  if (rootRequired.length > 0) {
    if (rootRequired.length > 1) {
      fail("Query parameter 'root_required' may be specified only once.", 'root_required', undefined, PlacementErrorCodes.QUERY_DUPLICATE_KEY);
    }
    const value = rootRequired[0]!;
    // root_required has no any-of form: the legacy parser, which refuses `in:`.
    const parsed = parseTraits('root_required', value, true, false);
    // lib._fix_one_forbidden over the legacy set {T, ..., '!F', ...}.
    const required = new Set<string>();
    for (const anyOf of parsed.required) for (const t of anyOf) required.add(t);
    const conflicts = pySorted([...parsed.forbidden].filter((t) => required.has(t)));
    if (conflicts.length > 0) {
      fail(
        `Conflicting required and forbidden traits found in root_required: ${conflicts.join(', ')}`,
        'root_required',
        value,
        PlacementErrorCodes.QUERY_BAD_VALUE,
      );
    }
    out.rootRequired = [...required];
    out.rootForbidden = [...parsed.forbidden];
  }

  for (const value of getAll(items, 'same_subtree')) {
    const suffixes = new Set(value.split(',').map(pyStrip));
    if (suffixes.has('')) {
      fail(
        'Empty string (unsuffixed group) can not be specified in `same_subtree` ',
        'same_subtree',
        value,
        PlacementErrorCodes.QUERY_BAD_VALUE,
      );
    }
    out.sameSubtrees.push(suffixes);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Request groups (lib.RequestGroup.dict_from_request).

interface GroupDraft {
  suffix: string;
  resources: Record<ResourceClass, number>;
  required: Array<Set<string>>;
  forbidden: Set<string>;
  memberOf: Array<Set<string>>;
  forbiddenAggregates: Set<string>;
  inTree?: string;
}

function keyPattern(mv: Microversion): RegExp {
  const groupPat = atLeast(mv, 33) ? GROUP_PAT_1_33 : GROUP_PAT;
  return pyRegex(`^(${PREFIXES.join('|')})(${groupPat})?$`);
}

function parseGroups(items: Items, mv: Microversion): Map<string, GroupDraft> {
  const bySuffix = new Map<string, GroupDraft>();
  const pattern = keyPattern(mv);
  for (const [key, val] of items) {
    const match = pattern.exec(key);
    if (!match) continue;
    const prefix = match[1] as Prefix;
    const suffix = match[2] ?? '';
    let group = bySuffix.get(suffix);
    if (!group) {
      group = { suffix, resources: {}, required: [], forbidden: new Set(), memberOf: [], forbiddenAggregates: new Set() };
      bySuffix.set(suffix, group);
    }
    switch (prefix) {
      case 'resources':
        group.resources = parseResources(key, val);
        break;
      case 'required': {
        const traits = parseRequiredParams(items, suffix, mv);
        group.required = traits.required;
        group.forbidden = traits.forbidden;
        break;
      }
      case 'member_of': {
        const aggregates = parseMemberOfParams(items, suffix, mv);
        group.memberOf = aggregates.required;
        group.forbiddenAggregates = aggregates.forbidden;
        break;
      }
      case 'in_tree':
        group.inTree = parseInTree(key, val);
        break;
    }
  }
  return bySuffix;
}

function hasResources(group: GroupDraft): boolean {
  return Object.keys(group.resources).length > 0;
}

/** Before 1.36 (lib._check_for_orphans): every group needs resources. */
function checkOrphans(bySuffix: Map<string, GroupDraft>): void {
  const groups = [...bySuffix.values()];
  const traitOrphans = groups.filter((g) => g.required.length > 0 && !hasResources(g)).map((g) => `required${g.suffix}`);
  if (traitOrphans.length > 0) {
    fail(
      `All traits parameters must be associated with resources.  Found the following orphaned traits keys: ${traitOrphans.join(', ')}`,
      traitOrphans[0],
    );
  }
  const memberOrphans = groups
    .filter((g) => !hasResources(g) && (g.memberOf.length > 0 || g.forbiddenAggregates.size > 0))
    .map((g) => `member_of${g.suffix}`);
  if (memberOrphans.length > 0) {
    fail(
      `All member_of parameters must be associated with resources. Found the following orphaned member_of keys: ${memberOrphans.join(', ')}`,
      memberOrphans[0],
    );
  }
  if (!groups.every(hasResources)) fail('All request groups must specify resources.');
  if (groups.length === 0) fail('At least one request group (`resources` or `resources{$S}`) is required.');
}

/** From 1.36: resourceless groups only as named members of a `same_subtree`. */
function checkResourceless(bySuffix: Map<string, GroupDraft>, sameSubtrees: Array<Set<string>>): void {
  const resourceless = [...bySuffix.values()].filter((g) => !hasResources(g)).map((g) => g.suffix);
  const subtreeSuffixes = new Set<string>();
  for (const s of sameSubtrees) for (const suffix of s) subtreeSuffixes.add(suffix);
  if (resourceless.length === bySuffix.size) {
    fail('There must be at least one resources or resources[$S] parameter.', undefined, undefined, PlacementErrorCodes.QUERY_MISSING_VALUE);
  }
  // Placement lists these from Python sets (order varies per process); ert lists them in
  // the order they first appear in the query.
  const badResourceless = resourceless.filter((s) => !subtreeSuffixes.has(s));
  if (badResourceless.length > 0) {
    fail(
      `Resourceless suffixed group request should be specified in \`same_subtree\` query param: bad group(s) - ${pyListRepr(badResourceless)}.`,
      `resources${badResourceless[0]}`,
      undefined,
      PlacementErrorCodes.QUERY_BAD_VALUE,
    );
  }
  const badSubtree = [...subtreeSuffixes].filter((s) => !bySuffix.has(s));
  if (badSubtree.length > 0) {
    fail(
      `Real suffixes should be specified in \`same_subtree\`: ${pyListRepr(badSubtree)} not found in ${pyListRepr([...bySuffix.keys()])}.`,
      'same_subtree',
      undefined,
      PlacementErrorCodes.QUERY_BAD_VALUE,
    );
  }
}

/** From 1.22 (lib._check_forbidden): an any-of set entirely forbidden in its group. */
function checkForbidden(bySuffix: Map<string, GroupDraft>): void {
  const conflicts: string[] = [];
  for (const group of bySuffix.values()) {
    for (const anyOf of group.required) {
      if ([...anyOf].every((t) => group.forbidden.has(t))) {
        conflicts.push(`required${group.suffix}: (${pySorted(anyOf).join(', ')})`);
      }
    }
  }
  if (conflicts.length > 0) {
    fail(`Conflicting required and forbidden traits found in the following traits keys: ${pySorted(conflicts).join(', ')}`);
  }
}

function unique<T>(values: Iterable<T>): T[] {
  return [...new Set(values)];
}

function toRequestGroup(draft: GroupDraft): RequestGroup {
  const requiredTraits: string[] = [];
  const anyOfTraits: string[][] = [];
  for (const anyOf of draft.required) {
    if (anyOf.size === 1) requiredTraits.push(...anyOf);
    else anyOfTraits.push([...anyOf]);
  }
  const group: RequestGroup = {
    suffix: draft.suffix,
    resources: { ...draft.resources },
    requiredTraits: unique(requiredTraits),
    forbiddenTraits: [...draft.forbidden],
    memberOf: draft.memberOf.map((s) => [...s]),
  };
  if (anyOfTraits.length > 0) group.anyOfTraits = anyOfTraits;
  if (draft.forbiddenAggregates.size > 0) group.forbiddenAggregates = [...draft.forbiddenAggregates];
  if (draft.inTree !== undefined) group.inTree = draft.inTree;
  return group;
}

/**
 * The value parsers of placement/util.py that `GET /resource_providers` shares with
 * allocation candidates, for the HTTP layer: the same rules, messages and
 * `PlacementQueryError`s as inside `parseCandidatesQuery`.
 * - `resources(key, value)`: normalize_resources_qs_param (`RC:N,...`, N >= 1);
 * - `required(query, mv)`: normalize_traits_qs_params of the unsuffixed `required` (the last
 *   one before 1.39; `!T` from 1.22; `in:` and repetition from 1.39): `required` is a list
 *   of any-of sets, all of which must hold;
 * - `memberOf(query, mv)`: normalize_member_of_qs_params of `member_of` (repetition from
 *   1.24, `!` forms from 1.32), in the same shape;
 * - `uuidLike(value)`: oslo's is_uuid_like.
 */
export const placementQueryValues = {
  resources: (key: string, value: string): Record<ResourceClass, number> => parseResources(key, value),
  required: (query: URLSearchParams, mv: Microversion): { required: Array<Set<string>>; forbidden: Set<string> } => parseRequiredParams([...query], '', mv),
  memberOf: (query: URLSearchParams, mv: Microversion): { required: Array<Set<string>>; forbidden: Set<string> } => parseMemberOfParams([...query], '', mv),
  uuidLike: (value: string): boolean => isUuidLike(value),
};

/**
 * Parse the query string of `GET /allocation_candidates` at `microversion` (1.10-1.39) into
 * the request the candidates engine takes, applying Placement 8.0.0's rules in its order
 * (so the first error Placement would report is the one thrown):
 *
 * 1. the microversion's schema: unknown or too-new parameters (`in_tree` before 1.31,
 *    suffixed keys before 1.25, `_NAME` suffixes before 1.33, ...), `resources` missing
 *    before 1.25, `limit` not `^[1-9][0-9]*$`, `group_policy` not none|isolate;
 * 2. request-wide parameters: `root_required` (1.35; twice -> `placement.query.duplicate_key`;
 *    `in:` refused; a trait both required and forbidden -> `placement.query.bad_value`),
 *    `same_subtree` (1.36; an empty suffix -> `placement.query.bad_value`);
 * 3. every `resources*`, `required*`, `member_of*`, `in_tree*` in query order: `RC:N` with
 *    N a Python int >= 1; `!T` from 1.22 (all leading `!`s stripped), `in:A,B` and repeated
 *    `required` from 1.39 (before, only the last `required<S>` counts); `member_of` a uuid,
 *    `in:a,b`, repeated from 1.24, `!a` and `!in:a,b` from 1.32; `in_tree` a uuid;
 * 4. before 1.36 every group needs resources (orphaned `required`/`member_of` named);
 *    from 1.36 some group needs resources (`placement.query.missing_value`) and a group
 *    without must be suffixed and named in a `same_subtree`, whose names must all be groups
 *    (`placement.query.bad_value`);
 * 5. from 1.22, a required trait (or every trait of an `in:` set) forbidden in its group;
 * 6. `group_policy` required with more than one suffixed group.
 *
 * Resource classes, traits, aggregates and providers are not looked up: unknown names are
 * the API layer's 400s (it has the store), unknown uuids simply match nothing.
 *
 * The result: `groups[0]` is the unsuffixed group (suffix ''), present even when the query
 * has no unsuffixed key (then it has no resources and no filters); the suffixed groups
 * follow in the order their suffix first appears in the query. A trait set of one (`T`, or
 * `in:T`) is a required trait, larger `in:` sets are `anyOfTraits`. `groupPolicy` is 'none'
 * unless `group_policy=isolate`. Uuids (aggregates, `in_tree`) are kept as written (after
 * Python's strip for `in_tree`), as Placement compares them.
 *
 * Throws `PlacementQueryError` (status 400, Placement's error code and message) on any
 * refused query, and RangeError for a microversion outside 1.10-1.39 (the HTTP layer answers
 * those with 404 or 406 before parsing). Where Placement validated only the last `limit` or
 * `group_policy` and then used the first, ert validates every value.
 */
export function parseCandidatesQuery(query: URLSearchParams, microversion: Microversion): CandidatesQuery {
  const mv = microversion;
  if (mv.major !== 1 || !Number.isInteger(mv.minor) || mv.minor < 10 || mv.minor > 39) {
    throw new RangeError(`GET /allocation_candidates exists at microversions 1.10-1.39, not ${mv.major}.${mv.minor}`);
  }
  const items: Items = [...query];

  validateSchema(items, mv);
  const wide = parseWideParams(items);
  const bySuffix = parseGroups(items, mv);

  if (atLeast(mv, 36)) checkResourceless(bySuffix, wide.sameSubtrees);
  else checkOrphans(bySuffix);
  if (atLeast(mv, 22)) checkForbidden(bySuffix);

  if (wide.groupPolicy === undefined && [...bySuffix.keys()].filter((s) => s !== '').length > 1) {
    fail('The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.', 'group_policy');
  }

  const unsuffixed = bySuffix.get('') ?? {
    suffix: '',
    resources: {},
    required: [],
    forbidden: new Set<string>(),
    memberOf: [],
    forbiddenAggregates: new Set<string>(),
  };
  const groups = [toRequestGroup(unsuffixed), ...[...bySuffix.values()].filter((g) => g.suffix !== '').map(toRequestGroup)];
  const groupPolicy: GroupPolicy = wide.groupPolicy === 'isolate' ? 'isolate' : 'none';
  const request: PlacementRequest = { groups, groupPolicy };
  if (wide.sameSubtrees.length > 0) request.sameSubtree = wide.sameSubtrees.map((s) => [...s]);
  if (wide.rootRequired !== undefined && wide.rootRequired.length > 0) request.rootRequiredTraits = wide.rootRequired;
  if (wide.rootForbidden !== undefined && wide.rootForbidden.length > 0) request.rootForbiddenTraits = wide.rootForbidden;
  const result: CandidatesQuery = { request };
  if (wide.limit !== undefined) result.limit = wide.limit;
  return result;
}
