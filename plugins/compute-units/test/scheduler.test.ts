import { describe, expect, it } from 'vitest';
import type { ConsumerHooks, FilterHooks, WeigherHooks } from '@ert/plugin-api';
import computeUnits, { type ComputeUnitsHostData } from '../src/scheduler.js';
import { unitsKey, type ComputeUnitsStatsV1 } from '../src/shared.js';
import { hostState, instanceOf, mapContainer, recordingLogger, specOf, withDefaults } from '../../vcpu/test/support.js';

const ctx = () => ({ name: 'compute-units', options: withDefaults(computeUnits, {}), logger: recordingLogger(), services: mapContainer() });
const stats: ComputeUnitsStatsV1 = { model: 'm', perCore: 10, cores: 8, total: 80, matchedBy: null };

describe('compute-units options', () => {
  it('defaults to 10 CU per core and no model rules', () => {
    expect(withDefaults(computeUnits, {})).toEqual({ perCore: 10, models: [] });
    expect(() => withDefaults(computeUnits, { models: [{ match: 'x' } as never] })).toThrow(/must have required property 'perCore'/);
  });
});

describe('cu:units', () => {
  // What this catches: cu:units and resources:CUSTOM_CU disagreeing, one silently winning
  // (the larger did before; llc:ways took its own): a conflict is refused naming both.
  it('adds CUSTOM_CU, and refuses a resources:CUSTOM_CU of another amount', () => {
    const resources: Record<string, number> = { VCPU: 2 };
    const flavor = { name: 'f', vcpus: 2, memoryMb: 0, diskGb: 0, extraSpecs: {} };
    expect(unitsKey.applyResources!(30, resources, {}, flavor)).toBeUndefined();
    expect(resources).toEqual({ VCPU: 2, CUSTOM_CU: 30 });
    expect(unitsKey.applyResources!(30, resources, {}, flavor)).toBeUndefined();
    expect(unitsKey.applyResources!(20, resources, {}, flavor)).toBe('conflicts with resources:CUSTOM_CU=30; give one of the two keys, or the same number of units in both');
    expect(resources.CUSTOM_CU).toBe(30);
    expect(unitsKey.schema).toEqual({ type: 'integer', minimum: 1 });
  });
});

describe('compute-units scheduler side', () => {
  it('consumes free CUs and follows placements', async () => {
    const consumer = (await computeUnits.consumer!(ctx())) as ConsumerHooks<ComputeUnitsStatsV1, ComputeUnitsHostData>;
    expect(consumer.reads).toEqual([1]);
    const host = hostState('h1', { CUSTOM_CU: { total: 80 } }, { CUSTOM_CU: 25 });
    const data = consumer.consume(stats, host) as ComputeUnitsHostData;
    expect(data).toEqual({ freeCu: 55 });
    const spec = specOf({ CUSTOM_CU: 20 });
    const after = consumer.placed!(data, {
      host: 'h1', instance: instanceOf('i', spec), spec,
      allocations: [{ providerUuid: 'h1-uuid', resourceClass: 'CUSTOM_CU', amount: 20 }, { providerUuid: 'h1-uuid', resourceClass: 'VCPU', amount: 2 }],
    }, host);
    expect(after).toEqual({ freeCu: 35 });
  });

  it('filters on free CUs', async () => {
    const filter = (await computeUnits.filter!(ctx())) as FilterHooks;
    const host = hostState('h1', {}, {}, { 'compute-units': { freeCu: 35 } });
    expect(filter.appliesTo!(specOf({ VCPU: 1 }))).toBe(false);
    expect(filter.appliesTo!(specOf({ CUSTOM_CU: 1 }))).toBe(true);
    expect(filter.filter(host, specOf({ CUSTOM_CU: 35 }))).toBeUndefined();
    expect(filter.filter(host, specOf({ CUSTOM_CU: 36 }))).toBe('needs 36 CUSTOM_CU, 35 free');
    // A host without the plugin's data falls back to its CUSTOM_CU inventory (none: 0 free).
    expect(filter.filter(hostState('h2', {}), specOf({ CUSTOM_CU: 1 }))).toBe('needs 1 CUSTOM_CU, 0 free');
  });

  it('weighs free CUs', async () => {
    const weigher = (await computeUnits.weigher!(ctx())) as WeigherHooks;
    expect(weigher.weigh(hostState('h1', {}, {}, { 'compute-units': { freeCu: 35 } }), specOf({}))).toBe(35);
    expect(weigher.weigh(hostState('h2', { CUSTOM_CU: { total: 80 } }, { CUSTOM_CU: 30 }), specOf({}))).toBe(50);
  });
});
