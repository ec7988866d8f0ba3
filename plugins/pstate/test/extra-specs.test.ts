// The pstate keys through the real flavor parser (@ert/placement), as both sides use it.
import { describe, expect, it } from 'vitest';
import { extraSpecKeyProblem, parseFlavor } from '@ert/placement';
import compute from '../src/compute.js';
import scheduler from '../src/scheduler.js';
import { pstateRequestOf } from '../src/shared.js';

const flavor = (extraSpecs: Record<string, string>) => ({ name: 'f', vcpus: 2, memoryMb: 2048, diskGb: 0, extraSpecs });
const keys = compute.extraSpecs!;

describe('pstate extra specs', () => {
  it('both entries own the same well-formed keys', () => {
    expect(scheduler.extraSpecs).toBe(compute.extraSpecs);
    expect(keys.map((k) => k.key)).toEqual(['pstate:governor', 'pstate:min_freq_mhz', 'pstate:epp']);
    for (const key of keys) expect(extraSpecKeyProblem(key)).toBeUndefined();
  });

  it('parses governor, minimum frequency and EPP (a name or 0-255) and adds no resources', () => {
    const spec = parseFlavor(flavor({ 'pstate:governor': 'performance', 'pstate:min_freq_mhz': '2400', 'pstate:epp': 'balance_power' }), { keys });
    expect(pstateRequestOf(spec)).toEqual({ governor: 'performance', minFreqMhz: 2400, epp: 'balance_power' });
    expect(spec.groups[0]!.resources).toEqual({ VCPU: 2, MEMORY_MB: 2048 });
    expect(pstateRequestOf(parseFlavor(flavor({ 'pstate:epp': '255' }), { keys }))).toEqual({ epp: '255' });
  });

  it('refuses malformed values with the key named', () => {
    const cases: Array<[string, string]> = [
      ['pstate:governor', 'Perf ormance'],
      ['pstate:min_freq_mhz', '2.4GHz'],
      ['pstate:min_freq_mhz', '0'],
      ['pstate:epp', '256'],
      ['pstate:epp', 'power!'],
    ];
    for (const [key, value] of cases) {
      expect(() => parseFlavor(flavor({ [key]: value }), { keys })).toThrow(expect.objectContaining({ details: expect.objectContaining({ key, value }) }));
    }
  });
});
