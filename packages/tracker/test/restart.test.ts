import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { configFromObject } from '@ert/core';
import type { InstanceEvent } from '@ert/plugin-api';
import type { Store } from '@ert/store';
import { createTracker, providerUuid } from '../src/index.js';
import { BACKENDS, useBench, flavor, request } from './harness.js';
// @ts-expect-error plain-JS fixtures shared with the child process
import { counting, pinning, ways } from './fixtures/plugins.mjs';

const CHILD = fileURLToPath(new URL('./fixtures/claimer.mjs', import.meta.url));
const BUILT = fileURLToPath(new URL('../dist/index.js', import.meta.url));

/** Everything the store holds about the host's usage, allocations and plugin views. */
async function snapshot(store: Store, host: string, consumers: string[]) {
  const [state] = await store.loadHosts([host]);
  const stats = Object.fromEntries(Object.entries(await store.readStats(host)).map(([k, v]) => [k, { version: v.schemaVersion, data: v.data }]));
  const allocations = Object.fromEntries(
    await Promise.all(consumers.map(async (c) => [c, (await store.getAllocations(c)).allocations.sort((a, b) => `${a.providerUuid}${a.resourceClass}`.localeCompare(`${b.providerUuid}${b.resourceClass}`))] as const)),
  );
  const instances = (await store.listInstances({ host })).map((i) => ({ uuid: i.uuid, state: i.state, assignments: i.assignments, cpus: i.cpus })).sort((a, b) => a.uuid.localeCompare(b.uuid));
  return {
    providers: state!.providers.map((p) => ({ name: p.name, generation: p.generation, inventories: p.inventories, usages: p.usages, traits: [...p.traits].sort() })),
    stats,
    allocations,
    instances,
  };
}

describe.each(BACKENDS)('a restarted tracker on %s', (backend) => {
  const bench = useBench(backend);

  it('rebuilds its view from the store with no drift after kill -9', async () => {
    expect(existsSync(BUILT), `build first: npx tsc -b packages/tracker (${BUILT} is missing)`).toBe(true);
    const storeOptions = bench.storeOptions();
    const requests = [
      request(2, 1024, { 'ways:count': '3', 'pin:cpus': '2' }),
      request(4, 2048),
      request(1, 512, { 'ways:count': '2', 'ert:policy': 'gold', 'pin:cpus': '1' }),
      request(3, 256, { 'ways:count': '4' }),
    ];
    // The resize pins the unpinned instance: its migration record stays unpinned.
    const resize = { uuid: requests[1]!.uuid, flavor: flavor(6, 1024, { 'ways:count': '1', 'pin:cpus': '3' }) };

    const child = spawn(process.execPath, [CHILD], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    child.stdin.write(JSON.stringify({ store: storeOptions, hostName: 'rebooted', root: bench.dir, requests, resize }) + '\n');
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`child exited (${code}) before reporting`)));
    });
    const { claimed } = JSON.parse(line) as { claimed: Array<{ uuid: string; allocations: unknown[]; assignments: unknown }> };
    expect(claimed).toHaveLength(4);
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    const store = await bench.openStore(storeOptions);
    const consumers = [...requests.map((r) => r.uuid), (await store.getInstance(resize.uuid))!.migrationUuid!];
    const before = await snapshot(store, 'rebooted', consumers);
    expect(before.instances.map((i) => i.state).sort()).toEqual(['active', 'active', 'active', 'resizing', 'resizing']);
    const pinnedBefore = { [requests[0]!.uuid]: [0, 1], [requests[2]!.uuid]: [2], [resize.uuid]: [3, 4, 5] };
    expect(Object.fromEntries(before.instances.filter((i) => i.cpus).map((i) => [i.uuid, i.cpus]))).toEqual(pinnedBefore);

    const config = configFromObject(
      {
        store: storeOptions,
        log: { level: 'silent' },
        tracker: {
          hostName: 'rebooted',
          root: bench.dir,
          interval: '1h',
          resources: [counting({ name: 'cpu', resourceClass: 'VCPU', total: 16 }), counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 8192 }), ways({ domains: 2, perDomain: 8 }), pinning({ cpus: 8 })],
        },
      },
      { configDir: bench.dir },
    );
    const tracker = await createTracker({ config, store });
    const updated: InstanceEvent[] = [];
    tracker.on('updated', (e) => updated.push(e));
    try {
      const report = await tracker.start();
      // The plugins' views rebuilt from the store give the very stats the killed tracker wrote.
      expect(report.problems).toEqual([]);
      expect(report.changes).toEqual([]);
      expect(report.instances).toBe(5);
      expect(report.discovery.plugins.map((p) => p.stats?.data)).toEqual([before.stats['cpu']!.data, before.stats['mem']!.data, before.stats['ways']!.data, before.stats['pin']!.data]);
      // The pinned CPUs came back with the instances: in the plugins' views and in the start's `updated` events.
      expect(before.stats['pin']!.data).toEqual({ pinned: pinnedBefore });
      expect(updated.map((e) => e.instance.uuid).sort()).toEqual([...consumers].sort());
      expect(Object.fromEntries(updated.filter((e) => e.instance.cpus).map((e) => [e.instance.uuid, e.instance.cpus]))).toEqual(pinnedBefore);
      const after = await snapshot(store, 'rebooted', consumers);
      expect(after).toEqual(before);
      expect(before.stats['cpu']!.data).toEqual({ used: 2 + 4 + 6 + 1 + 3, instances: [...consumers].sort() });
      expect(after.providers.find((p) => p.name === 'rebooted')!.usages).toEqual({ VCPU: 16, MEMORY_MB: 1024 + 2048 + 1024 + 512 + 256 });

      // And the rebuilt views keep deciding correctly: the cache has 8+8 ways, 3+2+4+1 held
      // (plus the resize's old ones) -- and the resize can still be confirmed.
      const confirmed = await tracker.confirmResize(resize.uuid);
      expect(confirmed).toMatchObject({ ok: true, instance: { cpus: [3, 4, 5] }, record: { cpus: [3, 4, 5] } });
      const leftover = await tracker.claim(request(1, 128, { 'ways:count': '6' }));
      expect(leftover).toEqual({ ok: false, reasons: [{ plugin: 'ways', reason: 'ways: no cache domain has 6 contiguous free ways' }] });
      expect((await tracker.claim(request(1, 128, { 'ways:count': '4' }))).ok).toBe(true);
      expect((await store.getInventories(providerUuid('rebooted'))).inventories['VCPU']!.total).toBe(16);
    } finally {
      await tracker.stop();
    }
  });
});
