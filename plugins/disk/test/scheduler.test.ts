import { describe, expect, it } from 'vitest';
import type { ConsumerHooks, FilterHooks, HostState } from '@ert/plugin-api';
import disk, { type DiskHostData } from '../src/scheduler.js';
import type { DiskStatsV1 } from '../src/shared.js';
import { hostState, instanceOf, mapContainer, recordingLogger, specOf, withDefaults } from '../../vcpu/test/support.js';

const ctx = () => ({ name: 'disk', options: withDefaults(disk, {}), logger: recordingLogger(), services: mapContainer() });

const fsStats = (provider: string | null, path: string, availableGb: number) => ({
  filesystem: path,
  provider,
  paths: [path],
  totalGb: 1000,
  freeGb: availableGb,
  reservedGb: 0,
  heldGb: 0,
  pendingGb: 0,
  availableGb,
});

const stats = (...filesystems: DiskStatsV1['filesystems']): DiskStatsV1 => ({
  shared: false,
  paths: filesystems.flatMap((f) => f.paths.map((p) => ({ path: p, filesystem: f.filesystem, totalGb: f.totalGb, freeGb: f.freeGb, reservedGb: f.reservedGb }))),
  filesystems,
});

/** A host whose DISK_GB inventory does not limit (the filter's job is the free space now). */
function host(data: DiskHostData | undefined): HostState {
  return hostState('h1', { DISK_GB: { total: 10000 } }, {}, data === undefined ? {} : { disk: data });
}

describe('disk scheduler side', () => {
  it('consume keeps what each filesystem can take now; placed subtracts the DISK_GB allocated there', async () => {
    const consumer = (await disk.consumer!(ctx())) as ConsumerHooks<DiskStatsV1, DiskHostData>;
    expect(consumer.reads).toEqual([1]);
    const h = hostState('h1', {});
    const data = consumer.consume(stats(fsStats('disk_a', '/a', 100), fsStats('disk_b', '/b', 50)), h) as DiskHostData;
    expect(data).toEqual({ filesystems: [{ provider: 'disk_a', paths: ['/a'], availableGb: 100 }, { provider: 'disk_b', paths: ['/b'], availableGb: 50 }] });
    expect(consumer.consume(undefined, h)).toEqual({ filesystems: [] });
    // h1_disk_b is a child of h1: the placement names it by uuid.
    const withChild: HostState = { ...h, providers: [...h.providers, { ...h.providers[0]!, uuid: 'b-uuid', name: 'h1_disk_b', parentUuid: h.rootUuid }] };
    const spec = specOf({ DISK_GB: 30 });
    const after = consumer.placed!(data, { host: 'h1', instance: instanceOf('i', spec), spec, allocations: [{ providerUuid: 'b-uuid', resourceClass: 'DISK_GB', amount: 30 }] }, withChild);
    expect(after.filesystems.map((f) => f.availableGb)).toEqual([100, 20]);
    expect(data.filesystems[1]!.availableGb).toBe(50); // the input is not changed
  });

  it('the filter refuses a host none of whose filesystems can hold the DISK_GB now, naming paths and numbers', async () => {
    const filter = (await disk.filter!(ctx())) as FilterHooks;
    const twenty = specOf({ VCPU: 1, DISK_GB: 20 });
    expect(filter.appliesTo!(specOf({ VCPU: 1 }))).toBe(false);
    expect(filter.appliesTo!(twenty)).toBe(true);
    const data: DiskHostData = { filesystems: [{ provider: 'disk_a', paths: ['/a'], availableGb: 10 }, { provider: 'disk_b', paths: ['/b', '/c'], availableGb: 20 }] };
    expect(filter.filter(host(data), twenty)).toBeUndefined();
    expect(filter.filter(host(data), specOf({ DISK_GB: 21 }))).toBe('disk: needs 21 GB, /a: 10 GB free now; /b, /c: 20 GB free now');
    // No stats (the plugin is unavailable there): the resources filter judges the host.
    expect(filter.filter(host(undefined), specOf({ DISK_GB: 21 }))).toBeUndefined();
  });
});
