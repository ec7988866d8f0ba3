/*
 * Issue 20, point 5: the operator's word in provider config files (docs/provider-config.md):
 * a custom provider under any provider of the host's tree (a plugin's, or one another entry
 * creates, in any order), not only under the root; and aggregates: the memberships the files
 * name are the tracker's (owner `tracker`), put back at every sync and removed when a file
 * stops naming them, while other writers' memberships are kept (docs/ownership.md).
 *
 * Seen red: with buildTree creating nested providers only under `$HOST` (the old rule), the
 * three nested entries were unmatched; with reconcileProvider not writing aggregates, the root
 * was in none; with the memberships replaced by the file's (`setAggregates(..., missing)`), the
 * operator's AGG_C was gone after the sync.
 */
import { describe, expect, it } from 'vitest';
import { providerUuid, TrackerErrorCodes } from '../src/index.js';
import { BACKENDS, request, useBench } from './harness.js';
// @ts-expect-error plain-JS fixtures
import { counting, ways } from './fixtures/plugins.mjs';

const AGG_A = '0a000000-0000-4000-8000-00000000000a';
const AGG_B = '0a000000-0000-4000-8000-00000000000b';
const AGG_C = '0a000000-0000-4000-8000-00000000000c';

const FILE = `schema_version: "1.0"
providers:
  - identification: { name: "$HOST" }
    aggregates: [${AGG_A}]
  - identification: { name: fpga_slot }
    parent: fpga
    inventories: { additional: [ { CUSTOM_FPGA_SLOT: { total: 2 } } ] }
  - identification: { name: fpga }
    parent: "$HOST"
    aggregates: [${AGG_B.toUpperCase()}]
  - identification: { name: cache_0_monitor }
    parent: cache_0
    inventories: { additional: [ { CUSTOM_MON: { total: 1 } } ] }
    traits: { additional: [CUSTOM_MONITORED] }
  - identification: { name: nic_port }
    parent: nic
`;

describe.each(BACKENDS)('provider config files: nested anywhere, aggregates (%s)', (backend) => {
  const bench = useBench(backend);
  const plugins = () => [counting({ name: 'cpu', resourceClass: 'VCPU', total: 8 }), counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096 }), ways()];

  it('creates providers under a plugin\'s provider and under another entry\'s; an entry whose parent is not on this host is reported unmatched', async () => {
    const dir = await bench.providerDir({ 'tree.yaml': FILE });
    const store = await bench.openStore(bench.storeOptions());
    const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: plugins(), providerConfigs: dir }), store);
    const report = await tracker.start();
    expect(report.problems).toEqual([expect.objectContaining({ code: TrackerErrorCodes.PROVIDER_CONFIG_UNMATCHED })]);
    expect(report.discovery.providerConfigs.unmatched).toEqual([{ file: `${dir}/tree.yaml`, index: 4, identification: { name: 'nic_port' } }]);
    expect((await store.getProvider(providerUuid('host1_fpga')))!.parentUuid).toBe(providerUuid('host1'));
    expect((await store.getProvider(providerUuid('host1_fpga_slot')))!.parentUuid).toBe(providerUuid('host1_fpga'));
    expect((await store.getProvider(providerUuid('host1_cache_0_monitor')))!.parentUuid).toBe(providerUuid('host1_cache_0'));
    expect(await store.getTraits(providerUuid('host1_cache_0_monitor'))).toEqual(['CUSTOM_MONITORED']);
    // Claimable like any provider of the tree.
    const claimed = await tracker.claim(request(1, 128, { 'resources:CUSTOM_FPGA_SLOT': '1', 'resources:CUSTOM_MON': '1' }));
    expect(claimed.ok).toBe(true);
    expect((await store.getUsages(providerUuid('host1_fpga_slot')))['CUSTOM_FPGA_SLOT']).toBe(1);
    // A second sync changes nothing.
    expect((await tracker.sync()).changes).toEqual([]);
  });

  // Seen red with the tracker's setAggregates written without { owner } (the operator's AGG_C
  // gone when the file dropped AGG_A), and with the store's owner-scoped setAggregates not
  // keeping the other owners' rows (AGG_C gone at the first sync).
  it('puts providers in the files\' aggregates at every sync, keeps the memberships other writers add, and removes one a file stops naming', async () => {
    const dir = await bench.providerDir({ 'tree.yaml': FILE });
    const store = await bench.openStore(bench.storeOptions());
    const tracker = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: plugins(), providerConfigs: dir }), store);
    const first = await tracker.start();
    expect(first.changes).toEqual(expect.arrayContaining([`aggregates of host1: ${AGG_A}`, `aggregates of host1_fpga: ${AGG_B}`]));
    expect(await store.getAggregates(providerUuid('host1'))).toEqual([AGG_A]);
    expect(await store.getAggregates(providerUuid('host1_fpga'))).toEqual([AGG_B]);

    // An operator adds the host to another aggregate (`ert aggregate add-host`): kept.
    const root = (await store.getProvider(providerUuid('host1')))!;
    await store.setAggregates(root.uuid, root.generation, [AGG_A, AGG_C]);
    for (let i = 0; i < 3; i++) await tracker.sync();
    expect((await store.getAggregates(providerUuid('host1'))).sort()).toEqual([AGG_A, AGG_C]);

    // The file's membership removed by another writer is the tracker's to put back, as a trait it reports.
    const again = (await store.getProvider(providerUuid('host1')))!;
    await store.setAggregates(again.uuid, again.generation, [AGG_C]);
    expect((await tracker.sync()).changes).toContain(`aggregates of host1: ${AGG_A}`);
    expect((await store.getAggregates(providerUuid('host1'))).sort()).toEqual([AGG_A, AGG_C]);
    expect(await store.getAggregates(providerUuid('host1'), { owner: 'tracker' })).toEqual([AGG_A]);

    // The file stops naming AGG_A (a new tracker reads the files at creation): the tracker's
    // membership leaves, the operator's AGG_C stays.
    await tracker.stop();
    const dropped = await bench.providerDir({ 'tree.yaml': FILE.replace(`aggregates: [${AGG_A}]`, 'aggregates: []') });
    const next = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: plugins(), providerConfigs: dropped }), store);
    const report = await next.start();
    expect(report.changes).toContain('aggregates of host1: (none)');
    expect(await store.getAggregates(providerUuid('host1'))).toEqual([AGG_C]);
    expect(await store.getAggregates(providerUuid('host1_fpga'))).toEqual([AGG_B]);
    expect((await next.sync()).changes).toEqual([]);
  });
});
