import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STANDARD_CLASSES, STANDARD_TRAITS, STANDARDS_SOURCE } from '@ert/api';

const REPO = join(import.meta.dirname, '../../..');
const DATA = join(REPO, 'packages/api/data/placement-standards.json');
const CI = !['', '0', 'false'].includes((process.env.CI ?? '').trim().toLowerCase());

/** Whether the Python packages the data file is generated from are installed. */
function pythonHasStandards(): boolean {
  const python = process.env.ERT_PLACEMENT_PYTHON ?? '/usr/bin/python3';
  return spawnSync(python, ['-c', 'import os_traits, os_resource_classes'], { stdio: 'ignore' }).status === 0;
}

describe('standard resource classes and traits (Placement 8.0.0: os-resource-classes 1.1.0, os-traits 2.9.0)', () => {
  it('has 21 classes in os-resource-classes order and 345 sorted traits, from the versions Debian bookworm ships', () => {
    expect(STANDARDS_SOURCE).toEqual({ 'os-resource-classes': '1.1.0', 'os-traits': '2.9.0' });
    expect(STANDARD_CLASSES).toHaveLength(21);
    expect(STANDARD_CLASSES.slice(0, 3)).toEqual(['VCPU', 'MEMORY_MB', 'DISK_GB']);
    expect(STANDARD_CLASSES[14]).toBe('PCPU');
    expect(STANDARD_CLASSES[20]).toBe('NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC');
    expect(STANDARD_TRAITS).toHaveLength(345);
    expect([...STANDARD_TRAITS].sort()).toEqual(STANDARD_TRAITS);
    const prefixes: Record<string, number> = {};
    for (const t of STANDARD_TRAITS) prefixes[t.split('_')[0]!] = (prefixes[t.split('_')[0]!] ?? 0) + 1;
    expect(prefixes).toEqual({ COMPUTE: 81, HW: 259, MISC: 1, OWNER: 2, STORAGE: 2 });
  });

  // Under CI (.ci/run installs the Python packages) a missing package fails rather than skips.
  it.skipIf(!CI && !pythonHasStandards())('is what scripts/gen-placement-standards.mjs generates from the installed Python packages', () => {
    expect(pythonHasStandards(), 'CI: python3-os-traits and python3-os-resource-classes must be installed (.ci/run does it)').toBe(true);
    const result = spawnSync(process.execPath, [join(REPO, 'scripts/gen-placement-standards.mjs'), '--print'], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe(readFileSync(DATA, 'utf8'));
  });
});
