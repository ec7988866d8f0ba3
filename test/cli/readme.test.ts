import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, mkdir, readFile, realpath, copyFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO, bash } from './helpers.js';

/** The shell block under a README heading, as written. */
async function readmeBlock(heading: string): Promise<string> {
  const readme = await readFile(join(REPO, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf(`## ${heading}`));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error(`README.md has no sh block under "## ${heading}"`);
  return block[1]!;
}

/** The README's own directory: the tour writes its config and store there. */
const TOUR_DIR = '/tmp/ert-tour';

/**
 * A script that runs `script` on a clean TOUR_DIR: it waits for any other run of the tour
 * (another test run, in this checkout or another) to finish, holding a lock until it exits,
 * then removes what a previous run left (`ert init` refuses to overwrite it, as the README says).
 */
function onCleanTourDir(script: string): string {
  return `exec 9>${TOUR_DIR}.lock\nflock -w 600 9\nrm -rf ${TOUR_DIR}\n${script}`;
}

describe('the README', () => {
  it('names the two commands of a fresh clone, and both are scripts of the root package', async () => {
    const setup = await readmeBlock('Set-up');
    expect(setup).toMatch(/^npm ci && npm start\b/m);
    expect(setup).toMatch(/^npm test\b/m);
    const pkg = JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8'));
    expect(pkg.scripts.start).toMatch(/npm run build && node packages\/cli\/dist\/bin\.js demo/);
    expect(pkg.scripts.test).toMatch(/^npm run build && .*vitest run$/);
  });

  // Caught: the bin pointing at dist/bin.js again (not in git: on a fresh clone `npm ci` runs
  // before any build, links nothing, and `npx ert` says "could not determine executable").
  it('`npx ert` exists right after `npm ci`: the bin npm links is a checked-in, executable file', async () => {
    const cli = JSON.parse(await readFile(join(REPO, 'packages/cli/package.json'), 'utf8'));
    const bin = join('packages/cli', cli.bin.ert);
    expect(execFileSync('git', ['ls-files', '--stage', '--', bin], { cwd: REPO, encoding: 'utf8' })).toMatch(/^100755 /);
    expect(await realpath(join(REPO, 'node_modules/.bin/ert'))).toBe(join(REPO, bin));
    // Before a build, it says what to do instead of a module-not-found stack.
    const dir = await mkdtemp(join(tmpdir(), 'ert-bin-'));
    try {
      await mkdir(join(dir, 'bin'));
      await copyFile(join(REPO, bin), join(dir, 'bin/ert.js'));
      const result = spawnSync(process.execPath, [join(dir, 'bin/ert.js'), '--help'], { encoding: 'utf8' });
      expect(result.status).toBe(1);
      expect(result.stderr).toBe(`ert: ${join(dir, 'dist/bin.js')} is not built yet; run \`npm run build\` first (at the repository's root)\n`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  // Every line of the tour exactly as written (`npx ert`, /tmp/ert-tour), from the
  // repository's root, as a reader pastes it.
  it('five-minute tour: every command works as written', async () => {
    const tour = await readmeBlock('A five-minute tour');
    expect(tour).toMatch(new RegExp(`^npx ert init ${TOUR_DIR} `, 'm'));
    const result = await bash(onCleanTourDir(tour), {});
    expect(result.code, result.stderr).toBe(0);
    // Each command's output shows it did its work: the starter files, the resolved
    // plugins, the profile's discovery, the claim, three placements, usage, the simulation.
    expect(result.stdout).toContain('Usage: ert [options] [command]');
    expect(result.stdout).toMatch(/wrote .*ert\.config\.yaml/);
    expect(result.stdout).toMatch(/^compute\s+resource\s+llc\s+@ert\/plugin-llc/m);
    expect(result.stdout).toContain('"plugin": "llc"');
    // The claim names the providers it allocated from and what the llc plugin assigned.
    expect(result.stdout).toMatch(/^claimed \S+ \(llc\.gold\) on xeon-1\nPROVIDER\s+CLASS\s+AMOUNT\n/m);
    expect(result.stdout).toMatch(/^xeon-1_llc_0\s+CUSTOM_LLC_WAYS\s+4$/m);
    expect(result.stdout).toMatch(/^xeon-1\s+VCPU\s+4$/m);
    expect(result.stdout).toMatch(/^llc\s+\{"domain":0,"mask":"f","closid":1\}$/m);
    expect(result.stdout).toMatch(/^flavor m1\.small: 1 of 1 hosts passed$/m);
    expect(result.stdout.match(/^\S+\s+xeon-1\s+VCPU=1 MEMORY_MB=2048/gm)).toHaveLength(3);
    // llc.gold (4 vCPUs, 4 ways) and three m1.small (1 vCPU each).
    expect(result.stdout).toMatch(/^xeon-1\s+CUSTOM_LLC_WAYS\s+22\s+4\s+18$/m);
    // xeon-2s-cat: 72 shared CPUs x 4 (8 isolated ones are PCPU: dedicatedCpus: isolated).
    expect(result.stdout).toMatch(/^xeon-1\s+VCPU\s+288\s+7\s+281$/m);
    expect(result.stdout).toMatch(/^xeon-1\s+PCPU\s+8\s+0\s+8$/m);
    const simulation = JSON.parse(result.stdout.slice(result.stdout.lastIndexOf('\n{\n  "seed"')));
    expect(simulation).toMatchObject({ seed: 7, hosts: 100, requests: 1000 });
    expect(simulation.placed + simulation.rejected).toBe(1000);
  }, 240_000);

  // A reader who stops after the claim and comes back the next day. Time passing is the
  // host's last update moved a day back in the store (the only line not from the README).
  // Caught: the starter config back on `staleAfter: 3m` (the status filter removed xeon-1:
  // "no valid host ... removed by status: 1").
  it('five-minute tour: a reader who pauses for a day before scheduling still gets the placements', async () => {
    const tour = (await readmeBlock('A five-minute tour')).split('\n');
    const pause = tour.findIndex((line) => line.startsWith('npx ert schedule '));
    const end = tour.findIndex((line) => line.startsWith('npx ert usage'));
    expect(pause).toBeGreaterThan(0);
    expect(end).toBeGreaterThan(pause);
    const aDayLater = `node --input-type=module -e "
      import sqlite3 from 'sqlite3';
      const db = new sqlite3.Database('${TOUR_DIR}/ert.db');
      db.run('UPDATE hosts SET last_update = last_update - 86400000', (err) => { if (err) throw err; db.close(); });"`;
    // Then, to check that the day did pass: the hosts as the store holds them.
    const script = [...tour.slice(0, pause), aDayLater, ...tour.slice(pause, end + 1), 'echo "--- hosts"', 'npx ert hosts --json'].join('\n');
    const result = await bash(onCleanTourDir(script), {});
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^flavor m1\.small: 1 of 1 hosts passed$/m);
    expect(result.stdout.match(/^\S+\s+xeon-1\s+VCPU=1 MEMORY_MB=2048/gm)).toHaveLength(3);
    const [host] = JSON.parse(result.stdout.slice(result.stdout.indexOf('--- hosts\n') + 10)).hosts;
    expect(host).toMatchObject({ name: 'xeon-1', status: 'up' });
    expect(Date.now() - Date.parse(host.lastUpdate)).toBeGreaterThan(86_400_000);
  }, 120_000);
});
