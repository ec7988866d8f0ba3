import { servedAt } from './served.js';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { buildPackage } from '../build.js';
import { PROFILES, REPO, json, runErt, scratchDir, startErt } from '../cli/helpers.js';

/**
 * `ert serve` driven by OpenStack's own client, unchanged: python3-openstackclient with
 * python3-osc-placement (Debian), noauth2 (`--os-auth-type admin_token --os-token admin`),
 * microversion 1.39 (others where a step needs them), against a store written by
 * `ert host sync` of the xeon-2s-cat profile and `ert schedule`: reads of that, then an
 * operator's workflow of writes asserting each step's `-f json`. Under CI (.ci/run installs
 * the client) a missing `openstack` fails.
 */

const CI = !['', '0', 'false'].includes((process.env.CI ?? '').trim().toLowerCase());
const HAVE_OPENSTACK = spawnSync('openstack', ['--version'], { stdio: 'ignore' }).status === 0;

/** `openstack ... -f json` at microversion 1.39 (`mv`), or without `-f json` for the commands that print nothing (`json: false`). */
function openstack(endpoint: string, args: string[], opts: { mv?: string; json?: boolean } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // The caller's OS_* variables (a real cloud's) must not leak in.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OS_')));
  const argv = ['--os-auth-type', 'admin_token', '--os-token', 'admin', '--os-endpoint', endpoint, '--os-placement-api-version', opts.mv ?? '1.39', ...args, ...(opts.json === false ? [] : ['-f', 'json'])];
  return new Promise((resolve, reject) => {
    const child = spawn('openstack', argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('ert serve with the openstack CLI (osc-placement)', () => {
  let dir: string;
  let server: ChildProcess | undefined;
  let endpoint: string;
  let rootUuid: string;
  let instances: string[] = [];
  const config = () => join(dir, 'ert.config.yaml');

  beforeAll(async () => {
    buildPackage(join(REPO, 'packages/api'));
    dir = await scratchDir('ert-api-test-');
    await writeFile(
      config(),
      stringify({
        store: { client: 'sqlite3', connection: './ert.db' },
        tracker: { hostName: 'node1', root: join(PROFILES, 'xeon-2s-cat'), resources: ['vcpu', 'memory', 'compute-units', 'llc', 'pstate'] },
        scheduler: { consumers: ['vcpu', 'memory'], filters: ['status', 'resources'], weighers: [] },
        flavors: [{ name: 'small', vcpus: 2, memory_mb: 2048 }],
      }),
    );
  });
  afterAll(async () => {
    if (server && server.exitCode === null) {
      server.kill('SIGTERM');
      await new Promise((resolve) => server!.once('exit', resolve));
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('refuses to open a store that does not exist, creating nothing', async () => {
    const r = await runErt(['--config', config(), 'serve', '--port', '0'], { cwd: dir });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('does not exist');
    expect(existsSync(join(dir, 'ert.db'))).toBe(false);
  });

  it('refuses to listen beyond loopback without an explicit auth mode', async () => {
    const r = await runErt(['--config', config(), 'serve', '--host', '0.0.0.0', '--port', '0'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^ert: refusing to serve on 0\.0\.0\.0 without an explicit auth mode/);
  });

  it('takes the auth mode from --auth, then ERT_API_AUTH, then the config\'s api.auth', async () => {
    const withKey = join(dir, 'with-api.yaml');
    await writeFile(withKey, stringify({ store: { client: 'sqlite3', connection: './ert.db' }, api: { auth: 'noauth2' } }));
    // Each refusal names the mode that won; none of them listens.
    const flag = await runErt(['--config', withKey, 'serve', '--host', '0.0.0.0', '--port', '0', '--auth', 'bogus'], { cwd: dir });
    expect(flag.stderr).toMatch(/^ert: unknown auth mode "bogus"/);
    const env = await runErt(['--config', withKey, 'serve', '--host', '0.0.0.0', '--port', '0'], { cwd: dir, env: { ERT_API_AUTH: 'other' } });
    expect(env.stderr).toMatch(/^ert: unknown auth mode "other"/);
    // With the config's mode, it goes on to open the store (missing here): not an auth refusal.
    const config = await runErt(['--config', withKey, 'serve', '--host', '0.0.0.0', '--port', '0'], { cwd: dir });
    expect(config.code).not.toBe(0);
    expect(config.stderr).not.toContain('auth');
    expect(config.stderr).toContain('does not exist');
  });

  it('serves what host sync and schedule wrote', async () => {
    const sync = await runErt(['--config', config(), 'host', 'sync', '--json'], { cwd: dir });
    expect(sync.code, sync.stderr).toBe(0);
    rootUuid = json(sync).rootUuid;
    const scheduled = await runErt(['--config', config(), 'schedule', '--flavor', 'small', '-n', '2', '--json'], { cwd: dir });
    expect(scheduled.code, scheduled.stderr).toBe(0);
    instances = (json(scheduled).selections as Array<{ instanceUuid: string }>).map((sel) => sel.instanceUuid);
    expect(instances).toHaveLength(2);
    server = startErt(['--config', config(), 'serve', '--port', '0', '--log-level', 'warn'], { cwd: dir });
    endpoint = (await servedAt(server, 20_000)).url;
    expect(endpoint).toMatch(/\/placement$/);
    const res = await fetch(`${endpoint}/resource_providers/${rootUuid}/usages`, { headers: { 'x-auth-token': 'admin' } });
    expect(await res.json()).toMatchObject({ usages: { VCPU: 4, MEMORY_MB: 4096, CUSTOM_CU: 0 } });
  });

  describe.skipIf(!CI && !HAVE_OPENSTACK)('openstack ... -f json', () => {
    it('has the client (CI installs python3-openstackclient and python3-osc-placement)', () => {
      expect(HAVE_OPENSTACK, 'the openstack CLI is missing: apt-get install python3-openstackclient python3-osc-placement').toBe(true);
    });

    it('resource provider list and show', { timeout: 60_000 }, async () => {
      const list = await openstack(endpoint, ['resource', 'provider', 'list']);
      expect(list.code, list.stderr).toBe(0);
      const providers = JSON.parse(list.stdout) as Array<Record<string, unknown>>;
      expect(providers.map((p) => p.name).sort()).toEqual(['node1', 'node1_llc_0', 'node1_llc_1']);
      const root = providers.find((p) => p.name === 'node1')!;
      expect(root).toMatchObject({ uuid: rootUuid, root_provider_uuid: rootUuid, parent_provider_uuid: null, generation: expect.any(Number) });
      for (const child of providers.filter((p) => p.name !== 'node1')) expect(child).toMatchObject({ parent_provider_uuid: rootUuid, root_provider_uuid: rootUuid });
      const show = await openstack(endpoint, ['resource', 'provider', 'show', rootUuid]);
      expect(show.code, show.stderr).toBe(0);
      expect(JSON.parse(show.stdout)).toEqual({ uuid: rootUuid, name: 'node1', generation: root.generation, root_provider_uuid: rootUuid, parent_provider_uuid: null });
    });

    it('resource provider inventory list', { timeout: 60_000 }, async () => {
      const r = await openstack(endpoint, ['resource', 'provider', 'inventory', 'list', rootUuid]);
      expect(r.code, r.stderr).toBe(0);
      const rows = JSON.parse(r.stdout) as Array<Record<string, unknown>>;
      const byClass = Object.fromEntries(rows.map((row) => [row.resource_class, row]));
      expect(Object.keys(byClass).sort()).toEqual(['CUSTOM_CU', 'MEMORY_MB', 'VCPU']);
      // The profile's 80 CPUs at the vcpu plugin's default ratio 4.0; 384 GiB less 512 MB reserved.
      expect(byClass.VCPU).toMatchObject({ total: 80, allocation_ratio: 4, reserved: 0, used: 4 });
      expect(byClass.MEMORY_MB).toMatchObject({ total: 393216, reserved: 512, used: 4096 });
      expect(byClass.CUSTOM_CU).toMatchObject({ total: 400, used: 0 });
    });

    it('trait list and resource class list', { timeout: 60_000 }, async () => {
      const traits = await openstack(endpoint, ['trait', 'list']);
      expect(traits.code, traits.stderr).toBe(0);
      const names = (JSON.parse(traits.stdout) as Array<{ name: string }>).map((t) => t.name);
      expect(names).toHaveLength(345 + 6);
      expect(names).toEqual(expect.arrayContaining(['HW_CPU_X86_AVX2', 'COMPUTE_VOLUME_MULTI_ATTACH', 'CUSTOM_RDT_CAT', 'CUSTOM_PSTATE_CONTROL']));
      const classes = await openstack(endpoint, ['resource', 'class', 'list']);
      expect(classes.code, classes.stderr).toBe(0);
      const classNames = (JSON.parse(classes.stdout) as Array<{ name: string }>).map((c) => c.name);
      expect(classNames.filter((n) => !n.startsWith('CUSTOM_'))).toHaveLength(21);
      expect(classNames).toEqual(expect.arrayContaining(['VCPU', 'PCPU', 'CUSTOM_CU', 'CUSTOM_LLC_WAYS']));
    });

    it('usages, a consumer\'s allocations and a filtered provider list', { timeout: 60_000 }, async () => {
      const usage = await openstack(endpoint, ['resource', 'provider', 'usage', 'show', rootUuid]);
      expect(usage.code, usage.stderr).toBe(0);
      expect(JSON.parse(usage.stdout)).toEqual(
        expect.arrayContaining([
          { resource_class: 'VCPU', usage: 4 },
          { resource_class: 'MEMORY_MB', usage: 4096 },
        ]),
      );
      // `ert schedule`'s instances are consumers of type INSTANCE in project ert-cli (1.38's grouping).
      const project = await openstack(endpoint, ['resource', 'usage', 'show', 'ert-cli']);
      expect(project.code, project.stderr).toBe(0);
      expect(JSON.parse(project.stdout)).toEqual([{ resource_class: 'INSTANCE', usage: { consumer_count: 2, VCPU: 4, MEMORY_MB: 4096 } }]);
      const allocation = await openstack(endpoint, ['resource', 'provider', 'allocation', 'show', instances[0]!]);
      expect(allocation.code, allocation.stderr).toBe(0);
      expect(JSON.parse(allocation.stdout)).toEqual([
        { resource_provider: rootUuid, generation: expect.any(Number), resources: { VCPU: 2, MEMORY_MB: 2048 }, project_id: 'ert-cli', user_id: 'ert-cli', consumer_type: 'INSTANCE' },
      ]);
      const filtered = await openstack(endpoint, ['resource', 'provider', 'list', '--resource', 'VCPU=2', '--required', 'HW_CPU_X86_AVX2']);
      expect(filtered.code, filtered.stderr).toBe(0);
      expect((JSON.parse(filtered.stdout) as Array<{ uuid: string }>).map((p) => p.uuid)).toEqual([rootUuid]);
    });

    it('allocation candidate list --resource VCPU=1', { timeout: 60_000 }, async () => {
      const r = await openstack(endpoint, ['allocation', 'candidate', 'list', '--resource', 'VCPU=1']);
      expect(r.code, r.stderr).toBe(0);
      const rows = JSON.parse(r.stdout) as Array<Record<string, unknown>>;
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ '#': 1, allocation: 'VCPU=1', 'resource provider': rootUuid });
      expect(rows[0]!['inventory used/capacity']).toBe('CUSTOM_CU=0/400,MEMORY_MB=4096/392704,VCPU=4/320');
      expect(String(rows[0]!.traits).split(',')).toEqual(expect.arrayContaining(['HW_CPU_X86_AVX2', 'CUSTOM_RDT_CAT']));
    });

    it('an operator workflow with writes: classes, traits, a provider tree, inventories, aggregates, candidates, allocations, usages, deletes', { timeout: 240_000 }, async () => {
      const A = '0a000000-0000-4000-8000-000000000001';
      const B = '0a000000-0000-4000-8000-000000000002';
      const AGG = 'aaaaaaaa-0000-4000-8000-000000000001';
      const C = 'c0000000-0000-4000-8000-0000000000c1';
      const ok = async (args: string[], opts: { mv?: string; json?: boolean } = {}): Promise<any> => {
        const r = await openstack(endpoint, args, opts);
        expect(r.code, `openstack ${args.join(' ')}: ${r.stderr}`).toBe(0);
        return opts.json === false ? r.stdout : JSON.parse(r.stdout);
      };
      const fails = async (args: string[]): Promise<string> => {
        const r = await openstack(endpoint, args, { json: false });
        expect(r.code, `openstack ${args.join(' ')} should fail`).not.toBe(0);
        return r.stderr;
      };

      // Custom resource class and trait (bodiless PUTs: they print nothing).
      await ok(['resource', 'class', 'create', 'CUSTOM_FPGA'], { json: false });
      expect(await ok(['resource', 'class', 'show', 'CUSTOM_FPGA'])).toEqual({ name: 'CUSTOM_FPGA' });
      await ok(['trait', 'create', 'CUSTOM_GOLD'], { json: false });
      expect(await ok(['trait', 'show', 'CUSTOM_GOLD'])).toEqual({ name: 'CUSTOM_GOLD' });
      expect(await ok(['trait', 'list', '--name', 'startswith:CUSTOM_GOLD'])).toEqual([{ name: 'CUSTOM_GOLD' }]);

      // A provider tree: a root and a child (parent_provider_uuid from 1.14).
      expect(await ok(['resource', 'provider', 'create', 'cn-a', '--uuid', A])).toEqual({ uuid: A, name: 'cn-a', generation: 0, root_provider_uuid: A, parent_provider_uuid: null });
      expect(await ok(['resource', 'provider', 'create', 'cn-a-fpga', '--uuid', B, '--parent-provider', A])).toEqual({
        uuid: B,
        name: 'cn-a-fpga',
        generation: 0,
        root_provider_uuid: A,
        parent_provider_uuid: A,
      });
      // Below 1.14 the tree is not shown.
      expect(await ok(['resource', 'provider', 'show', B], { mv: '1.13' })).toEqual({ uuid: B, name: 'cn-a-fpga', generation: 0 });

      // Inventories, with options per class.
      const inventory = await ok(['resource', 'provider', 'inventory', 'set', A, '--resource', 'VCPU=16', '--resource', 'VCPU:allocation_ratio=2.0', '--resource', 'MEMORY_MB=32768', '--resource', 'MEMORY_MB:reserved=512']);
      expect(inventory).toEqual([
        { resource_class: 'MEMORY_MB', allocation_ratio: 1, min_unit: 1, max_unit: 2147483647, reserved: 512, step_size: 1, total: 32768 },
        { resource_class: 'VCPU', allocation_ratio: 2, min_unit: 1, max_unit: 2147483647, reserved: 0, step_size: 1, total: 16 },
      ]);
      expect(await ok(['resource', 'provider', 'inventory', 'set', B, '--resource', 'CUSTOM_FPGA=2'])).toEqual([
        { resource_class: 'CUSTOM_FPGA', allocation_ratio: 1, min_unit: 1, max_unit: 2147483647, reserved: 0, step_size: 1, total: 2 },
      ]);
      // One class's inventory: Placement's body has no resource_class, and osc shows it as is.
      expect(await ok(['resource', 'provider', 'inventory', 'show', B, 'CUSTOM_FPGA'])).toMatchObject({ total: 2, reserved: 0, allocation_ratio: 1, min_unit: 1, step_size: 1 });
      // An unknown class is the server's 400, passed through.
      expect(await fails(['resource', 'provider', 'inventory', 'set', B, '--resource', 'CUSTOM_NOPE=1'])).toContain('No such resource class CUSTOM_NOPE');

      // Traits and aggregates (1.19: the aggregate write carries the provider generation; a stale one is 409).
      expect(await ok(['resource', 'provider', 'trait', 'set', B, '--trait', 'CUSTOM_GOLD'])).toEqual([{ name: 'CUSTOM_GOLD' }]);
      const root = await ok(['resource', 'provider', 'show', A]);
      expect(root).toMatchObject({ uuid: A, generation: 1 });
      expect(await fails(['resource', 'provider', 'aggregate', 'set', A, '--aggregate', AGG, '--generation', '0'])).toContain('(HTTP 409)');
      expect(await ok(['resource', 'provider', 'aggregate', 'set', A, '--aggregate', AGG, '--generation', String(root.generation)])).toEqual([{ uuid: AGG }]);
      expect(await ok(['resource', 'provider', 'aggregate', 'list', A])).toEqual([{ uuid: AGG }]);
      expect((await ok(['resource', 'provider', 'list', '--member-of', AGG])).map((p: { uuid: string }) => p.uuid)).toEqual([A]);
      expect((await ok(['resource', 'provider', 'list', '--in-tree', B])).map((p: { uuid: string }) => p.uuid).sort()).toEqual([A, B]);

      // Allocation candidates with a numbered group (1.25+): VCPU from the root, the FPGA from the GOLD child.
      const candidates = await ok(['allocation', 'candidate', 'list', '--resource', 'VCPU=2', '--group', '1', '--resource', 'CUSTOM_FPGA=1', '--required', 'CUSTOM_GOLD', '--group-policy', 'isolate']);
      expect(candidates).toEqual([
        { '#': 1, allocation: 'VCPU=2', 'resource provider': A, 'inventory used/capacity': 'MEMORY_MB=0/32256,VCPU=0/32', traits: '' },
        { '#': 1, allocation: 'CUSTOM_FPGA=1', 'resource provider': B, 'inventory used/capacity': 'CUSTOM_FPGA=0/2', traits: 'CUSTOM_GOLD' },
      ]);
      // Nothing carries a forbidden GOLD FPGA.
      expect(await ok(['allocation', 'candidate', 'list', '--group', '1', '--resource', 'CUSTOM_FPGA=1', '--forbidden', 'CUSTOM_GOLD'])).toEqual([]);

      // Claim the candidate: allocations for one consumer on both providers (1.38: consumer type).
      const allocation = [
        { resource_provider: A, generation: expect.any(Number), resources: { MEMORY_MB: 1024, VCPU: 2 }, project_id: 'proj1', user_id: 'user1', consumer_type: 'INSTANCE' },
        { resource_provider: B, generation: expect.any(Number), resources: { CUSTOM_FPGA: 1 }, project_id: 'proj1', user_id: 'user1', consumer_type: 'INSTANCE' },
      ];
      const set = await ok(['resource', 'provider', 'allocation', 'set', C, '--allocation', `rp=${A},VCPU=2,MEMORY_MB=1024`, '--allocation', `rp=${B},CUSTOM_FPGA=1`, '--project-id', 'proj1', '--user-id', 'user1', '--consumer-type', 'INSTANCE']);
      expect(set).toEqual(allocation);
      expect(await ok(['resource', 'provider', 'allocation', 'show', C])).toEqual(allocation);
      // Beyond capacity (FPGA 2 in total): 409, nothing written.
      expect(await fails(['resource', 'provider', 'allocation', 'set', 'c0000000-0000-4000-8000-0000000000c2', '--allocation', `rp=${B},CUSTOM_FPGA=2`, '--project-id', 'proj1', '--user-id', 'user1', '--consumer-type', 'INSTANCE'])).toContain('(HTTP 409)');

      // Usages: per provider, per project (grouped by consumer type at 1.38), and in the inventory list.
      expect(await ok(['resource', 'provider', 'usage', 'show', A])).toEqual([
        { resource_class: 'MEMORY_MB', usage: 1024 },
        { resource_class: 'VCPU', usage: 2 },
      ]);
      expect(await ok(['resource', 'provider', 'usage', 'show', B])).toEqual([{ resource_class: 'CUSTOM_FPGA', usage: 1 }]);
      expect(await ok(['resource', 'usage', 'show', 'proj1'])).toEqual([{ resource_class: 'INSTANCE', usage: { consumer_count: 1, CUSTOM_FPGA: 1, MEMORY_MB: 1024, VCPU: 2 } }]);
      expect(await ok(['resource', 'usage', 'show', 'proj1', '--user-id', 'user1'], { mv: '1.9' })).toEqual(
        expect.arrayContaining([
          { resource_class: 'CUSTOM_FPGA', usage: 1 },
          { resource_class: 'VCPU', usage: 2 },
        ]),
      );
      const inventories = await ok(['resource', 'provider', 'inventory', 'list', A]);
      expect(inventories.find((row: { resource_class: string }) => row.resource_class === 'VCPU')).toMatchObject({ total: 16, used: 2 });
      // The candidates now see the usage.
      const after = await ok(['allocation', 'candidate', 'list', '--resource', 'VCPU=2', '--group', '1', '--resource', 'CUSTOM_FPGA=1', '--required', 'CUSTOM_GOLD', '--group-policy', 'isolate']);
      expect(after.map((row: Record<string, string>) => row['inventory used/capacity'])).toEqual(['MEMORY_MB=1024/32256,VCPU=2/32', 'CUSTOM_FPGA=1/2']);

      // Deletes: in-use and parent refusals, then everything in order.
      expect(await fails(['resource', 'provider', 'delete', B])).toContain('(HTTP 409)');
      expect(await fails(['resource', 'provider', 'delete', A])).toContain('It has child resource providers');
      expect(await fails(['resource', 'class', 'delete', 'CUSTOM_FPGA'])).toContain('(HTTP 409)');
      await ok(['resource', 'provider', 'allocation', 'delete', C], { json: false });
      expect(await ok(['resource', 'provider', 'allocation', 'show', C])).toEqual([]);
      expect(await ok(['resource', 'usage', 'show', 'proj1'])).toEqual([]);
      await ok(['resource', 'provider', 'trait', 'delete', B], { json: false });
      expect(await ok(['resource', 'provider', 'trait', 'list', B])).toEqual([]);
      await ok(['resource', 'provider', 'inventory', 'delete', B, '--resource-class', 'CUSTOM_FPGA'], { json: false });
      expect(await ok(['resource', 'provider', 'inventory', 'list', B])).toEqual([]);
      await ok(['resource', 'provider', 'delete', B], { json: false });
      await ok(['resource', 'provider', 'delete', A], { json: false });
      await ok(['resource', 'class', 'delete', 'CUSTOM_FPGA'], { json: false });
      await ok(['trait', 'delete', 'CUSTOM_GOLD'], { json: false });
      expect(await fails(['resource', 'class', 'show', 'CUSTOM_FPGA'])).toContain('(HTTP 404)');
      expect(await ok(['trait', 'list', '--name', 'startswith:CUSTOM_GOLD'])).toEqual([]);
      // What host sync wrote is untouched.
      expect((await ok(['resource', 'provider', 'list'])).map((p: { name: string }) => p.name).sort()).toEqual(['node1', 'node1_llc_0', 'node1_llc_1']);
    });
  });
});
