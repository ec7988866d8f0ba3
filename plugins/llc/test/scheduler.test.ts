import { describe, expect, it } from 'vitest';
import type { ConsumerHooks, FilterHooks, Placement, PluginContext, WeigherHooks } from '@ert/plugin-api';
import llc, { type LlcHostData } from '../src/scheduler.js';
import type { LlcOptions, LlcStats } from '../src/shared.js';
import { group, hostState, provider, services, silentLogger, specOf } from './helpers.js';

const ctx: PluginContext<LlcOptions> = { name: 'llc', options: { reservedWays: 0 }, logger: silentLogger, services: services() };
const consumer = (await llc.consumer!(ctx)) as ConsumerHooks<LlcStats, LlcHostData>;
const filter = (await llc.filter!(ctx)) as FilterHooks;
const weigher = (await llc.weigher!(ctx)) as WeigherHooks;

function stats(freeMasks: string[], freeClosids = 15, minCbmBits = 1): LlcStats {
  return {
    available: true,
    cache: { level: 3, sizeKiB: 28160, ways: 11, domains: freeMasks.map((_, id) => ({ id, cpus: `${id}` })) },
    resctrl: { cdp: false, cbmMask: '7ff', numClosids: 16, minCbmBits, shareableBits: '0', foreignGroups: 0, freeClosids },
    domains: freeMasks.map((freeMask, id) => ({
      id,
      key: `llc_${id}`,
      cbmMask: '7ff',
      ways: 11,
      reservedMask: '0',
      freeMask,
      largestFreeRun: 0,
      instances: [],
    })),
  };
}
function host(name: string, s: LlcStats | undefined) {
  const providers = (s?.domains ?? []).map((d) => provider(`${name}-llc-${d.id}`, `${name}_llc_${d.id}`, `${name}-root`));
  const data = consumer.consume(s, hostState(name, 'llc', undefined, providers)) as LlcHostData;
  return hostState(name, 'llc', data, providers);
}
const ways = (n: number) => specOf([group('', { VCPU: 1, CUSTOM_LLC_WAYS: n })]);
const plain = specOf([group('', { VCPU: 1 })]);

describe('llc scheduler side', () => {
  it('reads stats version 1 into free bitmaps and CLOSIDs', () => {
    expect(consumer.reads).toEqual([1]);
    expect(consumer.consume(stats(['70f', '7ff'], 9, 2), hostState('h', 'llc', undefined))).toEqual({
      available: true,
      minCbmBits: 2,
      freeClosids: 9,
      domains: [
        { id: 0, free: 0x70f },
        { id: 1, free: 0x7ff },
      ],
    });
    const none = consumer.consume(undefined, hostState('h', 'llc', undefined)) as LlcHostData;
    expect(none).toMatchObject({ available: false, reason: 'the host reports no llc stats' });
  });

  it('filters on a contiguous run, CLOSIDs and min_cbm_bits, and only for requests with ways', () => {
    const fragmented = host('frag', stats(['70f']));
    expect(filter.appliesTo!(plain)).toBe(false);
    expect(filter.appliesTo!(ways(2))).toBe(true);
    expect(filter.filter(fragmented, ways(5))).toBe('no cache domain has 5 contiguous free ways (largest free run 4; free ways per domain 0:7)');
    expect(filter.filter(fragmented, ways(4))).toBeUndefined();
    expect(filter.filter(host('full', stats(['7ff'], 0)), ways(1))).toBe('no free CLOSID (every class of service is in use)');
    expect(filter.filter(host('min', stats(['7ff'], 3, 2)), ways(1))).toBe('requested 1 cache ways, below min_cbm_bits 2');
    const noCat: LlcStats = { available: false, reason: 'no cache allocation: resctrl is not mounted', cache: null, resctrl: null, domains: [] };
    expect(filter.filter(host('vm', noCat), ways(1))).toBe('no cache ways on this host: no cache allocation: resctrl is not mounted');
    expect(filter.filter(host('none', undefined), ways(1))).toBe('no cache ways on this host: the host reports no llc stats');
  });

  it('weighs hosts by the longest free run left after the request', () => {
    const fragmented = host('frag', stats(['70f']));
    const roomy = host('roomy', stats(['0', '7ff']));
    // frag: the 3-way run takes it, the 4-way run stays; roomy: 11 - 3 = 8.
    expect(weigher.weigh(fragmented, ways(3))).toBe(4);
    expect(weigher.weigh(roomy, ways(3))).toBe(8);
    expect(weigher.weigh(roomy, ways(3))).toBeGreaterThan(weigher.weigh(fragmented, ways(3)));
    expect(weigher.weigh(host('tight', stats(['3'])), ways(3))).toBe(0);
  });

  it('placed takes the ways on the allocated domain and one CLOSID', () => {
    const h = host('h', stats(['7ff', '7ff'], 2));
    const data = h.pluginData<LlcHostData>('llc')!;
    const placement = (uuid: string, n: number, providerUuid: string): Placement => ({
      host: 'h',
      instance: { uuid, projectId: 'p', userId: 'u', flavor: ways(n).flavor },
      spec: ways(n),
      allocations: [{ providerUuid, resourceClass: 'CUSTOM_LLC_WAYS', amount: n }],
    });
    const after = consumer.placed!(data, placement('a', 3, 'h-llc-1'), h);
    expect(after).toEqual({ available: true, minCbmBits: 1, freeClosids: 1, domains: [{ id: 0, free: 0x7ff }, { id: 1, free: 0x7f8 }] });
    expect(data.domains[1]!.free).toBe(0x7ff); // the previous data is not mutated
    const again = consumer.placed!(after, placement('b', 8, 'h-llc-1'), h);
    expect(again.domains[1]!.free).toBe(0);
    expect(again.freeClosids).toBe(0);
    expect(filter.filter(hostState('h', 'llc', again), ways(1))).toBe('no free CLOSID (every class of service is in use)');
    // A placement without cache ways changes nothing.
    expect(consumer.placed!(after, { ...placement('c', 1, 'x'), spec: plain }, h)).toBe(after);
  });
});
