import { describe, expect, it } from 'vitest';
import {
  BUILTIN_EXTRA_SPEC_PREFIXES,
  extraSpecKeyProblem,
  isBuiltinExtraSpecKey,
  parseFlavor,
  RequestSpecError,
} from '@ert/placement';
import { definePlugin, type ExtraSpecKey, type Flavor } from '@ert/plugin-api';

const flavor = (extraSpecs: Record<string, string>, amounts: Partial<Pick<Flavor, 'vcpus' | 'memoryMb' | 'diskGb'>> = {}): Flavor => ({
  name: 'f1',
  vcpus: amounts.vcpus ?? 2,
  memoryMb: amounts.memoryMb ?? 4096,
  diskGb: amounts.diskGb ?? 20,
  extraSpecs,
});

// Plugin keys shaped like the first-party plugins'.
const pluginKeys: ExtraSpecKey<any>[] = [
  {
    key: 'hw:cpu_policy',
    description: 'dedicated moves VCPU to PCPU',
    schema: { type: 'string', enum: ['shared', 'dedicated'] },
    applyResources(value: string, resources: Record<string, number>) {
      if (value === 'dedicated' && resources['VCPU'] !== undefined) {
        resources['PCPU'] = resources['VCPU'];
        delete resources['VCPU'];
      }
    },
  },
  {
    key: 'cu:units',
    description: 'compute units',
    schema: { type: 'integer', minimum: 1, maximum: 1000 },
    applyResources(value: number, resources: Record<string, number>) {
      resources['CUSTOM_CU'] = value;
    },
  },
  { key: 'pstate:min_freq_mhz', description: 'min freq', schema: { type: 'number', minimum: 100 } },
  { key: 'pstate:turbo', description: 'turbo', schema: { type: 'boolean' } },
  { key: 'pstate:governor', description: 'governor', schema: { type: 'string', pattern: '^[a-z]+$' } },
];

function parse(extraSpecs: Record<string, string>, amounts?: Parameters<typeof flavor>[1]) {
  return parseFlavor(flavor(extraSpecs, amounts), { keys: pluginKeys });
}

function errorOf(fn: () => unknown): RequestSpecError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(RequestSpecError);
    return err as RequestSpecError;
  }
  throw new Error('expected a RequestSpecError');
}

describe("parseFlavor: Nova's rule for the flavor's own amounts (issue 10, rule 1)", () => {
  // Mutation seen caught: adding the flavor's vcpus/memory/disk to the unnumbered group
  // unconditionally (the old parse.ts) fails the first three tests.
  it('a class a numbered group names is not also taken from the flavor', () => {
    const request = parse({ 'resources1:VCPU': '4', 'resources1:MEMORY_MB': '2048' }, { vcpus: 4, memoryMb: 2048, diskGb: 0 });
    expect(request.groups[0]!.resources).toEqual({});
    expect(request.groups[1]!.resources).toEqual({ VCPU: 4, MEMORY_MB: 2048 });
  });

  it('classes no group names still come from the flavor', () => {
    const request = parse({ 'resources1:VCPU': '2' }, { vcpus: 2, memoryMb: 1024, diskGb: 10 });
    expect(request.groups[0]!.resources).toEqual({ MEMORY_MB: 1024, DISK_GB: 10 });
    expect(request.groups[1]!.resources).toEqual({ VCPU: 2 });
  });

  it('a numbered group naming a class with 0 still suppresses the flavor amount', () => {
    const request = parse({ 'resources1:VCPU': '0', 'resources1:CUSTOM_X': '1' }, { vcpus: 2, memoryMb: 1024, diskGb: 0 });
    expect(request.groups[0]!.resources).toEqual({ MEMORY_MB: 1024 });
    expect(request.groups[1]!.resources).toEqual({ CUSTOM_X: 1 });
  });

  it('resources:CLASS overrides the flavor and resources:CLASS=0 drops it', () => {
    expect(parse({ 'resources:VCPU': '8', 'resources:DISK_GB': '0' }, { vcpus: 2, memoryMb: 512, diskGb: 20 }).groups[0]!.resources).toEqual({ MEMORY_MB: 512, VCPU: 8 });
  });

  // Catches the flavor's vcpus asked as VCPU beside explicit PCPU (a Placement-style pinned
  // flavor counted twice: 4 VCPU and 4 PCPU): seen red with only `named.has(resourceClass)`.
  it("a group naming PCPU keeps the flavor's vcpus out as VCPU, as Nova's ResourceRequest does", () => {
    expect(parse({ 'resources:PCPU': '4' }, { vcpus: 4, memoryMb: 1024, diskGb: 0 }).groups[0]!.resources).toEqual({ MEMORY_MB: 1024, PCPU: 4 });
    const numbered = parse({ 'resources1:PCPU': '4' }, { vcpus: 4, memoryMb: 1024, diskGb: 0 });
    expect(numbered.groups.map((g) => g.resources)).toEqual([{ MEMORY_MB: 1024 }, { PCPU: 4 }]);
    expect(parse({ 'resources:PCPU': '4', 'resources:VCPU': '0' }, { vcpus: 4, memoryMb: 1024, diskGb: 0 }).groups[0]!.resources).toEqual({ MEMORY_MB: 1024, PCPU: 4 });
    const split = parse({ 'resources1:PCPU': '2', 'resources2:PCPU': '2', group_policy: 'none' }, { vcpus: 4, memoryMb: 0, diskGb: 0 });
    expect(split.groups.map((g) => g.resources)).toEqual([{}, { PCPU: 2 }, { PCPU: 2 }]);
  });

  // Nova's numa_get_constraints refuses these flavors at its API; seen red with checkCpuAmounts
  // not called (both parsed).
  it('explicit VCPU and PCPU amounts together, or PCPU amounts other than the vcpus, are ERT_SPEC_CONFLICT naming the key', () => {
    const both = errorOf(() => parse({ 'resources:VCPU': '2', 'resources1:PCPU': '2' }, { vcpus: 4 }));
    expect([both.code, both.message, both.details]).toEqual([
      'ERT_SPEC_CONFLICT',
      'extra spec "resources:VCPU=2": conflicts with resources1:PCPU=2: Nova refuses explicit VCPU and PCPU amounts together; use one or the other',
      { key: 'resources:VCPU', value: '2', expected: 'resources[N]:VCPU or resources[N]:PCPU, not both' },
    ]);
    const short = errorOf(() => parse({ 'resources:PCPU': '2' }, { vcpus: 4 }));
    expect([short.code, short.message]).toEqual(['ERT_SPEC_CONFLICT', 'extra spec "resources:PCPU=2": 2 PCPU for flavor "f1" of 4 vCPUs: Nova needs exactly flavor.vcpus PCPUs']);
    const over = errorOf(() => parse({ 'resources1:PCPU': '3', 'resources2:PCPU': '3', group_policy: 'none' }, { vcpus: 4 }));
    expect(over.message).toBe('extra spec "resources1:PCPU=3": with resources2:PCPU=3, 6 PCPU for flavor "f1" of 4 vCPUs: Nova needs exactly flavor.vcpus PCPUs');
  });

  it("a recorded instance's flavor (recorded: true) skips the request-only checks, and still refuses a malformed key", () => {
    const recorded = (extraSpecs: Record<string, string>) => parseFlavor(flavor(extraSpecs, { vcpus: 4, memoryMb: 0, diskGb: 0 }), { keys: [], recorded: true });
    expect(recorded({ 'resources:PCPU': '2' }).groups[0]!.resources).toEqual({ PCPU: 2 });
    expect(recorded({ 'resources:VCPU': '2', 'resources:PCPU': '2' }).groups[0]!.resources).toEqual({ VCPU: 2, PCPU: 2 });
    const refusing: ExtraSpecKey<any>[] = [{ key: 'x:y', description: '', schema: {}, applyResources: () => 'never with this flavor' }];
    expect(parseFlavor(flavor({ 'x:y': 'a' }), { keys: refusing, recorded: true }).pluginSpecs).toEqual({ 'x:y': 'a' });
    expect(errorOf(() => parseFlavor(flavor({ 'x:y': 'a' }), { keys: refusing })).code).toBe('ERT_SPEC_CONFLICT');
    expect(errorOf(() => recorded({ 'resources:PCPU': 'two' })).code).toBe('ERT_SPEC_INVALID_VALUE');
  });

  it('member_of=!in: forbids aggregates (Placement 1.32)', () => {
    const request = parse({ member_of: '!in:agg1,agg2', 'member_of1': '!agg3', 'resources1:CUSTOM_X': '1' });
    expect(request.groups[0]!.forbiddenAggregates).toEqual(['agg1', 'agg2']);
    expect(request.groups[0]!.memberOf).toEqual([]);
    expect(request.groups[1]!.forbiddenAggregates).toEqual(['agg3']);
  });
});

describe('parseFlavor: flavor amounts and resources:', () => {
  it('derives VCPU, MEMORY_MB and DISK_GB from the flavor, omitting zeros', () => {
    const spec = parse({}, { diskGb: 0 });
    expect(spec.groups).toEqual([{ suffix: '', resources: { VCPU: 2, MEMORY_MB: 4096 }, requiredTraits: [], forbiddenTraits: [], memberOf: [] }]);
    expect(spec.groupPolicy).toBe('none');
    expect(spec.hints).toEqual({});
    expect(spec.policy).toBeUndefined();
  });

  it('resources:CLASS overrides the flavor amount, 0 removes it, custom classes are added', () => {
    const spec = parse({ 'resources:VCPU': '6', 'resources:DISK_GB': '0', 'resources:CUSTOM_LLC_WAYS': '2' });
    expect(spec.groups[0]!.resources).toEqual({ VCPU: 6, MEMORY_MB: 4096, CUSTOM_LLC_WAYS: 2 });
  });

  it('builds numbered groups with digit and named suffixes, ordered numerically then by name', () => {
    const spec = parse({
      'resources10:SRIOV_NET_VF': '1',
      'resources2:SRIOV_NET_VF': '1',
      'resources_NET1:NET_BW_EGR_KILOBIT_PER_SEC': '1000',
      'trait_NET1:CUSTOM_PHYSNET1': 'required',
      'trait2:HW_NIC_SRIOV': 'forbidden',
      'member_of2': 'in:agg1,agg2',
      group_policy: 'isolate',
    });
    expect(spec.groups.map((g) => g.suffix)).toEqual(['', '2', '10', '_NET1']);
    expect(spec.groups[1]).toEqual({ suffix: '2', resources: { SRIOV_NET_VF: 1 }, requiredTraits: [], forbiddenTraits: ['HW_NIC_SRIOV'], memberOf: [['agg1', 'agg2']] });
    expect(spec.groups[3]).toEqual({ suffix: '_NET1', resources: { NET_BW_EGR_KILOBIT_PER_SEC: 1000 }, requiredTraits: ['CUSTOM_PHYSNET1'], forbiddenTraits: [], memberOf: [] });
    expect(spec.groupPolicy).toBe('isolate');
  });

  it('unnumbered traits and member_of', () => {
    const spec = parse({ 'trait:HW_CPU_X86_AVX2': 'required', 'trait:CUSTOM_SLOW': 'forbidden', member_of: 'agg9' });
    expect(spec.groups[0]).toMatchObject({ requiredTraits: ['HW_CPU_X86_AVX2'], forbiddenTraits: ['CUSTOM_SLOW'], memberOf: [['agg9']] });
  });

  it('drops a numbered group whose only amount is 0', () => {
    expect(parse({ 'resources1:VGPU': '0' }).groups).toHaveLength(1);
  });

  it('one numbered group needs no group_policy', () => {
    expect(parse({ 'resources1:VGPU': '1' }).groups).toHaveLength(2);
  });
});

describe('parseFlavor: other built-in keys', () => {
  it('aggregate_instance_extra_specs keeps the value, capabilities parse into requirements, ert:policy is opaque', () => {
    const spec = parse({
      'aggregate_instance_extra_specs:ssd': 'true',
      'aggregate_instance_extra_specs:cores': '>= 8',
      'capabilities:vcpu.sockets': '>= 2',
      'capabilities:cpu_info:vendor': 'Intel',
      'capabilities:hypervisor_type': '<or> QEMU <or> KVM',
      'capabilities:cpu_info:features': '<all-in> avx2 sse4_2',
      'ert:policy': ' { "any": [thing] } ',
    });
    expect(spec.aggregateExtraSpecs).toEqual({ ssd: 'true', cores: '>= 8' });
    expect(spec.capabilities).toEqual([
      { key: 'cpu_info:features', op: '<all-in>', values: ['avx2', 'sse4_2'] },
      { key: 'cpu_info:vendor', op: 's==', values: ['Intel'] },
      { key: 'hypervisor_type', op: '<or>', values: ['QEMU', 'KVM'] },
      { key: 'vcpu.sockets', op: '>=', values: ['2'] },
    ]);
    expect(spec.policy).toBe(' { "any": [thing] } ');
  });

  it('passes scheduling hints through', () => {
    const hints = { differentHost: ['i-1'] };
    expect(parseFlavor(flavor({}), { keys: [], hints }).hints).toEqual(hints);
  });

  it('does not modify the flavor', () => {
    const f = flavor({ 'hw:cpu_policy': 'dedicated', 'resources:VCPU': '4' });
    const copy = structuredClone(f);
    parseFlavor(f, { keys: pluginKeys });
    expect(f).toEqual(copy);
  });

  it('exports the built-in prefixes and classifies keys by them', () => {
    expect(BUILTIN_EXTRA_SPEC_PREFIXES).toContain('capabilities:');
    expect(isBuiltinExtraSpecKey('resources1:VCPU')).toBe(true);
    expect(isBuiltinExtraSpecKey('ert:anything')).toBe(true);
    expect(isBuiltinExtraSpecKey('llc:ways')).toBe(false);
  });
});

describe('parseFlavor: plugin keys', () => {
  it('converts by schema type and calls applyResources in key order', () => {
    const spec = parse({ 'hw:cpu_policy': 'dedicated', 'cu:units': '40', 'pstate:min_freq_mhz': '2000.5', 'pstate:turbo': 'YES', 'pstate:governor': 'performance' });
    expect(spec.pluginSpecs).toEqual({ 'hw:cpu_policy': 'dedicated', 'cu:units': 40, 'pstate:min_freq_mhz': 2000.5, 'pstate:turbo': true, 'pstate:governor': 'performance' });
    expect(spec.groups[0]!.resources).toEqual({ PCPU: 2, MEMORY_MB: 4096, DISK_GB: 20, CUSTOM_CU: 40 });
  });

  it.each([
    ['true', true],
    ['False', false],
    ['yes', true],
    ['NO', false],
    ['1', true],
    ['0', false],
  ])('boolean %s -> %s', (raw, value) => {
    expect(parse({ 'pstate:turbo': raw }).pluginSpecs['pstate:turbo']).toBe(value);
  });

  it('a plugin that sets an amount to 0 removes the class', () => {
    const keys: ExtraSpecKey<any>[] = [{ key: 'x:off', description: '', schema: { type: 'boolean' }, applyResources: (_v: boolean, r: Record<string, number>) => void (r['VCPU'] = 0) }];
    expect(parseFlavor(flavor({ 'x:off': 'true' }), { keys }).groups[0]!.resources).toEqual({ MEMORY_MB: 4096, DISK_GB: 20 });
  });

  it('extraSpecKeyProblem accepts the supported subset and names what is not', () => {
    for (const k of pluginKeys) expect(extraSpecKeyProblem(k)).toBeUndefined();
    expect(extraSpecKeyProblem({ key: 'a:b', description: '', schema: { type: 'string', minLength: 2 } })).toMatch(/keyword "minLength"/);
    expect(extraSpecKeyProblem({ key: 'a:b', description: '', schema: { type: 'array' } })).toMatch(/type "array"/);
    expect(extraSpecKeyProblem({ key: 'a:b', description: '', schema: { pattern: '(' } })).toMatch(/not a valid regular expression/);
  });
});

describe('parseFlavor: errors name the key and value', () => {
  const cases: Array<[string, Record<string, string>, string, RegExp]> = [
    ['unknown key', { 'hw:mem_page_size': 'large' }, 'ERT_SPEC_UNKNOWN_KEY', /"hw:mem_page_size=large".*no loaded plugin owns/],
    ['bare Nova aggregate key', { ssd: 'true' }, 'ERT_SPEC_UNKNOWN_KEY', /"ssd=true"/],
    ['unknown ert: key', { 'ert:other': 'x' }, 'ERT_SPEC_UNKNOWN_KEY', /"ert:other=x"/],
    ['invalid resource class', { 'resources:vcpu': '1' }, 'ERT_SPEC_UNKNOWN_KEY', /"vcpu" is not a standard resource class or CUSTOM_/],
    ['unknown standard class', { 'resources:GPU': '1' }, 'ERT_SPEC_UNKNOWN_KEY', /"GPU"/],
    ['empty resource class', { 'resources1:': '1' }, 'ERT_SPEC_UNKNOWN_KEY', /"resources1:=1"/],
    ['bad suffix', { 'resources.1:VCPU': '1' }, 'ERT_SPEC_UNKNOWN_KEY', /resources\.1:VCPU/],
    ['negative amount', { 'resources:VCPU': '-1' }, 'ERT_SPEC_INVALID_VALUE', /"resources:VCPU=-1".*non-negative integer/],
    ['fractional amount', { 'resources:VCPU': '1.5' }, 'ERT_SPEC_INVALID_VALUE', /non-negative integer/],
    ['non-numeric amount', { 'resources:VCPU': 'four' }, 'ERT_SPEC_INVALID_VALUE', /four/],
    ['invalid trait name', { 'trait:hw_avx': 'required' }, 'ERT_SPEC_UNKNOWN_KEY', /"hw_avx" is not a valid trait name/],
    ['invalid trait value', { 'trait:HW_CPU_X86_AVX2': 'yes' }, 'ERT_SPEC_INVALID_VALUE', /required or forbidden/],
    ['invalid group_policy', { group_policy: 'separate' }, 'ERT_SPEC_INVALID_VALUE', /none or isolate/],
    ['member_of list without in:', { member_of: 'a,b' }, 'ERT_SPEC_INVALID_VALUE', /"in:" prefix/],
    ['member_of empty', { member_of1: 'in:' }, 'ERT_SPEC_INVALID_VALUE', /member_of1/],
    ['capabilities unsupported op', { 'capabilities:cpu': 's< b' }, 'ERT_SPEC_INVALID_VALUE', /not supported/],
    ['capabilities numeric op with text', { 'capabilities:cpus': '>= many' }, 'ERT_SPEC_INVALID_VALUE', /"many" is not a number/],
    ['capabilities op without value', { 'capabilities:cpus': '>=' }, 'ERT_SPEC_INVALID_VALUE', /exactly one value/],
    ['capabilities malformed <or>', { 'capabilities:hv': '<or> a b' }, 'ERT_SPEC_INVALID_VALUE', /<or>/],
    ['capabilities empty <all-in>', { 'capabilities:f': '<all-in>' }, 'ERT_SPEC_INVALID_VALUE', /at least one value/],
    ['capabilities empty value', { 'capabilities:f': ' ' }, 'ERT_SPEC_INVALID_VALUE', /empty value/],
    ['capabilities empty name', { 'capabilities:': 'x' }, 'ERT_SPEC_UNKNOWN_KEY', /capability name is empty/],
    ['aggregate spec empty name', { 'aggregate_instance_extra_specs:': 'x' }, 'ERT_SPEC_UNKNOWN_KEY', /metadata key is empty/],
    ['aggregate spec malformed op', { 'aggregate_instance_extra_specs:cores': '<= x' }, 'ERT_SPEC_INVALID_VALUE', /not a number/],
    ['plugin enum', { 'hw:cpu_policy': 'mixed' }, 'ERT_SPEC_INVALID_VALUE', /"hw:cpu_policy=mixed".*one of "shared", "dedicated"/],
    ['plugin integer not strict', { 'cu:units': '4e1' }, 'ERT_SPEC_INVALID_VALUE', /an integer/],
    ['plugin integer minimum', { 'cu:units': '0' }, 'ERT_SPEC_INVALID_VALUE', />= 1/],
    ['plugin integer maximum', { 'cu:units': '1001' }, 'ERT_SPEC_INVALID_VALUE', /<= 1000/],
    ['plugin number', { 'pstate:min_freq_mhz': 'fast' }, 'ERT_SPEC_INVALID_VALUE', /a number/],
    ['plugin boolean', { 'pstate:turbo': 'on' }, 'ERT_SPEC_INVALID_VALUE', /a boolean/],
    ['plugin pattern', { 'pstate:governor': 'Perf1' }, 'ERT_SPEC_INVALID_VALUE', /matching/],
    ['two numbered groups without group_policy', { 'resources1:VGPU': '1', 'resources2:VGPU': '1' }, 'ERT_SPEC_CONFLICT', /need group_policy/],
    ['resourceless numbered group', { 'trait1:CUSTOM_X': 'required' }, 'ERT_SPEC_CONFLICT', /numbered group "1" has traits or member_of but no resources1/],
    ['member_of on a resourceless numbered group', { member_of3: 'agg' }, 'ERT_SPEC_CONFLICT', /group "3"/],
  ];

  it.each(cases)('%s', (_name, extraSpecs, code, message) => {
    const err = errorOf(() => parse(extraSpecs));
    expect(err.code).toBe(code);
    expect(err.message).toMatch(message);
    const [key] = Object.keys(extraSpecs);
    if (code !== 'ERT_SPEC_CONFLICT') expect(err.details).toMatchObject({ key, value: extraSpecs[key!] });
    expect(typeof err.details.expected).toBe('string');
  });

  it('a negative or fractional flavor amount names the field', () => {
    const err = errorOf(() => parse({}, { vcpus: -1 }));
    expect(err.code).toBe('ERT_SPEC_INVALID_VALUE');
    expect(err.details).toMatchObject({ key: 'vcpus', value: '-1' });
    expect(errorOf(() => parse({}, { memoryMb: 1.5 })).details.key).toBe('memoryMb');
  });

  it('a plugin key with an unsupported schema is refused as the plugin’s fault', () => {
    const keys: ExtraSpecKey[] = [{ key: 'x:y', description: '', schema: { type: 'string', format: 'email' } }];
    const err = errorOf(() => parseFlavor(flavor({ 'x:y': 'a' }), { keys }));
    expect(err.code).toBe('ERT_SPEC_SCHEMA_UNSUPPORTED');
    expect(err.message).toMatch(/"x:y=a".*keyword "format"/);
  });

  it('a plugin applyResources producing a bad class or amount is refused naming the key', () => {
    const bad: ExtraSpecKey<any>[] = [{ key: 'x:y', description: '', schema: {}, applyResources: (_v: string, r: Record<string, number>) => void (r['lower'] = 1) }];
    expect(errorOf(() => parseFlavor(flavor({ 'x:y': 'a' }), { keys: bad })).message).toMatch(/"x:y=a".*class "lower"/);
    const frac: ExtraSpecKey<any>[] = [{ key: 'x:y', description: '', schema: {}, applyResources: (_v: string, r: Record<string, number>) => void (r['VCPU'] = 0.5) }];
    expect(errorOf(() => parseFlavor(flavor({ 'x:y': 'a' }), { keys: frac })).message).toMatch(/VCPU=0.5/);
  });

  it('a plugin cannot take over a built-in key', () => {
    const keys: ExtraSpecKey[] = [{ key: 'ert:other', description: '', schema: {} }];
    expect(errorOf(() => parseFlavor(flavor({ 'ert:other': 'x' }), { keys })).code).toBe('ERT_SPEC_UNKNOWN_KEY');
  });
});

// Audit #8. Catches extra-spec errors that name the key and value but not the plugin whose key
// it is: every error about a key of a plugin made with definePlugin (its value, its schema,
// what its applyResources produced or refused, a value an image gave it) starts with
// `plugin "<name>": ` and carries `details.plugin`; codes are unchanged. Keys no plugin was
// made with (a bare ExtraSpecKey list) keep the former wording.
describe('parseFlavor: errors about a plugin key name the plugin', () => {
  const gpu = definePlugin({
    name: 'gpu',
    extraSpecs: [
      {
        key: 'gpu:count',
        description: 'GPUs',
        schema: { type: 'integer', minimum: 1 },
        applyResources(value: number, resources: Record<string, number>) {
          const asked = resources['CUSTOM_GPU'];
          if (asked !== undefined && asked !== value) return `resources:CUSTOM_GPU=${asked} asks for ${asked} GPUs`;
          resources['CUSTOM_GPU'] = value;
          return undefined;
        },
      },
      { key: 'gpu:model', description: 'model', schema: { type: 'string', format: 'email' } },
      { key: 'gpu:bad', description: 'bad', schema: {}, applyResources: (_v: string, r: Record<string, number>) => void (r['lower'] = 1) },
      {
        key: 'gpu:boom',
        description: 'throws',
        schema: {},
        applyResources(value: string, resources: Record<string, number>) {
          resources['CUSTOM_GPU'] = 1; // half-done before the throw: the request must not be parsed anyway
          if (value === 'unprintable') throw Object.create(null);
          throw new Error('gpu: table not loaded');
        },
      },
      { key: 'hw:gpu_mode', description: 'mode', schema: { type: 'string', enum: ['a', 'b'] } },
    ],
  });
  const keys = gpu.extraSpecs!;

  it('a value its schema refuses', () => {
    const err = errorOf(() => parseFlavor(flavor({ 'gpu:count': 'two' }), { keys }));
    expect(err.code).toBe('ERT_SPEC_INVALID_VALUE');
    expect(err.message).toBe('plugin "gpu": extra spec "gpu:count=two": expected an integer (decimal digits)');
    expect(err.details).toMatchObject({ key: 'gpu:count', value: 'two', plugin: 'gpu' });
  });

  it('a schema outside the supported subset, and a bad class from applyResources', () => {
    const schema = errorOf(() => parseFlavor(flavor({ 'gpu:model': 'a' }), { keys }));
    expect(schema.code).toBe('ERT_SPEC_SCHEMA_UNSUPPORTED');
    expect(schema.message).toMatch(/^plugin "gpu": extra spec "gpu:model=a": the owning plugin's schema keyword "format"/);
    expect(schema.details.plugin).toBe('gpu');
    const produced = errorOf(() => parseFlavor(flavor({ 'gpu:bad': 'a' }), { keys }));
    expect(produced.code).toBe('ERT_SPEC_INVALID_VALUE');
    expect(produced.message).toMatch(/^plugin "gpu": extra spec "gpu:bad=a": the owning plugin's applyResources produced class "lower"/);
    expect(produced.details.plugin).toBe('gpu');
  });

  // Catches a throw from a plugin's applyResources escaping parseFlavor as the plugin's own
  // error (no code, no key, no plugin named): seen red with the try/catch around the call removed.
  it('applyResources that throws refuses the flavor as ERT_SPEC_PLUGIN_FAILED naming plugin, hook and key', () => {
    const err = errorOf(() => parseFlavor(flavor({ 'gpu:boom': 'x' }), { keys }));
    expect(err.code).toBe('ERT_SPEC_PLUGIN_FAILED');
    expect(err.message).toBe('plugin "gpu": extra spec "gpu:boom=x": the owning plugin\'s applyResources threw: gpu: table not loaded');
    expect(err.details).toMatchObject({ key: 'gpu:boom', value: 'x', plugin: 'gpu' });
    const unprintable = errorOf(() => parseFlavor(flavor({ 'gpu:boom': 'unprintable' }), { keys }));
    expect(unprintable.message).toBe('plugin "gpu": extra spec "gpu:boom=unprintable": the owning plugin\'s applyResources threw: <unprintable thrown value>');
  });

  it('applyResources returning a reason refuses the flavor as ERT_SPEC_CONFLICT; agreeing keys pass', () => {
    const err = errorOf(() => parseFlavor(flavor({ 'gpu:count': '2', 'resources:CUSTOM_GPU': '3' }), { keys }));
    expect(err.code).toBe('ERT_SPEC_CONFLICT');
    expect(err.message).toBe('plugin "gpu": extra spec "gpu:count=2": resources:CUSTOM_GPU=3 asks for 3 GPUs');
    expect(err.details).toMatchObject({ key: 'gpu:count', value: '2', plugin: 'gpu' });
    expect(parseFlavor(flavor({ 'gpu:count': '3', 'resources:CUSTOM_GPU': '3' }), { keys }).groups[0]!.resources['CUSTOM_GPU']).toBe(3);
  });

  it('a value the image gave, said about the image property', () => {
    const err = errorOf(() => parseFlavor({ ...flavor({}), image: { properties: { hw_gpu_mode: 'c' } } }, { keys }));
    expect(err.code).toBe('ERT_SPEC_INVALID_VALUE');
    expect(err.message).toBe('plugin "gpu": image property "hw_gpu_mode=c" (as hw:gpu_mode): expected one of "a", "b"');
    expect(err.details).toMatchObject({ key: 'hw:gpu_mode', plugin: 'gpu', imageProperty: 'hw_gpu_mode' });
  });

  it('keys that no plugin was made with keep the former wording', () => {
    const err = errorOf(() => parse({ 'cu:units': 'ten' }));
    expect(err.message).toBe('extra spec "cu:units=ten": expected an integer (decimal digits)');
    expect(err.details.plugin).toBeUndefined();
  });
});
