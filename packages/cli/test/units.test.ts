import { describe, expect, it } from 'vitest';
import { ErtError } from '@ert/plugin-api';
import { formatTable } from '../src/table.js';
import { CliError, CliErrorCode, exitCodeFor } from '../src/errors.js';
import { randomUuid, seededRandom } from '../src/random.js';
import { hostUsage, utilization } from '../src/usage.js';
import type { HostSnapshot } from '@ert/store';

describe('formatTable', () => {
  it('aligns columns, numbers to the right, and trims trailing spaces', () => {
    const rows = [
      { host: 'a', vcpu: 4, note: 'x' },
      { host: 'longer-name', vcpu: 128, note: '' },
    ];
    const text = formatTable(rows, [
      { header: 'HOST', value: (r) => r.host },
      { header: 'VCPU', value: (r) => r.vcpu },
      { header: 'NOTE', value: (r) => r.note },
    ]);
    expect(text).toBe(['HOST         VCPU  NOTE', 'a               4  x', 'longer-name   128'].join('\n') + '\n');
  });

  it('renders the header alone for no rows, and objects and fractions compactly', () => {
    expect(formatTable([], [{ header: 'A', value: () => 1 }])).toBe('A\n');
    const text = formatTable([{ o: { a: 1 }, f: 1 / 3, n: null }], [
      { header: 'O', value: (r) => r.o },
      { header: 'F', value: (r) => r.f },
      { header: 'N', value: (r) => r.n },
    ]);
    expect(text).toBe('O            F  N\n{"a":1}  0.333\n');
  });
});

describe('exitCodeFor', () => {
  it.each([
    [new CliError(CliErrorCode.UNKNOWN_FLAVOR, 'x'), 2],
    [new ErtError('ERT_CONFIG_INVALID', 'x'), 2],
    [new ErtError('ERT_SPEC_UNKNOWN_KEY', 'x'), 2],
    [new ErtError('ERT_PLUGIN_NOT_FOUND', 'x'), 2],
    [new ErtError('ERT_PLUGIN_HOOK_FAILED', 'x'), 1],
    [new ErtError('ERT_PLUGIN_STATS_INVALID', 'x'), 1],
    [new ErtError('ERT_STORE_CONFLICT', 'x'), 1],
    [new ErtError('ERT_SCHEDULER_NO_VALID_HOST', 'x'), 3],
    [new CliError(CliErrorCode.CLAIM_REJECTED, 'x'), 3],
    [new CliError(CliErrorCode.CLAIMED_WITH_PROBLEMS, 'x'), 4],
    [new CliError(CliErrorCode.RELEASED_WITH_PROBLEMS, 'x'), 4],
    [new CliError(CliErrorCode.NOT_RELEASED, 'x'), 2],
    // An unknown `serve --auth` mode, and simulate's profiles directory unreadable or empty:
    // the operator's options (seen red without them among the usage codes: 1).
    [new ErtError('ERT_API_BAD_AUTH', 'x'), 2],
    [new ErtError('ERT_TRACKER_FLEET', 'x'), 2],
    [new ErtError('ERT_API_AUTH_REQUIRED', 'x'), 1],
    [new Error('plain'), 1],
  ])('%s -> %i', (err, code) => {
    expect(exitCodeFor(err)).toBe(code);
  });
});

describe('seededRandom', () => {
  it('repeats for a seed and differs between seeds', () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const c = seededRandom(43);
    const seqA = Array.from({ length: 5 }, a);
    expect(Array.from({ length: 5 }, b)).toEqual(seqA);
    expect(Array.from({ length: 5 }, c)).not.toEqual(seqA);
    for (const x of seqA) expect(x >= 0 && x < 1).toBe(true);
  });

  it('makes well-formed uuids deterministically', () => {
    const u = randomUuid(seededRandom(1));
    expect(u).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(randomUuid(seededRandom(1))).toBe(u);
  });
});

describe('hostUsage and utilization', () => {
  const inv = (total: number, allocationRatio = 1, reserved = 0) => ({ total, reserved, minUnit: 1, maxUnit: total, stepSize: 1, allocationRatio });
  const snapshot = (name: string, providers: Array<{ inventories: Record<string, ReturnType<typeof inv>>; usages: Record<string, number> }>): HostSnapshot =>
    ({
      host: { name, rootProviderUuid: `${name}-root`, status: 'up', lastUpdate: 0, generation: 1 },
      providers: providers.map((p, i) => ({ uuid: `${name}-${i}`, name: `${name}-${i}`, rootUuid: `${name}-0`, generation: 1, traits: [], aggregates: [], ...p })),
      sharingProviders: [],
      aggregateMetadata: {},
      stats: {},
      instances: [],
    }) as HostSnapshot;

  it('sums capacity (with ratio and reserved) and usage over the tree per class', () => {
    const rows = hostUsage([
      snapshot('b', [{ inventories: { VCPU: inv(8, 4, 1) }, usages: { VCPU: 10 } }]),
      snapshot('a', [
        { inventories: { VCPU: inv(4) }, usages: {} },
        { inventories: { CUSTOM_LLC_WAYS: inv(11) }, usages: { CUSTOM_LLC_WAYS: 3 } },
        { inventories: { CUSTOM_LLC_WAYS: inv(11) }, usages: { CUSTOM_LLC_WAYS: 5 } },
      ]),
    ]);
    expect(rows).toEqual([
      { host: 'a', resourceClass: 'CUSTOM_LLC_WAYS', capacity: 22, used: 8, free: 14 },
      { host: 'a', resourceClass: 'VCPU', capacity: 4, used: 0, free: 4 },
      { host: 'b', resourceClass: 'VCPU', capacity: 28, used: 10, free: 18 },
    ]);
    expect(utilization(rows)).toEqual({ CUSTOM_LLC_WAYS: 8 / 22, VCPU: 10 / 32 });
  });
});
