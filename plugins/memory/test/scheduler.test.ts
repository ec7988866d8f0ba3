import { describe, expect, it } from 'vitest';
import type { ConsumerHooks, FilterHooks, WeigherHooks } from '@ert/plugin-api';
import memory, { type MemoryHostData } from '../src/scheduler.js';
import { pageSizeKey, parsePageSize, type MemoryStatsV1 } from '../src/shared.js';
import { hostState, instanceOf, mapContainer, recordingLogger, specOf, withDefaults } from '../../vcpu/test/support.js';

const ctx = () => ({ name: 'memory', options: withDefaults(memory, {}), logger: recordingLogger(), services: mapContainer() });
const pool = (sizeKb: number, total: number, free: number, claimed: number) => ({ sizeKb, total, free, surplus: 0, claimed });
const stats: MemoryStatsV1 = {
  totalMb: 65536, freeMb: 60000, defaultHugePageSizeKb: 2048,
  hugePages: [pool(2048, 2048, 1024, 512), pool(1048576, 8, 8, 2)],
  numaNodes: [
    { id: 0, totalMb: 32768, freeMb: 30000, hugePages: [pool(2048, 1024, 512, 0), pool(1048576, 4, 4, 2)] },
    { id: 1, totalMb: 32768, freeMb: 30000, hugePages: [pool(2048, 1024, 512, 512), pool(1048576, 4, 4, 0)] },
  ],
};
const withPages = (memoryMb: number, size: string) => specOf({ MEMORY_MB: memoryMb }, { pluginSpecs: { 'hw:mem_page_size': size } });

describe('memory options', () => {
  it('defaults to 512 MB reserved and ratio 1.0', () => {
    expect(withDefaults(memory, {})).toEqual({ reservedMb: 512, allocationRatio: 1, reservedHugePages: [] });
    expect(() => withDefaults(memory, { reservedMb: -1 })).toThrow(/reservedMb must be >= 0/);
  });
});

describe('hw:mem_page_size', () => {
  it('parses names and sizes (a bare number is KB)', () => {
    expect(parsePageSize('large')).toEqual({ kind: 'large' });
    expect(parsePageSize('any')).toEqual({ kind: 'any' });
    expect(parsePageSize('small')).toEqual({ kind: 'small' });
    expect(parsePageSize('4KB')).toEqual({ kind: 'small' });
    expect(parsePageSize('2MB')).toEqual({ kind: 'size', sizeKb: 2048 });
    expect(parsePageSize('2048')).toEqual({ kind: 'size', sizeKb: 2048 });
    expect(parsePageSize('1GiB')).toEqual({ kind: 'size', sizeKb: 1048576 });
    expect(parsePageSize('1G')).toEqual({ kind: 'size', sizeKb: 1048576 });
    expect(parsePageSize('huge')).toBeUndefined();
    expect(parsePageSize('0')).toBeUndefined();
  });

  it('has a schema pattern that accepts exactly what parsePageSize reads', () => {
    const pattern = new RegExp((pageSizeKey.schema as { pattern: string }).pattern);
    for (const ok of ['small', 'large', 'any', '2MB', '1GB', '2048', '1GiB', '64k']) expect(pattern.test(ok)).toBe(true);
    for (const bad of ['huge', '2TB', '', 'large ']) expect(pattern.test(bad)).toBe(false);
    // A size of 0 is no page size (it read as small pages, dropping an image's page size), and
    // ten digits of GB are no safe integer of kB: both refused by the key's schema.
    for (const bad of ['0', '0MB', '00', '1234567890GB']) {
      expect(pattern.test(bad)).toBe(false);
      expect(parsePageSize(bad)).toBeUndefined();
    }
    expect(parsePageSize('02MB')).toEqual({ kind: 'size', sizeKb: 2048 });
    expect(pageSizeKey.applyResources).toBeUndefined();
  });
});

describe('memory scheduler side', () => {
  it('consumes available pages per node (free less not-yet-started claims) and follows placements', async () => {
    const consumer = (await memory.consumer!(ctx())) as ConsumerHooks<MemoryStatsV1, MemoryHostData>;
    const host = hostState('h1', { MEMORY_MB: { total: 65536, reserved: 512 } }, { MEMORY_MB: 4096 });
    const data = consumer.consume(stats, host) as MemoryHostData;
    expect(data).toEqual({
      freeMb: 60928,
      nodes: [
        { id: 0, pools: [{ sizeKb: 2048, available: 512 }, { sizeKb: 1048576, available: 2 }] },
        { id: 1, pools: [{ sizeKb: 2048, available: 512 }, { sizeKb: 1048576, available: 4 }] },
      ],
    });
    const spec = withPages(3072, '1GB');
    const after = consumer.placed!(data, {
      host: 'h1', instance: instanceOf('i', spec), spec,
      allocations: [{ providerUuid: 'h1-uuid', resourceClass: 'MEMORY_MB', amount: 3072 }],
    }, host);
    expect(after.freeMb).toBe(57856);
    expect(after.nodes[1]!.pools[1]).toEqual({ sizeKb: 1048576, available: 1 });
    expect(data.nodes[1]!.pools[1]).toEqual({ sizeKb: 1048576, available: 4 });
    expect(consumer.consume(undefined, host)).toEqual({ freeMb: 60928, nodes: [] });
  });

  it('keeps reserved pages and pages used outside ert from instances, and never offers more than the kernel has free', async () => {
    const consumer = (await memory.consumer!(ctx())) as ConsumerHooks<MemoryStatsV1, MemoryHostData>;
    const host = hostState('h1', { MEMORY_MB: { total: 65536, reserved: 512 } }, {});
    const withPools = (...pools: MemoryStatsV1['hugePages']): MemoryStatsV1 => ({ ...stats, numaNodes: [{ id: 0, totalMb: 32768, freeMb: 16384, hugePages: pools }] });
    const available = (p: MemoryStatsV1['hugePages'][number]) => (consumer.consume(withPools(p), host) as MemoryHostData).nodes[0]!.pools[0]!.available;
    // 8192 pages, 2048 used outside ert, 4096 claimed and not started (still free in the kernel).
    expect(available({ ...pool(2048, 8192, 6144, 4096), usedOutside: 2048 })).toBe(2048);
    // The operator's reservation when it is the larger; the outside use when that is.
    expect(available({ ...pool(2048, 8192, 8192, 0), reserved: 1024, usedOutside: 512 })).toBe(7168);
    expect(available({ ...pool(2048, 8192, 8192, 0), reserved: 512, usedOutside: 1024 })).toBe(7168);
    // The kernel's free pages bound it (stats of an older tracker: no reserved, no usedOutside).
    expect(available(pool(2048, 8192, 1000, 0))).toBe(1000);
    expect(available({ ...pool(2048, 8192, 8192, 8000), reserved: 1024 })).toBe(0);
  });

  it('filters on the requested page size', async () => {
    const consumer = (await memory.consumer!(ctx())) as ConsumerHooks<MemoryStatsV1, MemoryHostData>;
    const filter = (await memory.filter!(ctx())) as FilterHooks;
    const host = hostState('h1', {}, {}, { memory: consumer.consume(stats, hostState('h1', {})) });
    expect(filter.appliesTo!(specOf({ MEMORY_MB: 1 }))).toBe(false);
    expect(filter.appliesTo!(withPages(1024, 'large'))).toBe(true);
    expect(filter.filter(host, withPages(4096, '1GB'))).toBeUndefined();
    expect(filter.filter(host, withPages(5120, '1GB'))).toBe('no NUMA node has 5 free 1GB huge pages (best node: 4)');
    expect(filter.filter(host, withPages(1024, '2MB'))).toBeUndefined();
    expect(filter.filter(host, withPages(1026, '2MB'))).toBe('no NUMA node has 513 free 2MB huge pages (best node: 512)');
    expect(filter.filter(host, withPages(5120, 'large'))).toBe(
      'no NUMA node has 5120 MB free in huge pages of one size (1GB: 4 free on the best node, 2MB: 512 free on the best node)',
    );
    expect(filter.filter(host, withPages(5120, 'any'))).toBeUndefined();
    expect(filter.filter(host, withPages(1024, '16MB'))).toBe('the host has no 16MB huge pages');
    const noStats = hostState('h2', { MEMORY_MB: { total: 1024 } });
    expect(filter.filter(noStats, withPages(1024, 'large'))).toBe('the host has no huge pages');
    expect(filter.filter(noStats, withPages(1024, 'small'))).toBeUndefined();
  });

  it('weighs free RAM', async () => {
    const weigher = (await memory.weigher!(ctx())) as WeigherHooks;
    expect(weigher.weigh(hostState('h1', {}, {}, { memory: { freeMb: 1234, nodes: [] } }), specOf({}))).toBe(1234);
    expect(weigher.weigh(hostState('h2', { MEMORY_MB: { total: 2048, reserved: 512 } }), specOf({}))).toBe(1536);
  });
});
