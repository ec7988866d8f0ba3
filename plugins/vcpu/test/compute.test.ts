import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ClaimedInstance, Discovery, ResourceHooks } from '@ert/plugin-api';
import vcpu from '../src/compute.js';
import { VcpuErrorCodes } from '../src/errors.js';
import type { VcpuOptions, VcpuStats } from '../src/shared.js';
import { instanceOf, profileCopy, schemaProblems, profileRoot, resourceContext, specOf, type Profile } from './support.js';

async function hooksFor(root: string, options: Partial<VcpuOptions> = {}): Promise<ResourceHooks<VcpuStats>> {
  return vcpu.resource!(resourceContext(vcpu, root, options));
}

const INTEL_AVX512 = [
  'HW_CPU_X86_AESNI', 'HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_AVX512BW', 'HW_CPU_X86_AVX512CD',
  'HW_CPU_X86_AVX512DQ', 'HW_CPU_X86_AVX512F', 'HW_CPU_X86_AVX512VL', 'HW_CPU_X86_BMI', 'HW_CPU_X86_BMI2',
  'HW_CPU_X86_CLMUL', 'HW_CPU_X86_F16C', 'HW_CPU_X86_FMA3', 'HW_CPU_X86_MPX', 'HW_CPU_X86_SSE41',
  'HW_CPU_X86_SSE42', 'HW_CPU_X86_SSSE3',
];

const expected: Record<Profile, { vcpu: number; traits: string[]; stats: VcpuStats }> = {
  'xeon-2s-cat': {
    vcpu: 80,
    traits: [...INTEL_AVX512, 'HW_CPU_X86_AVX512VNNI', 'HW_CPU_X86_VMX', 'HW_CPU_HYPERTHREADING'].sort(),
    stats: {
      model: 'Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz', vendor: 'GenuineIntel', family: 6, modelNumber: 85,
      cpus: 80, sockets: 2, cores: 40, threadsPerCore: 2,
      numaNodes: [{ id: 0, cpus: '0-19,40-59', dedicatedCpus: 0, freeDedicated: 0 }, { id: 1, cpus: '20-39,60-79', dedicatedCpus: 0, freeDedicated: 0 }],
      sharedCpus: '0-79', dedicatedCpus: '', reservedCpus: '', freeDedicatedCpus: '',
    },
  },
  'epyc-1s': {
    vcpu: 64,
    traits: [
      'HW_CPU_HYPERTHREADING', 'HW_CPU_X86_AESNI', 'HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_BMI', 'HW_CPU_X86_BMI2',
      'HW_CPU_X86_CLMUL', 'HW_CPU_X86_F16C', 'HW_CPU_X86_FMA3', 'HW_CPU_X86_SHA', 'HW_CPU_X86_SSE41', 'HW_CPU_X86_SSE42',
      'HW_CPU_X86_SSSE3', 'HW_CPU_X86_SVM',
    ],
    stats: {
      model: 'AMD EPYC 7543P 32-Core Processor', vendor: 'AuthenticAMD', family: 25, modelNumber: 1,
      cpus: 64, sockets: 1, cores: 32, threadsPerCore: 2,
      numaNodes: [{ id: 0, cpus: '0-63', dedicatedCpus: 0, freeDedicated: 0 }],
      sharedCpus: '0-63', dedicatedCpus: '', reservedCpus: '', freeDedicatedCpus: '',
    },
  },
  'cloud-vm': {
    // A guest sees no vmx: no HW_CPU_X86_VMX.
    vcpu: 4,
    traits: [...INTEL_AVX512, 'HW_CPU_X86_AVX512VNNI', 'HW_CPU_HYPERTHREADING'].sort(),
    stats: {
      model: 'Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz', vendor: 'GenuineIntel', family: 6, modelNumber: 85,
      cpus: 4, sockets: 1, cores: 2, threadsPerCore: 2,
      numaNodes: [{ id: 0, cpus: '0-3', dedicatedCpus: 0, freeDedicated: 0 }],
      sharedCpus: '0-3', dedicatedCpus: '', reservedCpus: '', freeDedicatedCpus: '',
    },
  },
  'xeon-4s-numa': {
    // Skylake-SP: AVX-512 without VNNI.
    vcpu: 64,
    traits: [...INTEL_AVX512, 'HW_CPU_X86_VMX', 'HW_CPU_HYPERTHREADING'].sort(),
    stats: {
      model: 'Intel(R) Xeon(R) Gold 6144 CPU @ 3.50GHz', vendor: 'GenuineIntel', family: 6, modelNumber: 85,
      cpus: 64, sockets: 4, cores: 32, threadsPerCore: 2,
      numaNodes: [
        { id: 0, cpus: '0-7,32-39', dedicatedCpus: 0, freeDedicated: 0 },
        { id: 1, cpus: '8-15,40-47', dedicatedCpus: 0, freeDedicated: 0 },
        { id: 2, cpus: '16-23,48-55', dedicatedCpus: 0, freeDedicated: 0 },
        { id: 3, cpus: '24-31,56-63', dedicatedCpus: 0, freeDedicated: 0 },
      ],
      sharedCpus: '0-63', dedicatedCpus: '', reservedCpus: '', freeDedicatedCpus: '',
    },
  },
};

describe('vcpu discovery on the host profiles', () => {
  it.each(Object.keys(expected) as Profile[])('%s', async (profile) => {
    const want = expected[profile];
    const hooks = await hooksFor(profileRoot(profile));
    const discovery = await hooks.discover();
    expect(discovery).toEqual({
      available: true,
      host: {
        inventories: { VCPU: { total: want.vcpu, reserved: 0, minUnit: 1, maxUnit: want.vcpu, stepSize: 1, allocationRatio: 4 } },
        traits: [...want.traits].sort(),
      },
    });
    const stats = await hooks.stats!();
    expect(stats).toEqual(want.stats);
    expect(schemaProblems(vcpu.stats!.schema, stats)).toEqual([]);
  });

  it('has a stats schema that refuses what a reader could not use', () => {
    const stats = { ...expected['cloud-vm'].stats, sockets: 0, numaNodes: [{ id: 0, cpus: '0-3' }] };
    expect(schemaProblems(vcpu.stats!.schema, stats)).toEqual([
      '/sockets must be >= 1',
      "/numaNodes/0 must have required property 'dedicatedCpus'",
    ]);
  });

  it('splits xeon-2s-cat into reserved, shared and dedicated CPUs', async () => {
    const hooks = await hooksFor(profileRoot('xeon-2s-cat'), { reservedCpus: '0,40', dedicatedCpus: '10-19,50-59', allocationRatio: 2 });
    const discovery = await hooks.discover();
    expect(discovery.host?.inventories).toEqual({
      VCPU: { total: 60, reserved: 2, minUnit: 1, maxUnit: 60, stepSize: 1, allocationRatio: 2 },
      PCPU: { total: 20, reserved: 0, minUnit: 1, maxUnit: 20, stepSize: 1, allocationRatio: 1 },
    });
    const stats = await hooks.stats!();
    expect(stats.numaNodes).toEqual([
      { id: 0, cpus: '0-19,40-59', dedicatedCpus: 20, freeDedicated: 20 },
      { id: 1, cpus: '20-39,60-79', dedicatedCpus: 0, freeDedicated: 0 },
    ]);
    expect(stats).toMatchObject({ sharedCpus: '0-9,20-49,60-79', dedicatedCpus: '10-19,50-59', reservedCpus: '0,40', freeDedicatedCpus: '10-19,50-59' });
  });

  it('does not count reserved CPUs that are dedicated', async () => {
    const hooks = await hooksFor(profileRoot('cloud-vm'), { reservedCpus: '0-1', dedicatedCpus: '1,3' });
    const discovery = await hooks.discover();
    expect(discovery.host?.inventories?.VCPU).toMatchObject({ total: 2, reserved: 1 });
    expect(discovery.host?.inventories?.PCPU).toMatchObject({ total: 2 });
  });

  it('publishes no VCPU when every CPU is dedicated', async () => {
    const discovery = await (await hooksFor(profileRoot('cloud-vm'), { dedicatedCpus: '0-3' })).discover();
    expect(Object.keys(discovery.host?.inventories ?? {})).toEqual(['PCPU']);
  });

  it('is unavailable when dedicatedCpus names CPUs that are not online', async () => {
    const hooks = await hooksFor(profileRoot('cloud-vm'), { dedicatedCpus: '2-5' });
    expect(await hooks.discover()).toEqual({ available: false, reason: 'option dedicatedCpus names CPUs 4-5 that are not online (online: 0-3)' });
    await expect(async () => hooks.stats!()).rejects.toMatchObject({ code: VcpuErrorCodes.unavailable });
  });

  it('refuses a CPU list that runs backwards, naming the option', async () => {
    await expect(hooksFor(profileRoot('cloud-vm'), { reservedCpus: '5-3' })).rejects.toMatchObject({
      code: VcpuErrorCodes.invalidOption,
      details: { plugin: 'vcpu', key: 'reservedCpus', value: '5-3' },
    });
  });
});

describe('vcpu on broken hosts', () => {
  async function discoverBroken(breakIt: (root: string) => Promise<void>): Promise<Discovery> {
    const copy = await profileCopy('cloud-vm');
    try {
      await breakIt(copy.root);
      return await (await hooksFor(copy.root)).discover();
    } finally {
      await copy.cleanup();
    }
  }

  it('is unavailable with a garbled cpuinfo, naming the file', async () => {
    const discovery = await discoverBroken((root) => writeFile(path.join(root, 'proc/cpuinfo'), 'this is not\ncpuinfo at all\n'));
    expect(discovery.available).toBe(false);
    expect(discovery.reason).toMatch(/^\/proc\/cpuinfo: record 1: line "this is not"/);
    expect(discovery.host).toBeUndefined();
  });

  it('is unavailable when a CPU topology directory is missing, naming the file', async () => {
    const discovery = await discoverBroken((root) => rm(path.join(root, 'sys/devices/system/cpu/cpu3/topology'), { recursive: true }));
    expect(discovery).toEqual({
      available: false,
      reason: '/sys/devices/system/cpu/cpu3/topology/physical_package_id: missing, unreadable or not an integer',
    });
  });

  it('is unavailable on an empty root', async () => {
    const copy = await profileCopy('cloud-vm');
    await copy.cleanup();
    const discovery = await (await hooksFor(copy.root)).discover();
    expect(discovery).toEqual({ available: false, reason: '/sys/devices/system/cpu/online: missing, unreadable or not a CPU list' });
  });
});

describe('vcpu claims', () => {
  const claimed = (uuid: string, vcpus: number, pcpus = 0): ClaimedInstance => {
    const spec = specOf({ VCPU: vcpus, ...(pcpus ? { PCPU: pcpus } : {}) });
    return { uuid, request: instanceOf(uuid, spec), spec, allocations: [] };
  };
  const request = (uuid: string, resources: Record<string, number>, kind: 'claim' | 'resize' = 'claim') => {
    const spec = specOf(resources);
    return { instance: instanceOf(uuid, spec), spec, kind };
  };

  it('refuses before discovery and on an unavailable host', async () => {
    const hooks = await hooksFor(profileRoot('cloud-vm'));
    expect(await hooks.test!(request('a', { VCPU: 1 }))).toBe('vcpu is unavailable on this host: the host has not been discovered yet');
  });

  it('counts instances against capacity (cloud-vm: 4 CPUs x 4.0 = 16 VCPU)', async () => {
    const hooks = await hooksFor(profileRoot('cloud-vm'));
    await hooks.discover();
    // One instance gets at most the host's CPU count (max_unit = total), overcommit spreads over instances.
    expect(await hooks.test!(request('a', { VCPU: 4 }))).toBeUndefined();
    expect(await hooks.test!(request('a', { VCPU: 5 }))).toBe('VCPU: amount 5 is above max_unit 4');
    await hooks.addInstance!(claimed('a', 4));
    await hooks.addInstance!(claimed('b', 4));
    await hooks.addInstance!(claimed('c', 4));
    await hooks.addInstance!(claimed('c', 4)); // idempotent
    expect(await hooks.test!(request('d', { VCPU: 4 }))).toBeUndefined();
    await hooks.addInstance!(claimed('d', 3));
    expect(await hooks.test!(request('e', { VCPU: 2 }))).toBe('VCPU: needs 2, 1 free of capacity 16');
    // A resize counts the instance's own current size too: it stays held until confirmed or reverted.
    expect(await hooks.test!(request('d', { VCPU: 1 }, 'resize'))).toBeUndefined();
    expect(await hooks.test!(request('d', { VCPU: 2 }, 'resize'))).toBe('VCPU: needs 2, 1 free of capacity 16');
    await hooks.removeInstance!('a');
    await hooks.removeInstance!('unknown');
    expect(await hooks.test!(request('e', { VCPU: 4 }))).toBeUndefined();
    await hooks.reset!();
    expect(await hooks.test!(request('e', { VCPU: 4 }))).toBeUndefined();
    expect(await hooks.test!(request('e', { MEMORY_MB: 512 }))).toBeUndefined();
  });

  it('counts the allocations written rather than the spec when there are any', async () => {
    const hooks = await hooksFor(profileRoot('cloud-vm'), { reservedCpus: '0', allocationRatio: 1 });
    await hooks.discover();
    const instance = claimed('a', 1);
    instance.allocations = [{ providerName: 'compute-1', resourceClass: 'VCPU', amount: 2 }];
    await hooks.addInstance!(instance);
    expect(await hooks.test!(request('b', { VCPU: 2 }))).toBe('VCPU: needs 2, 1 free of capacity 3');
  });

  it('tests PCPU against the dedicated set', async () => {
    const none = await hooksFor(profileRoot('xeon-4s-numa'));
    await none.discover();
    expect(await none.test!(request('a', { PCPU: 2 }))).toBe('PCPU: the host has no dedicated CPUs (dedicatedCpus is empty)');

    const hooks = await hooksFor(profileRoot('xeon-4s-numa'), { dedicatedCpus: '0-7,32-39' });
    await hooks.discover();
    await hooks.addInstance!(claimed('a', 0, 10));
    // 'a' came without pinned CPUs: it counts against PCPU, but pins none.
    expect(await hooks.test!(request('b', { PCPU: 6 }))).toEqual({ cpus: [0, 1, 2, 3, 4, 5] });
    expect(await hooks.test!(request('b', { PCPU: 7, VCPU: 300 }))).toBe('VCPU: amount 300 is above max_unit 48; PCPU: needs 7, 6 free of capacity 16');
  });

  describe('pinning dedicated CPUs', () => {
    // xeon-4s-numa: node 0 is 0-7,32-39, node 1 is 8-15,40-47, node 2 is 16-23,48-55.
    const pinned = (uuid: string, cpus: number[], vcpus = 0): ClaimedInstance => ({ ...claimed(uuid, vcpus, cpus.length), cpus });
    async function dedicatedHost(dedicatedCpus: string) {
      const hooks = await hooksFor(profileRoot('xeon-4s-numa'), { dedicatedCpus });
      await hooks.discover();
      return hooks;
    }

    it('grants free dedicated CPUs on the NUMA node that fits best, and none to shared instances', async () => {
      // Node 0 has 4 dedicated CPUs, node 1 has 6.
      const hooks = await dedicatedHost('4-7,8-13');
      expect(await hooks.test!(request('a', { VCPU: 4 }))).toBeUndefined();
      expect(await hooks.test!(request('a', { PCPU: 3 }))).toEqual({ cpus: [4, 5, 6] });
      expect(await hooks.test!(request('a', { PCPU: 5 }))).toEqual({ cpus: [8, 9, 10, 11, 12] });
      // No node has 8: a PCPU amount no flavor pins (these specs have no extra specs, as a
      // Placement-style request) takes the fullest node first, then the next. A flavor that pins
      // (hw:cpu_policy=dedicated, resources:PCPU) is refused instead: cpu-policy.test.ts.
      expect(await hooks.test!(request('a', { PCPU: 8 }))).toEqual({ cpus: [4, 5, 8, 9, 10, 11, 12, 13] });
    });

    it('does not grant CPUs other instances are pinned to, and frees them on removeInstance', async () => {
      const hooks = await dedicatedHost('4-7,8-13');
      await hooks.addInstance!(pinned('a', [8, 9, 10, 11]));
      await hooks.addInstance!(pinned('b', [4, 5]));
      expect((await hooks.stats!()).freeDedicatedCpus).toBe('6-7,12-13');
      expect(await hooks.test!(request('c', { PCPU: 2 }))).toEqual({ cpus: [6, 7] });
      expect(await hooks.test!(request('c', { PCPU: 3 }))).toEqual({ cpus: [6, 7, 12] });
      await hooks.removeInstance!('a');
      expect((await hooks.stats!()).freeDedicatedCpus).toBe('6-13');
      expect(await hooks.test!(request('c', { PCPU: 3 }))).toEqual({ cpus: [8, 9, 10] });
    });

    it('refuses when fewer dedicated CPUs are free to pin than requested', async () => {
      const hooks = await dedicatedHost('4-7');
      await hooks.addInstance!(pinned('a', [4, 5, 6]));
      // A resize's old CPUs stay pinned and counted until it is confirmed or reverted.
      expect(await hooks.test!(request('a', { PCPU: 2 }, 'resize'))).toBe('PCPU: needs 2, 1 free of capacity 4');
      expect(await hooks.test!(request('a', { PCPU: 1 }, 'resize'))).toEqual({ cpus: [7] });
      // Pinned CPUs that the count does not see (an instance added without PCPU allocations) still are not granted.
      await hooks.addInstance!({ ...claimed('b', 0, 0), cpus: [7] });
      expect(await hooks.test!(request('c', { PCPU: 1 }))).toBe('PCPU: needs 1 dedicated CPUs to pin, 0 free (none)');
    });

    it('rebuilds the pinned CPUs from reset + addInstance', async () => {
      const hooks = await dedicatedHost('4-7');
      await hooks.addInstance!(pinned('a', [4, 5]));
      await hooks.reset!();
      expect((await hooks.stats!()).freeDedicatedCpus).toBe('4-7');
      await hooks.addInstance!(pinned('a', [6, 7]));
      await hooks.addInstance!(pinned('a', [6, 7])); // idempotent
      expect((await hooks.stats!()).freeDedicatedCpus).toBe('4-5');
      expect(await hooks.test!(request('b', { PCPU: 2 }))).toEqual({ cpus: [4, 5] });
      expect(schemaProblems(vcpu.stats!.schema, await hooks.stats!())).toEqual([]);
    });
  });
});

// Issue 12: `dedicatedCpus: isolated` takes the dedicated (PCPU) CPUs from the kernel's
// isolated list, as Nova's cpu_dedicated_set is usually set, so that a fleet of hosts with
// different isolcpus= needs no per-host config. Seen red with the list read only while no
// CPU was dedicated yet (a later malformed list went unnoticed).
describe('dedicatedCpus: isolated', () => {
  it('makes the kernel\u2019s isolated CPUs PCPU and the rest VCPU (xeon-2s-cat: 36-39,76-79)', async () => {
    const hooks = await hooksFor(profileRoot('xeon-2s-cat'), { dedicatedCpus: 'isolated' });
    const found = (await hooks.discover()) as Discovery;
    expect(found.host?.inventories).toMatchObject({ VCPU: { total: 72 }, PCPU: { total: 8 } });
    expect((await hooks.stats!()).dedicatedCpus).toBe('36-39,76-79');
  });

  it('reads the list at each discovery; an empty or absent list is no PCPU; a malformed one makes the plugin unavailable', async () => {
    const copy = await profileCopy('xeon-2s-cat');
    const file = path.join(copy.root, 'sys/devices/system/cpu/isolated');
    try {
      const hooks = await hooksFor(copy.root, { dedicatedCpus: 'isolated' });
      await writeFile(file, '\n');
      expect(((await hooks.discover()) as Discovery).host?.inventories).toEqual({ VCPU: expect.objectContaining({ total: 80 }) });
      await rm(file);
      expect(((await hooks.discover()) as Discovery).host?.inventories).toEqual({ VCPU: expect.objectContaining({ total: 80 }) });
      await writeFile(file, '40-41\n');
      expect(((await hooks.discover()) as Discovery).host?.inventories).toMatchObject({ VCPU: { total: 78 }, PCPU: { total: 2 } });
      await writeFile(file, '7-3\n');
      expect(await hooks.discover()).toEqual({ available: false, reason: expect.stringContaining('/sys/devices/system/cpu/isolated (dedicatedCpus: isolated) is not a CPU list') });
    } finally {
      await copy.cleanup();
    }
  });
});
