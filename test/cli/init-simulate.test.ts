import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, json, runErt, scratchDir } from './helpers.js';

describe('ert init', () => {
  let dir: string;
  beforeAll(async () => {
    // Outside the repository: the starter config's plugin names must resolve from where ert
    // is installed, with no node_modules next to the config.
    dir = await mkdtemp(join(tmpdir(), 'ert-cli-init-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes a starter config, flavors and providers.d that load', async () => {
    const result = await runErt(['init', 'site', '--json'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    expect(json(result)).toEqual({
      dir: join(dir, 'site'),
      files: ['ert.config.yaml', 'flavors.yaml', 'providers.d/example.yaml.example'],
    });
    const flavors = await runErt(['--config', join(dir, 'site/ert.config.yaml'), 'flavors', '--json'], { cwd: dir });
    expect(flavors.code, flavors.stderr).toBe(0);
    expect(json(flavors).flavors.length).toBeGreaterThanOrEqual(10);
    const plugins = await runErt(['--config', join(dir, 'site/ert.config.yaml'), 'plugins', '--json'], { cwd: dir });
    expect(plugins.code, plugins.stderr).toBe(0);
    expect(new Set(json(plugins).plugins.filter((p: any) => p.side === 'compute').map((p: any) => p.name))).toEqual(
      new Set(['vcpu', 'memory', 'compute-units', 'llc', 'pstate', 'disk']),
    );
  });

  it('refuses to overwrite without --force, and overwrites with it', async () => {
    await writeFile(join(dir, 'site/flavors.yaml'), '[]\n');
    const refused = await runErt(['init', 'site'], { cwd: dir });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^ert: .*site\/ert\.config\.yaml, .*site\/flavors\.yaml, .*already exists; use --force to overwrite\n$/);
    expect(await readFile(join(dir, 'site/flavors.yaml'), 'utf8')).toBe('[]\n');
    const forced = await runErt(['init', 'site', '--force'], { cwd: dir });
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toContain('wrote site/ert.config.yaml');
    expect(await readFile(join(dir, 'site/flavors.yaml'), 'utf8')).toBe(await readFile(join(REPO, 'config/flavors.yaml'), 'utf8'));
  });

  it('ships the repository default config and flavors as its templates', async () => {
    for (const file of ['ert.config.yaml', 'flavors.yaml']) {
      expect(await readFile(join(REPO, 'packages/cli/templates', file), 'utf8')).toBe(await readFile(join(REPO, 'config', file), 'utf8'));
    }
  });
});

describe('config/flavors.yaml', () => {
  it('uses extra specs of every first-party plugin, each flavor parsing with the default config', async () => {
    const flavors = await runErt(['--config', join(REPO, 'config/ert.config.yaml'), 'flavors', '--json'], { cwd: REPO });
    const used = new Set(json(flavors).flavors.flatMap((f: any) => Object.keys(f.extraSpecs)));
    for (const name of ['vcpu', 'memory', 'compute-units', 'llc', 'pstate']) {
      const plugin = (await import(`@ert/plugin-${name}/scheduler`)).default as { extraSpecs?: Array<{ key: string }> };
      const keys = (plugin.extraSpecs ?? []).map((k) => k.key);
      expect(keys.filter((k) => used.has(k)), `no flavor uses a key of ${name} (${keys.join(', ')})`).not.toEqual([]);
    }
    // Every flavor's extra specs are accepted: --explain parses each one against the loaded plugins.
    const dir = await mkdtemp(join(tmpdir(), 'ert-cli-flavors-'));
    try {
      // schedule --explain reads the store without creating it (issue 11, point 13).
      const migrated = await runErt(['--config', join(REPO, 'config/ert.config.yaml'), 'db', 'migrate'], { cwd: dir, env: { ERT_STORE_CONNECTION: join(dir, 'ert.db') } });
      expect(migrated.code, migrated.stderr).toBe(0);
      for (const flavor of json(flavors).flavors) {
        const explained = await runErt(['--config', join(REPO, 'config/ert.config.yaml'), 'schedule', '--flavor', flavor.name, '--explain', '--json'], {
          cwd: dir,
          env: { ERT_STORE_CONNECTION: join(dir, 'ert.db') },
        });
        expect(explained.code, `${flavor.name}: ${explained.stderr}`).toBe(0);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    // One `ert` process per flavor (11), one after another: about 1 s each on a quiet machine,
    // over 2.5 s under a full CI run on 2 cores (it went past the default 30 s there once).
  }, 120_000);
});

describe('ert simulate', () => {
  const config = join(REPO, 'config/ert.config.yaml');
  const simulate = (seed: string) =>
    runErt(['--config', config, 'simulate', '--hosts', '8', '--requests', '60', '--seed', seed, '--json'], { cwd: REPO });

  it('reports placements, rejections, utilisation, fragmentation and speed; the same seed gives the same placements', async () => {
    const [a, b, c] = await Promise.all([simulate('7'), simulate('7'), simulate('8')]);
    expect(a.code, a.stderr).toBe(0);
    const first = json(a);
    expect(first).toMatchObject({ seed: 7, hosts: 8, requests: 60 });
    expect(first.placed + first.rejected).toBe(60);
    // Instances leave as others arrive: some departed, the rest are still placed.
    expect(first.departed).toBeGreaterThan(0);
    expect(first.live).toBe(first.placed - first.departed);
    expect(first.placements).toHaveLength(first.placed);
    expect(first.rejections).toHaveLength(first.rejected);
    for (const r of first.rejections) expect(r.reason).not.toBe('');
    expect(Object.values(first.profiles).reduce((x: number, y: any) => x + y, 0)).toBe(8);
    for (const fraction of Object.values(first.utilization) as number[]) {
      expect(fraction).toBeGreaterThanOrEqual(0);
      expect(fraction).toBeLessThanOrEqual(1);
    }
    expect(first.utilization.VCPU).toBeGreaterThan(0);
    expect(first.decisionsPerSecond).toBeGreaterThan(0);
    expect(first.fragmentation.flavor).toBeTypeOf('string');
    expect(json(b).placements).toEqual(first.placements);
    expect(json(b).rejections).toEqual(first.rejections);
    expect(json(c).placements).not.toEqual(first.placements);
  });

  /*
   * A fleet small enough to work out by hand: 3 cloud-vm hosts (config/hosts/README.md: 4 CPUs,
   * VCPU capacity 4 x 4.0 = 16 with max_unit 4; MEMORY_MB 15628 - 512 reserved = 15116), only
   * the vcpu and memory plugins, filters status and resources, no weigher (every weight 0: ties
   * go to the lower host name, so hosts fill in name order), one flavor f3 (3 vCPUs, 4096 MB),
   * and a mean lifetime so long that nobody leaves. Memory binds: a host takes
   * floor(15116 / 4096) = 3 instances (9 vCPUs of 16).
   *
   * Mutations seen caught: `utilization` dividing by the free amount instead of the capacity
   * (usage.ts); the stranded share counting the free capacity of hosts that fit instead of
   * those that do not (simulation.ts); decisionsPerSecond computed per millisecond.
   */
  describe('on a hand-computed fleet', () => {
    let dir: string;
    let run: (requests: number) => Promise<any>;
    beforeAll(async () => {
      dir = await scratchDir('ert-cli-sim-hand-');
      await mkdir(join(dir, 'hosts'));
      await cp(join(REPO, 'config/hosts/cloud-vm'), join(dir, 'hosts/cloud-vm'), { recursive: true });
      await writeFile(join(dir, 'flavors.yaml'), '- { name: f3, vcpus: 3, memory_mb: 4096, disk_gb: 0, extra_specs: {} }\n');
      await writeFile(
        join(dir, 'ert.config.yaml'),
        [
          'store: { client: sqlite3, connection: ./unused.db }',
          'log: { level: silent }',
          'tracker: { resources: [vcpu, memory] }',
          'scheduler: { consumers: [vcpu, memory], filters: [status, resources], weighers: [], maxAttempts: 3, hostSubsetSize: 1 }',
          'plugins: { vcpu: { allocationRatio: 4.0 }, memory: { reservedMb: 512, allocationRatio: 1.0 } }',
          'flavors: ./flavors.yaml',
          '',
        ].join('\n'),
      );
      run = async (requests) => {
        const result = await runErt(['--config', join(dir, 'ert.config.yaml'), 'simulate', '--hosts', '3', '--requests', String(requests), '--lifetime', '1000000', '--seed', '3', '--json'], { cwd: dir });
        expect(result.code, result.stderr).toBe(0);
        return json(result);
      };
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('7 requests: 3 + 3 + 1 placed in name order; utilisation, fit and stranded capacity as computed by hand', async () => {
      const report = await run(7);
      expect(report).toMatchObject({ seed: 3, hosts: 3, profiles: { 'cloud-vm': 3 }, requests: 7, placed: 7, rejected: 0, departed: 0, live: 7, rejectedByFlavor: {} });
      expect(report.placements.map((p: any) => [p.request, p.flavor, p.host])).toEqual([
        [0, 'f3', 'sim-cloud-vm-0'],
        [1, 'f3', 'sim-cloud-vm-0'],
        [2, 'f3', 'sim-cloud-vm-0'],
        [3, 'f3', 'sim-cloud-vm-1'],
        [4, 'f3', 'sim-cloud-vm-1'],
        [5, 'f3', 'sim-cloud-vm-1'],
        [6, 'f3', 'sim-cloud-vm-2'],
      ]);
      // Used 7 x 3 = 21 of 3 x 16 = 48 vCPUs; 7 x 4096 = 28672 of 3 x 15116 = 45348 MB.
      expect(report.utilization).toEqual({ MEMORY_MB: 28672 / 45348, VCPU: 21 / 48 });
      // Free: vCPUs 7, 7, 13 and MB 2828, 2828, 11020. Only sim-cloud-vm-2 still takes f3
      // (2828 MB < 4096): 14 of 27 free vCPUs and 5656 of 16676 free MB are stranded.
      expect(report.fragmentation).toEqual({ flavor: 'f3', hostsThatFit: 1, strandedFreeShare: { MEMORY_MB: 5656 / 16676, VCPU: 14 / 27 } });
      // Decisions per second of select time: select time is part of the run's elapsed time.
      expect(report.decisionsPerSecond).toBeGreaterThanOrEqual(7 / ((report.elapsedMs + 1) / 1000));
    });

    it('10 requests: the tenth finds no host; then no host takes f3 and all free capacity is stranded', async () => {
      const report = await run(10);
      expect(report).toMatchObject({ hosts: 3, requests: 10, placed: 9, rejected: 1, departed: 0, live: 9, rejectedByFlavor: { f3: 1 } });
      expect(report.placements.map((p: any) => p.host)).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2].map((i) => `sim-cloud-vm-${i}`));
      expect(report.rejections).toHaveLength(1);
      expect(report.rejections[0]).toMatchObject({ request: 9, flavor: 'f3' });
      expect(report.rejections[0].reason).toMatch(/no valid host .* 3 host\(s\), 0 passed; removed by resources: 3/);
      expect(report.utilization).toEqual({ MEMORY_MB: 36864 / 45348, VCPU: 27 / 48 });
      expect(report.fragmentation).toEqual({ flavor: 'f3', hostsThatFit: 0, strandedFreeShare: { MEMORY_MB: 1, VCPU: 1 } });
      expect(report.decisionsPerSecond).toBeGreaterThanOrEqual(10 / ((report.elapsedMs + 1) / 1000));
    });
  });

  it('prints a readable report without --json, with no progress bar when stderr is not a TTY', async () => {
    const result = await runErt(['--config', config, 'simulate', '--hosts', '4', '--requests', '20'], { cwd: REPO });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^fleet: 4 hosts \(/m);
    expect(result.stdout).toMatch(/^requests: 20, placed \d+, rejected \d+/m);
    expect(result.stdout).toMatch(/^CLASS\s+USED\s+STRANDED FREE$/m);
    expect(result.stdout).toMatch(/^decisions per second: \d+/m);
    expect(result.stderr).toBe('');
  });

  it('--db keeps the database and refuses an existing file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ert-cli-sim-'));
    try {
      const db = join(dir, 'sim.db');
      const result = await runErt(['--config', config, 'simulate', '--hosts', '2', '--requests', '5', '--db', db, '--json'], { cwd: dir });
      expect(result.code, result.stderr).toBe(0);
      expect(existsSync(db)).toBe(true);
      const hosts = await runErt(['--config', config, 'hosts', '--json'], { cwd: dir, env: { ERT_STORE_CONNECTION: db } });
      expect(json(hosts).hosts).toHaveLength(2);
      const again = await runErt(['--config', config, 'simulate', '--hosts', '2', '--requests', '5', '--db', db], { cwd: dir });
      expect(again.code).toBe(2);
      expect(again.stderr).toBe(`ert: --db ${db} already exists; simulate needs a new file\n`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a missing profiles directory names what was tried', async () => {
    const result = await runErt(['--config', config, 'simulate', '--hosts', '2', '--requests', '5', '--profiles', '/nonexistent/profiles'], { cwd: REPO });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('ert: no host profiles directory: tried /nonexistent/profiles\n');
  });
});

describe('ert demo', () => {
  it('registers this machine, builds a fleet and schedules a sample workload', async () => {
    const result = await runErt(['demo', '--hosts', '4', '--requests', '20', '--json'], { cwd: REPO });
    expect(result.code, result.stderr).toBe(0);
    const demo = json(result);
    expect(demo.database).toBe(join(REPO, '.ert/demo.db'));
    expect(demo.localHost.discovery.plugins.map((p: any) => p.plugin)).toEqual(['vcpu', 'memory', 'compute-units', 'llc', 'pstate', 'disk']);
    expect(demo.simulation).toMatchObject({ hosts: 4, requests: 20 });
    expect(demo.simulation.placed).toBeGreaterThan(0);
    const hosts = await runErt(['hosts', '--json'], { cwd: REPO, env: { ERT_CONFIG: join(REPO, 'config/ert.config.yaml'), ERT_STORE_CONNECTION: demo.database } });
    expect(json(hosts).hosts.map((h: any) => h.name)).toContain(demo.localHost.host);
  });
});
