/*
 * The lifecycle invariant (docs/lifecycle.md) through createTracker with the five real
 * plugins on the host profiles of config/hosts and a real SQLite store: after every step
 * (claim, resize, confirm, revert, release, restart) `violations()` (./real-host.ts) is
 * empty: usage within capacity, the store's usage equal to the records' allocations, and
 * every plugin's own view (pages per node, way masks, CPU sets, counted amounts) equal to
 * what the store holds. A same-host resize holds old and new until confirm or revert (Nova),
 * so one that does not fit beside the old allocation is refused naming the plugin.
 */
import { describe, expect, it } from 'vitest';
import type { Flavor } from '@ert/plugin-api';
import { interceptStore, ok, refused, useBench } from './harness.js';
import { newUuid, realFlavor, realHost, violations, type RealHost } from './real-host.js';


async function claim(host: RealHost, flavor: Flavor): Promise<string> {
  const uuid = newUuid();
  ok(await host.tracker.claim({ uuid, projectId: 'p', userId: 'u', flavor }));
  return uuid;
}

/** The lifecycle invariant holds (docs/lifecycle.md). */
async function holds(host: RealHost): Promise<void> {
  expect(await violations(host)).toEqual([]);
}

async function storeState(host: RealHost) {
  const records = await host.store.listInstances({ host: host.hostName });
  const [snapshot] = await host.store.loadHosts([host.hostName]);
  return {
    records: records.map((r) => ({ ...r, updatedAt: 0 })).sort((a, b) => a.uuid.localeCompare(b.uuid)),
    usages: snapshot!.providers.map((p) => [p.name, p.usages]),
    stats: await host.store.readStats(host.hostName),
  };
}

const GB = 1024;
/** 1 GB pages the memory plugin's view holds, per NUMA node. */
async function claimed1G(host: RealHost): Promise<number[]> {
  const stats = (await host.hooks.get('memory')!.stats!()) as { numaNodes: Array<{ hugePages: Array<{ sizeKb: number; claimed: number }> }> };
  return stats.numaNodes.map((n) => n.hugePages.find((p) => p.sizeKb === 1024 * 1024)!.claimed);
}

describe('the lifecycle invariant with the real plugins', () => {
  const bench = useBench('sqlite3');

  // Seen red on: resize calling place() without the try/catch that restores the views (the
  // plugins kept the instance under its migration uuid and nothing under its own).
  it('a resize whose store read throws leaves the plugins\' views as they were', async () => {
    const options = bench.storeOptions();
    const real = await bench.openStore(options);
    let failNextLoad = false;
    const store = interceptStore(real, async (method, _args, call) => {
      if (method === 'loadHosts' && failNextLoad) {
        failNextLoad = false;
        throw new Error('injected: the store went away during the resize');
      }
      return call();
    });
    const host = await realHost(bench, 'xeon-2s-cat', { shared: { store, options } });
    const uuid = await claim(host, realFlavor('pin2', 2, 2 * GB, { 'hw:cpu_policy': 'dedicated', 'llc:ways': '2' }));
    await holds(host);
    failNextLoad = true;
    await expect(host.tracker.resize(uuid, realFlavor('pin4', 4, 4 * GB, { 'hw:cpu_policy': 'dedicated', 'llc:ways': '3' }))).rejects.toThrow(/injected/);
    expect(failNextLoad).toBe(false); // the fault was reached inside the resize
    await holds(host);
  });

  // Every profile, every step, a restart in the middle of a resize, and back to nothing.
  // Seen red on: the code of issue 17 on cloud-vm, the host without headroom (its revert
  // wrote the instance's old allocation before the migration consumer let go, and the store
  // refused a revert that fits: VCPU needs 2, 1 free of capacity 3); the other profiles have
  // room for that double count and stayed green.
  it.each(['xeon-2s-cat', 'xeon-4s-numa', 'epyc-1s', 'cloud-vm'] as const)('%s: claim, resize, restart, confirm, resize, revert, release keep the invariant', async (profile) => {
    const host = await realHost(bench, profile);
    const [root] = await host.store.loadHosts([host.hostName]);
    const cu = root!.providers[0]!.inventories['CUSTOM_CU']!.total;
    const shared = (vcpus: number, units: number) => realFlavor(`s${vcpus}x${units}`, vcpus, vcpus * GB, { 'cu:units': String(units) });
    const pinned = realFlavor('pinned1', 1, GB, { 'hw:cpu_policy': 'dedicated' });
    const a = await claim(host, shared(1, cu / 4));
    const b = await claim(host, pinned);
    await holds(host);
    ok(await host.tracker.resize(a, shared(2, cu / 2)));
    await holds(host);
    expect((await host.restart()).changes).toEqual([]);
    await holds(host);
    // Held: a's old quarter and new half of the CUs; a quarter and one more does not fit
    // (on cloud-vm, whose 3 shared CPUs are all held, vcpu refuses too).
    expect(refused(await host.tracker.claim({ uuid: newUuid(), projectId: 'p', userId: 'u', flavor: shared(1, cu / 4 + 1) }))).toContainEqual({
      plugin: 'compute-units',
      reason: `CUSTOM_CU: needs ${cu / 4 + 1}, ${cu / 4} free of capacity ${cu}`,
    });
    ok(await host.tracker.confirmResize(a));
    await holds(host);
    ok(await host.tracker.resize(a, shared(1, cu / 2)));
    await holds(host);
    ok(await host.tracker.revertResize(a));
    await holds(host);
    expect((await host.tracker.release(a)).released).toBe(true);
    expect((await host.tracker.release(b)).released).toBe(true);
    await holds(host);
    const [after] = await host.store.loadHosts([host.hostName]);
    for (const p of after!.providers) expect(Object.values(p.usages).every((u) => u === 0), p.name).toBe(true);
  });

  describe('a same-host resize holds the old allocation beside the new one (issue 17)', () => {
    // Seen red on: the code of issue 17 (the tracker tests before moving the old allocation
    // to the migration uuid in the views, and memory leaves the instance's own pages out of a
    // resize): node 0 ended at 64 of 32 1 GB pages. Also on resize() not re-adding the old
    // allocation to the views at all.
    it('1 GB pages on xeon-4s-numa: the new pages come from another node, and a resize with no node left is refused by memory', async () => {
      const host = await realHost(bench, 'xeon-4s-numa');
      const big = (vcpus: number) => realFlavor(`hp${vcpus}`, vcpus, 32 * GB, { 'hw:mem_page_size': '1GB' });
      const a = await claim(host, big(2));
      expect(await claimed1G(host)).toEqual([32, 0, 0, 0]);
      await holds(host);

      ok(await host.tracker.resize(a, big(4)));
      expect(await claimed1G(host)).toEqual([32, 32, 0, 0]);
      await holds(host);
      ok(await host.tracker.revertResize(a));
      expect(await claimed1G(host)).toEqual([32, 0, 0, 0]);
      await holds(host);

      // Every node's 32 pages taken: a resize of one of them has nowhere to go.
      const others = [await claim(host, big(2)), await claim(host, big(2)), await claim(host, big(2))];
      expect(await claimed1G(host)).toEqual([32, 32, 32, 32]);
      const before = await storeState(host);
      const reasons = refused(await host.tracker.resize(a, big(4)));
      expect(reasons).toEqual([{ plugin: 'memory', reason: expect.stringContaining('hw:mem_page_size: no NUMA node has 32 free 1GB huge pages') }]);
      expect(await storeState(host)).toEqual(before);
      expect(await claimed1G(host)).toEqual([32, 32, 32, 32]);
      await holds(host);

      // Releasing one frees its node for the resize; confirming gives the old node back.
      await host.tracker.release(others[1]!);
      ok(await host.tracker.resize(a, big(4)));
      expect(await claimed1G(host)).toEqual([32, 32, 32, 32]);
      await holds(host);
      ok(await host.tracker.confirmResize(a));
      expect(await claimed1G(host)).toEqual([0, 32, 32, 32]);
      await holds(host);
      await host.restart();
      expect(await claimed1G(host)).toEqual([0, 32, 32, 32]);
      await holds(host);
    });

    // Seen red on: the code of issue 17 (llc granted the resize ways and the CLOSID the
    // instance already held: f and 1f both under CLOSID 1, 6 ways free by the plugin, 9 of 11
    // used by the store); resize() not moving the views back after a refusal; resize()
    // writing the migration consumer before the instance (the store refuses the resize of c,
    // counting its 8 ways twice); revert writing the instance before the migration consumer
    // lets go (same); llc listing a domain's instances in insertion order (stats drift).
    it('LLC ways on xeon-2s-cat: old and new masks are disjoint, with their own classes of service; a resize with no room is refused by llc', async () => {
      const host = await realHost(bench, 'xeon-2s-cat');
      const llc = (ways: number) => realFlavor(`llc${ways}`, 2, 2 * GB, { 'llc:ways': String(ways) });
      const a = await claim(host, llc(4));
      const old = (await host.store.getInstance(a))!.assignments['llc'] as { domain: number; mask: string; closid: number };
      expect(old).toEqual({ domain: 0, mask: 'f', closid: 1 });

      const resized = ok(await host.tracker.resize(a, llc(5)));
      const next = resized.record.assignments['llc'] as { domain: number; mask: string; closid: number };
      expect(next.closid).not.toBe(1);
      if (next.domain === old.domain) expect(parseInt(next.mask, 16) & parseInt(old.mask, 16)).toBe(0);
      await holds(host);
      ok(await host.tracker.confirmResize(a));
      await holds(host);

      // 8 + 3 ways on each domain: resizing the 8-way instance to 4 leaves no room beside it.
      await host.tracker.release(a);
      const b = await claim(host, llc(8));
      const c = await claim(host, llc(8));
      await claim(host, llc(3));
      await claim(host, llc(3));
      const before = await storeState(host);
      const reasons = refused(await host.tracker.resize(b, llc(4)));
      expect(reasons).toEqual([{ plugin: 'llc', reason: expect.stringMatching(/ways/) }]);
      expect(await storeState(host)).toEqual(before);
      await holds(host);
      // Revert after a fitting resize restores the old mask and class of service exactly.
      const oldC = (await host.store.getInstance(c))!.assignments['llc'];
      await host.tracker.release(b);
      ok(await host.tracker.resize(c, llc(8)));
      await holds(host);
      const reverted = ok(await host.tracker.revertResize(c));
      expect(reverted.record.assignments['llc']).toEqual(oldC);
      await holds(host);
    });

    // Seen red on: the code of issue 17 (compute-units, vcpu and memory left the instance's
    // own amount out of a resize; placement or the store refused with their own message,
    // naming no plugin); resize() writing the migration consumer first and revert writing
    // the instance first (both count the 6 pinned PCPU twice on a host of 9).
    it('counted amounts: a resize that does not fit beside the old amount is refused by the plugin that counts it, naming the class', async () => {
      const host = await realHost(bench, 'xeon-2s-cat');
      const a = await claim(host, realFlavor('cu300', 2, 2 * GB, { 'cu:units': '300' }));
      expect(refused(await host.tracker.resize(a, realFlavor('cu200', 2, 2 * GB, { 'cu:units': '200' })))).toEqual([
        { plugin: 'compute-units', reason: expect.stringContaining('CUSTOM_CU: needs 200, 100 free of capacity 400') },
      ]);
      await holds(host);
      // 393216 - 512 MB of capacity: 2048 + 200000 held, 191000 more does not fit beside them.
      const m = await claim(host, realFlavor('m200k', 1, 200_000));
      expect(refused(await host.tracker.resize(m, realFlavor('m191k', 1, 191_000)))).toEqual([
        { plugin: 'memory', reason: 'MEMORY_MB: needs 191000, 190656 free of capacity 392704' },
      ]);
      await holds(host);
      // 9 dedicated CPUs (20-27,40): 6 pinned, 6 more do not fit beside them.
      const d = await claim(host, realFlavor('ded6', 6, GB, { 'hw:cpu_policy': 'dedicated' }));
      expect(refused(await host.tracker.resize(d, realFlavor('ded6b', 6, 2 * GB, { 'hw:cpu_policy': 'dedicated' })))).toEqual([
        { plugin: 'vcpu', reason: expect.stringContaining('PCPU: needs 6, 3 free of capacity 9') },
      ]);
      await holds(host);
      // Pinned CPUs come from one NUMA node: 26-27 are what node 1 has left beside the old 20-25.
      const resized = ok(await host.tracker.resize(d, realFlavor('ded2', 2, 2 * GB, { 'hw:cpu_policy': 'dedicated' })));
      const old = (await host.store.getInstance((await host.store.getInstance(d))!.migrationUuid!))!.cpus!;
      expect(resized.record.cpus!.filter((cpu) => old.includes(cpu))).toEqual([]);
      await holds(host);
      await host.restart();
      await holds(host);
      ok(await host.tracker.revertResize(d));
      expect((await host.store.getInstance(d))!.cpus).toEqual(old);
      await holds(host);
    });
  });
});
