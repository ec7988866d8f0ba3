import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, REPO, bash, scratchDir } from './helpers.js';

/**
 * docs/plugins.md section 10 followed literally: its `file=` blocks are written out as they
 * are, then its shell block runs from the repository root (only `npx ert` becomes the built
 * binary and tmp/nvme-demo a fresh directory).
 */
describe('docs/plugins.md: the complete small plugin', () => {
  let dir: string;
  let section: string;
  beforeAll(async () => {
    dir = await scratchDir('ert-plugin-doc-');
    const doc = await readFile(join(REPO, 'docs/plugins.md'), 'utf8');
    section = doc.slice(doc.indexOf('## 10. A complete small plugin'));
    for (const [, file, body] of section.matchAll(/```\w+ file=(\S+)\n([\s\S]*?)```/g)) {
      await mkdir(dirname(join(dir, file!)), { recursive: true });
      await writeFile(join(dir, file!), body!);
    }
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('has the four plugin files, a unit test and the config', async () => {
    const files = [...section.matchAll(/```\w+ file=(\S+)/g)].map((m) => m[1]);
    expect(files).toEqual([
      'ert-plugin-nvme/package.json',
      'ert-plugin-nvme/shared.js',
      'ert-plugin-nvme/compute.js',
      'ert-plugin-nvme/scheduler.js',
      'ert-plugin-nvme/test/compute.test.js',
      'ert.config.yaml',
    ]);
  });

  it('its unit test passes with node --test', async () => {
    const result = await bash(`cd ${join(dir, 'ert-plugin-nvme')} && node --test`, {});
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^# pass 2$/m);
    expect(result.stdout).toMatch(/^# fail 0$/m);
  });

  it('loads, discovers, schedules and explains as the page says', async () => {
    const commands = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
    const script = commands.replaceAll('npx ert ', `node ${BIN} --json `).replaceAll('tmp/nvme-demo', relative(REPO, dir));
    const result = await bash(script, {});
    expect(result.code, result.stderr).toBe(0);
    // One JSON document per ert command, in order.
    const documents = result.stdout.split(/^(?=\{$)/m).map((d) => JSON.parse(d));
    const [plugins, discovery, sync, placed, explained] = documents;
    expect(documents).toHaveLength(5);
    expect(plugins.plugins.filter((p: any) => p.name === 'nvme').map((p: any) => [p.use, p.package, p.version, p.options])).toEqual([
      ['resource', 'ert-plugin-nvme', '0.1.0', { reserved: 1 }],
      ['consumer', 'ert-plugin-nvme', '0.1.0', { reserved: 1 }],
      ['filter', 'ert-plugin-nvme', '0.1.0', { reserved: 1 }],
    ]);
    expect(plugins.extraSpecKeys.map((k: any) => k.key)).toContain('nvme:count');
    const nvme = discovery.plugins.find((p: any) => p.plugin === 'nvme');
    expect(nvme).toMatchObject({ available: true, stats: { schemaVersion: 1, data: { models: ['NVMe 0', 'NVMe 1', 'NVMe 2'] } } });
    expect(nvme.providers[0].inventories.CUSTOM_NVME).toMatchObject({ total: 3, reserved: 1 });
    expect(sync.host).toBe('box1');
    expect(placed.selections[0].allocations).toContainEqual(expect.objectContaining({ resourceClass: 'CUSTOM_NVME', amount: 2 }));
    expect(explained.passed).toBe(0);
    expect(explained.filters.find((f: any) => f.filter === 'nvme').examples[0]).toEqual({
      host: 'box1',
      reason: 'nvme: needs 2 drive(s), 0 free of 3',
    });
  });
});
