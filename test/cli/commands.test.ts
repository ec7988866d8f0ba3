import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropPostgresSchema } from '@ert/store';
import { Project, REPO, json, startErt } from './helpers.js';

/** The ert binary on a temp project: a copy of the xeon-2s-cat profile with 2 GPUs as root. */
describe('ert commands on a project', () => {
  let project: Project;
  beforeAll(async () => {
    project = await Project.create();
  });
  afterAll(async () => {
    await project?.remove();
  });

  it('db migrate creates the SQLite file and says which store', async () => {
    const result = await project.run(['db', 'migrate', '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect(json(result)).toEqual({ client: 'sqlite3', connection: join(project.dir, 'ert.db'), migrated: true });
    expect(existsSync(join(project.dir, 'ert.db'))).toBe(true);
  });

  it('plugins lists both sides with package, version, kinds and options', async () => {
    const result = await project.run(['plugins', '--json']);
    expect(result.code, result.stderr).toBe(0);
    const { plugins, extraSpecKeys } = json(result);
    const gpuResource = plugins.find((p: any) => p.side === 'compute' && p.name === 'gpu');
    expect(gpuResource).toMatchObject({ use: 'resource', package: 'ert-plugin-gpu', version: '1.0.0', kinds: ['resource'] });
    expect(gpuResource.options).toEqual({ vendors: ['0x10de', '0x1002', '0x8086'] });
    const vcpu = plugins.find((p: any) => p.side === 'compute' && p.name === 'vcpu');
    expect(vcpu.package).toBe('@ert/plugin-vcpu');
    expect(vcpu.options.allocationRatio).toBe(4);
    expect(plugins.filter((p: any) => p.side === 'scheduler' && p.name === 'gpu').map((p: any) => p.use)).toEqual(['consumer', 'filter']);
    expect(plugins.find((p: any) => p.name === 'status')).toMatchObject({ side: 'scheduler', use: 'filter', package: '(built-in)' });
    expect(plugins.find((p: any) => p.use === 'weigher')).toMatchObject({ name: 'memory', multiplier: 1 });
    expect(extraSpecKeys.map((k: any) => k.key)).toContain('gpu:count');

    const human = await project.run(['plugins']);
    expect(human.stdout).toMatch(/^SIDE\s+USE\s+NAME\s+PACKAGE\s+VERSION\s+KINDS\s+OPTIONS$/m);
    expect(human.stdout).toMatch(/^compute\s+resource\s+gpu\s+ert-plugin-gpu\s+1\.0\.0\s+resource\s+/m);
  });

  it('host discover reports what the plugins find and writes nothing', async () => {
    const result = await project.run(['host', 'discover', '--json']);
    expect(result.code, result.stderr).toBe(0);
    const report = json(result);
    expect(report.host).toBe('node1');
    const byName = Object.fromEntries(report.plugins.map((p: any) => [p.plugin, p]));
    expect(byName.gpu).toMatchObject({ available: true });
    expect(byName.gpu.stats).toEqual({ schemaVersion: 1, data: { cards: [{ card: 'card0', vendor: '0x10de' }, { card: 'card1', vendor: '0x10de' }], total: 2, used: 0 } });
    const root = report.providers.find((p: any) => p.name === 'node1');
    expect(root.inventories.CUSTOM_GPU.total).toBe(2);
    expect(root.inventories.VCPU).toMatchObject({ total: 80, allocationRatio: 4 });
    const hosts = await project.run(['hosts', '--json']);
    expect(json(hosts).hosts).toEqual([]);
  });

  it('host discover --root on a profile without GPUs reports the gpu plugin unavailable with its reason', async () => {
    const result = await project.run(['host', 'discover', '--json', '--root', join(REPO, 'config/hosts/cloud-vm')]);
    expect(result.code, result.stderr).toBe(0);
    const gpu = json(result).plugins.find((p: any) => p.plugin === 'gpu');
    expect(gpu.available).toBe(false);
    expect(gpu.reason).toContain('sys/class/drm');
    const human = await project.run(['host', 'discover', '--root', join(REPO, 'config/hosts/cloud-vm')]);
    expect(human.stdout).toMatch(/^gpu\s+no\s+0\s+.*no DRM devices/m);
  });

  it('host sync writes the host once; hosts and usage show it', async () => {
    const first = await project.run(['host', 'sync', '--json']);
    expect(first.code, first.stderr).toBe(0);
    expect(json(first).changes.length).toBeGreaterThan(0);
    const second = await project.run(['host', 'sync', '--json']);
    expect(json(second).changes).toEqual([]);

    const hosts = json(await project.run(['hosts', '--json'])).hosts;
    expect(hosts).toHaveLength(1);
    expect(hosts[0]).toMatchObject({ name: 'node1', status: 'up', instances: 0 });
    expect(new Date(hosts[0].lastUpdate).toISOString()).toBe(hosts[0].lastUpdate);

    const usage = json(await project.run(['usage', '--json'])).usage;
    expect(usage.find((u: any) => u.resourceClass === 'VCPU')).toEqual({ host: 'node1', resourceClass: 'VCPU', capacity: 320, used: 0, free: 320 });
    expect(usage.find((u: any) => u.resourceClass === 'CUSTOM_GPU')).toEqual({ host: 'node1', resourceClass: 'CUSTOM_GPU', capacity: 2, used: 0, free: 2 });
    const human = await project.run(['usage']);
    expect(human.stdout).toMatch(/^HOST\s+CLASS\s+CAPACITY\s+USED\s+FREE$/m);
    expect(human.stdout).toMatch(/^node1\s+VCPU\s+320\s+0\s+320$/m);
    const one = json(await project.run(['usage', '--host', 'node1', '--json'])).usage;
    expect(one).toEqual(usage);
    const unknown = await project.run(['usage', '--host', 'node9']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe('ert: no host "node9" in the store; did you mean node1?\n');
  });

  it('flavors lists the configured flavors', async () => {
    const result = await project.run(['flavors', '--json']);
    expect(result.code).toBe(0);
    expect(json(result).flavors.map((f: any) => f.name)).toEqual(['small', 'huge', 'gpu2', 'gpu4']);
    expect(json(result).flavors[2]).toEqual({ name: 'gpu2', vcpus: 2, memoryMb: 2048, diskGb: 0, extraSpecs: { 'gpu:count': '2' } });
  });

  it('claim and release go through the tracker and its plugins', async () => {
    const uuid = '11111111-2222-4333-8444-555555555555';
    const claim = await project.run(['claim', '--flavor', 'gpu2', '--uuid', uuid, '--json']);
    expect(claim.code, claim.stderr).toBe(0);
    const claimed = json(claim);
    expect(claimed.instance).toBe(uuid);
    expect(claimed.host).toBe('node1');
    const byClass = Object.fromEntries(claimed.allocations.map((a: any) => [a.resourceClass, a.amount]));
    expect(byClass).toMatchObject({ VCPU: 2, MEMORY_MB: 2048, CUSTOM_GPU: 2 });

    const usage = json(await project.run(['usage', '--json'])).usage;
    expect(usage.find((u: any) => u.resourceClass === 'CUSTOM_GPU')).toMatchObject({ used: 2, free: 0 });

    // Both GPUs are taken: the plugin's own view refuses the next one (exit 3, every reason).
    const rejected = await project.run(['claim', '--flavor', 'gpu2']);
    expect(rejected.code).toBe(3);
    expect(rejected.stderr).toMatch(/^ert: claim of flavor gpu2 on host node1 rejected: .*gpu: needs 2 GPU\(s\), 0 free of 2/);
    expect(rejected.stderr.trim().split('\n')).toHaveLength(1);

    const release = await project.run(['release', uuid, '--json']);
    expect(release.code, release.stderr).toBe(0);
    expect(json(release)).toEqual({ instance: uuid, host: 'node1', released: true });
    const after = json(await project.run(['usage', '--json'])).usage;
    expect(after.find((u: any) => u.resourceClass === 'CUSTOM_GPU')).toMatchObject({ used: 0, free: 2 });
  });

  it('a claim larger than the host is rejected by the plugins with their reasons', async () => {
    const result = await project.run(['claim', '--flavor', 'gpu4', '--json']);
    expect(result.code).toBe(3);
    const { error } = json(result);
    expect(error.code).toBe('ERT_CLI_CLAIM_REJECTED');
    expect(error.details.reasons).toContainEqual({ plugin: 'gpu', reason: 'needs 4 GPU(s), 2 free of 2' });
    expect(json(await project.run(['hosts', '--json'])).hosts[0].instances).toBe(0);
  });

  it('release of an unknown instance exits 2 naming it', async () => {
    const result = await project.run(['release', 'aaaaaaaa-0000-4000-8000-000000000000']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('ert: no instance aaaaaaaa-0000-4000-8000-000000000000 in the store\n');
  });

  it('schedule places instances and claims them in the store', async () => {
    const result = await project.run(['schedule', '--flavor', 'small', '--count', '3', '--json']);
    expect(result.code, result.stderr).toBe(0);
    const { flavor, selections } = json(result);
    expect(flavor).toBe('small');
    expect(selections).toHaveLength(3);
    for (const s of selections) {
      expect(s.host).toBe('node1');
      expect(Object.fromEntries(s.allocations.map((a: any) => [a.resourceClass, a.amount]))).toEqual({ VCPU: 2, MEMORY_MB: 2048 });
    }
    const usage = json(await project.run(['usage', '--json'])).usage;
    expect(usage.find((u: any) => u.resourceClass === 'VCPU')).toMatchObject({ used: 6 });
    const human = await project.run(['schedule', '--flavor', 'small']);
    expect(human.stdout).toMatch(/^INSTANCE\s+HOST\s+ALLOCATIONS\s+ALTERNATES$/m);
    expect(human.stdout).toMatch(/\snode1\s+VCPU=2 MEMORY_MB=2048/);
  });

  it('schedule --explain reports the filters and the candidates without placing', async () => {
    const before = json(await project.run(['hosts', '--json'])).hosts[0].instances;
    const result = await project.run(['schedule', '--flavor', 'gpu2', '--explain', '--json']);
    expect(result.code, result.stderr).toBe(0);
    const explanation = json(result);
    expect(explanation).toMatchObject({ flavor: 'gpu2', hosts: 1, passed: 1 });
    expect(explanation.filters.map((f: any) => f.filter)).toEqual(expect.arrayContaining(['status', 'resources', 'gpu']));
    expect(explanation.weighed.map((w: any) => w.host)).toEqual(['node1']);
    expect(json(await project.run(['hosts', '--json'])).hosts[0].instances).toBe(before);
  });

  it('no valid host exits 3 with the explanation', async () => {
    const result = await project.run(['schedule', '--flavor', 'huge', '--json']);
    expect(result.code).toBe(3);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^ert: /);
    const { error } = json(result);
    expect(error.code).toBe('ERT_SCHEDULER_NO_VALID_HOST');
    const resources = error.details.summary.filters.find((f: any) => f.filter === 'resources');
    expect(resources.removed).toBe(1);
    expect(resources.examples[0].host).toBe('node1');
    expect(resources.examples[0].reason).toContain('VCPU');

    const human = await project.run(['schedule', '--flavor', 'huge']);
    expect(human.code).toBe(3);
    expect(human.stdout).toMatch(/^resources\s+1\s+node1: .*VCPU/m);
  });

  it('host run syncs, keeps running and stops gracefully on SIGTERM', async () => {
    const child = startErt(['--config', project.configFile, 'host', 'run', '--name', 'node2', '--json'], { cwd: project.dir });
    let stderr = '';
    let stdout = '';
    child.stdout!.on('data', (d) => (stdout += d));
    await new Promise<void>((resolve, reject) => {
      child.stderr!.on('data', (d) => {
        stderr += d;
        if (stderr.includes('tracking host node2')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
    });
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, stderr).toBe(0);
    expect(stderr).toContain('SIGTERM received, stopping');
    expect(JSON.parse(stdout)).toEqual({ host: 'node2', stopped: true });
    const node2 = json(await project.run(['hosts', '--json'])).hosts.find((h: any) => h.name === 'node2');
    expect(node2).toMatchObject({ status: 'up', instances: 0 });
  });
});

const PG_URL = process.env.ERT_TEST_PG_URL;

/** ERT_STORE_CONNECTION with a postgres:// URL switches a SQLite config to PostgreSQL. */
describe.skipIf(!PG_URL)('ert on PostgreSQL through ERT_STORE_CONNECTION', () => {
  const schema = `ert_cli_${process.pid}`;
  let project: Project;
  beforeAll(async () => {
    project = await Project.create('cloud-vm');
    // The config says SQLite; only the schema (test isolation) is set for PostgreSQL.
    await project.writeConfig({ store: { client: 'sqlite3', connection: './ert.db', schema } });
  });
  afterAll(async () => {
    await dropPostgresSchema(PG_URL!, schema);
    await project?.remove();
  });

  it('migrates, syncs and schedules in the PostgreSQL store, and leaves no SQLite file', async () => {
    const env = { ERT_STORE_CONNECTION: PG_URL! };
    const migrated = await project.run(['db', 'migrate', '--json'], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(json(migrated)).toMatchObject({ client: 'pg', migrated: true });
    expect((await project.run(['host', 'sync'], env)).code).toBe(0);
    const placed = await project.run(['schedule', '--flavor', 'small', '--count', '2', '--json'], env);
    expect(placed.code, placed.stderr).toBe(0);
    expect(json(placed).selections.map((s: any) => s.host)).toEqual(['node1', 'node1']);
    expect(json(await project.run(['hosts', '--json'], env)).hosts).toMatchObject([{ name: 'node1', instances: 2 }]);
    expect(existsSync(join(project.dir, 'ert.db'))).toBe(false);
  });
});
