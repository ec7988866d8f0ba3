/*
 * Cold migration and evacuation between two hosts (two trackers, one SQLite store, the five
 * real plugins on host profiles): the lifecycle invariant (docs/lifecycle.md, `violations()`)
 * holds on both hosts after every step -- each host's usage within capacity and equal to the
 * allocations of its records, the source's allocations held on the migration consumer until
 * confirm, revert or (evacuation) the source's return, and every running tracker's plugin
 * views equal to what the store holds once it has updated (`sync`, its periodic update).
 */
import { describe, expect, it } from 'vitest';
import type { Flavor } from '@ert/plugin-api';
import { migrationUuid } from '../src/index.js';
import { ok, refused, useBench } from './harness.js';
import { newUuid, realFlavor, realHost, violations, type Profile, type RealHost } from './real-host.js';

async function holds(...hosts: RealHost[]): Promise<void> {
  for (const host of hosts) expect(await violations(host), host.hostName).toEqual([]);
}
/** Usage of every class summed over a host's providers. */
async function usage(host: RealHost): Promise<Record<string, number>> {
  const [snapshot] = await host.store.loadHosts([host.hostName]);
  const out: Record<string, number> = {};
  for (const p of snapshot!.providers) for (const [cls, n] of Object.entries(p.usages)) if (n > 0) out[cls] = (out[cls] ?? 0) + n;
  return out;
}

const GB = 1024;
const MIXED: Flavor = realFlavor('mixed', 2, 8 * GB, { 'llc:ways': '4', 'hw:cpu_policy': 'dedicated', 'cu:units': '40', 'hw:mem_page_size': '1GB' });

describe('migration and evacuation between hosts with the real plugins', () => {
  const bench = useBench('sqlite3');

  async function pair(source: Profile, destination: Profile): Promise<[RealHost, RealHost]> {
    const options = bench.storeOptions();
    const store = await bench.openStore(options);
    const src = await realHost(bench, source, { hostName: 'src', shared: { store, options } });
    const dst = await realHost(bench, destination, { hostName: 'dst', shared: { store, options } });
    return [src, dst];
  }

  // Seen red on: the source's rebuildViews deleting a migration record whose instance is on
  // another host (the old orphan rule): the held source allocations vanished before confirm.
  it('cold migration, confirmed: the source holds the old allocation on the migration consumer until confirm', async () => {
    const [src, dst] = await pair('xeon-4s-numa', 'xeon-4s-numa');
    const uuid = newUuid();
    ok(await src.tracker.claim({ uuid, projectId: 'p', userId: 'u', flavor: MIXED }));
    const before = await usage(src);
    await holds(src, dst);

    const moved = ok(await dst.tracker.migrate(uuid));
    expect(moved.record).toMatchObject({ host: 'dst', state: 'resizing', migrationUuid: migrationUuid(uuid) });
    expect(await store(src).getInstance(migrationUuid(uuid))).toMatchObject({ host: 'src', state: 'resizing' });
    expect(await usage(src)).toEqual(before);
    expect(await usage(dst)).toEqual(before);
    await src.tracker.sync(); // the source's periodic update re-keys its views
    await holds(src, dst);
    await src.restart();
    await holds(src, dst);

    ok(await dst.tracker.confirmResize(uuid));
    await src.tracker.sync();
    expect(await usage(src)).toEqual({});
    expect(await usage(dst)).toEqual(before);
    expect(await store(src).getInstance(uuid)).toMatchObject({ host: 'dst', state: 'active' });
    expect((await store(src).getInstance(uuid))!.migrationUuid).toBeUndefined();
    await holds(src, dst);
  });

  // Seen red on: revert adding the reverted instance to the destination's views (the
  // destination's plugins kept counting an instance that went back to the source).
  it('cold migration, reverted: the instance goes back to the source with its old assignments and CPUs', async () => {
    const [src, dst] = await pair('xeon-2s-cat', 'xeon-4s-numa');
    const flavor = realFlavor('mixed2', 2, 8 * GB, { 'llc:ways': '4', 'hw:cpu_policy': 'dedicated', 'cu:units': '40' });
    const uuid = newUuid();
    const claimed = ok(await src.tracker.claim({ uuid, projectId: 'p', userId: 'u', flavor }));
    ok(await dst.tracker.migrate(uuid));
    await src.tracker.sync();
    await holds(src, dst);
    const reverted = ok(await dst.tracker.revertResize(uuid));
    expect(reverted.record).toMatchObject({ host: 'src', state: 'active', assignments: claimed.record.assignments, cpus: claimed.record.cpus });
    await src.tracker.sync();
    expect(await usage(dst)).toEqual({});
    await holds(src, dst);
    expect((await src.tracker.release(uuid)).released).toBe(true);
    expect(await usage(src)).toEqual({});
    await holds(src, dst);
  });

  // Seen red on: releaseLocked removing only the record's migration uuid from the plugins
  // (after a revert the record has none, but the source's plugins, updated during the move,
  // still held the old allocation under it until their next update).
  it('cold migration reverted, then released on the source before its next update: the source\'s views let go of everything', async () => {
    const [src, dst] = await pair('xeon-2s-cat', 'xeon-4s-numa');
    const flavor = realFlavor('mixed3', 2, 8 * GB, { 'llc:ways': '4', 'hw:cpu_policy': 'dedicated', 'cu:units': '40' });
    const uuid = newUuid();
    ok(await src.tracker.claim({ uuid, projectId: 'p', userId: 'u', flavor }));
    ok(await dst.tracker.migrate(uuid));
    await src.tracker.sync(); // the source's views now hold the old allocation under the migration uuid
    ok(await dst.tracker.revertResize(uuid));
    expect((await src.tracker.release(uuid)).released).toBe(true); // no update of the source in between
    expect(await usage(src)).toEqual({});
    await holds(src, dst);
  });

  it('a migration that does not fit on the destination is refused by its plugin and changes nothing', async () => {
    const [src, dst] = await pair('xeon-4s-numa', 'xeon-2s-cat');
    const uuid = newUuid();
    ok(await src.tracker.claim({ uuid, projectId: 'p', userId: 'u', flavor: MIXED }));
    const reasons = refused(await dst.tracker.migrate(uuid)); // xeon-2s-cat has no 1 GB pages
    expect(reasons).toEqual([{ plugin: 'memory', reason: expect.stringContaining('hw:mem_page_size') }]);
    expect(await store(src).getInstance(uuid)).toMatchObject({ host: 'src', state: 'active' });
    expect(await usage(dst)).toEqual({});
    await holds(src, dst);
    expect(refused(await src.tracker.migrate(uuid))[0]!.reason).toMatch(/only an active instance of another host/);
  });

  // Seen red on: rebuildViews treating an evacuated instance's migration record as pending
  // (kept: the returning source host held the old allocation for ever).
  it('evacuation: refused while the source is up; from a down host the old allocation stays held until the source returns', async () => {
    const [src, dst] = await pair('xeon-4s-numa', 'xeon-4s-numa');
    const uuid = newUuid();
    ok(await src.tracker.claim({ uuid, projectId: 'p', userId: 'u', flavor: MIXED }));
    const before = await usage(src);
    expect(refused(await dst.tracker.evacuate(uuid))).toEqual([{ reason: expect.stringContaining('host src is up') }]);

    await src.stop();
    await store(src).setHostStatus('src', 'stale');
    const evacuated = ok(await dst.tracker.evacuate(uuid));
    expect(evacuated.record).toMatchObject({ host: 'dst', state: 'active', migrationUuid: migrationUuid(uuid) });
    expect(await usage(src)).toEqual(before); // held on the down host
    expect(await usage(dst)).toEqual(before);
    await holds(src, dst);
    // Until the source is back, the evacuated instance cannot move again.
    expect(refused(await dst.tracker.resize(uuid, MIXED))[0]!.reason).toMatch(/evacuated from host src/);

    const report = await src.restart();
    expect(report.changes).toContain(`released what instance ${uuid} held here before it was evacuated to host dst`);
    expect(await usage(src)).toEqual({});
    expect((await store(src).getInstance(uuid))!.migrationUuid).toBeUndefined();
    await holds(src, dst);
    ok(await dst.tracker.resize(uuid, realFlavor('small', 1, 2 * GB)));
    ok(await dst.tracker.confirmResize(uuid));
    await holds(src, dst);
  });
});

function store(host: RealHost) {
  return host.store;
}
