import { copyFile, mkdtemp, readdir, writeFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { loadProviderConfigs, parseProviderConfig } from '../src/provider-config.js';
import { TrackerErrorCodes } from '../src/errors.js';
import { thrown } from './harness.js';

const dirs: string[] = [];
async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ert-provcfg-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  return dir;
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});


const valid = `schema_version: "1.0"
providers:
  - identification: { name: "$HOST" }
    inventories:
      additional:
        - CUSTOM_X: { total: 4, reserved: 1, min_unit: 1, max_unit: 2, step_size: 1, allocation_ratio: 2.0 }
    traits:
      additional: [CUSTOM_A, CUSTOM_A, CUSTOM_B]
  - identification: { name: pool }
    parent: "$HOST"
    inventories:
      additional:
        - CUSTOM_Y: { total: 3 }
`;

describe('parseProviderConfig', () => {
  it('reads inventories (with Placement defaults), traits and nested providers', () => {
    const entries = parseProviderConfig(valid, '/etc/p.yaml');
    expect(entries).toHaveLength(2);
    expect(entries[0]!.identification).toEqual({ name: '$HOST' });
    expect(entries[0]!.inventories['CUSTOM_X']).toEqual({ total: 4, reserved: 1, minUnit: 1, maxUnit: 2, stepSize: 1, allocationRatio: 2 });
    expect(entries[0]!.traits).toEqual(['CUSTOM_A', 'CUSTOM_B']);
    expect(entries[1]!.parent).toBe('$HOST');
    expect(entries[1]!.inventories['CUSTOM_Y']).toEqual({ total: 3, reserved: 0, minUnit: 1, maxUnit: 3, stepSize: 1, allocationRatio: 1 });
  });

  const cases: Array<[string, string, RegExp, Record<string, unknown>]> = [
    ['malformed YAML', 'schema_version: "1.0"\nproviders: [\n', /not valid YAML/, {}],
    ['wrong schema version', 'schema_version: 1.0\nproviders: []\n', /schema_version must be "1.0"/, { key: 'schema_version' }],
    ['unknown top-level key', 'schema_version: "1.0"\nprovider: []\n', /unknown key "provider"/, { key: 'provider' }],
    [
      'unknown key in an entry',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    invent: {}\n',
      /providers\[0\] \(name=\$HOST\): unknown key "invent"/,
      { index: 0, key: 'invent', identification: { name: '$HOST' } },
    ],
    [
      'unknown inventory field',
      'schema_version: "1.0"\nproviders:\n  - identification: { uuid: "$HOST" }\n    inventories: { additional: [ { CUSTOM_X: { total: 1, ratio: 2 } } ] }\n',
      /unknown key "ratio"/,
      { index: 0, key: 'ratio' },
    ],
    [
      'a standard (non-CUSTOM) class',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n  - identification: { name: other }\n    inventories: { additional: [ { VCPU: { total: 1 } } ] }\n',
      /providers\[1\] \(name=other\): resource class VCPU is not CUSTOM_/,
      { index: 1, resourceClass: 'VCPU', identification: { name: 'other' } },
    ],
    [
      'a non-CUSTOM trait',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    traits: { additional: [HW_CPU_X86_AVX2] }\n',
      /trait "HW_CPU_X86_AVX2" is not CUSTOM_/,
      { index: 0, trait: 'HW_CPU_X86_AVX2' },
    ],
    [
      'an invalid inventory',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    inventories: { additional: [ { CUSTOM_X: { total: 2, reserved: 3 } } ] }\n',
      /CUSTOM_X: reserved \(3\) must not exceed total \(2\)/,
      { index: 0, resourceClass: 'CUSTOM_X' },
    ],
    [
      'min_unit above max_unit, in the file\u2019s own words',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    inventories: { additional: [ { CUSTOM_X: { total: 4, min_unit: 3, max_unit: 2 } } ] }\n',
      /CUSTOM_X: max_unit \(2\) must not be below min_unit \(3\)/,
      { index: 0, resourceClass: 'CUSTOM_X' },
    ],
    [
      'a zero allocation_ratio',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    inventories: { additional: [ { CUSTOM_X: { total: 4, allocation_ratio: 0 } } ] }\n',
      /CUSTOM_X: allocation_ratio must be a positive number, got 0/,
      { index: 0, resourceClass: 'CUSTOM_X' },
    ],
    [
      'identification with both name and uuid',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: a, uuid: "$HOST" }\n',
      /exactly one of name, uuid/,
      { index: 0 },
    ],
    ['a nested provider with a bad name', 'schema_version: "1.0"\nproviders:\n  - identification: { name: "Big Pool" }\n    parent: "$HOST"\n', /\[a-z0-9_\]\+/, { index: 0 }],
    ['an empty file', '', /the file must be a mapping with schema_version and providers/, {}],
    ['providers that are not a list', 'schema_version: "1.0"\nproviders: { a: 1 }\n', /providers must be a list/, { key: 'providers' }],
    ['an entry without identification', 'schema_version: "1.0"\nproviders:\n  - traits: { additional: [CUSTOM_A] }\n', /providers\[0\]: identification is required/, { index: 0, key: 'identification' }],
    ['a malformed uuid', 'schema_version: "1.0"\nproviders:\n  - identification: { uuid: not-a-uuid }\n', /identification.uuid must be a uuid/, { index: 0, key: 'identification.uuid' }],
    [
      'an inventory without total',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    inventories: { additional: [ { CUSTOM_X: { reserved: 1 } } ] }\n',
      /providers\[0\] \(name=\$HOST\): CUSTOM_X.total is required/,
      { index: 0, key: 'inventories.additional.CUSTOM_X.total', identification: { name: '$HOST' } },
    ],
    [
      'a class listed twice in one entry',
      'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    inventories: { additional: [ { CUSTOM_X: { total: 1 } }, { CUSTOM_X: { total: 2 } } ] }\n',
      /resource class CUSTOM_X is listed twice/,
      { index: 0, resourceClass: 'CUSTOM_X' },
    ],
    ['a duplicate YAML key', 'schema_version: "1.0"\nschema_version: "1.0"\nproviders: []\n', /not valid YAML/, {}],
    ['a parent that is not a name', 'schema_version: "1.0"\nproviders:\n  - identification: { name: a }\n    parent: 7\n', /parent must be "\$HOST" or the name of a provider of the host, got 7/, { index: 0, key: 'parent' }],
    ['a provider its own parent', 'schema_version: "1.0"\nproviders:\n  - identification: { name: a }\n    parent: a\n', /a provider cannot be its own parent/, { index: 0, key: 'parent' }],
    ['an aggregate that is not a uuid', 'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    aggregates: [rack-1]\n', /aggregate "rack-1" is not a uuid/, { index: 0, key: 'aggregates' }],
  ];
  it.each(cases)('refuses %s, naming the file and entry', (_label, text, message, details) => {
    const err = thrown(() => parseProviderConfig(text, '/etc/ert/bad.yaml'));
    expect(err.code).toBe(TrackerErrorCodes.PROVIDER_CONFIG_INVALID);
    expect(err.message).toContain('/etc/ert/bad.yaml');
    expect(err.message).toMatch(message);
    expect(err.details).toMatchObject({ file: '/etc/ert/bad.yaml', ...details });
  });
});

describe('loadProviderConfigs', () => {
  it('reads every YAML file of the directory in name order', async () => {
    const dir = await dirWith({
      'b.yaml': 'schema_version: "1.0"\nproviders:\n  - identification: { name: b }\n',
      'a.yml': 'schema_version: "1.0"\nproviders:\n  - identification: { name: a }\n',
      'notes.txt': 'ignored',
    });
    const entries = await loadProviderConfigs(dir);
    expect(entries.map((e) => [path.basename(e.file), e.identification.name])).toEqual([
      ['a.yml', 'a'],
      ['b.yaml', 'b'],
    ]);
  });

  it('refuses a provider described in two files, naming both', async () => {
    const dir = await dirWith({
      'a.yaml': 'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n',
      'b.yaml': 'schema_version: "1.0"\nproviders:\n  - identification: { name: x }\n  - identification: { uuid: "$HOST" }\n',
    });
    const err = await loadProviderConfigs(dir).then(
      () => undefined,
      (e: unknown) => e as { code: string; message: string; details: Record<string, unknown> },
    );
    expect(err?.code).toBe(TrackerErrorCodes.PROVIDER_CONFIG_DUPLICATE);
    expect(err?.message).toContain(path.join(dir, 'b.yaml'));
    expect(err?.message).toContain(path.join(dir, 'a.yaml'));
    expect(err?.details).toMatchObject({ file: path.join(dir, 'b.yaml'), index: 1, otherFile: path.join(dir, 'a.yaml'), otherIndex: 0 });
  });

  it('refuses a directory that does not exist', async () => {
    await expect(loadProviderConfigs('/nonexistent/ert/providers.d')).rejects.toMatchObject({ code: TrackerErrorCodes.PROVIDER_CONFIG_INVALID });
  });

  it('accepts the example files shipped in config/providers.d and ert init, once copied to a .yaml name; as shipped they are not read', async () => {
    const shipped = [fileURLToPath(new URL('../../../config/providers.d', import.meta.url)), fileURLToPath(new URL('../../cli/templates/providers.d', import.meta.url))];
    for (const dir of shipped) {
      // As shipped (*.yaml.example) they change no host (issue 12).
      expect(await loadProviderConfigs(dir)).toEqual([]);
      const copy = await mkdtemp(path.join(os.tmpdir(), 'ert-examples-'));
      try {
        for (const name of (await readdir(dir)).filter((n) => n.endsWith('.yaml.example'))) await copyFile(path.join(dir, name), path.join(copy, name.replace(/\.example$/, '')));
        const entries = await loadProviderConfigs(copy);
        expect(entries.length).toBeGreaterThanOrEqual(1);
      } finally {
        await rm(copy, { recursive: true, force: true });
      }
    }
  });
});

