// The llc keys through the real flavor parser (@ert/placement), as both sides use it.
import { describe, expect, it } from 'vitest';
import { extraSpecKeyProblem, parseFlavor } from '@ert/placement';
import compute from '../src/compute.js';
import scheduler from '../src/scheduler.js';
import { requestedWays } from '../src/shared.js';

const flavor = (extraSpecs: Record<string, string>) => ({ name: 'f', vcpus: 2, memoryMb: 2048, diskGb: 0, extraSpecs });
const keys = compute.extraSpecs!;

describe('llc extra specs', () => {
  it('both entries own the same well-formed keys', () => {
    expect(scheduler.extraSpecs).toBe(compute.extraSpecs);
    expect(keys.map((k) => k.key)).toEqual(['llc:ways']);
    for (const key of keys) expect(extraSpecKeyProblem(key)).toBeUndefined();
  });

  it('llc:ways=N asks for N ways in the unnumbered group, like resources:CUSTOM_LLC_WAYS=N', () => {
    const viaKey = parseFlavor(flavor({ 'llc:ways': '4' }), { keys });
    expect(viaKey.groups[0]!.resources).toMatchObject({ CUSTOM_LLC_WAYS: 4 });
    expect(requestedWays(viaKey)).toBe(4);
    const viaResources = parseFlavor(flavor({ 'resources:CUSTOM_LLC_WAYS': '3' }), { keys });
    expect(requestedWays(viaResources)).toBe(3);
  });

  it('refuses malformed values with the key named', () => {
    for (const bad of ['0', 'four', '33']) {
      expect(() => parseFlavor(flavor({ 'llc:ways': bad }), { keys })).toThrow(expect.objectContaining({ details: expect.objectContaining({ key: 'llc:ways', value: bad }) }));
    }
  });
});
