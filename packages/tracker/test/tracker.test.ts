import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import os from 'node:os';
import { describe, expect, it, vi } from 'vitest';
import { definePlugin, type InstanceEvent } from '@ert/plugin-api';
import type { Store } from '@ert/store';
import { providerUuid, TrackerErrorCodes, type ClaimResult, type SyncReport } from '../src/index.js';
import { BACKENDS, useBench, flavor, request, type Bench } from './harness.js';
// @ts-expect-error plain-JS fixtures shared with the child process of the restart test
import { counting, pinning, ways } from './fixtures/plugins.mjs';

function ok(result: ClaimResult): Extract<ClaimResult, { ok: true }> {
  if (!result.ok) throw new Error(`claim refused: ${JSON.stringify(result.reasons)}`);
  return result;
}
function refused(result: ClaimResult): Array<{ plugin?: string; reason: string }> {
  if (result.ok) throw new Error('claim unexpectedly accepted');
  return result.reasons;
}
async function usage(store: Store, host: string): Promise<Record<string, number>> {
  const [snapshot] = await store.loadHosts([host]);
  const total: Record<string, number> = {};
  for (const p of snapshot!.providers) for (const [c, n] of Object.entries(p.usages)) total[c] = (total[c] ?? 0) + n;
  return total;
}

describe.each(BACKENDS)('tracker on %s', (backend) => {
  const bench = useBench(backend);

  function basics(faults: { cpu?: Record<string, string>; mem?: Record<string, string> } = {}, journal: string[] = []) {
    return [
      counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, traits: ['HW_CPU_X86_AVX2'], faults: faults.cpu ?? {}, journal }),
      counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096, faults: faults.mem ?? {}, journal }),
    ];
  }

  describe('discovery and sync', () => {
    it('names the host after the machine unless the config or the caller names it', async () => {
      const config = bench.config({ store: bench.storeOptions(), resources: basics() });
      const { hostName: _configured, ...unnamed } = config.tracker;
      const byMachine = await bench.tracker({ ...config, tracker: unnamed });
      expect(byMachine.hostName).toBe(os.hostname());
      expect(byMachine.rootUuid).toBe(providerUuid(os.hostname()));
      expect((await bench.tracker(config)).hostName).toBe('host1');
      expect((await bench.tracker(config, undefined, { hostName: 'given' })).hostName).toBe('given');
    });

    it('discover() reports every plugin and writes nothing (the store is not even opened)', async () => {
      const storeOptions = bench.storeOptions();
      const tracker = await bench.tracker(bench.config({ store: storeOptions, resources: [...basics(), ways()] }));
      const report = await tracker.discover();
      expect(report.host).toBe('host1');
      expect(report.rootUuid).toBe(providerUuid('host1'));
      expect(report.plugins.map((p) => [p.plugin, p.available])).toEqual([
        ['cpu', true],
        ['mem', true],
        ['ways', true],
      ]);
      expect(report.plugins[0]!.stats).toEqual({ schemaVersion: 1, data: { used: 0, instances: [] } });
      expect(report.plugins[2]!.providers.map((p) => p.name)).toEqual(['host1', 'host1_cache_0', 'host1_cache_1']);
      expect(report.providers.map((p) => p.name)).toEqual(['host1', 'host1_cache_0', 'host1_cache_1']);
      expect(report.providers[0]!.inventories['VCPU']!.total).toBe(8);
      if (backend === 'sqlite3') expect(existsSync(storeOptions.connection)).toBe(false);
    });

    it('sync() writes providers, inventories, traits, stats and the host row, then changes nothing when nothing changed', async () => {
      const store = await bench.openStore(bench.storeOptions());
      let now = 1_000_000;
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [...basics(), ways()] }), store, { clock: { now: () => now } });
      const first = await tracker.sync();
      expect(first.problems).toEqual([]);
      expect(first.changes).toEqual(expect.arrayContaining(['created provider host1', 'created provider host1_cache_0', 'stats of cpu', 'stats of ways']));
      const root = await store.getInventories(providerUuid('host1'));
      expect(Object.keys(root.inventories).sort()).toEqual(['MEMORY_MB', 'VCPU']);
      expect((await store.getTraits(providerUuid('host1'))).sort()).toEqual(['CUSTOM_CACHE_WAYS', 'HW_CPU_X86_AVX2']);
      expect((await store.getProvider(providerUuid('host1_cache_1')))!.parentUuid).toBe(providerUuid('host1'));
      expect(await store.getHost('host1')).toMatchObject({ status: 'up', lastUpdate: now, rootProviderUuid: providerUuid('host1') });
      expect((await store.readStats('host1'))['ways']).toMatchObject({ schemaVersion: 2, data: { domains: [{ used: 0 }, { used: 0 }] } });

      const generations = await Promise.all(first.discovery.providers.map(async (p) => (await store.getProvider(p.uuid))!.generation));
      now += 1000;
      const second = await tracker.sync();
      expect(second.changes).toEqual([]);
      expect(await Promise.all(first.discovery.providers.map(async (p) => (await store.getProvider(p.uuid))!.generation))).toEqual(generations);
      expect((await store.getHost('host1'))!.lastUpdate).toBe(now);
    });

    it('writes only the inventory that changed, keeps inventory allocations use, and retires providers nothing reports', async () => {
      const store = await bench.openStore(bench.storeOptions());
      const shape = { total: 8 };
      const cpu = counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, shape });
      const memFaults: Record<string, string> = {};
      const mem = counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096, faults: memFaults });
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [cpu, mem, ways({ domains: 2 })] }), store);
      await tracker.sync();
      ok(await tracker.claim(request(4, 1024)));

      shape.total = 16;
      const grown = await tracker.sync();
      expect(grown.changes).toEqual(['inventories of host1: VCPU']);
      expect((await store.getInventories(providerUuid('host1'))).inventories['VCPU']!.total).toBe(16);

      shape.total = 2; // below the 4 in use
      const shrunk = await tracker.sync();
      expect(shrunk.problems).toEqual([expect.objectContaining({ code: 'ERT_STORE_INVENTORY_IN_USE', provider: 'host1', resourceClass: 'VCPU' })]);
      expect((await store.getInventories(providerUuid('host1'))).inventories['VCPU']!.total).toBe(16);

      memFaults['discover'] = 'unavailable'; // MEMORY_MB (1024 used) would disappear
      const gone = await tracker.sync();
      expect(gone.problems.filter((p) => p.code === 'ERT_STORE_INVENTORY_IN_USE').map((p) => p.resourceClass).sort()).toEqual(['MEMORY_MB', 'VCPU']);
      expect((await store.getInventories(providerUuid('host1'))).inventories['MEMORY_MB']!.total).toBe(4096);
    });

    it('deletes nested providers that nothing reports any more', async () => {
      const store = await bench.openStore(bench.storeOptions());
      const config = bench.config({ store: bench.storeOptions(), resources: [...basics(), ways({ domains: 2 })] });
      await (await bench.tracker(config, store)).sync();
      const fewer = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [...basics(), ways({ domains: 1 })] }), store);
      const report = await fewer.sync();
      expect(report.changes).toEqual(expect.arrayContaining(['deleted provider host1_cache_1']));
      expect(await store.getProvider(providerUuid('host1_cache_1'))).toBeUndefined();
      expect(await store.getProvider(providerUuid('host1_cache_0'))).toMatchObject({ name: 'host1_cache_0', uuid: providerUuid('host1_cache_0') });
    });

    // The hang case: a plugin whose discovery failed is not told about instances, so its hung
    // call adds no timeout of its own. Seen red with PluginViews.tells always true (a second
    // problem: mem's reset timed out behind the hung discover).
    it.each([
      ['throws', 'throw', 'ERT_PLUGIN_HOOK_FAILED'],
      ['hangs', 'hang', 'ERT_PLUGIN_HOOK_TIMEOUT'],
      ['returns garbage', 'garbage', TrackerErrorCodes.INVALID_DISCOVERY],
    ])('a plugin whose discover %s is unavailable and reported; the others go on', async (_label, fault, code) => {
      const store = await bench.openStore(bench.storeOptions());
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: basics({ mem: { discover: fault } }) }), store);
      const report = await tracker.sync();
      const mem = report.discovery.plugins.find((p) => p.plugin === 'mem')!;
      expect(mem.available).toBe(false);
      expect(report.problems).toEqual([expect.objectContaining({ code, plugin: 'mem' })]);
      expect(Object.keys((await store.getInventories(providerUuid('host1'))).inventories)).toEqual(['VCPU']);
      expect(Object.keys(await store.readStats('host1'))).toEqual(['cpu']);
    });

    // Issue 11, point 15: stats the tracker cannot renew expire (a scheduler must not place by
    // what the host no longer says). Seen red with the expiry loop removed from writeStats (the
    // last valid stats stayed).
    it('refuses stats that fail their schema, expires the last ones, and writes the other plugins\u2019 stats', async () => {
      const store = await bench.openStore(bench.storeOptions());
      const faults: Record<string, string> = {};
      const cpu = counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, faults });
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [cpu, counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096 })] }), store);
      await tracker.sync();
      const r = ok(await tracker.claim(request(1, 512)));
      faults['stats'] = 'invalid';
      const report = await tracker.sync();
      expect(report.problems).toEqual([expect.objectContaining({ code: 'ERT_PLUGIN_STATS_INVALID', plugin: 'cpu' })]);
      expect(report.discovery.plugins[0]!.statsProblem?.code).toBe('ERT_PLUGIN_STATS_INVALID');
      const stats = await store.readStats('host1');
      expect(stats['cpu']).toBeUndefined();
      expect(report.changes).toEqual([expect.stringMatching(/^stats of cpu expired \(its stats failed: .*stats/)]);
      expect(stats['mem']!.data).toEqual({ used: 512, instances: [r.instance.uuid] });
      // Valid again: written again.
      delete faults['stats'];
      expect((await tracker.sync()).changes).toEqual(['stats of cpu']);
      expect((await store.readStats('host1'))['cpu']!.data).toEqual({ used: 1, instances: [r.instance.uuid] });
    });

    it('expires the stats of a plugin that became unavailable, naming why, and bumps the host for schedulers', async () => {
      const store = await bench.openStore(bench.storeOptions());
      const faults: Record<string, string> = {};
      const mem = counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096, faults });
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [counting({ name: 'cpu', resourceClass: 'VCPU', total: 8 }), mem] }), store);
      await tracker.sync();
      expect(Object.keys(await store.readStats('host1')).sort()).toEqual(['cpu', 'mem']);
      const before = (await store.getHost('host1'))!.generation;
      faults['discover'] = 'unavailable';
      const report = await tracker.sync();
      expect(report.changes).toContain('stats of mem expired (the plugin is unavailable)');
      expect(Object.keys(await store.readStats('host1'))).toEqual(['cpu']);
      expect((await store.getHost('host1'))!.generation).toBeGreaterThan(before);
      // Nothing left to expire: the next sync changes nothing.
      expect((await tracker.sync()).changes).toEqual([]);
    });

    it('refuses to start when two plugins report the same class on one provider, naming both', async () => {
      const tracker = await bench.tracker(
        bench.config({ store: bench.storeOptions(), resources: [...basics(), counting({ name: 'cpu2', resourceClass: 'VCPU', total: 4 })] }),
      );
      await expect(tracker.start()).rejects.toMatchObject({
        code: TrackerErrorCodes.INVENTORY_CONFLICT,
        details: { provider: 'host1', resourceClass: 'VCPU', plugins: ['cpu', 'cpu2'] },
      });
    });

    it('marks other hosts stale whose last update is older than staleAfter', async () => {
      const store = await bench.openStore(bench.storeOptions());
      const now = 10_000_000;
      await store.createProvider({ uuid: providerUuid('old'), name: 'old' });
      await store.upsertHost({ name: 'old', rootProviderUuid: providerUuid('old'), status: 'up', lastUpdate: now - 181_000 });
      await store.createProvider({ uuid: providerUuid('fresh'), name: 'fresh' });
      await store.upsertHost({ name: 'fresh', rootProviderUuid: providerUuid('fresh'), status: 'up', lastUpdate: now - 179_000 });
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: basics(), staleAfter: '3m' }), store, { clock: { now: () => now } });
      const report = await tracker.sync();
      expect(report.staleHosts).toEqual(['old']);
      expect((await store.getHost('old'))!.status).toBe('stale');
      expect((await store.getHost('fresh'))!.status).toBe('up');
      expect((await store.getHost('host1'))!.status).toBe('up');
    });
  });

  it('start() re-syncs every interval: discover again, reset, re-add live instances, write what changed, touch the host', async () => {
    const store = await bench.openStore(bench.storeOptions());
    const journal: string[] = [];
    const shape = { total: 8 };
    let now = 5_000_000;
    const config = bench.config({ store: bench.storeOptions(), resources: [counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, shape, journal }), counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096 })] });
    const tracker = await bench.tracker({ ...config, tracker: { ...config.tracker, interval: 20, enforce: ['cpu'] } }, store, { clock: { now: () => now } });
    const updated: InstanceEvent[] = [];
    tracker.on('updated', (e) => updated.push(e));
    await tracker.start();
    const req = request(2, 256);
    ok(await tracker.claim(req));
    expect(journal).toContain(`cpu.enforce:claimed:${req.uuid}`);
    journal.length = 0;
    shape.total = 12;
    now += 60_000;
    await vi.waitFor(async () => expect((await store.getInventories(providerUuid('host1'))).inventories['VCPU']!.total).toBe(12), { timeout: 10_000, interval: 20 });
    await vi.waitFor(() => expect(journal.join(',')).toContain(`cpu.discover,cpu.reset,cpu.add:${req.uuid}`), { timeout: 10_000, interval: 20 });
    await vi.waitFor(async () => expect((await store.getHost('host1'))!.lastUpdate).toBe(now), { timeout: 10_000, interval: 20 });
    await vi.waitFor(() => expect(tracker.lastSync).toMatchObject({ instances: 1, changes: [] }), { timeout: 10_000, interval: 20 });
    await tracker.stop();
    // Periodic updates re-add the live instance but emit nothing: enforcement is re-applied
    // on start() only (the restart test checks that), not every interval.
    expect(journal.filter((j) => j.includes('.add:')).length).toBeGreaterThanOrEqual(2);
    expect(updated).toEqual([]);
    expect(journal.filter((j) => j.startsWith('cpu.enforce:'))).toEqual([]);
    const calls = journal.length;
    await new Promise((r) => setTimeout(r, 100));
    expect(journal.length).toBe(calls); // no update after stop()
  });

  describe('provider config files', () => {
    it('adds operator inventories and traits, and a nested provider under the host', async () => {
      const dir = await bench.providerDir({
        'a.yaml': `schema_version: "1.0"
providers:
  - identification: { name: "$HOST" }
    inventories: { additional: [ { CUSTOM_LICENSE: { total: 3, max_unit: 1 } } ] }
    traits: { additional: [CUSTOM_RACK_A] }
  - identification: { name: fpga }
    parent: "$HOST"
    inventories: { additional: [ { CUSTOM_FPGA: { total: 2 } } ] }
  - identification: { name: cache_0 }
    traits: { additional: [CUSTOM_MANAGED] }
`,
      });
      const store = await bench.openStore(bench.storeOptions());
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [...basics(), ways()], providerConfigs: dir }), store);
      const report = await tracker.start();
      expect(report.problems).toEqual([]);
      const root = await store.getInventories(providerUuid('host1'));
      expect(root.inventories['CUSTOM_LICENSE']).toEqual({ total: 3, reserved: 0, minUnit: 1, maxUnit: 1, stepSize: 1, allocationRatio: 1 });
      expect(await store.getTraits(providerUuid('host1'))).toContain('CUSTOM_RACK_A');
      expect((await store.getProvider(providerUuid('host1_fpga')))!.parentUuid).toBe(providerUuid('host1'));
      expect((await store.getInventories(providerUuid('host1_fpga'))).inventories['CUSTOM_FPGA']!.total).toBe(2);
      expect(await store.getTraits(providerUuid('host1_cache_0'))).toContain('CUSTOM_MANAGED');
      // Operator classes are claimable like any other.
      ok(await tracker.claim(request(1, 128, { 'resources:CUSTOM_FPGA': '1' })));
      expect((await usage(store, 'host1'))['CUSTOM_FPGA']).toBe(1);
    });

    it('skips and reports an entry that matches no provider of this host', async () => {
      const dir = await bench.providerDir({ 'other-kind.yaml': 'schema_version: "1.0"\nproviders:\n  - identification: { name: gpu_0 }\n    traits: { additional: [CUSTOM_GPU] }\n' });
      const store = await bench.openStore(bench.storeOptions());
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: basics(), providerConfigs: dir }), store);
      const report = await tracker.start();
      expect(report.problems).toEqual([expect.objectContaining({ code: TrackerErrorCodes.PROVIDER_CONFIG_UNMATCHED, file: `${dir}/other-kind.yaml` })]);
      expect(report.discovery.providerConfigs).toEqual({ entries: 1, unmatched: [{ file: `${dir}/other-kind.yaml`, index: 0, identification: { name: 'gpu_0' } }] });
      expect(report.discovery.providers.map((p) => p.name)).toEqual(['host1']);
    });

    it('stops start-up when an entry adds a class a plugin reports, naming file and entry', async () => {
      const dir = await bench.providerDir({
        'x.yaml': 'schema_version: "1.0"\nproviders:\n  - identification: { name: cache_1 }\n    inventories: { additional: [ { CUSTOM_WAYS: { total: 4 } } ] }\n',
      });
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [...basics(), ways()], providerConfigs: dir }));
      const err = await tracker.start().then(() => undefined, (e: unknown) => e as { code: string; message: string; details: Record<string, unknown> });
      expect(err?.code).toBe(TrackerErrorCodes.PROVIDER_CONFIG_CONFLICT);
      expect(err?.message).toContain('x.yaml providers[0] (name=cache_1)');
      expect(err?.details).toMatchObject({ index: 0, resourceClass: 'CUSTOM_WAYS', owner: 'ways' });
    });

    it.each([
      ['a malformed file', 'schema_version: "1.0"\nproviders: [ {\n', TrackerErrorCodes.PROVIDER_CONFIG_INVALID],
      ['an unknown key', 'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    extra: 1\n', TrackerErrorCodes.PROVIDER_CONFIG_INVALID],
      ['a non-CUSTOM class', 'schema_version: "1.0"\nproviders:\n  - identification: { name: "$HOST" }\n    inventories: { additional: [ { DISK_GB: { total: 1 } } ] }\n', TrackerErrorCodes.PROVIDER_CONFIG_INVALID],
    ])('createTracker refuses %s in a provider config file', async (_label, text, code) => {
      const dir = await bench.providerDir({ 'bad.yaml': text });
      await expect(bench.tracker(bench.config({ store: bench.storeOptions(), resources: basics(), providerConfigs: dir }))).rejects.toMatchObject({
        code,
        message: expect.stringContaining('bad.yaml'),
      });
    });

    it('createTracker refuses a provider described in two files', async () => {
      const dir = await bench.providerDir({
        '1.yaml': 'schema_version: "1.0"\nproviders:\n  - identification: { name: fpga }\n    parent: "$HOST"\n',
        '2.yaml': 'schema_version: "1.0"\nproviders:\n  - identification: { name: fpga }\n',
      });
      await expect(bench.tracker(bench.config({ store: bench.storeOptions(), resources: basics(), providerConfigs: dir }))).rejects.toMatchObject({
        code: TrackerErrorCodes.PROVIDER_CONFIG_DUPLICATE,
      });
    });
  });

  describe('claims', () => {
    async function started(resources: unknown[], extra: Parameters<Bench['config']>[0] extends infer C ? Partial<C> : never = {}) {
      const store = await bench.openStore(bench.storeOptions());
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: resources as never, ...extra }), store);
      await tracker.start();
      return { store, tracker };
    }

    it('claims atomically: allocations and instance record written, views, stats and events updated', async () => {
      const journal: string[] = [];
      const { store, tracker } = await started(basics({}, journal));
      const events: InstanceEvent[] = [];
      tracker.on('claimed', (e) => events.push(e));
      const req = request(2, 1024);
      const result = ok(await tracker.claim(req));
      expect(result.allocations.sort((a, b) => a.resourceClass.localeCompare(b.resourceClass))).toEqual([
        { providerUuid: providerUuid('host1'), resourceClass: 'MEMORY_MB', amount: 1024 },
        { providerUuid: providerUuid('host1'), resourceClass: 'VCPU', amount: 2 },
      ]);
      expect((await store.getAllocations(req.uuid)).allocations).toHaveLength(2);
      expect(await store.getInstance(req.uuid)).toMatchObject({ host: 'host1', state: 'active', flavor: req.flavor });
      expect((await store.readStats('host1'))['cpu']!.data).toEqual({ used: 2, instances: [req.uuid] });
      expect(journal.filter((j) => j.endsWith(req.uuid))).toEqual(['cpu.test:' + req.uuid, 'mem.test:' + req.uuid, 'cpu.add:' + req.uuid, 'mem.add:' + req.uuid]);
      expect(events).toEqual([expect.objectContaining({ type: 'claimed', host: 'host1', instance: expect.objectContaining({ uuid: req.uuid }) })]);
      expect(events[0]!.instance.allocations).toEqual(expect.arrayContaining([{ providerName: 'host1', resourceClass: 'VCPU', amount: 2 }]));
    });

    it('collects every plugin\u2019s reason and writes nothing', async () => {
      const { store, tracker } = await started(basics());
      const req = request(9, 5000);
      const reasons = refused(await tracker.claim(req));
      expect(reasons).toEqual([
        { plugin: 'cpu', reason: 'cpu: needs 9 VCPU, 8 free' },
        { plugin: 'mem', reason: 'mem: needs 5000 MEMORY_MB, 4096 free' },
      ]);
      expect((await store.getAllocations(req.uuid)).allocations).toEqual([]);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
    });

    it.each([
      ['throws', 'throw', /mem.*test/],
      ['hangs past its timeout', 'hang', /did not finish within 300 ms/],
      ['returns garbage', 'garbage', /invalid result/],
    ])('fails closed when a plugin\u2019s test %s, naming the plugin', async (_label, fault, message) => {
      const { store, tracker } = await started(basics({ mem: { test: fault } }));
      const req = request(1, 128);
      const reasons = refused(await tracker.claim(req));
      expect(reasons).toEqual([{ plugin: 'mem', reason: expect.stringMatching(message) }]);
      expect(reasons[0]!.reason).toContain('mem');
      expect((await store.getAllocations(req.uuid)).allocations).toEqual([]);
    });

    it('refuses a grant that is not a ClaimGrant', async () => {
      const { tracker } = await started([...basics(), ways({ faults: { test: 'garbage' } })]);
      expect(refused(await tracker.claim(request(1, 128)))).toEqual([{ plugin: 'ways', reason: expect.stringMatching(/allocations must be a list/) }]);
    });

    it('refuses an extra spec key no plugin owns, naming it', async () => {
      const { tracker } = await started(basics());
      const reasons = refused(await tracker.claim(request(1, 128, { 'bogus:key': '1' })));
      expect(reasons).toHaveLength(1);
      expect(reasons[0]!.reason).toContain('bogus:key');
    });

    it('refuses what placement cannot fit (a class nobody has) with placement\u2019s reason', async () => {
      const { store, tracker } = await started(basics());
      const req = { ...request(1, 128), flavor: { ...flavor(1, 128), diskGb: 10 } };
      const reasons = refused(await tracker.claim(req));
      expect(reasons[0]!.reason).toMatch(/DISK_GB/);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
    });

    it('places plugin grants on nested providers, stores assignments and passes ert:policy untouched', async () => {
      const policies: unknown[] = [];
      const { store, tracker } = await started([...basics(), ways({ domains: 2, perDomain: 4, policies })]);
      const a = ok(await tracker.claim(request(1, 128, { 'ways:count': '3', 'ert:policy': 'gold; tier=1' })));
      expect(policies).toContain('gold; tier=1');
      expect(a.allocations).toContainEqual({ providerUuid: providerUuid('host1_cache_0'), resourceClass: 'CUSTOM_WAYS', amount: 3 });
      expect(a.record.assignments).toEqual({ ways: { domain: 0, mask: 0b0111 } });
      expect((await store.getInstance(a.instance.uuid))!.assignments).toEqual({ ways: { domain: 0, mask: 0b0111 } });
      const b = ok(await tracker.claim(request(1, 128, { 'ways:count': '2' })));
      expect(b.record.assignments).toEqual({ ways: { domain: 1, mask: 0b0011 } });
      expect((await store.readStats('host1'))['ways']!.data).toEqual({ domains: [{ used: 0b0111 }, { used: 0b0011 }] });
      expect(refused(await tracker.claim(request(1, 128, { 'ways:count': '3' })))).toEqual([{ plugin: 'ways', reason: 'ways: no cache domain has 3 contiguous free ways' }]);
    });

    it('adopts allocations the scheduler wrote for the instance instead of counting them twice', async () => {
      const { store, tracker } = await started(basics());
      const req = request(6, 1024);
      await store.writeAllocations([
        {
          consumer: { uuid: req.uuid, projectId: 'p1', userId: 'u1', generation: null },
          allocations: [
            { providerUuid: providerUuid('host1'), resourceClass: 'VCPU', amount: 6 },
            { providerUuid: providerUuid('host1'), resourceClass: 'MEMORY_MB', amount: 1024 },
          ],
          instance: { uuid: req.uuid, host: 'host1', projectId: 'p1', userId: 'u1', flavor: req.flavor, state: 'scheduled', assignments: {} },
        },
      ]);
      // 6 of 8 VCPU are already used by this very consumer: only adoption lets it fit.
      ok(await tracker.claim(req));
      expect(await usage(store, 'host1')).toEqual({ VCPU: 6, MEMORY_MB: 1024 });
      expect((await store.getInstance(req.uuid))!.state).toBe('active');
      refused(await tracker.claim(req));
    });

    it('serializes concurrent claims: the plugins never see two interleaved, and capacity holds', async () => {
      const journal: string[] = [];
      const { store, tracker } = await started(basics({}, journal));
      const requests = Array.from({ length: 6 }, () => request(3, 256));
      journal.length = 0;
      const results = await Promise.all(requests.map((r) => tracker.claim(r)));
      expect(results.filter((r) => r.ok)).toHaveLength(2); // 8 VCPU / 3
      expect((await usage(store, 'host1'))['VCPU']).toBe(6);
      // Each claim's tests run before the next claim starts.
      const order = journal.filter((j) => j.startsWith('cpu.test') || j.startsWith('cpu.add')).map((j) => j.split(':')[1]);
      const firstSeen = [...new Set(order)];
      expect(firstSeen).toEqual(requests.map((r) => r.uuid));
      for (const uuid of firstSeen) {
        const idx = order.flatMap((u, i) => (u === uuid ? [i] : []));
        expect(idx[idx.length - 1]! - idx[0]!).toBe(idx.length - 1); // contiguous
      }
    });

    it('releases: allocations, instance record and views are gone; unknown instances are a no-op', async () => {
      const { store, tracker } = await started(basics());
      const events: string[] = [];
      tracker.on('released', (e) => events.push(e.instance.uuid));
      const req = request(2, 256);
      ok(await tracker.claim(req));
      expect(await tracker.release(req.uuid)).toEqual({ released: true, problems: [] });
      expect((await store.getAllocations(req.uuid)).allocations).toEqual([]);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
      expect((await store.readStats('host1'))['cpu']!.data).toEqual({ used: 0, instances: [] });
      expect(events).toEqual([req.uuid]);
      expect(await tracker.release(req.uuid)).toEqual({ released: false, problems: [] });
    });

    it('resize holds old and new amounts until confirmed', async () => {
      const { store, tracker } = await started(basics());
      const req = request(2, 512);
      ok(await tracker.claim(req));
      const resized = ok(await tracker.resize(req.uuid, flavor(4, 1024)));
      expect(resized.record.state).toBe('resizing');
      expect(await usage(store, 'host1')).toEqual({ VCPU: 6, MEMORY_MB: 1536 });
      expect((await store.readStats('host1'))['cpu']!.data).toMatchObject({ used: 6 });
      // Too big while both are held:
      refused(await tracker.claim(request(3, 128)));
      const confirmed = ok(await tracker.confirmResize(req.uuid));
      expect(confirmed.record).toMatchObject({ state: 'active', flavor: flavor(4, 1024) });
      expect(confirmed.record.previousFlavor).toBeUndefined();
      expect(await usage(store, 'host1')).toEqual({ VCPU: 4, MEMORY_MB: 1024 });
      expect((await store.readStats('host1'))['cpu']!.data).toEqual({ used: 4, instances: [req.uuid] });
      expect((await store.listInstances({ host: 'host1' })).map((i) => i.uuid)).toEqual([req.uuid]);
    });

    it('revertResize restores the old flavor, allocations and assignments', async () => {
      const { store, tracker } = await started([...basics(), ways({ domains: 1, perDomain: 8 })]);
      const events: InstanceEvent[] = [];
      tracker.on('resized', (e) => events.push(e));
      const req = request(2, 512, { 'ways:count': '2' });
      const before = ok(await tracker.claim(req));
      const usageBefore = await usage(store, 'host1');
      ok(await tracker.resize(req.uuid, flavor(3, 512, { 'ways:count': '4' })));
      expect((await usage(store, 'host1'))['CUSTOM_WAYS']).toBe(6);
      const reverted = ok(await tracker.revertResize(req.uuid));
      expect(reverted.record).toMatchObject({ state: 'active', flavor: req.flavor, assignments: before.record.assignments });
      expect(await usage(store, 'host1')).toEqual(usageBefore);
      expect((await store.readStats('host1'))['ways']!.data).toEqual({ domains: [{ used: 0b11 }] });
      expect(events.map((e) => [e.instance.request.flavor.vcpus, e.previous?.request.flavor.vcpus])).toEqual([
        [3, 2],
        [2, 3],
      ]);
      refused(await tracker.revertResize(req.uuid));
    });

    it('reports enforcement failures under the report policy, and only calls enabled plugins', async () => {
      const journal: string[] = [];
      const { tracker } = await started(basics({ cpu: { enforce: 'throw' } }, journal), { enforce: ['cpu'], enforcementFailure: 'report' });
      const req = request(1, 128);
      const result = ok(await tracker.claim(req));
      expect(result.problems).toEqual([expect.objectContaining({ plugin: 'cpu', hook: 'enforce', code: 'ERT_PLUGIN_HOOK_FAILED' })]);
      expect(journal).toContain(`cpu.enforce:claimed:${req.uuid}`);
      expect(journal.some((j) => j.startsWith('mem.enforce'))).toBe(false);
    });

    it('undoes the claim when enforcement fails under the undo policy', async () => {
      const { store, tracker } = await started(basics({ mem: { enforce: 'throw' } }), { enforce: ['cpu', 'mem'], enforcementFailure: 'undo' });
      const req = request(1, 128);
      const reasons = refused(await tracker.claim(req));
      expect(reasons).toEqual([{ plugin: 'mem', reason: expect.stringContaining('enforcement by plugin mem failed') }]);
      expect((await store.getAllocations(req.uuid)).allocations).toEqual([]);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
      expect((await store.readStats('host1'))['cpu']!.data).toEqual({ used: 0, instances: [] });
    });

    it('enforce sees the plugin\u2019s own assignment', async () => {
      const journal: string[] = [];
      const { tracker } = await started([...basics(), ways({ journal })], { enforce: ['ways'] });
      ok(await tracker.claim(request(1, 128, { 'ways:count': '2' })));
      expect(journal).toContain('ways.enforce:claimed:{"domain":0,"mask":3}');
    });

    it('takes pinned CPUs from a grant, stores them and passes them to every plugin, in events and to enforce', async () => {
      const journal: string[] = [];
      const { store, tracker } = await started([...basics(), pinning({ journal }), ways({ journal })], { enforce: ['pin', 'ways'] });
      const events: InstanceEvent[] = [];
      tracker.on('claimed', (e) => events.push(e));
      tracker.on('released', (e) => events.push(e));
      const pinned = ok(await tracker.claim(request(2, 128, { 'pin:cpus': '3', 'ways:count': '1' })));
      // The fixture grants [2, 1, 0]: the tracker sorts them.
      expect(pinned.instance.cpus).toEqual([0, 1, 2]);
      expect(pinned.record.cpus).toEqual([0, 1, 2]);
      expect((await store.getInstance(pinned.instance.uuid))!.cpus).toEqual([0, 1, 2]);
      const floating = ok(await tracker.claim(request(1, 128, { 'ways:count': '1' })));
      expect(floating.instance.cpus).toBeUndefined();
      expect((await store.getInstance(floating.instance.uuid))!.cpus).toBeUndefined();
      expect((await store.readStats('host1'))['pin']!.data).toEqual({ pinned: { [pinned.instance.uuid]: [0, 1, 2] } });
      expect(journal).toContain(`pin.enforce:claimed:${pinned.instance.uuid}:[0,1,2]`);
      expect(journal).toContain(`pin.enforce:claimed:${floating.instance.uuid}:null`);
      expect((await tracker.release(pinned.instance.uuid)).released).toBe(true);
      expect(events.map((e) => [e.type, e.instance.cpus ?? null])).toEqual([
        ['claimed', [0, 1, 2]],
        ['claimed', null],
        ['released', [0, 1, 2]],
      ]);
      expect((await store.readStats('host1'))['pin']!.data).toEqual({ pinned: {} });
    });

    it('refuses a claim two plugins pin, naming both', async () => {
      const { store, tracker } = await started([...basics(), pinning({ name: 'pin' }), pinning({ name: 'other' })]);
      const req = request(1, 128, { 'pin:cpus': '1', 'other:cpus': '2' });
      expect(refused(await tracker.claim(req))).toEqual([{ plugin: 'other', reason: 'plugins pin and other both granted cpus' }]);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
      ok(await tracker.claim(request(1, 128, { 'other:cpus': '2' })));
    });

    it.each([
      [[1, -1], 'cpus must be a list of CPU numbers (non-negative integers)'],
      [[1, 1], 'cpus must not repeat a CPU'],
      [[], 'cpus must not be empty (leave it out for an instance that is not pinned)'],
    ])('refuses a grant of cpus %j, naming the plugin', async (cpus, message) => {
      const bad = definePlugin({ name: 'bad', resource: () => ({ discover: () => ({ available: true }), test: () => ({ cpus }) }) });
      const { tracker } = await started([...basics(), bad]);
      const reasons = refused(await tracker.claim(request(1, 128)));
      expect(reasons).toEqual([{ plugin: 'bad', reason: expect.stringContaining(message) }]);
      expect(reasons[0]!.reason).toContain('bad');
    });

    // Issue 11, point 6: a plugin cannot pin an instance to CPUs the machine does not have
    // online (read from <root>/sys/devices/system/cpu/online at each discovery). Seen red with
    // the check removed from resolveGrants: the claim was written pinned to CPUs 4 and 5.
    it('refuses a grant of CPUs the host does not have online, naming plugin and hook', async () => {
      await mkdir(path.join(bench.dir, 'sys/devices/system/cpu'), { recursive: true });
      await writeFile(path.join(bench.dir, 'sys/devices/system/cpu/online'), '0-3\n');
      const { store, tracker } = await started([...basics(), pinning({ name: 'pin', cpus: 8 })]);
      expect(ok(await tracker.claim(request(1, 128, { 'pin:cpus': '2' }))).record.cpus).toEqual([0, 1]);
      // The plugin believes in 8 CPUs: it offers 2-5.
      const req = request(1, 128, { 'pin:cpus': '4' });
      expect(refused(await tracker.claim(req))).toEqual([{ plugin: 'pin', reason: 'plugin pin hook test granted cpus 4-5, which host host1 does not have online (0-3)' }]);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
      ok(await tracker.claim(request(1, 128, { 'pin:cpus': '2' })));
    });

    // Issue 11, points 4 and 6: units and pools a plugin names must be well-formed, or the
    // claim is refused naming the plugin (the store would refuse them too, less clearly).
    it.each([
      [{ units: ['a', 'a'] }, 'units must not repeat a unit'],
      [{ units: [3] }, 'units must be a list of non-empty strings'],
      [{ units: ['x'.repeat(201)] }, 'units must be a list of non-empty strings of at most 200 characters'],
      [{ pools: [] }, 'pools must be an object'],
      [{ pools: { p: { amount: 0, capacity: 4 } } }, 'pools.p.amount must be a positive integer'],
      [{ pools: { p: { amount: 5, capacity: 4 } } }, 'pools.p.capacity must be an integer of at least the amount'],
      [{ pools: { p: { amount: Number.NaN, capacity: 4 } } }, 'pools.p.amount must be a positive integer'],
    ])('refuses a grant %j, naming the plugin', async (grant, message) => {
      const bad = definePlugin({ name: 'bad', resource: () => ({ discover: () => ({ available: true }), test: () => grant as never }) });
      const { store, tracker } = await started([...basics(), bad]);
      const req = request(1, 128);
      expect(refused(await tracker.claim(req))).toEqual([{ plugin: 'bad', reason: expect.stringContaining(message) }]);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
    });

    it('records a plugin\'s units and pools with the instance, under the plugin\'s name, and frees them on release', async () => {
      const holder = definePlugin({
        name: 'holder',
        resource: () => ({ discover: () => ({ available: true }), test: () => ({ units: ['slot/1'], pools: { 'pages': { amount: 2, capacity: 3 } } }) }),
      });
      const { store, tracker } = await started([...basics(), holder]);
      const first = ok(await tracker.claim(request(1, 128)));
      expect(await store.getInstance(first.record.uuid)).toMatchObject({ units: ['holder/slot/1'], pools: { 'holder/pages': { amount: 2, capacity: 3 } } });
      // The plugin's view (none here) offers slot 1 again: the store refuses, the retry too.
      const second = request(1, 128);
      expect(refused(await tracker.claim(second))).toEqual([{ reason: expect.stringContaining('cannot take holder/slot/1: instance ' + first.record.uuid + ' holds it') }]);
      await tracker.release(first.record.uuid);
      ok(await tracker.claim(second));
    });

    // Issue 11, point 6. Seen red on: resolveGrants without the ownership check (the claim
    // went through with MEMORY_MB 1 that the cpu plugin decided for the memory plugin).
    it('refuses a grant of a class the granting plugin does not report, naming it', async () => {
      const liar = definePlugin({
        name: 'liar',
        resource: () => ({
          discover: () => ({ available: true, host: { inventories: { CUSTOM_LIAR: { total: 4 } } } }),
          test: () => ({ allocations: [{ resourceClass: 'MEMORY_MB', amount: 1 }] }),
        }),
      });
      const { store, tracker } = await started([...basics(), liar]);
      const req = request(1, 128);
      expect(refused(await tracker.claim(req))).toEqual([{ plugin: 'liar', reason: 'plugin liar granted MEMORY_MB, a class it does not report (it reports CUSTOM_LIAR)' }]);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
      expect(await store.getAllocations(req.uuid)).toEqual({ generation: null, allocations: [] });
    });

    it('reports (does not crash on) plugins that throw in reset, addInstance and removeInstance', async () => {
      const faults: Record<string, string> = {};
      const { tracker } = await started([counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, faults }), counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096 })]);
      faults['addInstance'] = 'throw';
      const req = request(1, 128);
      const claimed = ok(await tracker.claim(req));
      expect(claimed.problems).toEqual([expect.objectContaining({ plugin: 'cpu', hook: 'addInstance' })]);
      faults['reset'] = 'throw';
      const report: SyncReport = await tracker.sync();
      // A plugin whose reset failed is not told the instances: its view is rebuilt before its
      // next test. Seen red with rebuildViews telling every plugin (cpu.addInstance too).
      expect(report.problems.map((p) => `${p.plugin}.${p.hook}`)).toEqual(['cpu.reset']);
      faults['removeInstance'] = 'throw';
      const released = await tracker.release(req.uuid);
      expect(released.released).toBe(true);
      expect(released.problems).toEqual([expect.objectContaining({ plugin: 'cpu', hook: 'removeInstance' })]);
    });

    it('a claim before the first sync throws ERT_TRACKER_HOST_NOT_SYNCED and writes nothing', async () => {
      const store = await bench.openStore(bench.storeOptions());
      const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: basics() }), store);
      const req = request(1, 128);
      await expect(tracker.claim(req)).rejects.toMatchObject({ code: TrackerErrorCodes.HOST_NOT_SYNCED, details: { host: 'host1' } });
      expect(await store.getInstance(req.uuid)).toBeUndefined();
      await tracker.sync();
      ok(await tracker.claim(req));
    });

    it('lists every reason at once: a refusal, a throw and a timeout, each with its plugin', async () => {
      const { store, tracker } = await started([
        counting({ name: 'cpu', resourceClass: 'VCPU', total: 8 }),
        counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096, faults: { test: 'throw' } }),
        counting({ name: 'cu', resourceClass: 'CUSTOM_CU', total: 10, faults: { test: 'hang' } }),
      ]);
      const req = request(9, 128);
      const reasons = refused(await tracker.claim(req));
      expect(reasons.map((r) => r.plugin)).toEqual(['cpu', 'mem', 'cu']);
      expect(reasons[0]!.reason).toBe('cpu: needs 9 VCPU, 8 free');
      expect(reasons[1]!.reason).toMatch(/mem.*test.*mem test exploded/);
      expect(reasons[2]!.reason).toMatch(/cu.*test.*did not finish within 300 ms/);
      expect((await store.getAllocations(req.uuid)).allocations).toEqual([]);
      expect(await store.getInstance(req.uuid)).toBeUndefined();
    });

    it('keeps the flavor and its extra specs with the instance, and gives ert:policy to the plugins untouched again after a re-sync', async () => {
      const policies: unknown[] = [];
      const { store, tracker } = await started([...basics(), ways({ policies })]);
      const req = request(1, 128, { 'ways:count': '1', 'ert:policy': 'base64:eyJjbG9zIjoxfQ==; opaque=1' });
      ok(await tracker.claim(req));
      expect((await store.getInstance(req.uuid))!.flavor).toEqual(req.flavor);
      policies.length = 0;
      await tracker.sync(); // re-adds the instance from the store
      expect(policies).toEqual(['added base64:eyJjbG9zIjoxfQ==; opaque=1']);
    });

    it('a listener that throws neither breaks the claim nor stops the other listeners', async () => {
      const { tracker } = await started(basics());
      const seen: string[] = [];
      tracker.on('claimed', () => {
        throw new Error('listener bug');
      });
      tracker.on('claimed', (e) => seen.push(e.instance.uuid));
      const req = request(1, 128);
      expect(ok(await tracker.claim(req)).problems).toEqual([]);
      expect(seen).toEqual([req.uuid]);
    });

    it('a resize that does not fit is refused and changes nothing', async () => {
      const { store, tracker } = await started(basics());
      const req = request(2, 512);
      const claimed = ok(await tracker.claim(req));
      const reasons = refused(await tracker.resize(req.uuid, flavor(7, 512))); // 2 held + 7 > 8
      expect(reasons).toEqual([{ plugin: 'cpu', reason: 'cpu: needs 7 VCPU, 6 free' }]);
      expect(await store.getInstance(req.uuid)).toMatchObject({ state: 'active', flavor: req.flavor });
      expect((await store.getInstance(req.uuid))!.migrationUuid).toBeUndefined();
      expect(await usage(store, 'host1')).toEqual({ VCPU: 2, MEMORY_MB: 512 });
      expect((await store.getAllocations(req.uuid)).allocations).toEqual(claimed.allocations);
      refused(await tracker.resize('00000000-0000-4000-8000-ffffffffffff', flavor(1, 128)));
      refused(await tracker.confirmResize(req.uuid));
    });

    // Seen red on: resize() testing the plugins before it moves the old allocation to the
    // migration uuid in their views (a plugin that leaves the instance's own usage out of a
    // resize then accepts, and only the store refuses, naming no plugin: issue 17); resize()
    // not moving the views back after a refusal; resize() writing the migration consumer first.
    it('a resize is tested with the old allocation held under the migration uuid, so a plugin that leaves the instance out still refuses', async () => {
      const cpu = counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, ownLeftOutOnResize: true });
      const { store, tracker } = await started([cpu, counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096 })]);
      const req = request(6, 512);
      ok(await tracker.claim(req));
      expect(refused(await tracker.resize(req.uuid, flavor(4, 512)))).toEqual([{ plugin: 'cpu', reason: 'cpu: needs 4 VCPU, 2 free' }]);
      // The views are back as the store has them: the instance under its own uuid, no migration.
      const other = request(2, 512);
      ok(await tracker.claim(other));
      expect((await store.readStats('host1'))['cpu']!.data).toEqual({ used: 8, instances: [req.uuid, other.uuid].sort() });
      expect((await tracker.release(other.uuid)).released).toBe(true);
      const resized = ok(await tracker.resize(req.uuid, flavor(2, 512)));
      expect(resized.problems).toEqual([]);
      expect((await store.readStats('host1'))['cpu']!.data).toEqual({ used: 8, instances: [req.uuid, (await store.getInstance(req.uuid))!.migrationUuid!].sort() });
    });

    it('undo tells the plugins that did enforce: a released event after a failed claim, a resized one back after a failed resize', async () => {
      const journal: string[] = [];
      const memFaults: Record<string, string> = {};
      const { store, tracker } = await started(basics({ mem: memFaults }, journal), { enforce: ['cpu', 'mem'], enforcementFailure: 'undo' });
      const events: string[] = [];
      for (const type of ['claimed', 'released', 'resized'] as const) tracker.on(type, (e) => events.push(`${e.type}:${e.instance.request.flavor.vcpus}`));

      memFaults['enforce'] = 'throw';
      const failed = request(1, 128);
      refused(await tracker.claim(failed));
      expect(journal.filter((j) => j.startsWith('cpu.enforce'))).toEqual([`cpu.enforce:claimed:${failed.uuid}`, `cpu.enforce:released:${failed.uuid}`]);
      expect(events).toEqual(['claimed:1', 'released:1']);

      delete memFaults['enforce'];
      const req = request(2, 256);
      ok(await tracker.claim(req));
      const usageBefore = await usage(store, 'host1');
      journal.length = 0;
      events.length = 0;
      memFaults['enforce'] = 'throw';
      const reasons = refused(await tracker.resize(req.uuid, flavor(4, 256)));
      expect(reasons).toEqual([{ plugin: 'mem', reason: expect.stringContaining('enforcement by plugin mem failed, resize reverted') }]);
      expect(events).toEqual(['resized:4', 'resized:2']);
      expect(journal.filter((j) => j.startsWith('cpu.enforce'))).toEqual([`cpu.enforce:resized:${req.uuid}`, `cpu.enforce:resized:${req.uuid}`]);
      expect(await store.getInstance(req.uuid)).toMatchObject({ state: 'active', flavor: req.flavor });
      expect(await usage(store, 'host1')).toEqual(usageBefore);
    });

    it.each([
      ['throws', 'throw', 'ERT_PLUGIN_HOOK_FAILED'],
      ['hangs', 'hang', 'ERT_PLUGIN_HOOK_TIMEOUT'],
    ])('a plugin whose stats hook %s is reported; its last stats (now wrong: used 0) expire and the others are written', async (_label, fault, code) => {
      const faults: Record<string, string> = {};
      const { store, tracker } = await started([counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, faults }), counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096 })]);
      faults['stats'] = fault;
      const req = request(1, 256);
      const claimed = ok(await tracker.claim(req));
      expect(claimed.problems).toEqual([expect.objectContaining({ code, plugin: 'cpu', hook: 'stats' })]);
      const stats = await store.readStats('host1');
      expect(stats['cpu']).toBeUndefined();
      expect(stats['mem']!.data).toEqual({ used: 256, instances: [req.uuid] });
    });

    it('stop() goes on when a close hook throws, and a second stop() waits for the same shutdown', async () => {
      const journal: string[] = [];
      const { tracker } = await started(basics({ cpu: { close: 'throw' } }, journal));
      const first = tracker.stop();
      const second = tracker.stop();
      await second;
      expect(journal.slice(-2)).toEqual(['cpu.close', 'mem.close']);
      await first;
      expect(journal.filter((j) => j.endsWith('.close'))).toEqual(['cpu.close', 'mem.close']);
    });

    it('stop() waits for a claim in flight, closes plugins, and refuses later calls', async () => {
      const journal: string[] = [];
      const { tracker } = await started(basics({}, journal));
      const claim = tracker.claim(request(1, 128));
      const stopping = tracker.stop();
      expect((await claim).ok).toBe(true);
      await stopping;
      expect(journal.slice(-2)).toEqual(['cpu.close', 'mem.close']);
      expect(() => tracker.claim(request(1, 128))).toThrow(expect.objectContaining({ code: TrackerErrorCodes.STATE }));
    });
  });
});
