import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClaimedInstance, ClaimGrant, ClaimRequest } from '@ert/plugin-api';
import pstate from '../src/compute.js';
import type { PstateStats } from '../src/shared.js';
import { HOSTS, removeTemp, resourceOf, snapshot, specOf, tempProfile, validator } from './helpers.js';

const validStats = validator(pstate.stats!.schema);
const temps: string[] = [];
afterEach(async () => {
  await Promise.all(temps.splice(0).map(removeTemp));
});
async function temp(profile: string): Promise<string> {
  const dir = await tempProfile(profile, { copy: ['sys/devices/system/cpu/cpufreq', 'sys/devices/system/cpu/intel_pstate'] });
  temps.push(dir);
  return dir;
}
async function hooks(profileOrRoot: string, enforce = false) {
  const root = path.isAbsolute(profileOrRoot) ? profileOrRoot : path.join(HOSTS, profileOrRoot);
  const h = await resourceOf(pstate, root, { enforce });
  const discovery = await h.discover();
  return { h, discovery, stats: (await h.stats!()) as PstateStats };
}
function claim(pluginSpecs: Record<string, unknown>, uuid = 'i1', kind: 'claim' | 'resize' = 'claim'): ClaimRequest {
  const spec = specOf([], pluginSpecs);
  return { instance: { uuid, projectId: 'p', userId: 'u', flavor: spec.flavor }, spec, kind };
}
function claimed(uuid: string, grant: ClaimGrant | undefined, cpus?: number[]): ClaimedInstance {
  const spec = specOf([]);
  return {
    uuid,
    request: { uuid, projectId: 'p', userId: 'u', flavor: spec.flavor },
    spec,
    allocations: [],
    assignment: grant?.assignment,
    ...(cpus ? { cpus } : {}),
  } as ClaimedInstance;
}
const policyFile = (root: string, cpu: number, file: string) => readFile(path.join(root, `sys/devices/system/cpu/cpufreq/policy${cpu}/${file}`), 'utf8');

describe('pstate discovery on the host profiles', () => {
  it('xeon-2s-cat: intel_pstate active with HWP, EPP and turbo', async () => {
    const { discovery, stats } = await hooks('xeon-2s-cat');
    expect(discovery).toEqual({
      available: true,
      host: {
        traits: ['CUSTOM_PSTATE_CONTROL', 'CUSTOM_PSTATE_GOVERNOR_PERFORMANCE', 'CUSTOM_PSTATE_GOVERNOR_POWERSAVE', 'CUSTOM_PSTATE_TURBO', 'CUSTOM_PSTATE_EPP'],
      },
    });
    expect(validStats(stats)).toBeUndefined();
    expect(stats).toEqual({
      available: true,
      driver: 'intel_pstate',
      intelPstate: { status: 'active', noTurbo: false },
      control: true,
      governors: ['performance', 'powersave'],
      minFreqMhz: 1000,
      maxFreqMhz: 3900,
      baseFreqMhz: 2500,
      epp: { available: ['default', 'performance', 'balance_performance', 'balance_power', 'power'], current: ['balance_performance'] },
      turbo: true,
      policies: [
        {
          cpus: '0-79',
          driver: 'intel_pstate',
          governor: 'powersave',
          minFreqMhz: 1000,
          maxFreqMhz: 3900,
          scalingMinMhz: 1000,
          scalingMaxMhz: 3900,
          epp: 'balance_performance',
        },
      ],
    });
  });

  it('epyc-1s: acpi-cpufreq with six governors and boost, no EPP', async () => {
    const { discovery, stats } = await hooks('epyc-1s');
    expect(discovery.host!.traits).toEqual([
      'CUSTOM_PSTATE_CONTROL',
      'CUSTOM_PSTATE_GOVERNOR_CONSERVATIVE',
      'CUSTOM_PSTATE_GOVERNOR_ONDEMAND',
      'CUSTOM_PSTATE_GOVERNOR_USERSPACE',
      'CUSTOM_PSTATE_GOVERNOR_POWERSAVE',
      'CUSTOM_PSTATE_GOVERNOR_PERFORMANCE',
      'CUSTOM_PSTATE_GOVERNOR_SCHEDUTIL',
      'CUSTOM_PSTATE_TURBO',
    ]);
    expect(discovery.host!.inventories).toBeUndefined();
    expect(validStats(stats)).toBeUndefined();
    expect(stats).toEqual({
      available: true,
      driver: 'acpi-cpufreq',
      intelPstate: null,
      control: true,
      governors: ['conservative', 'ondemand', 'userspace', 'powersave', 'performance', 'schedutil'],
      minFreqMhz: 1500,
      maxFreqMhz: 2800,
      baseFreqMhz: null,
      epp: null,
      turbo: true,
      policies: [
        { cpus: '0-63', driver: 'acpi-cpufreq', governor: 'schedutil', minFreqMhz: 1500, maxFreqMhz: 2800, scalingMinMhz: 1500, scalingMaxMhz: 2800, epp: null },
      ],
    });
  });

  it('xeon-4s-numa: intel_pstate passive (intel_cpufreq), turbo off', async () => {
    const { discovery, stats } = await hooks('xeon-4s-numa');
    expect(discovery.host!.traits).toEqual([
      'CUSTOM_PSTATE_CONTROL',
      'CUSTOM_PSTATE_GOVERNOR_CONSERVATIVE',
      'CUSTOM_PSTATE_GOVERNOR_ONDEMAND',
      'CUSTOM_PSTATE_GOVERNOR_USERSPACE',
      'CUSTOM_PSTATE_GOVERNOR_POWERSAVE',
      'CUSTOM_PSTATE_GOVERNOR_PERFORMANCE',
      'CUSTOM_PSTATE_GOVERNOR_SCHEDUTIL',
    ]);
    expect(validStats(stats)).toBeUndefined();
    expect(stats).toEqual({
      available: true,
      driver: 'intel_cpufreq',
      intelPstate: { status: 'passive', noTurbo: true },
      control: true,
      governors: ['conservative', 'ondemand', 'userspace', 'powersave', 'performance', 'schedutil'],
      minFreqMhz: 1200,
      maxFreqMhz: 4200,
      baseFreqMhz: null,
      epp: null,
      turbo: false,
      policies: [
        { cpus: '0-63', driver: 'intel_cpufreq', governor: 'performance', minFreqMhz: 1200, maxFreqMhz: 4200, scalingMinMhz: 1200, scalingMaxMhz: 4200, epp: null },
      ],
    });
  });

  it('cloud-vm: no cpufreq, so unavailable with the reason', async () => {
    const { discovery, stats } = await hooks('cloud-vm');
    expect(discovery).toEqual({ available: false, reason: 'no cpufreq (no /sys/devices/system/cpu/cpufreq)' });
    expect(validStats(stats)).toBeUndefined();
    expect(stats).toEqual({
      available: false,
      reason: 'no cpufreq (no /sys/devices/system/cpu/cpufreq)',
      driver: null,
      intelPstate: null,
      control: false,
      governors: [],
      minFreqMhz: null,
      maxFreqMhz: null,
      baseFreqMhz: null,
      epp: null,
      turbo: null,
      policies: [],
    });
  });
});

describe('pstate discovery on broken trees', () => {
  it('garbled scaling_available_governors: the reason names the file, no traits, no throw', async () => {
    const root = await temp('xeon-2s-cat');
    await writeFile(path.join(root, 'sys/devices/system/cpu/cpufreq/policy5/scaling_available_governors'), 'perf@rmance \u0000\u0001\n');
    const { discovery, stats } = await hooks(root);
    expect(discovery.available).toBe(false);
    expect(discovery.reason).toContain('/sys/devices/system/cpu/cpufreq/policy5/scaling_available_governors');
    expect(discovery.host).toBeUndefined();
    expect(stats.available).toBe(false);
    expect(await (await hooks(root)).h.test!(claim({ 'pstate:governor': 'performance' }))).toMatch(/^P-state settings unavailable: .*policy5\/scaling_available_governors/);
  });

  it('a missing frequency file names it', async () => {
    const root = await temp('epyc-1s');
    await rm(path.join(root, 'sys/devices/system/cpu/cpufreq/policy9/cpuinfo_max_freq'));
    const { discovery } = await hooks(root);
    expect(discovery).toEqual({ available: false, reason: '/sys/devices/system/cpu/cpufreq/policy9/cpuinfo_max_freq is missing or not a frequency in kHz' });
  });

  it('a missing cpufreq directory on a host that had one', async () => {
    const root = await temp('xeon-4s-numa');
    await rm(path.join(root, 'sys/devices/system/cpu/cpufreq'), { recursive: true });
    const { discovery } = await hooks(root);
    expect(discovery).toEqual({ available: false, reason: 'no cpufreq (no /sys/devices/system/cpu/cpufreq)' });
  });

  it('policies with different settings are reported in groups', async () => {
    const root = await temp('epyc-1s');
    await writeFile(path.join(root, 'sys/devices/system/cpu/cpufreq/policy3/scaling_governor'), 'performance\n');
    const { stats } = await hooks(root);
    expect(stats.policies.map((p) => [p.cpus, p.governor])).toEqual([
      ['0-2,4-63', 'schedutil'],
      ['3', 'performance'],
    ]);
  });
});

describe('pstate claims', () => {
  it('grants what the host can do and records the values to restore', async () => {
    const { h } = await hooks('xeon-2s-cat');
    expect(await h.test!(claim({}))).toBeUndefined();
    expect(await h.test!(claim({ 'pstate:governor': 'performance', 'pstate:epp': 'performance', 'pstate:min_freq_mhz': 3000 }))).toEqual({
      assignment: {
        governor: 'performance',
        epp: 'performance',
        minFreqMhz: 3000,
        previous: [{ cpus: '0-79', governor: 'powersave', scalingMinKhz: 1000000, epp: 'balance_performance' }],
      },
    });
    expect(await h.test!(claim({ 'pstate:epp': '128' }))).toMatchObject({ assignment: { epp: '128' } });
  });

  it('refuses what the host cannot do', async () => {
    const { h } = await hooks('xeon-2s-cat');
    expect(await h.test!(claim({ 'pstate:governor': 'schedutil' }))).toBe('governor "schedutil" is not offered (available: performance, powersave)');
    expect(await h.test!(claim({ 'pstate:min_freq_mhz': 4000 }))).toBe('min_freq_mhz 4000 is above the maximum frequency 3900 MHz');
    expect(await h.test!(claim({ 'pstate:governor': 'performance', 'pstate:epp': '128' }))).toBe(
      'intel_pstate keeps EPP at "performance" under the performance governor; "128" cannot be set with it',
    );
    expect(await h.test!(claim({ 'pstate:epp': 'turbo' }))).toBe(
      'energy-performance preference "turbo" is not offered (available: default, performance, balance_performance, balance_power, power)',
    );
    const { h: epyc } = await hooks('epyc-1s');
    expect(await epyc.test!(claim({ 'pstate:epp': 'performance' }))).toBe('energy-performance preference "performance" asked, but the host has no EPP');
    expect(await epyc.test!(claim({ 'pstate:governor': 'schedutil', 'pstate:min_freq_mhz': 2800 }))).toMatchObject({ assignment: { governor: 'schedutil' } });
    const { h: vm } = await hooks('cloud-vm');
    expect(await vm.test!(claim({ 'pstate:governor': 'performance' }))).toBe('P-state settings unavailable: no cpufreq (no /sys/devices/system/cpu/cpufreq)');
    expect(await vm.test!(claim({}))).toBeUndefined();
  });
});

describe('pstate enforcement', () => {
  it('sets governor, EPP and minimum frequency on the instance CPUs and restores them at release', async () => {
    const root = await temp('xeon-2s-cat');
    const { h } = await hooks(root, true);
    const grant = (await h.test!(claim({ 'pstate:governor': 'performance', 'pstate:epp': 'performance', 'pstate:min_freq_mhz': 3000 }))) as ClaimGrant;
    const instance = claimed('i1', grant, [1, 41]);
    await h.enforce!({ type: 'claimed', host: 'host1', instance });
    for (const cpu of [1, 41]) {
      expect(await policyFile(root, cpu, 'scaling_governor')).toBe('performance\n');
      expect(await policyFile(root, cpu, 'energy_performance_preference')).toBe('performance\n');
      expect(await policyFile(root, cpu, 'scaling_min_freq')).toBe('3000000\n');
    }
    expect(await policyFile(root, 2, 'scaling_governor')).toBe('powersave\n');
    await h.enforce!({ type: 'released', host: 'host1', instance });
    for (const cpu of [1, 41]) {
      expect(await policyFile(root, cpu, 'scaling_governor')).toBe('powersave\n');
      expect(await policyFile(root, cpu, 'energy_performance_preference')).toBe('balance_performance\n');
      expect(await policyFile(root, cpu, 'scaling_min_freq')).toBe('1000000\n');
    }
  });

  it('a resize restores the old settings and applies the new ones', async () => {
    const root = await temp('xeon-4s-numa');
    const { h } = await hooks(root, true);
    const before = claimed('i1', (await h.test!(claim({ 'pstate:governor': 'schedutil' }))) as ClaimGrant, [8]);
    await h.enforce!({ type: 'claimed', host: 'host1', instance: before });
    expect(await policyFile(root, 8, 'scaling_governor')).toBe('schedutil\n');
    const after = claimed('i1', (await h.test!(claim({ 'pstate:min_freq_mhz': 2000 }, 'i1', 'resize'))) as ClaimGrant, [8]);
    await h.enforce!({ type: 'resized', host: 'host1', instance: after, previous: before });
    expect(await policyFile(root, 8, 'scaling_governor')).toBe('performance\n');
    expect(await policyFile(root, 8, 'scaling_min_freq')).toBe('2000000\n');
  });

  it('refuses an instance that is not pinned (its CPUs are shared), and reports failed writes', async () => {
    const root = await temp('xeon-2s-cat');
    const { h } = await hooks(root, true);
    const grant = (await h.test!(claim({ 'pstate:governor': 'performance' }))) as ClaimGrant;
    await expect(h.enforce!({ type: 'claimed', host: 'host1', instance: claimed('i1', grant) })).rejects.toMatchObject({
      code: 'ERT_PSTATE_CPUS_UNKNOWN',
      details: { instance: 'i1' },
      message: expect.stringContaining('is not pinned to host CPUs'),
    });
    const governorFile = path.join(root, 'sys/devices/system/cpu/cpufreq/policy7/scaling_governor');
    await rm(governorFile);
    await mkdir(governorFile);
    await expect(h.enforce!({ type: 'claimed', host: 'host1', instance: claimed('i1', grant, [7]) })).rejects.toMatchObject({
      code: 'ERT_PSTATE_ENFORCE_FAILED',
      details: { instance: 'i1', file: '/sys/devices/system/cpu/cpufreq/policy7/scaling_governor' },
    });
    // An instance that asked for nothing needs no CPUs and writes nothing.
    await h.enforce!({ type: 'claimed', host: 'host1', instance: claimed('i2', undefined) });
  });

  it('writes nothing when enforcement is off', async () => {
    const root = await temp('xeon-2s-cat');
    const before = await snapshot(root);
    const { h } = await hooks(root, false);
    const grant = (await h.test!(claim({ 'pstate:governor': 'performance', 'pstate:min_freq_mhz': 3000 }))) as ClaimGrant;
    await h.enforce!({ type: 'claimed', host: 'host1', instance: claimed('i1', grant, [0, 1, 2]) });
    await h.enforce!({ type: 'released', host: 'host1', instance: claimed('i1', grant, [0, 1, 2]) });
    expect(await snapshot(root)).toEqual(before);
  });
});
