import { describe, expect, it } from 'vitest';
import { requestedAmount, type RequestGroup, type RequestSpec } from '../src/index.js';

function group(suffix: string, resources: Record<string, number>): RequestGroup {
  return { suffix, resources, requiredTraits: [], forbiddenTraits: [], memberOf: [] };
}

function spec(groups: RequestGroup[]): RequestSpec {
  return {
    flavor: { name: 'f', vcpus: 4, memoryMb: 2048, diskGb: 0, extraSpecs: {} },
    groups,
    groupPolicy: 'none',
    aggregateExtraSpecs: {},
    capabilities: [],
    pluginSpecs: {},
    hints: {},
  };
}

describe('requestedAmount', () => {
  it('sums a class over the unnumbered and the numbered groups', () => {
    const s = spec([group('', { VCPU: 4, MEMORY_MB: 2048 }), group('1', { VCPU: 2, CUSTOM_CU: 10 }), group('_NET', { CUSTOM_CU: 5 })]);
    expect(requestedAmount(s, 'VCPU')).toBe(6);
    expect(requestedAmount(s, 'CUSTOM_CU')).toBe(15);
    expect(requestedAmount(s, 'MEMORY_MB')).toBe(2048);
  });

  it('is 0 for a class no group asks for', () => {
    expect(requestedAmount(spec([group('', { VCPU: 4 }), group('1', { MEMORY_MB: 512 })]), 'PCPU')).toBe(0);
  });

  it('reads the groups, not the flavor (extra specs already applied)', () => {
    // hw:cpu_policy=dedicated moved the flavor's 4 VCPU to PCPU.
    const s = spec([group('', { PCPU: 4, MEMORY_MB: 2048 })]);
    expect(requestedAmount(s, 'VCPU')).toBe(0);
    expect(requestedAmount(s, 'PCPU')).toBe(4);
  });
});
