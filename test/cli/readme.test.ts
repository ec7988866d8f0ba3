import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, REPO, bash } from './helpers.js';

/** The shell block under a README heading, as written. */
async function readmeBlock(heading: string): Promise<string> {
  const readme = await readFile(join(REPO, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf(`## ${heading}`));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error(`README.md has no sh block under "## ${heading}"`);
  return block[1]!;
}

describe('the README', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ert-readme-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('names the two commands of a fresh clone, and both are scripts of the root package', async () => {
    const setup = await readmeBlock('Set-up');
    expect(setup).toMatch(/^npm ci && npm start\b/m);
    expect(setup).toMatch(/^npm test\b/m);
    const pkg = JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8'));
    expect(pkg.scripts.start).toMatch(/npm run build && node packages\/cli\/dist\/bin\.js demo/);
    expect(pkg.scripts.test).toMatch(/^npm run build && .*vitest run$/);
  });

  // Every line of the tour, as written: only `npx ert` becomes the built binary (npx would
  // resolve the same file) and /tmp/ert-tour a fresh directory, so runs do not collide.
  it('five-minute tour: every command works as written', async () => {
    const tour = await readmeBlock('A five-minute tour');
    expect(tour).toContain('npx ert init /tmp/ert-tour');
    const script = tour.replaceAll('npx ert ', `node ${BIN} `).replaceAll('/tmp/ert-tour', join(dir, 'tour'));
    const result = await bash(script, {});
    expect(result.code, result.stderr).toBe(0);
    // Each command's output shows it did its work: the starter files, the resolved
    // plugins, the profile's discovery, the claim, three placements, usage, the simulation.
    expect(result.stdout).toContain('Usage: ert [options] [command]');
    expect(result.stdout).toMatch(/wrote .*ert\.config\.yaml/);
    expect(result.stdout).toMatch(/^compute\s+resource\s+llc\s+@ert\/plugin-llc/m);
    expect(result.stdout).toContain('"plugin": "llc"');
    expect(result.stdout).toMatch(/^claimed \S+ \(llc\.gold\) on xeon-1$/m);
    expect(result.stdout).toMatch(/^flavor m1\.small: 1 of 1 hosts passed$/m);
    expect(result.stdout.match(/^\S+\s+xeon-1\s+VCPU=1 MEMORY_MB=2048/gm)).toHaveLength(3);
    // llc.gold (4 vCPUs, 4 ways) and three m1.small (1 vCPU each).
    expect(result.stdout).toMatch(/^xeon-1\s+CUSTOM_LLC_WAYS\s+22\s+4\s+18$/m);
    expect(result.stdout).toMatch(/^xeon-1\s+VCPU\s+320\s+7\s+313$/m);
    const simulation = JSON.parse(result.stdout.slice(result.stdout.lastIndexOf('\n{\n  "seed"')));
    expect(simulation).toMatchObject({ seed: 7, hosts: 100, requests: 1000 });
    expect(simulation.placed + simulation.rejected).toBe(1000);
  }, 240_000);
});
