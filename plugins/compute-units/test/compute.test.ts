import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ResourceHooks } from '@ert/plugin-api';
import computeUnits from '../src/compute.js';
import { CuErrorCodes } from '../src/errors.js';
import type { ComputeUnitsOptions, ComputeUnitsStatsV1 } from '../src/shared.js';
import { instanceOf, profileCopy, schemaProblems, profileRoot, resourceContext, specOf, type Profile } from '../../vcpu/test/support.js';

async function hooksFor(root: string, options: Partial<ComputeUnitsOptions> = {}): Promise<ResourceHooks<ComputeUnitsStatsV1>> {
  return computeUnits.resource!(resourceContext(computeUnits, root, options));
}

const models: Record<Profile, string> = {
  'xeon-2s-cat': 'Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz',
  'epyc-1s': 'AMD EPYC 7543P 32-Core Processor',
  'cloud-vm': 'Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz',
  'xeon-4s-numa': 'Intel(R) Xeon(R) Gold 6144 CPU @ 3.50GHz',
};
// Physical cores: 2 x 20, 1 x 32, 1 x 2, 4 x 8.
const cores: Record<Profile, number> = { 'xeon-2s-cat': 40, 'epyc-1s': 32, 'cloud-vm': 2, 'xeon-4s-numa': 32 };

describe('compute units with the default 10 CU per core', () => {
  it.each([
    ['xeon-2s-cat', 400],
    ['epyc-1s', 320],
    ['cloud-vm', 20],
    ['xeon-4s-numa', 320],
  ] as Array<[Profile, number]>)('%s: %i CUSTOM_CU', async (profile, total) => {
    const hooks = await hooksFor(profileRoot(profile));
    expect(await hooks.discover()).toEqual({
      available: true,
      host: { inventories: { CUSTOM_CU: { total, reserved: 0, minUnit: 1, maxUnit: total, stepSize: 1, allocationRatio: 1 } } },
    });
    const stats = await hooks.stats!();
    expect(stats).toEqual({ model: models[profile], perCore: 10, cores: cores[profile], total, matchedBy: null });
    expect(schemaProblems(computeUnits.stats!.schema, stats)).toEqual([]);
  });
});

describe('compute units per CPU model', () => {
  const rules: ComputeUnitsOptions['models'] = [
    { match: 'Gold 6248', perCore: 12 },
    { match: '/EPYC 7\\d43P/', perCore: 14 },
    { match: '/xeon\\(r\\) gold/i', perCore: 11 },
    { match: 'Gold', perCore: 99 },
  ];

  it.each([
    ['xeon-2s-cat', 12, 480, 'Gold 6248'],
    ['epyc-1s', 14, 448, '/EPYC 7\\d43P/'],
    ['xeon-4s-numa', 11, 352, '/xeon\\(r\\) gold/i'],
    ['cloud-vm', 8, 16, null],
  ] as Array<[Profile, number, number, string | null]>)('%s: %i per core, %i CU, matched by %s', async (profile, perCore, total, matchedBy) => {
    const hooks = await hooksFor(profileRoot(profile), { models: rules, perCore: 8 });
    const discovery = await hooks.discover();
    expect(discovery.host?.inventories?.CUSTOM_CU).toMatchObject({ total });
    expect(await hooks.stats!()).toEqual({ model: models[profile], perCore, cores: cores[profile], total, matchedBy });
  });

  it('refuses a rule whose regex does not compile, naming it', async () => {
    await expect(hooksFor(profileRoot('cloud-vm'), { models: [{ match: 'ok', perCore: 1 }, { match: '/([/', perCore: 2 }] })).rejects.toMatchObject({
      code: CuErrorCodes.invalidOption,
      details: { plugin: 'compute-units', key: 'models[1].match', value: '/([/' },
    });
  });
});

describe('compute units on broken hosts', () => {
  it('is unavailable with a garbled cpuinfo or without CPU topology, naming the file', async () => {
    const copy = await profileCopy('epyc-1s');
    try {
      await writeFile(path.join(copy.root, 'proc/cpuinfo'), 'processor : zero\n');
      const garbled = await (await hooksFor(copy.root)).discover();
      expect(garbled).toEqual({ available: false, reason: '/proc/cpuinfo: record 1 has no numeric "processor" field' });
      expect(garbled.host).toBeUndefined();
      // Cores come from the topology: without one CPU's topology directory there is no count.
      await writeFile(path.join(copy.root, 'proc/cpuinfo'), await readFile(path.join(profileRoot('epyc-1s'), 'proc/cpuinfo')));
      await rm(path.join(copy.root, 'sys/devices/system/cpu/cpu7/topology'), { recursive: true });
      expect(await (await hooksFor(copy.root)).discover()).toEqual({
        available: false,
        reason: '/sys/devices/system/cpu/cpu7/topology/physical_package_id: missing, unreadable or not an integer',
      });
    } finally {
      await copy.cleanup();
    }
    const hooks = await hooksFor(path.join(profileRoot('epyc-1s'), 'proc'));
    expect(await hooks.discover()).toEqual({ available: false, reason: '/proc/cpuinfo: missing or unreadable' });
    await expect(async () => hooks.stats!()).rejects.toMatchObject({ code: CuErrorCodes.unavailable });
  });
});

describe('compute unit claims', () => {
  const request = (uuid: string, units: number, kind: 'claim' | 'resize' = 'claim') => {
    const spec = specOf({ VCPU: 1, CUSTOM_CU: units });
    return { instance: instanceOf(uuid, spec), spec, kind };
  };

  it('counts instances against the host CUs (cloud-vm: 20)', async () => {
    const hooks = await hooksFor(profileRoot('cloud-vm'));
    expect(await hooks.test!(request('a', 5))).toBe('compute units are unavailable on this host: the host has not been discovered yet');
    await hooks.discover();
    expect(await hooks.test!(request('a', 21))).toBe('CUSTOM_CU: amount 21 is above max_unit 20');
    const a = request('a', 15);
    await hooks.addInstance!({ uuid: 'a', request: a.instance, spec: a.spec, allocations: [] });
    expect(await hooks.test!(request('b', 6))).toBe('CUSTOM_CU: needs 6, 5 free of capacity 20');
    expect(await hooks.test!(request('b', 5))).toBeUndefined();
    // A resize counts the instance's current units too: they stay held until it is confirmed or reverted.
    expect(await hooks.test!(request('a', 6, 'resize'))).toBe('CUSTOM_CU: needs 6, 5 free of capacity 20');
    await hooks.addInstance!({ uuid: 'a', request: a.instance, spec: a.spec, allocations: [{ providerName: 'compute-1', resourceClass: 'CUSTOM_CU', amount: 10 }] });
    expect(await hooks.test!(request('b', 10))).toBeUndefined();
    await hooks.removeInstance!('a');
    expect(await hooks.test!(request('b', 20))).toBeUndefined();
    const noCu = specOf({ VCPU: 2 });
    expect(await hooks.test!({ instance: instanceOf('c', noCu), spec: noCu, kind: 'claim' })).toBeUndefined();
  });
});
