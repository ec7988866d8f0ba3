/**
 * ert installed outside the repository (issue 12, "Installable outside this repo"): every
 * publishable package packed with `npm pack`, a fresh project in the system's temporary
 * directory depending on `@ert/cli`, `@ert/plugin-testkit` and the third-party
 * `ert-plugin-gpu` only (the other @ert tarballs are reachable solely through `@ert/cli`'s
 * own dependencies; `overrides` point their names at the tarballs), installed with
 * `npm install`, and the installed `ert` run there through `npx` as a user would: `--help`,
 * `init`, `db migrate`, `host discover --root <profile>` with the starter's six first-party
 * plugins, `host sync`, `claim`, and the gpu plugin by its short name. How sqlite3 is kept
 * from being rebuilt: test/e2e/installed.ts.
 *
 * Seen red once, then reverted: the six plugin dependencies removed from @ert/cli's
 * package.json (four tests fail, `ert plugins` with ERT_PLUGIN_NOT_FOUND); plugins/disk/LICENSE
 * removed (the tarball check; npm packs a LICENSE whatever `files` says, so the file is what counts).
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { REPO, cleanEnv, installProject, packAll, type Packed } from './installed.js';

const run = promisify(execFile);
const FIRST_PARTY = ['vcpu', 'memory', 'compute-units', 'llc', 'pstate', 'disk'];

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

describe('ert installed from packed tarballs into an empty directory', () => {
  let work: string;
  let project: string;
  let packed: Packed[];
  let installMs = 0;

  /** `npx --no -- ert ...` in the project (`--no`: never fetch ert from the registry; `--`: the rest is ert's, `--config` included). */
  const npx = async (...args: string[]): Promise<Result> => {
    try {
      const { stdout, stderr } = await run('npx', ['--no', '--', 'ert', ...args], { cwd: project, env: cleanEnv() });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const ok = (result: Result) => {
    expect(result.code, result.stderr + result.stdout).toBe(0);
    return result.stdout;
  };
  const json = (result: Result) => JSON.parse(ok(result));

  beforeAll(async () => {
    work = realpathSync(await mkdtemp(join(tmpdir(), 'ert-install-')));
    project = join(work, 'site');
    await mkdir(project);
    const packs = join(work, 'packs');
    packed = await packAll(packs, [join(REPO, 'test/fixtures/ert-plugin-gpu')]);
    installMs = await installProject(project, packs, packed, ['@ert/cli', '@ert/plugin-testkit', 'ert-plugin-gpu']);
    console.log(`npm install of the packed tarballs: ${(installMs / 1000).toFixed(1)} s`);

    // The machine: the xeon-2s-cat profile with three DRM cards, two of them NVIDIA GPUs.
    const root = join(project, 'root');
    await cp(join(REPO, 'config/hosts/xeon-2s-cat'), root, { recursive: true });
    for (const [card, vendor] of [['card0', '0x10de'], ['card1', '0x10de'], ['card2', '0x1234']]) {
      await mkdir(join(root, 'sys/class/drm', card, 'device'), { recursive: true });
      await writeFile(join(root, 'sys/class/drm', card, 'device/vendor'), `${vendor}\n`);
    }
  }, 600_000);

  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('every publishable package is packed with its README, LICENSE, built dist and publish metadata', async () => {
    const names = packed.map((p) => p.name).sort();
    expect(names).toEqual(
      ['@ert/api', '@ert/cli', '@ert/core', '@ert/placement', '@ert/plugin-api', '@ert/plugin-testkit', '@ert/scheduler', '@ert/store', '@ert/sysfs', '@ert/tracker', '@ert/ui']
        .concat(FIRST_PARTY.map((p) => `@ert/plugin-${p}`), ['ert-plugin-gpu'])
        .sort(),
    );
    for (const p of packed.filter((x) => x.name.startsWith('@ert/'))) {
      const files = p.files.map((f) => f.path);
      for (const f of ['package.json', 'README.md', 'LICENSE']) expect(files, `${p.name}: ${f}`).toContain(f);
      expect(files.some((f) => f.startsWith('dist/') && f.endsWith('.js')), `${p.name}: dist`).toBe(true);
      expect(files.filter((f) => f.startsWith('test/') || f.endsWith('.tsbuildinfo')), `${p.name}: no tests, no build info`).toEqual([]);
      const pkg = JSON.parse(await readFile(join(project, 'node_modules', p.name, 'package.json'), 'utf8').catch(() => 'null')) as Record<string, any> | null;
      if (pkg === null) continue; // packed but not installed (none today: all are reachable from @ert/cli or installed directly)
      expect(pkg, p.name).toMatchObject({ license: 'Apache-2.0', engines: { node: expect.any(String) }, repository: { type: 'git', directory: expect.any(String) } });
      expect(pkg.description, p.name).toEqual(expect.any(String));
      // Every export names its types and a built file; ert-source (the repository's TypeScript) ships too.
      for (const [subpath, target] of Object.entries(pkg.exports as Record<string, unknown>)) {
        if (subpath === './package.json') continue;
        const t = target as Record<string, string>;
        expect(t.types, `${p.name} ${subpath} types`).toMatch(/^\.\/dist\/.*\.d\.ts$/);
        expect(existsSync(join(project, 'node_modules', p.name, t.default!)), `${p.name} ${subpath} default`).toBe(true);
        expect(existsSync(join(project, 'node_modules', p.name, t['ert-source']!)), `${p.name} ${subpath} ert-source`).toBe(true);
      }
    }
    const license = await readFile(join(REPO, 'LICENSE'), 'utf8');
    expect(await readFile(join(project, 'node_modules/@ert/cli/LICENSE'), 'utf8')).toBe(license);
  });

  it('@ert/cli alone brings every first-party plugin: they are installed though the project names only the cli', async () => {
    const site = JSON.parse(await readFile(join(project, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(site.dependencies).sort()).toEqual(['@ert/cli', '@ert/plugin-testkit', 'ert-plugin-gpu']);
    for (const p of FIRST_PARTY) expect(existsSync(join(project, 'node_modules/@ert', `plugin-${p}`, 'dist/compute.js')), p).toBe(true);
    // sqlite3 was not rebuilt: the binary is the repository's, byte for byte.
    const binary = 'node_modules/sqlite3/build/Release/node_sqlite3.node';
    expect((await readFile(join(project, binary))).equals(await readFile(join(REPO, binary)))).toBe(true);
  });

  it('npx ert --help', async () => {
    const out = ok(await npx('--help'));
    expect(out).toContain('Usage: ert');
    for (const command of ['init', 'db', 'host', 'claim', 'schedule', 'serve']) expect(out).toContain(command);
  });

  it('npx ert init writes the starter config, which loads the six first-party plugins from the install', async () => {
    ok(await npx('init', 'starter'));
    for (const f of ['ert.config.yaml', 'flavors.yaml']) expect(existsSync(join(project, 'starter', f)), f).toBe(true);
    const { plugins } = json(await npx('--config', 'starter/ert.config.yaml', 'plugins', '--json'));
    const compute = plugins.filter((p: any) => p.side === 'compute');
    expect(compute.map((p: any) => p.name)).toEqual(FIRST_PARTY);
    for (const p of compute) expect(p.package, p.name).toBe(`@ert/plugin-${p.name}`);
  });

  it('npx ert db migrate, host discover --root <profile>, host sync, claim', async () => {
    const config = ['--config', 'starter/ert.config.yaml'];
    ok(await npx(...config, 'db', 'migrate'));
    expect(existsSync(join(project, 'starter/ert.db'))).toBe(true);

    const report = json(await npx(...config, 'host', 'discover', '--root', 'root', '--name', 'node-1', '--json'));
    const available = Object.fromEntries(report.plugins.map((p: any) => [p.plugin, p.available]));
    expect(available).toEqual(Object.fromEntries(FIRST_PARTY.map((p) => [p, true])));
    const inventories = report.providers[0].inventories;
    expect(inventories.VCPU.total).toBeGreaterThan(0);
    expect(inventories.MEMORY_MB.total).toBeGreaterThan(0);

    json(await npx(...config, 'host', 'sync', '--root', 'root', '--name', 'node-1', '--json'));
    const claim = json(await npx(...config, 'claim', '--flavor', 'm1.small', '--host', 'node-1', '--root', 'root', '--json'));
    expect(claim).toMatchObject({ host: 'node-1', flavor: 'm1.small' });
    const amounts = Object.fromEntries(claim.allocations.map((a: any) => [a.resourceClass, a.amount]));
    expect(amounts).toMatchObject({ VCPU: 1, MEMORY_MB: 2048 });
  });

  it('a third-party plugin package resolves by its short name next to the first-party ones, and claims with it', async () => {
    // The starter config with gpu added on both sides, and a flavor asking for a GPU.
    const config = parse(await readFile(join(project, 'starter/ert.config.yaml'), 'utf8'));
    config.tracker.resources.push('gpu');
    config.scheduler.consumers.push('gpu');
    config.scheduler.filters.push('gpu');
    config.plugins.gpu = { vendors: ['0x10de'] };
    config.store.connection = './gpu.db';
    config.flavors = [{ name: 'gpu.one', vcpus: 2, memory_mb: 4096, disk_gb: 0, extra_specs: { 'gpu:count': '1' } }];
    await writeFile(join(project, 'starter/gpu.yaml'), stringify(config));
    const args = ['--config', 'starter/gpu.yaml'];

    const { plugins } = json(await npx(...args, 'plugins', '--json'));
    const gpu = plugins.filter((p: any) => p.name === 'gpu');
    expect(gpu.map((p: any) => `${p.side}/${p.use}`)).toEqual(['compute/resource', 'scheduler/consumer', 'scheduler/filter']);
    for (const p of gpu) expect(p).toMatchObject({ package: 'ert-plugin-gpu', version: '1.0.0' });

    ok(await npx(...args, 'db', 'migrate'));
    json(await npx(...args, 'host', 'sync', '--root', 'root', '--name', 'gpu-node', '--json'));
    const claim = json(await npx(...args, 'claim', '--flavor', 'gpu.one', '--host', 'gpu-node', '--root', 'root', '--json'));
    expect(claim.allocations).toContainEqual(expect.objectContaining({ resourceClass: 'CUSTOM_GPU', amount: 1 }));
  });

  it('the test kit imports in the installed project (a plugin author\'s devDependency)', async () => {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', "const kit = await import('@ert/plugin-testkit'); console.log(typeof kit.describePluginContract)"], {
      cwd: project,
      env: cleanEnv(),
    });
    expect(stdout.trim()).toBe('function');
  });
});
