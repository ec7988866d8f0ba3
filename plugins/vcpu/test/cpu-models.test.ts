import { describe, expect, it } from 'vitest';
import type { Discovery } from '@ert/plugin-api';
import { optionsWithDefaults } from '@ert/plugin-testkit';
import vcpu from '../src/compute.js';
import type { VcpuOptions } from '../src/shared.js';
import { profileRoot, resourceContext, type Profile } from './support.js';

/*
 * Issue 20, point 5: Nova's `[libvirt] cpu_mode = custom` + `cpu_models` (and
 * `cpu_model_extra_flags`), for migration compatibility across CPU generations: the
 * CPU-feature traits the host reports are the guest CPU model's, not the host's own, so hosts
 * of different generations configured with one model report the same traits; a host that
 * cannot run a configured model is refused (Nova does not start). On the profiles of
 * config/hosts: xeon-2s-cat (Cascade Lake: AVX-512 with VNNI, VMX), epyc-1s (Zen 3: SHA, SVM,
 * no AVX-512).
 */
async function discover(profile: Profile, options: Partial<VcpuOptions>): Promise<Discovery> {
  return (await vcpu.resource!(resourceContext(vcpu, profileRoot(profile), options))).discover();
}

const traitsOf = (d: Discovery): string[] => (d.available ? [...(d.host?.traits ?? [])].sort() : []);

const HASWELL = ['HW_CPU_X86_AESNI', 'HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_BMI', 'HW_CPU_X86_BMI2', 'HW_CPU_X86_CLMUL', 'HW_CPU_X86_F16C', 'HW_CPU_X86_FMA3', 'HW_CPU_X86_SSE41', 'HW_CPU_X86_SSE42', 'HW_CPU_X86_SSSE3'];

describe('vcpu cpuModels: the guest CPU model replaces the CPU-feature traits', () => {
  it('a Cascade Lake and a Zen 3 host both configured Haswell-noTSX report the same CPU traits: the model\'s', async () => {
    // Seen red: with compute.ts ignoring cpuModels (the host's flags), xeon reported AVX-512 and VMX, epyc SHA and SVM.
    const xeon = await discover('xeon-2s-cat', { cpuModels: ['Haswell-noTSX'] });
    const epyc = await discover('epyc-1s', { cpuModels: ['Haswell-noTSX'] });
    expect(traitsOf(xeon)).toEqual([...HASWELL, 'HW_CPU_HYPERTHREADING'].sort());
    expect(traitsOf(epyc)).toEqual(traitsOf(xeon));
    // Inventories are the host's as ever.
    expect(xeon.available && xeon.host?.inventories?.['VCPU']?.total).toBe(80);
  });

  it('the union of several models and the extra flags; without cpuModels the host\'s own flags', async () => {
    const both = await discover('xeon-2s-cat', { cpuModels: ['Haswell-noTSX', 'Skylake-Server'], cpuModelExtraFlags: ['avx512_vnni'] });
    expect(traitsOf(both)).toEqual([...HASWELL, 'HW_CPU_HYPERTHREADING', 'HW_CPU_X86_AVX512BW', 'HW_CPU_X86_AVX512CD', 'HW_CPU_X86_AVX512DQ', 'HW_CPU_X86_AVX512F', 'HW_CPU_X86_AVX512VL', 'HW_CPU_X86_AVX512VNNI'].sort());
    expect(traitsOf(await discover('xeon-2s-cat', {}))).toContain('HW_CPU_X86_VMX');
  });

  it('a host that cannot run a configured model (or an extra flag) is unavailable, naming the model and the flags it lacks', async () => {
    // Seen red: with the `missing` check removed, epyc reported Skylake-Server's AVX-512 traits it cannot run.
    expect(await discover('epyc-1s', { cpuModels: ['Skylake-Server'] })).toEqual({
      available: false,
      reason: "option cpuModels: this host's CPU cannot run Skylake-Server (lacks avx512f, avx512cd, avx512bw, avx512dq, avx512vl)",
    });
    expect(await discover('xeon-2s-cat', { cpuModels: ['Icelake-Server'] })).toMatchObject({ available: false, reason: expect.stringContaining('Icelake-Server (lacks sha_ni)') });
    expect(await discover('xeon-2s-cat', { cpuModels: ['Haswell'], cpuModelExtraFlags: ['sha_ni'] })).toMatchObject({ available: false, reason: expect.stringContaining('extra flags (lacks sha_ni)') });
    expect(await discover('xeon-2s-cat', { cpuModelExtraFlags: ['avx2'] })).toMatchObject({ available: false, reason: expect.stringContaining('cpuModelExtraFlags needs cpuModels') });
  });

  it('an unknown model is refused by the options schema', () => {
    expect(() => optionsWithDefaults(vcpu, { cpuModels: ['Pentium4'] })).toThrow(/cpuModels\/0 must be equal to one of the allowed values/);
    expect(optionsWithDefaults(vcpu, {})).toMatchObject({ cpuModels: [], cpuModelExtraFlags: [] });
  });
});
