import { describe, expect, it } from 'vitest';
import type { ConsumerHooks, FilterHooks, PluginContext, WeigherHooks } from '@ert/plugin-api';
import pstate, { type PstateHostData } from '../src/scheduler.js';
import type { PstateOptions, PstateStats } from '../src/shared.js';
import { hostState, services, silentLogger, specOf } from './helpers.js';

const ctx: PluginContext<PstateOptions> = { name: 'pstate', options: {}, logger: silentLogger, services: services() };
const consumer = (await pstate.consumer!(ctx)) as ConsumerHooks<PstateStats, PstateHostData>;
const filter = (await pstate.filter!(ctx)) as FilterHooks;
const weigher = (await pstate.weigher!(ctx)) as WeigherHooks;

function stats(over: Partial<PstateStats>): PstateStats {
  return {
    available: true,
    driver: 'intel_pstate',
    intelPstate: { status: 'active', noTurbo: false },
    control: true,
    governors: ['performance', 'powersave'],
    minFreqMhz: 1000,
    maxFreqMhz: 3900,
    baseFreqMhz: 2500,
    epp: { available: ['performance', 'power'], current: ['power'] },
    turbo: true,
    policies: [],
    ...over,
  };
}
function host(name: string, s: PstateStats | undefined) {
  return hostState(name, 'pstate', consumer.consume(s, hostState(name, 'pstate', undefined)));
}
const xeon = host('xeon', stats({}));
const epyc = host('epyc', stats({ driver: 'acpi-cpufreq', governors: ['ondemand', 'performance', 'schedutil'], maxFreqMhz: 2800, epp: null }));
const fixed = host('fixed', stats({ control: false, governors: ['performance'] }));
const vm = host('vm', stats({ available: false, reason: 'no cpufreq (no /sys/devices/system/cpu/cpufreq)', control: false, governors: [], maxFreqMhz: null, epp: null }));
const unknown = host('unknown', undefined);

describe('pstate scheduler side', () => {
  it('keeps only the capabilities from stats version 1', () => {
    expect(consumer.reads).toEqual([1]);
    expect(xeon.pluginData('pstate')).toEqual({
      available: true,
      intelPstate: { status: 'active', noTurbo: false },
      control: true,
      governors: ['performance', 'powersave'],
      maxFreqMhz: 3900,
      epp: { available: ['performance', 'power'], current: ['power'] },
    });
    expect(unknown.pluginData('pstate')).toMatchObject({ available: false, reason: 'the host reports no pstate stats' });
  });

  it('filters on governor, minimum frequency and EPP, only for requests that ask', () => {
    const plain = specOf([]);
    expect(filter.appliesTo!(plain)).toBe(false);
    const schedutil = specOf([], { 'pstate:governor': 'schedutil' });
    expect(filter.appliesTo!(schedutil)).toBe(true);
    expect(filter.filter(xeon, schedutil)).toBe('governor "schedutil" is not offered (available: performance, powersave)');
    expect(filter.filter(epyc, schedutil)).toBeUndefined();
    const fast = specOf([], { 'pstate:min_freq_mhz': 3000 });
    expect(filter.filter(xeon, fast)).toBeUndefined();
    expect(filter.filter(epyc, fast)).toBe('min_freq_mhz 3000 is above the maximum frequency 2800 MHz');
    const epp = specOf([], { 'pstate:epp': 'power' });
    expect(filter.filter(xeon, epp)).toBeUndefined();
    expect(filter.filter(epyc, epp)).toBe('energy-performance preference "power" asked, but the host has no EPP');
    expect(filter.filter(fixed, specOf([], { 'pstate:governor': 'performance' }))).toBe(
      'P-state settings unavailable: no writable cpufreq policy with a choice of governors',
    );
    expect(filter.filter(xeon, specOf([], { 'pstate:governor': 'performance', 'pstate:epp': 'power' }))).toBe(
      'intel_pstate keeps EPP at "performance" under the performance governor; "power" cannot be set with it',
    );
    expect(filter.filter(xeon, specOf([], { 'pstate:governor': 'performance', 'pstate:epp': 'performance' }))).toBeUndefined();
    expect(filter.filter(xeon, specOf([], { 'pstate:governor': 'powersave', 'pstate:epp': 'power' }))).toBeUndefined();
    expect(filter.filter(vm, epp)).toBe('P-state settings unavailable: no cpufreq (no /sys/devices/system/cpu/cpufreq)');
    expect(filter.filter(unknown, epp)).toBe('P-state settings unavailable: the host reports no pstate stats');
  });

  it('weighs frequency headroom above the requested minimum', () => {
    const spec = specOf([], { 'pstate:min_freq_mhz': 2000 });
    expect(weigher.weigh(xeon, spec)).toBe(1900);
    expect(weigher.weigh(epyc, spec)).toBe(800);
    expect(weigher.weigh(vm, spec)).toBe(0);
    expect(weigher.weigh(epyc, specOf([]))).toBe(2800);
  });
});
