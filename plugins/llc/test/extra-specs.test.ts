// The llc keys through the real flavor parser (@ert/placement), as both sides use it.
import { describe, expect, it } from 'vitest';
import { extraSpecKeyProblem, parseFlavor, RequestSpecError } from '@ert/placement';
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

  // Audit #7. Catches llc:ways silently overriding resources:CUSTOM_LLC_WAYS (`llc:ways=3` with
  // `resources:CUSTOM_LLC_WAYS=5` became 3 ways, nothing said): a pair that disagrees is
  // ERT_SPEC_CONFLICT naming both keys and values, through the keys of either entry (the
  // tracker parses with the compute entry's, the scheduler with the scheduler entry's: the one
  // applyResources of src/shared.ts). Equal values are one request and pass.
  it('refuses llc:ways and resources:CUSTOM_LLC_WAYS that disagree, on both sides; equal values pass', () => {
    for (const entryKeys of [compute.extraSpecs!, scheduler.extraSpecs!]) {
      for (const [ways, resources] of [['3', '5'], ['5', '3']] as const) {
        const conflict = { 'llc:ways': ways, 'resources:CUSTOM_LLC_WAYS': resources };
        let error: unknown;
        try {
          parseFlavor(flavor(conflict), { keys: entryKeys });
        } catch (err) {
          error = err;
        }
        expect(error).toBeInstanceOf(RequestSpecError);
        expect(error).toMatchObject({ code: 'ERT_SPEC_CONFLICT', details: { key: 'llc:ways', value: ways, plugin: 'llc' } });
        expect((error as Error).message).toBe(
          `plugin "llc": extra spec "llc:ways=${ways}": conflicts with resources:CUSTOM_LLC_WAYS=${resources}; give one of the two keys, or the same number of ways in both`,
        );
      }
      const same = parseFlavor(flavor({ 'llc:ways': '4', 'resources:CUSTOM_LLC_WAYS': '4' }), { keys: entryKeys });
      expect(requestedWays(same)).toBe(4);
    }
  });

  // Audit #8. Catches an extra-spec error that names key and value but not the plugin whose key
  // it is: `llc:ways=abc` says `plugin "llc"` in its message and details, code unchanged.
  it('an invalid llc:ways names the llc plugin, the key and the value', () => {
    let error: unknown;
    try {
      parseFlavor(flavor({ 'llc:ways': 'abc' }), { keys });
    } catch (err) {
      error = err;
    }
    expect(error).toMatchObject({ code: 'ERT_SPEC_INVALID_VALUE', details: { key: 'llc:ways', value: 'abc', plugin: 'llc' } });
    expect((error as Error).message).toBe('plugin "llc": extra spec "llc:ways=abc": expected an integer (decimal digits)');
  });
});
