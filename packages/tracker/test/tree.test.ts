import { describe, expect, it } from 'vitest';
import { buildTree, normalizeDiscovery } from '../src/tree.js';
import { parseProviderConfig } from '../src/provider-config.js';
import { providerUuid, uuidV5 } from '../src/ids.js';
import { TrackerErrorCodes } from '../src/errors.js';
import { thrown } from './harness.js';


describe('uuids', () => {
  it('are RFC 4122 version 5 and depend only on the name', () => {
    // Known vector: uuid v5 of "python.org" in the DNS namespace.
    expect(uuidV5('python.org', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe('886313e1-3b8a-5372-9b90-0c9aee199e5d');
    expect(providerUuid('host1')).toBe(providerUuid('host1'));
    expect(providerUuid('host1')).not.toBe(providerUuid('host2'));
    expect(providerUuid('host1')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

describe('normalizeDiscovery', () => {
  it('applies Placement defaults and keeps children', () => {
    const d = normalizeDiscovery('llc', {
      available: true,
      host: { traits: ['CUSTOM_RDT_CAT'] },
      children: [{ key: 'llc_0', inventories: { CUSTOM_LLC_WAYS: { total: 11, maxUnit: 8 } } }],
    });
    expect(d.children[0]!.inventories['CUSTOM_LLC_WAYS']).toEqual({ total: 11, reserved: 0, minUnit: 1, maxUnit: 8, stepSize: 1, allocationRatio: 1 });
    expect(d.host.traits).toEqual(['CUSTOM_RDT_CAT']);
  });

  it('drops everything an unavailable plugin returned', () => {
    const d = normalizeDiscovery('p', { available: false, reason: 'no resctrl', host: { inventories: { VCPU: { total: 4 } } } });
    expect(d).toEqual({ available: false, reason: 'no resctrl', host: { inventories: {}, traits: [] }, children: [] });
  });

  const bad: Array<[string, unknown, string]> = [
    ['not an object', 42, '$'],
    ['no available flag', { host: {} }, '$.available'],
    ['a bad class', { available: true, host: { inventories: { vcpu: { total: 1 } } } }, '$.host.inventories.vcpu'],
    ['an invalid inventory', { available: true, host: { inventories: { VCPU: { total: 0 } } } }, '$.host.inventories.VCPU'],
    ['a bad trait', { available: true, host: { traits: ['lower'] } }, '$.host.traits[0]'],
    ['a bad child key', { available: true, children: [{ key: 'L3-0' }] }, '$.children[0].key'],
    ['a duplicate child key', { available: true, children: [{ key: 'a' }, { key: 'a' }] }, '$.children[1].key'],
    ['an unknown parent', { available: true, children: [{ key: 'a', parent: 'b' }] }, '$.children[0].parent'],
    ['a parent loop', { available: true, children: [{ key: 'a', parent: 'b' }, { key: 'b', parent: 'a' }] }, '$.children[0].parent'],
  ];
  it.each(bad)('refuses %s, naming plugin and path', (_label, value, at) => {
    const err = thrown(() => normalizeDiscovery('vcpu', value));
    expect(err.code).toBe(TrackerErrorCodes.INVALID_DISCOVERY);
    expect(err.details).toEqual({ plugin: 'vcpu', path: at });
    expect(err.message).toContain('plugin vcpu');
  });
});

describe('buildTree', () => {
  const vcpu = { plugin: 'vcpu', discovery: normalizeDiscovery('vcpu', { available: true, host: { inventories: { VCPU: { total: 8 } }, traits: ['HW_CPU_X86_AVX2'] } }) };
  const llc = {
    plugin: 'llc',
    discovery: normalizeDiscovery('llc', {
      available: true,
      host: { traits: ['CUSTOM_RDT_CAT'] },
      children: [
        { key: 'l3_1', parent: 'socket_0', inventories: { CUSTOM_LLC_WAYS: { total: 11 } } },
        { key: 'socket_0' },
      ],
    }),
  };

  it('puts the root first and parents before children, with name-derived uuids', () => {
    const { providers } = buildTree('h1', [vcpu, llc], []);
    expect(providers.map((p) => p.name)).toEqual(['h1', 'h1_socket_0', 'h1_l3_1']);
    expect(providers[0]!.uuid).toBe(providerUuid('h1'));
    expect(providers[2]!.parentUuid).toBe(providerUuid('h1_socket_0'));
    expect(providers[0]!.traits).toEqual(['HW_CPU_X86_AVX2', 'CUSTOM_RDT_CAT']);
    expect(providers[2]!.owners).toEqual({ CUSTOM_LLC_WAYS: 'llc' });
  });

  it('refuses two plugins reporting one class on one provider, naming both', () => {
    const other = { plugin: 'cpus2', discovery: normalizeDiscovery('cpus2', { available: true, host: { inventories: { VCPU: { total: 4 } } } }) };
    const err = thrown(() => buildTree('h1', [vcpu, other], []));
    expect(err.code).toBe(TrackerErrorCodes.INVENTORY_CONFLICT);
    expect(err.details).toEqual({ provider: 'h1', resourceClass: 'VCPU', plugins: ['vcpu', 'cpus2'] });
    expect(err.message).toMatch(/vcpu and cpus2/);
  });

  it('adds provider config inventories and traits to the host, nested and plugin providers', () => {
    const entries = parseProviderConfig(
      `schema_version: "1.0"
providers:
  - identification: { name: "$HOST" }
    traits: { additional: [CUSTOM_RACK_A] }
  - identification: { name: pool }
    parent: "$HOST"
    inventories: { additional: [ { CUSTOM_FPGA: { total: 2 } } ] }
  - identification: { name: l3_1 }
    traits: { additional: [CUSTOM_FAST] }
  - identification: { uuid: "${providerUuid('h1_socket_0')}" }
    inventories: { additional: [ { CUSTOM_POWER: { total: 100 } } ] }
  - identification: { name: missing }
`,
      '/p.yaml',
    );
    const { providers, unmatched } = buildTree('h1', [vcpu, llc], entries);
    const byName = Object.fromEntries(providers.map((p) => [p.name, p]));
    expect(byName['h1']!.traits).toContain('CUSTOM_RACK_A');
    expect(byName['h1_pool']!.parentName).toBe('h1');
    expect(byName['h1_pool']!.owners['CUSTOM_FPGA']).toBe('/p.yaml providers[1]');
    expect(byName['h1_l3_1']!.traits).toEqual(['CUSTOM_FAST']);
    expect(byName['h1_socket_0']!.inventories['CUSTOM_POWER']!.total).toBe(100);
    expect(unmatched.map((e) => e.identification)).toEqual([{ name: 'missing' }]);
  });

  it('refuses a provider config entry that adds a class a plugin owns, naming file and entry', () => {
    const entries = parseProviderConfig(
      'schema_version: "1.0"\nproviders:\n  - identification: { name: l3_1 }\n    inventories: { additional: [ { CUSTOM_LLC_WAYS: { total: 4 } } ] }\n',
      '/etc/ert/providers.d/llc.yaml',
    );
    const err = thrown(() => buildTree('h1', [vcpu, llc], entries));
    expect(err.code).toBe(TrackerErrorCodes.PROVIDER_CONFIG_CONFLICT);
    expect(err.message).toContain('/etc/ert/providers.d/llc.yaml providers[0] (name=l3_1)');
    expect(err.details).toMatchObject({ file: '/etc/ert/providers.d/llc.yaml', index: 0, resourceClass: 'CUSTOM_LLC_WAYS', owner: 'llc' });
  });
});
