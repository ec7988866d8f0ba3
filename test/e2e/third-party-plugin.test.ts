/**
 * A third-party plugin, end to end, as a user would install it: the ert packages and the
 * out-of-tree `ert-plugin-gpu` are packed with `npm pack`, installed into a fresh project,
 * and the installed `ert` binary discovers, syncs, schedules and explains with the plugin
 * named by its short name `gpu` (resolved to the `ert-plugin-gpu` package).
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { existsSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { REPO, cleanEnv, installProject, packAll } from './installed.js';

const run = promisify(execFile);
const GPU_PLUGIN = join(REPO, 'test/fixtures/ert-plugin-gpu');

/** The site's config: the third-party plugin by its short name on both sides. */
function siteConfig(filters: string[]) {
  return {
    store: { client: 'sqlite3', connection: './ert.db' },
    tracker: { hostName: 'gpu-node', root: './root', resources: ['vcpu', 'memory', 'gpu'] },
    scheduler: { consumers: ['vcpu', 'memory', 'gpu'], filters, weighers: [{ name: 'memory', multiplier: 1 }] },
    plugins: { gpu: { vendors: ['0x10de'] } },
    flavors: [
      { name: 'gpu.one', vcpus: 4, memory_mb: 8192, disk_gb: 0, extra_specs: { 'gpu:count': '1' } },
      { name: 'gpu.three', vcpus: 4, memory_mb: 8192, disk_gb: 0, extra_specs: { 'gpu:count': '3' } },
    ],
  };
}

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

describe('a third-party plugin installed from packed tarballs', () => {
  let project: string;
  const ert = async (...args: string[]): Promise<Result> => {
    const env = cleanEnv();
    try {
      const { stdout, stderr } = await run(process.execPath, [join(project, 'node_modules/@ert/cli/dist/bin.js'), ...args], { cwd: project, env });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const json = (result: Result) => {
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout);
  };

  beforeAll(async () => {
    const work = realpathSync(await mkdtemp(join(tmpdir(), 'ert-e2e-')));
    project = join(work, 'site');
    await mkdir(project);
    // Every publishable package packed, the project depending on @ert/cli and the plugin (test/e2e/installed.ts).
    const packed = await packAll(join(work, 'packs'), [GPU_PLUGIN]);
    await installProject(project, join(work, 'packs'), packed, ['@ert/cli', 'ert-plugin-gpu']);

    // The machine: a copy of the xeon-2s-cat profile with three DRM cards, two of them GPUs.
    const root = join(project, 'root');
    await cp(join(REPO, 'config/hosts/xeon-2s-cat'), root, { recursive: true });
    for (const [card, vendor] of [['card0', '0x10de'], ['card1', '0x10de'], ['card2', '0x1234']]) {
      await mkdir(join(root, 'sys/class/drm', card, 'device'), { recursive: true });
      await writeFile(join(root, 'sys/class/drm', card, 'device/vendor'), `${vendor}\n`);
    }
    await writeFile(join(project, 'ert.config.yaml'), stringify(siteConfig(['status', 'resources', 'gpu'])));
    // Without the generic resources filter, the plugin's own filter is what decides.
    await writeFile(join(project, 'gpu-only.yaml'), stringify(siteConfig(['status', 'gpu'])));
  }, 600_000);

  afterAll(async () => {
    if (project) await rm(join(project, '..'), { recursive: true, force: true });
  });

  it('installs the ert binary and the plugin from the tarballs', () => {
    expect(existsSync(join(project, 'node_modules/.bin/ert'))).toBe(true);
    expect(existsSync(join(project, 'node_modules/ert-plugin-gpu/compute.js'))).toBe(true);
  });

  it('resolves the short name gpu to the installed ert-plugin-gpu package', async () => {
    const { plugins } = json(await ert('plugins', '--json'));
    const gpu = plugins.filter((p: any) => p.name === 'gpu');
    expect(gpu.map((p: any) => `${p.side}/${p.use}`)).toEqual(['compute/resource', 'scheduler/consumer', 'scheduler/filter']);
    for (const p of gpu) expect(p).toMatchObject({ package: 'ert-plugin-gpu', version: '1.0.0', options: { vendors: ['0x10de'] } });
  });

  it('discovers the GPUs of the configured vendor', async () => {
    const report = json(await ert('host', 'discover', '--json'));
    const gpu = report.plugins.find((p: any) => p.plugin === 'gpu');
    expect(gpu.available).toBe(true);
    expect(gpu.stats.data).toEqual({ cards: [{ card: 'card0', vendor: '0x10de' }, { card: 'card1', vendor: '0x10de' }], total: 2, used: 0 });
    expect(report.providers[0].inventories.CUSTOM_GPU.total).toBe(2);
  });

  it('syncs, schedules on the GPUs and explains when they run out', async () => {
    json(await ert('host', 'sync', '--json'));
    const usage = json(await ert('usage', '--json')).usage;
    expect(usage.find((u: any) => u.resourceClass === 'CUSTOM_GPU')).toEqual({ host: 'gpu-node', resourceClass: 'CUSTOM_GPU', capacity: 2, used: 0, free: 2 });

    const { selections } = json(await ert('schedule', '--flavor', 'gpu.one', '--count', '2', '--json'));
    expect(selections.map((s: any) => s.host)).toEqual(['gpu-node', 'gpu-node']);
    for (const s of selections) expect(s.allocations).toContainEqual(expect.objectContaining({ resourceClass: 'CUSTOM_GPU', amount: 1 }));

    const explained = json(await ert('schedule', '--flavor', 'gpu.one', '--explain', '--json'));
    expect(explained.passed).toBe(0);
    const removedBy = explained.filters.filter((f: any) => f.removed > 0).map((f: any) => f.filter);
    expect(removedBy).toHaveLength(1);
    expect(['resources', 'gpu']).toContain(removedBy[0]);

    const none = await ert('schedule', '--flavor', 'gpu.three', '--json');
    expect(none.code).toBe(3);
    expect(JSON.parse(none.stdout).error.code).toBe('ERT_SCHEDULER_NO_VALID_HOST');
  });

  it('the gpu filter removes a host with too few free GPUs, naming how many it has', async () => {
    const explained = json(await ert('--config', 'gpu-only.yaml', 'schedule', '--flavor', 'gpu.one', '--explain', '--json'));
    const gpu = explained.filters.find((f: any) => f.filter === 'gpu');
    expect(gpu.removed).toBe(1);
    expect(gpu.examples[0]).toEqual({ host: 'gpu-node', reason: 'gpu: needs 1 GPU(s), host has 0 free of 2' });
  });
});
