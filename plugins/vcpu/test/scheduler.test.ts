import { describe, expect, it } from 'vitest';
import { exclusionReason, type ConsumerHooks, type FilterHooks, type WeigherHooks } from '@ert/plugin-api';
import vcpu, { type VcpuHostData } from '../src/scheduler.js';
import { cpuPolicyKey, type VcpuStatsRead } from '../src/shared.js';
import { hostState, instanceOf, mapContainer, recordingLogger, specOf, withDefaults } from './support.js';

const ctx = () => ({ name: 'vcpu', options: withDefaults(vcpu, {}), logger: recordingLogger(), services: mapContainer() });
const stats = (dedicatedPerNode: number[]): VcpuStatsRead => ({
  model: 'm', vendor: 'GenuineIntel', family: 6, modelNumber: 85, cpus: 16, sockets: 2, cores: 8, threadsPerCore: 2,
  numaNodes: dedicatedPerNode.map((dedicatedCpus, id) => ({ id, cpus: id === 0 ? '0-7' : '8-15', dedicatedCpus })),
  sharedCpus: '', dedicatedCpus: '', reservedCpus: '',
});

describe('vcpu options', () => {
  it('defaults to ratio 4.0 and no reserved or dedicated CPUs, and refuses malformed CPU lists', () => {
    expect(withDefaults(vcpu, {})).toEqual({ allocationRatio: 4, reservedCpus: '', dedicatedCpus: '', cpuModels: [], cpuModelExtraFlags: [] });
    expect(withDefaults(vcpu, { dedicatedCpus: '2-3, 6' })).toMatchObject({ dedicatedCpus: '2-3, 6' });
    expect(() => withDefaults(vcpu, { reservedCpus: 'all' })).toThrow(/reservedCpus must match pattern/);
    expect(() => withDefaults(vcpu, { allocationRatio: 0 })).toThrow(/allocationRatio must be > 0/);
  });
});

describe('hw:cpu_policy', () => {
  const flavor = { name: 'f', vcpus: 4, memoryMb: 2048, diskGb: 0, extraSpecs: {} };

  it("asks the flavor's vcpus as PCPU instead of VCPU when dedicated, as Nova's _translate_pinning_policies does", () => {
    const resources: Record<string, number> = { VCPU: 4, MEMORY_MB: 2048 };
    cpuPolicyKey.applyResources!('dedicated', resources, {}, flavor);
    expect(resources).toEqual({ PCPU: 4, MEMORY_MB: 2048 });
    // resources:VCPU=0 (or PCPU=0) kept the flavor's VCPU out of the group: Nova still asks vcpus PCPU.
    const zeroed: Record<string, number> = { MEMORY_MB: 2048 };
    cpuPolicyKey.applyResources!('dedicated', zeroed, { 'resources:VCPU': '0' }, flavor);
    expect(zeroed).toEqual({ PCPU: 4, MEMORY_MB: 2048 });
  });

  it('changes nothing when shared', () => {
    const resources: Record<string, number> = { VCPU: 4 };
    cpuPolicyKey.applyResources!('shared', resources, {}, flavor);
    expect(resources).toEqual({ VCPU: 4 });
  });

  it('is owned by both entries and allows only shared and dedicated', async () => {
    const compute = (await import('../src/compute.js')).default;
    expect(compute.extraSpecs?.map((k) => k.key)).toEqual(['hw:cpu_policy']);
    expect(vcpu.extraSpecs?.map((k) => k.key)).toEqual(['hw:cpu_policy']);
    expect(cpuPolicyKey.schema).toEqual({ type: 'string', enum: ['shared', 'dedicated'] });
  });
});

describe('vcpu scheduler side', () => {
  it('consumes free counts and the largest dedicated node, and follows placements', async () => {
    const consumer = (await vcpu.consumer!(ctx())) as ConsumerHooks<VcpuStatsRead, VcpuHostData>;
    expect(consumer.reads).toEqual([1, 2]);
    const host = hostState('h1', { VCPU: { total: 8, allocationRatio: 4 }, PCPU: { total: 8 } }, { VCPU: 10, PCPU: 2 });
    const data = consumer.consume(stats([6, 2]), host) as VcpuHostData;
    expect(exclusionReason(data)).toBeUndefined();
    expect(data).toEqual({ freeVcpu: 22, freePcpu: 6, freeDedicatedByNode: [6, 2], largestDedicatedNode: 6 });
    const spec = specOf({ VCPU: 3 });
    const after = consumer.placed!(data, {
      host: 'h1',
      instance: instanceOf('i1', spec),
      spec,
      allocations: [
        { providerUuid: 'h1-uuid', resourceClass: 'VCPU', amount: 3 },
        { providerUuid: 'h1-uuid', resourceClass: 'PCPU', amount: 2 },
        { providerUuid: 'h1-uuid', resourceClass: 'MEMORY_MB', amount: 512 },
      ],
    }, host);
    // The 2 PCPU come from node 1 (the node with the fewest free that fits), as the tracker pins them.
    expect(after).toEqual({ freeVcpu: 19, freePcpu: 4, freeDedicatedByNode: [6, 0], largestDedicatedNode: 6 });
    expect(data.freeVcpu).toBe(22);
    expect(consumer.consume(undefined, host)).toEqual({ freeVcpu: 22, freePcpu: 6, freeDedicatedByNode: null, largestDedicatedNode: null });
  });

  it('filters on free VCPU and PCPU and on dedicated CPUs per NUMA node', async () => {
    const filter = (await vcpu.filter!(ctx())) as FilterHooks;
    const data: VcpuHostData = { freeVcpu: 10, freePcpu: 12, freeDedicatedByNode: [8, 4], largestDedicatedNode: 8 };
    const host = hostState('h1', {}, {}, { vcpu: data });
    expect(filter.appliesTo!(specOf({ MEMORY_MB: 10 }))).toBe(false);
    expect(filter.appliesTo!(specOf({ PCPU: 1 }))).toBe(true);
    expect(filter.filter(host, specOf({ VCPU: 10 }))).toBeUndefined();
    expect(filter.filter(host, specOf({ VCPU: 11 }))).toBe('needs 11 VCPU, 10 free');
    // A dedicated flavor's CPUs come from one NUMA node; a PCPU amount no flavor pins (a Placement-style request) is only counted.
    const dedicated = (pcpu: number) => specOf({ PCPU: pcpu }, { pluginSpecs: { 'hw:cpu_policy': 'dedicated' }, flavor: { extraSpecs: { 'hw:cpu_policy': 'dedicated' } } });
    expect(filter.filter(host, dedicated(8))).toBeUndefined();
    expect(filter.filter(host, dedicated(9))).toBe('needs 9 dedicated CPUs on one NUMA node (hw:cpu_policy=dedicated), the largest node has 8');
    expect(filter.filter(host, specOf({ PCPU: 9 }))).toBeUndefined();
    expect(filter.filter(host, specOf({ PCPU: 13 }))).toBe('needs 13 PCPU, 12 free');
    // Groups are summed: the unnumbered group and a numbered one together.
    expect(filter.filter(host, specOf({ VCPU: 6 }, { extraGroups: [{ VCPU: 5 }] }))).toBe('needs 11 VCPU, 10 free');
    const noNuma = hostState('h2', {}, {}, { vcpu: { ...data, largestDedicatedNode: null } });
    expect(filter.filter(noNuma, dedicated(12))).toBeUndefined();
    // The bounds say no more than the filter: the NUMA bound only for a pinned request.
    expect(filter.summaryBounds!(dedicated(9))).toEqual([{ summary: 'vcpu.freePcpu', atLeast: 9 }, { summary: 'vcpu.largestDedicatedNode', atLeast: 9 }]);
    expect(filter.summaryBounds!(specOf({ PCPU: 9 }))).toEqual([{ summary: 'vcpu.freePcpu', atLeast: 9 }]);
  });

  it('falls back to the host free counts without consumer data', async () => {
    const filter = (await vcpu.filter!(ctx())) as FilterHooks;
    const host = hostState('h1', { VCPU: { total: 2, allocationRatio: 2 } }, { VCPU: 1 });
    expect(filter.filter(host, specOf({ VCPU: 3 }))).toBeUndefined();
    expect(filter.filter(host, specOf({ VCPU: 4 }))).toBe('needs 4 VCPU, 3 free');
  });

  it('weighs free VCPU, or free PCPU for dedicated requests', async () => {
    const weigher = (await vcpu.weigher!(ctx())) as WeigherHooks;
    const host = hostState('h1', {}, {}, { vcpu: { freeVcpu: 30, freePcpu: 5, largestDedicatedNode: 5 } });
    expect(weigher.weigh(host, specOf({ VCPU: 2 }))).toBe(30);
    expect(weigher.weigh(host, specOf({ PCPU: 2 }))).toBe(5);
  });
});
