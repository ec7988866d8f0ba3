/**
 * Two trackers of one host (issue 11, point 4): a restarted agent beside a stale one, or
 * `ert claim` beside `host run`. Each builds its plugins' views from the store when it starts,
 * so the second one's views do not know what the first claims afterwards: its plugins offer the
 * same CPUs, cache ways, class of service and huge pages again. The store refuses them
 * (ERT_STORE_ASSIGNMENT_TAKEN), the tracker re-reads the host's instances and chooses again,
 * and nothing is held twice. Real plugins on the xeon-2s-cat profile, SQLite and PostgreSQL.
 *
 * Mutation seen caught: the llc grant without `units` and the memory grant without `pools`
 * (the store then knows only the pinned CPUs): tracker B's claim was written with tracker A's
 * ways, class of service and 1 GB pages ("held twice" and the way overlap assertions red).
 * The retry removed (the refusal returned at once): B's claim was refused instead of placed.
 */
import { describe, expect, it } from 'vitest';
import type { ClaimRequest, JsonValue, RequestSpec } from '@ert/plugin-api';
import { parseFlavor } from '@ert/placement';
import llc from '@ert/plugin-llc/compute';
import memory from '@ert/plugin-memory/compute';
import vcpu from '@ert/plugin-vcpu/compute';
import type { InstanceRecord } from '@ert/store';
import { BACKENDS, ok, useBench } from './harness.js';
import { newUuid, realFlavor, realHost } from './real-host.js';

const GB = 1024;
/** Two dedicated CPUs. */
const pinned = realFlavor('pinned', 2, 2 * GB, { 'hw:cpu_policy': 'dedicated' });
/** Three cache ways (and a class of service). */
const ways = realFlavor('ways', 2, 2 * GB, { 'llc:ways': '3' });
/** A whole NUMA node's 1 GB pages on xeon-4s-numa (32 per node). */
const node = realFlavor('node-pages', 2, 32 * GB, { 'hw:mem_page_size': '1GB' });

/** Every hold of the records (pinned CPUs, units, pools) with its holders. */
function holders(records: InstanceRecord[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const add = (hold: string, uuid: string) => out.set(hold, [...(out.get(hold) ?? []), uuid]);
  for (const r of records) {
    for (const cpu of r.cpus ?? []) add(`cpu/${cpu}`, r.uuid);
    for (const unit of r.units ?? []) add(unit, r.uuid);
  }
  return out;
}

describe.each(BACKENDS)('two trackers of one host on %s', (backend) => {
  const bench = useBench(backend);

  // Each flavor alone, so that one kind of hold cannot hide another's absence (a CPU refused
  // makes the tracker re-read everything, ways included).
  it.each([
    ['pinned CPUs', pinned],
    ['cache ways and classes of service', ways],
  ])('never hold %s twice', async (_what, flavor) => {
    const storeOptions = bench.storeOptions();
    const store = await bench.openStore(storeOptions);
    const a = await realHost(bench, 'xeon-2s-cat', { hostName: 'twin', shared: { store, options: storeOptions } });
    const b = await realHost(bench, 'xeon-2s-cat', { hostName: 'twin', shared: { store, options: storeOptions } });

    const first = ok(await a.tracker.claim({ uuid: newUuid(), projectId: 'p', userId: 'u', flavor }));
    // B's views were built before A's claim: its plugins would grant exactly what A holds.
    const spec: RequestSpec = parseFlavor(flavor, { keys: [vcpu, memory, llc].flatMap((p) => p.extraSpecs ?? []) });
    const probe: ClaimRequest = { instance: { uuid: newUuid(), projectId: 'p', userId: 'u', flavor }, spec, kind: 'claim' };
    const plugin = flavor === pinned ? 'vcpu' : 'llc';
    const stale = (await b.hooks.get(plugin)!.test!(probe)) as { cpus?: number[]; assignment?: JsonValue };
    if (flavor === pinned) expect(stale.cpus).toEqual(first.record.cpus);
    else expect(stale.assignment).toEqual(first.record.assignments['llc']);

    const second = ok(await b.tracker.claim({ uuid: newUuid(), projectId: 'p', userId: 'u', flavor }));
    // And A, whose views do not know B's claim, claims once more.
    const third = ok(await a.tracker.claim({ uuid: newUuid(), projectId: 'p', userId: 'u', flavor }));

    const records = await store.listInstances({ host: 'twin' });
    expect(records.map((r) => r.uuid).sort()).toEqual([first, second, third].map((c) => c.record.uuid).sort());
    const twice = [...holders(records)].filter(([, uuids]) => uuids.length > 1);
    expect(twice, 'held twice').toEqual([]);
    if (flavor === pinned) {
      for (const r of records) expect(r.cpus).toHaveLength(2);
      return;
    }
    // The way masks of one domain are disjoint (the plugin's assignment, not only the units).
    const masks = records.map((r) => r.assignments['llc'] as { domain: number; mask: string });
    for (const [i, x] of masks.entries()) {
      for (const y of masks.slice(i + 1)) if (x.domain === y.domain) expect(parseInt(x.mask, 16) & parseInt(y.mask, 16), `${x.mask} / ${y.mask}`).toBe(0);
    }
    for (const r of records) {
      expect(r.units!.filter((u) => u.startsWith('llc/L3-'))).toHaveLength(3);
      expect(r.units!.filter((u) => u.startsWith('llc/clos/'))).toHaveLength(1);
    }
  });

  it('never draw a huge page pool beyond its pages', async () => {
    const storeOptions = bench.storeOptions();
    const store = await bench.openStore(storeOptions);
    const a = await realHost(bench, 'xeon-4s-numa', { hostName: 'twin', shared: { store, options: storeOptions } });
    const b = await realHost(bench, 'xeon-4s-numa', { hostName: 'twin', shared: { store, options: storeOptions } });
    const first = ok(await a.tracker.claim({ uuid: newUuid(), projectId: 'p', userId: 'u', flavor: node }));
    expect(first.record.assignments['memory']).toEqual({ node: 0, sizeKb: 1048576, pages: 32 });
    // B's view still has node 0's pages free; the store does not.
    const second = ok(await b.tracker.claim({ uuid: newUuid(), projectId: 'p', userId: 'u', flavor: node }));
    expect(second.record.assignments['memory']).toEqual({ node: 1, sizeKb: 1048576, pages: 32 });
    expect(second.record.pools).toEqual({ 'memory/node1/1048576kB': { amount: 32, capacity: 32 } });
  });
});
