import { describe, expect, it } from 'vitest';
import { parseCandidatesQuery, PlacementQueryError, type CandidatesQuery } from '@ert/placement';

// Expected messages are Placement 8.0.0's, copied from placement/util.py, placement/lib.py,
// placement/handlers/allocation_candidate.py and jsonschema 4.10's validators.

const U1 = '11111111-1111-1111-1111-111111111111';
const U2 = '22222222-2222-2222-2222-222222222222';
const U3 = '33333333-3333-3333-3333-333333333333';

function parse(qs: string, minor = 39): CandidatesQuery {
  return parseCandidatesQuery(new URLSearchParams(qs), { major: 1, minor });
}

function errorOf(qs: string, minor = 39): PlacementQueryError {
  try {
    parse(qs, minor);
  } catch (err) {
    expect(err).toBeInstanceOf(PlacementQueryError);
    return err as PlacementQueryError;
  }
  throw new Error(`expected ${qs} at 1.${minor} to be refused`);
}

/** The refusal as Placement's error body has it: status, code, message. */
function refusal(qs: string, minor = 39): { status: number; code: string; message: string } {
  const err = errorOf(qs, minor);
  return { status: err.status, code: err.code, message: err.message };
}

const UNDEFINED = 'placement.undefined_code';
const BAD_VALUE = 'placement.query.bad_value';
const PATTERNS_1_25 =
  "'^member_of([1-9][0-9]*)?$', '^required([1-9][0-9]*)?$', '^resources([1-9][0-9]*)?$'";
const PATTERNS_1_31 =
  "'^in_tree([1-9][0-9]*)?$', '^member_of([1-9][0-9]*)?$', '^required([1-9][0-9]*)?$', '^resources([1-9][0-9]*)?$'";
const PATTERNS_1_33 =
  "'^in_tree([a-zA-Z0-9_-]{1,64})?$', '^member_of([a-zA-Z0-9_-]{1,64})?$', " +
  "'^required([a-zA-Z0-9_-]{1,64})?$', '^resources([a-zA-Z0-9_-]{1,64})?$'";

const unknownAt = (minor: number, keys: string): string => {
  if (minor < 25) return `Invalid query string parameters: Additional properties are not allowed (${keys} ${keys.includes(',') ? 'were' : 'was'} unexpected)`;
  const patterns = minor >= 33 ? PATTERNS_1_33 : minor >= 31 ? PATTERNS_1_31 : PATTERNS_1_25;
  return `Invalid query string parameters: ${keys} ${keys.includes(',') ? 'do' : 'does'} not match any of the regexes: ${patterns}`;
};

describe('parseCandidatesQuery: microversions and the query-string schema', () => {
  it('exists at 1.10-1.39 only (the HTTP layer answers the rest)', () => {
    expect(() => parse('resources=VCPU:1', 9)).toThrow(RangeError);
    expect(() => parse('resources=VCPU:1', 40)).toThrow(RangeError);
    expect(() => parseCandidatesQuery(new URLSearchParams('resources=VCPU:1'), { major: 2, minor: 0 })).toThrow(RangeError);
    expect(parse('resources=VCPU:1', 10).request.groups[0]!.resources).toEqual({ VCPU: 1 });
    expect(parse('resources=VCPU:1', 39).request.groups[0]!.resources).toEqual({ VCPU: 1 });
  });

  it('requires resources up to 1.24, and says so before naming unknown keys', () => {
    expect(refusal('', 10)).toEqual({ status: 400, code: UNDEFINED, message: "Invalid query string parameters: 'resources' is a required property" });
    expect(refusal('foo=1', 24).message).toBe("Invalid query string parameters: 'resources' is a required property");
    expect(refusal('resources=VCPU:1&foo=1&bar=2', 10).message).toBe(unknownAt(10, "'bar', 'foo'"));
  });

  it('names unknown keys with the regexes from 1.25 (sorted, Python repr)', () => {
    expect(refusal('resources=VCPU:1&foo=1', 25).message).toBe(unknownAt(25, "'foo'"));
    expect(refusal('resources=VCPU:1&foo=1&bar=2', 31).message).toBe(unknownAt(31, "'bar', 'foo'"));
    expect(refusal("resources=VCPU:1&it's=1", 39).message).toBe(unknownAt(39, `"it's"`));
  });

  // [param, query, first microversion that accepts it]
  const introductions: Array<[string, string, number]> = [
    ['limit', 'resources=VCPU:1&limit=5', 16],
    ['required', 'resources=VCPU:1&required=HW_CPU_X86_AVX2', 17],
    ['member_of', `resources=VCPU:1&member_of=${U1}`, 21],
    ['resources1', 'resources=VCPU:1&resources1=VCPU:1', 25],
    ['group_policy', 'resources=VCPU:1&group_policy=none', 25],
    ['in_tree', `resources=VCPU:1&in_tree=${U1}`, 31],
    ['resources_NIC', 'resources_NIC=VCPU:1', 33],
    ['root_required', 'resources=VCPU:1&root_required=CUSTOM_A', 35],
    ['same_subtree', 'resources_A=VCPU:1&required_B=CUSTOM_X&same_subtree=_A,_B&group_policy=none', 36],
  ];
  it.each(introductions)('%s (%s) is accepted from 1.%i and refused before', (param, qs, minor) => {
    expect(() => parse(qs, minor)).not.toThrow();
    const err = refusal(qs, minor - 1);
    expect(err.code).toBe(UNDEFINED);
    expect(err.message).toMatch(/^Invalid query string parameters: /);
    expect(err.message).toContain(param === 'same_subtree' ? "'same_subtree'" : `'${param}'`);
  });

  it('takes numbered suffixes from 1.25 and [a-zA-Z0-9_-]{1,64} from 1.33', () => {
    expect(refusal('resources01=VCPU:1', 32).message).toBe(unknownAt(32, "'resources01'"));
    expect(parse('resources01=VCPU:1', 33).request.groups.map((g) => g.suffix)).toEqual(['', '01']);
    expect(parse(`resources${'a'.repeat(64)}=VCPU:1`, 33).request.groups[1]!.suffix).toBe('a'.repeat(64));
    expect(refusal(`resources${'a'.repeat(65)}=VCPU:1`, 39).message).toBe(unknownAt(39, `'resources${'a'.repeat(65)}'`));
    expect(refusal('resources!=VCPU:1', 39).message).toBe(unknownAt(39, "'resources!'"));
  });

  it('lets a key end in a newline from 1.25, as Python regexes do ($ before a final \\n)', () => {
    expect(parse('resources%0A=VCPU:1', 25).request.groups[0]!.resources).toEqual({ VCPU: 1 });
    expect(parse('resources1%0A=VCPU:1', 25).request.groups[1]!.suffix).toBe('1');
    expect(refusal('resources=VCPU:1&resources%0A=VCPU:1', 24).message).toBe(unknownAt(24, "'resources\\n'"));
    expect(refusal('resources=VCPU:1&limit%0A=1', 39).message).toBe(unknownAt(39, "'limit\\n'"));
  });

  it('checks limit and group_policy values with the schema', () => {
    expect(parse('resources=VCPU:1&limit=10', 16).limit).toBe(10);
    expect(parse('resources=VCPU:1&limit=10%0A', 16).limit).toBe(10);
    expect(parse('resources=VCPU:1', 16).limit).toBeUndefined();
    for (const bad of ['0', '-1', 'abc', '', '1.5', '+1', ' 1']) {
      expect(refusal(`resources=VCPU:1&limit=${encodeURIComponent(bad)}`, 16).message).toBe(
        `Invalid query string parameters: '${bad}' does not match '^[1-9][0-9]*$'`,
      );
    }
    expect(refusal('resources=VCPU:1&group_policy=ISOLATE', 25).message).toBe(
      "Invalid query string parameters: 'ISOLATE' is not one of ['none', 'isolate']",
    );
    // An unknown key outranks a bad value (jsonschema's best_match: errors higher up win).
    expect(refusal('resources=VCPU:1&limit=0&foo=1', 39).message).toBe(unknownAt(39, "'foo'"));
  });

  it('refuses every bad limit or group_policy value, where Placement checked only the last', () => {
    // Placement 8.0.0: limit=abc&limit=5 -> 500 (int('abc')); limit=0&limit=5 -> no limit.
    expect(refusal('resources=VCPU:1&limit=abc&limit=5', 39).message).toBe(
      "Invalid query string parameters: 'abc' does not match '^[1-9][0-9]*$'",
    );
    expect(refusal('resources=VCPU:1&group_policy=x&group_policy=none', 39).message).toBe(
      "Invalid query string parameters: 'x' is not one of ['none', 'isolate']",
    );
    expect(parse('resources=VCPU:1&limit=3&limit=5', 39).limit).toBe(3);
  });
});

describe('parseCandidatesQuery: resources', () => {
  const badlyFormed = (got: string) =>
    `Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: ${got}.`;

  it('parses RC:N lists, the last amount of a repeated class and the last resources key winning', () => {
    expect(parse('resources=VCPU:2,MEMORY_MB:1024,DISK_GB:50').request.groups[0]!.resources).toEqual({ VCPU: 2, MEMORY_MB: 1024, DISK_GB: 50 });
    expect(parse('resources=VCPU:2,VCPU:3').request.groups[0]!.resources).toEqual({ VCPU: 3 });
    expect(parse('resources=VCPU:2&resources=MEMORY_MB:1').request.groups[0]!.resources).toEqual({ MEMORY_MB: 1 });
  });

  it('reads amounts with Python int(): whitespace, sign, underscores, any decimal digits', () => {
    expect(parse('resources=VCPU:%201_0%20').request.groups[0]!.resources).toEqual({ VCPU: 10 });
    expect(parse('resources=VCPU:%2B5').request.groups[0]!.resources).toEqual({ VCPU: 5 });
    expect(parse('resources=VCPU:007').request.groups[0]!.resources).toEqual({ VCPU: 7 });
    expect(parse('resources=VCPU:%D9%A3').request.groups[0]!.resources).toEqual({ VCPU: 3 }); // ARABIC-INDIC THREE
    expect(parse('resources=VCPU:%EF%BC%91%EF%BC%92').request.groups[0]!.resources).toEqual({ VCPU: 12 }); // fullwidth 12
  });

  it('refuses malformed lists and non-integer amounts with Placement messages', () => {
    expect(refusal('resources=')).toEqual({
      status: 400,
      code: UNDEFINED,
      message: 'Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: empty string.',
    });
    expect(refusal('resources=%20%20').message).toContain('Got: empty string.');
    expect(refusal('resources=VCPU').message).toBe(badlyFormed('VCPU'));
    expect(refusal('resources=VCPU:1,').message).toBe(badlyFormed(''));
    expect(refusal('resources=VCPU:1:2').message).toBe(badlyFormed('VCPU:1:2'));
    expect(refusal('resources=VCPU:abc').message).toBe('Requested resource VCPU expected positive integer amount. Got: abc.');
    expect(refusal('resources=VCPU:1.5').message).toBe('Requested resource VCPU expected positive integer amount. Got: 1.5.');
    expect(refusal('resources=VCPU:1__0').message).toBe('Requested resource VCPU expected positive integer amount. Got: 1__0.');
    expect(refusal('resources=VCPU:_1').message).toBe('Requested resource VCPU expected positive integer amount. Got: _1.');
    expect(refusal('resources=VCPU:').message).toBe('Requested resource VCPU expected positive integer amount. Got: .');
  });

  it('requires amounts >= 1 (the amount as Python formats the int)', () => {
    expect(refusal('resources=VCPU:0').message).toBe('Requested resource VCPU requires amount >= 1. Got: 0.');
    expect(refusal('resources=VCPU:-05').message).toBe('Requested resource VCPU requires amount >= 1. Got: -5.');
    expect(refusal('resources1=VCPU:1&resources2=DISK_GB:0&group_policy=none').message).toBe(
      'Requested resource DISK_GB requires amount >= 1. Got: 0.',
    );
  });

  it('does not check class names (the API layer has the store)', () => {
    expect(parse('resources=vcpu:1,CUSTOM_NOPE:2').request.groups[0]!.resources).toEqual({ vcpu: 1, CUSTOM_NOPE: 2 });
  });

  it('reports the first bad parameter in query order', () => {
    expect(refusal(`resources=VCPU:0&member_of=nope`).message).toBe('Requested resource VCPU requires amount >= 1. Got: 0.');
    expect(refusal(`member_of=nope&resources=VCPU:0`).message).toBe(
      "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: nope",
    );
  });
});

describe('parseCandidatesQuery: required traits', () => {
  it('parses required traits (1.17) and forbidden ones (1.22), stripping every leading !', () => {
    const g = parse('resources=VCPU:1&required=HW_CPU_X86_AVX2,%20CUSTOM_A%20,!CUSTOM_B,!!!CUSTOM_C', 22).request.groups[0]!;
    expect(g.requiredTraits).toEqual(['HW_CPU_X86_AVX2', 'CUSTOM_A']);
    expect(g.forbiddenTraits).toEqual(['CUSTOM_B', 'CUSTOM_C']);
    expect(g.anyOfTraits).toBeUndefined();
  });

  it('refuses ! before 1.22 and empty traits, with the expected form of the microversion', () => {
    expect(refusal('resources=VCPU:1&required=!CUSTOM_B', 21).message).toBe(
      "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: !CUSTOM_B",
    );
    expect(refusal('resources=VCPU:1&required=A,,B', 21).message).toBe(
      "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: A,,B",
    );
    expect(refusal('resources=VCPU:1&required=!', 22).message).toBe(
      "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: !",
    );
    expect(refusal('resources=VCPU:1&required=', 39).message).toBe(
      "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: ",
    );
  });

  it('counts only the last required<S> before 1.39, all of them (ANDed) from 1.39', () => {
    const qs = 'resources=VCPU:1&required=CUSTOM_A&required=CUSTOM_B,!CUSTOM_C';
    const g38 = parse(qs, 38).request.groups[0]!;
    expect(g38.requiredTraits).toEqual(['CUSTOM_B']);
    expect(g38.forbiddenTraits).toEqual(['CUSTOM_C']);
    const g39 = parse(qs, 39).request.groups[0]!;
    expect(g39.requiredTraits).toEqual(['CUSTOM_A', 'CUSTOM_B']);
    expect(g39.forbiddenTraits).toEqual(['CUSTOM_C']);
    // A malformed earlier value is ignored before 1.39.
    expect(parse('resources=VCPU:1&required=!&required=CUSTOM_A', 38).request.groups[0]!.requiredTraits).toEqual(['CUSTOM_A']);
    expect(() => parse('resources=VCPU:1&required=!&required=CUSTOM_A', 39)).toThrow(PlacementQueryError);
  });

  it('parses in:A,B as any-of from 1.39 (a set of one is a plain required trait)', () => {
    const g = parse('resources=VCPU:1&required=in:CUSTOM_A,%20CUSTOM_B&required=in:CUSTOM_C&required=in:CUSTOM_D,CUSTOM_D').request.groups[0]!;
    expect(g.anyOfTraits).toEqual([['CUSTOM_A', 'CUSTOM_B']]);
    expect(g.requiredTraits).toEqual(['CUSTOM_C', 'CUSTOM_D']);
    expect(refusal('resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_B', 38).message).toBe(
      "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: in:CUSTOM_A,CUSTOM_B",
    );
    expect(refusal('resources=VCPU:1&required=in:CUSTOM_A,').message).toBe(
      "Invalid query string parameters: Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: in:CUSTOM_A,",
    );
    expect(refusal('resources=VCPU:1&required=in:CUSTOM_A,!CUSTOM_B').message).toBe(
      "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: in:CUSTOM_A,!CUSTOM_B",
    );
  });

  it('refuses a trait both required and forbidden in one group (1.22+), sorted', () => {
    expect(refusal('resources=VCPU:1&required=CUSTOM_B,!CUSTOM_B&resources1=VCPU:1&required1=CUSTOM_A,!CUSTOM_A&group_policy=none')).toEqual({
      status: 400,
      code: UNDEFINED,
      message: 'Conflicting required and forbidden traits found in the following traits keys: required1: (CUSTOM_A), required: (CUSTOM_B)',
    });
    expect(refusal('resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_B&required=!CUSTOM_A,!CUSTOM_B').message).toBe(
      'Conflicting required and forbidden traits found in the following traits keys: required: (CUSTOM_A, CUSTOM_B)',
    );
    // One member of an any-of set allowed: no conflict.
    expect(parse('resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_B&required=!CUSTOM_A').request.groups[0]!.forbiddenTraits).toEqual(['CUSTOM_A']);
    // Before 1.39 only the last required counts, so nothing conflicts here.
    expect(parse('resources=VCPU:1&required=CUSTOM_A&required=!CUSTOM_A', 38).request.groups[0]!.forbiddenTraits).toEqual(['CUSTOM_A']);
  });
});

describe('parseCandidatesQuery: member_of and in_tree', () => {
  it('parses member_of (1.21): one uuid, or in: a list; repeated and ANDed from 1.24', () => {
    expect(parse(`resources=VCPU:1&member_of=${U1}`, 21).request.groups[0]!.memberOf).toEqual([[U1]]);
    expect(parse(`resources=VCPU:1&member_of=in:${U1},${U2}&member_of=${U3}`, 24).request.groups[0]!.memberOf).toEqual([[U1, U2], [U3]]);
    expect(refusal(`resources=VCPU:1&member_of=${U1}&member_of=${U2}`, 23).message).toBe('Multiple member_of parameters are not supported');
  });

  it('parses forbidden aggregates !a and !in:a,b from 1.32', () => {
    const g = parse(`resources=VCPU:1&member_of=!${U1}&member_of=!in:${U2},${U3}`, 32).request.groups[0]!;
    expect(g.memberOf).toEqual([]);
    expect(g.forbiddenAggregates).toEqual([U1, U2, U3]);
    expect(refusal(`resources=VCPU:1&member_of=!${U1}`, 31).message).toBe(
      'Forbidden member_of parameters are not supported in the specified microversion',
    );
    expect(refusal(`resources_X=VCPU:1&member_of_X=!in:${U1},${U2}`, 32).message).toContain("'member_of_X'");
  });

  it('refuses lists without in: and anything uuidutils.is_uuid_like refuses', () => {
    expect(refusal(`resources=VCPU:1&member_of=${U1},${U2}`).message).toBe(
      `Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword using the valid microversion. Got: ${U1},${U2}`,
    );
    expect(refusal(`resources=VCPU:1&member_of=in:${U1},nope`).message).toBe(
      "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: nope",
    );
    expect(refusal('resources=VCPU:1&member_of=in:').message).toBe(
      "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: ",
    );
    expect(refusal(`resources=VCPU:1&member_of=!!${U1}`).message).toContain(`Got: !${U1}`);
  });

  it('accepts the uuid forms is_uuid_like accepts, keeping them as written', () => {
    const forms = [`{${U1.replaceAll('-', '')}}`, U1.toUpperCase(), `urn:uuid:${U1}`, U1.replaceAll('-', '')];
    for (const form of forms) {
      expect(parse(`resources=VCPU:1&member_of=${encodeURIComponent(form)}`).request.groups[0]!.memberOf).toEqual([[form]]);
    }
  });

  it('parses in_tree (1.31), stripped, per group', () => {
    const r = parse(`resources=VCPU:1&in_tree=%20${U1}%20&resources1=VCPU:1&in_tree1=${U2}`, 31).request;
    expect(r.groups[0]!.inTree).toBe(U1);
    expect(r.groups[1]!.inTree).toBe(U2);
    expect(refusal('resources=VCPU:1&in_tree=abc').message).toBe(
      "Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: abc",
    );
  });
});

describe('parseCandidatesQuery: groups, group_policy and orphans', () => {
  it('puts the unsuffixed group first, then suffixes in order of first appearance', () => {
    const r = parse('resources_B=VCPU:1&required_A=CUSTOM_X&resources=MEMORY_MB:1&resources_A=VCPU:2&group_policy=isolate').request;
    expect(r.groups.map((g) => g.suffix)).toEqual(['', '_B', '_A']);
    expect(r.groups[2]!).toEqual({ suffix: '_A', resources: { VCPU: 2 }, requiredTraits: ['CUSTOM_X'], forbiddenTraits: [], memberOf: [] });
    expect(r.groupPolicy).toBe('isolate');
  });

  it('always has an unsuffixed group, empty when the query has none', () => {
    const r = parse('resources1=VCPU:1', 25).request;
    expect(r.groups[0]).toEqual({ suffix: '', resources: {}, requiredTraits: [], forbiddenTraits: [], memberOf: [] });
    expect(r.groupPolicy).toBe('none');
  });

  it('requires group_policy with more than one suffixed group', () => {
    expect(refusal('resources=VCPU:1&resources1=VCPU:1&resources2=VCPU:1', 25)).toEqual({
      status: 400,
      code: UNDEFINED,
      message: 'The "group_policy" parameter is required when specifying more than one "resources{N}" parameter.',
    });
    expect(() => parse('resources=VCPU:1&resources1=VCPU:1', 25)).not.toThrow();
    expect(parse('resources1=VCPU:1&resources2=VCPU:1&group_policy=none', 25).request.groupPolicy).toBe('none');
  });

  it('refuses orphaned required and member_of before 1.36', () => {
    expect(refusal('resources=VCPU:1&required1=CUSTOM_A&required2=CUSTOM_B&group_policy=none', 25).message).toBe(
      'All traits parameters must be associated with resources.  Found the following orphaned traits keys: required1, required2',
    );
    expect(refusal(`resources=VCPU:1&member_of1=${U1}`, 35).message).toBe(
      'All member_of parameters must be associated with resources. Found the following orphaned member_of keys: member_of1',
    );
    expect(refusal(`resources=VCPU:1&member_of1=!${U1}`, 35).message).toContain('orphaned member_of keys: member_of1');
  });

  it('refuses other resourceless groups before 1.36 (forbidden traits only, in_tree only, nothing)', () => {
    expect(refusal('resources1=VCPU:1&required=!CUSTOM_A', 25).message).toBe('All request groups must specify resources.');
    expect(refusal(`resources1=VCPU:1&in_tree=${U1}`, 31).message).toBe('All request groups must specify resources.');
    expect(refusal('limit=1', 25).message).toBe('At least one request group (`resources` or `resources{$S}`) is required.');
    expect(refusal('required=CUSTOM_A', 35).message).toBe(
      'All traits parameters must be associated with resources.  Found the following orphaned traits keys: required',
    );
  });
});

describe('parseCandidatesQuery: root_required (1.35) and same_subtree (1.36)', () => {
  it('parses root_required into required and forbidden root traits', () => {
    const r = parse('resources=VCPU:1&root_required=CUSTOM_A,!CUSTOM_B,!!CUSTOM_C', 35).request;
    expect(r.rootRequiredTraits).toEqual(['CUSTOM_A']);
    expect(r.rootForbiddenTraits).toEqual(['CUSTOM_B', 'CUSTOM_C']);
  });

  it('refuses root_required twice (duplicate_key), conflicting (bad_value), in: (even at 1.39) and empty', () => {
    expect(refusal('resources=VCPU:1&root_required=CUSTOM_A&root_required=CUSTOM_B')).toEqual({
      status: 400,
      code: 'placement.query.duplicate_key',
      message: "Query parameter 'root_required' may be specified only once.",
    });
    expect(refusal('resources=VCPU:1&root_required=CUSTOM_B,!CUSTOM_B,CUSTOM_A,!CUSTOM_A')).toEqual({
      status: 400,
      code: BAD_VALUE,
      message: 'Conflicting required and forbidden traits found in root_required: CUSTOM_A, CUSTOM_B',
    });
    expect(refusal('resources=VCPU:1&root_required=in:CUSTOM_A,CUSTOM_B')).toEqual({
      status: 400,
      code: UNDEFINED,
      message: "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: in:CUSTOM_A,CUSTOM_B",
    });
    expect(refusal('resources=VCPU:1&root_required=CUSTOM_A,').message).toBe(
      "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,!CUSTOM_MAGIC. Got an empty trait in: CUSTOM_A,",
    );
  });

  it('checks request-wide parameters before the groups', () => {
    expect(refusal('resources=VCPU:0&root_required=A&root_required=B').code).toBe('placement.query.duplicate_key');
  });

  it('parses same_subtree lists (repeatable) and allows resourceless suffixed groups in them', () => {
    const r = parse('resources_NIC=NET_BW_EGR_KILOBIT_PER_SEC:10&required_NUMA=CUSTOM_X&same_subtree=_NIC,%20_NUMA&same_subtree=_NIC&group_policy=none', 36).request;
    expect(r.sameSubtree).toEqual([['_NIC', '_NUMA'], ['_NIC']]);
    expect(r.groups.map((g) => [g.suffix, g.resources])).toEqual([
      ['', {}],
      ['_NIC', { NET_BW_EGR_KILOBIT_PER_SEC: 10 }],
      ['_NUMA', {}],
    ]);
  });

  it('refuses an empty suffix, unknown suffixes and resourceless groups outside same_subtree', () => {
    expect(refusal('resources_A=VCPU:1&same_subtree=_A,')).toEqual({
      status: 400,
      code: BAD_VALUE,
      message: 'Empty string (unsuffixed group) can not be specified in `same_subtree` ',
    });
    expect(refusal('resources_A=VCPU:1&same_subtree=_A,_B')).toEqual({
      status: 400,
      code: BAD_VALUE,
      message: "Real suffixes should be specified in `same_subtree`: ['_B'] not found in ['_A'].",
    });
    expect(refusal('resources_A=VCPU:1&required_B=CUSTOM_X')).toEqual({
      status: 400,
      code: BAD_VALUE,
      message: "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - ['_B'].",
    });
    // The unsuffixed group cannot be resourceless either (it cannot be named in same_subtree).
    expect(refusal('resources_A=VCPU:1&required=CUSTOM_X', 36).message).toBe(
      "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - [''].",
    );
  });

  it('requires some resources from 1.36 (missing_value)', () => {
    const missing = { status: 400, code: 'placement.query.missing_value', message: 'There must be at least one resources or resources[$S] parameter.' };
    expect(refusal('', 36)).toEqual(missing);
    expect(refusal('required_A=CUSTOM_X&same_subtree=_A', 36)).toEqual(missing);
    expect(refusal('limit=5', 39)).toEqual(missing);
  });
});

describe('parseCandidatesQuery: the error', () => {
  it('is a PlacementQueryError naming the parameter and value at fault', () => {
    const err = errorOf('resources=VCPU:1&resources1=VCPU:x');
    expect(err.name).toBe('PlacementQueryError');
    expect(err.status).toBe(400);
    expect(err.details).toEqual({ key: 'resources1', value: 'VCPU:x' });
    expect(err.toJSON()).toMatchObject({ code: UNDEFINED, message: 'Requested resource VCPU expected positive integer amount. Got: x.' });
  });
});
