/** The builders: contexts, options with defaults, specs through the real parser, claimed instances, host states. */
import { describe, expect, it } from 'vitest';
import { CoreServices, definePlugin, requestedAmount } from '@ert/plugin-api';
import vcpu from '@ert/plugin-vcpu/compute';
import {
  captureLogger,
  claimRequest,
  claimedInstance,
  flavor,
  hostState,
  manualClock,
  optionsWithDefaults,
  pluginContext,
  requestSpec,
  resourceContext,
  serviceContainer,
  specFromFlavor,
  testUuid,
} from '../src/index.js';

describe('contexts', () => {
  it('a resource context: options with defaults, a captured logger bound to the plugin, the clock as a service', () => {
    const clock = manualClock(1000);
    const ctx = resourceContext(vcpu, '/fixture', { options: { dedicatedCpus: '2-3' }, clock, hostName: 'node7' });
    expect(ctx).toMatchObject({ name: 'vcpu', root: '/fixture', hostName: 'node7', enforce: false, options: { allocationRatio: 4, reservedCpus: '', dedicatedCpus: '2-3' } });
    expect(ctx.services.resolve(CoreServices.clock).now()).toBe(1000);
    clock.advance(500);
    expect(ctx.services.resolve(CoreServices.clock).now()).toBe(1500);
    ctx.logger.child({ instance: 'a' }).warn({ reason: 'x' }, 'vcpu unavailable');
    ctx.logger.info('plain');
    expect(ctx.logger.lines()).toEqual(['warn vcpu unavailable {"reason":"x"}', 'info plain']);
    expect(ctx.logger.records[0]!.bindings).toEqual({ plugin: 'vcpu', instance: 'a' });
    expect(ctx.logger.lines('info')).toEqual(['info plain']);
  });

  it('options the schema refuses are a named error; the argument is not modified', () => {
    const given = {};
    optionsWithDefaults(vcpu, given);
    expect(given).toEqual({});
    expect(() => optionsWithDefaults(vcpu, { allocationRatio: -1 })).toThrow(expect.objectContaining({ code: 'ERT_TESTKIT_OPTIONS_INVALID' }));
    expect(() => pluginContext(vcpu, { options: { typo: 1 } as never })).toThrow(/must NOT have additional properties/);
  });

  it('a service container falls back to its parent; an unknown token is a named error', () => {
    const parent = serviceContainer();
    parent.register(CoreServices.clock, manualClock(5));
    const child = serviceContainer(parent);
    expect(child.resolve(CoreServices.clock).now()).toBe(5);
    expect(() => serviceContainer().resolve(CoreServices.clock)).toThrow(expect.objectContaining({ code: 'ERT_TESTKIT_INVALID_INPUT' }));
    expect(captureLogger().lines()).toEqual([]);
  });
});

describe('requests', () => {
  it('specFromFlavor parses with the plugin keys, as the host does (dedicated moves VCPU to PCPU); unknown keys refused', () => {
    const spec = specFromFlavor(flavor({ vcpus: 4, memoryMb: 2048, extraSpecs: { 'hw:cpu_policy': 'dedicated' } }), vcpu);
    expect(requestedAmount(spec, 'PCPU')).toBe(4);
    expect(requestedAmount(spec, 'VCPU')).toBe(0);
    expect(spec.pluginSpecs).toEqual({ 'hw:cpu_policy': 'dedicated' });
    expect(() => specFromFlavor({ extraSpecs: { 'gpu:count': '1' } }, vcpu)).toThrow(expect.objectContaining({ code: 'ERT_SPEC_UNKNOWN_KEY' }));
  });

  it('requestSpec builds the light form; claimRequest and claimedInstance what the tracker passes', () => {
    const spec = requestSpec({ VCPU: 2, CUSTOM_LLC_WAYS: 2 }, { extraGroups: [{ DISK_GB: 5 }] });
    expect(spec.groups.map((g) => [g.suffix, g.resources])).toEqual([['', { VCPU: 2, CUSTOM_LLC_WAYS: 2 }], ['1', { DISK_GB: 5 }]]);
    expect(claimRequest(spec, { kind: 'resize' })).toMatchObject({ kind: 'resize', instance: { uuid: testUuid(1) } });
    const instance = claimedInstance(spec, {
      hostName: 'h',
      grant: { allocations: [{ provider: 'llc_1', resourceClass: 'CUSTOM_LLC_WAYS', amount: 2 }], assignment: { mask: '3' }, cpus: [5, 4] },
      discovery: { available: true, host: { inventories: { VCPU: { total: 8 } } }, children: [{ key: 'disk_a', inventories: { DISK_GB: { total: 9 } } }] },
    });
    expect(instance.allocations).toEqual([
      { providerName: 'h_llc_1', resourceClass: 'CUSTOM_LLC_WAYS', amount: 2 },
      { providerName: 'h', resourceClass: 'VCPU', amount: 2 },
      { providerName: 'h_disk_a', resourceClass: 'DISK_GB', amount: 5 },
    ]);
    expect(instance).toMatchObject({ assignment: { mask: '3' }, cpus: [4, 5] });
    expect(() => claimedInstance(spec, { grant: 'no room' })).toThrow(/refused the claim: no room/);
  });
});

describe('host states', () => {
  it('free sums capacity minus usage over the tree; plugin data by name', () => {
    const host = hostState({
      name: 'h',
      inventories: { VCPU: { total: 8, allocationRatio: 2 } },
      usages: { VCPU: 5 },
      children: [{ key: 'llc_0', inventories: { CUSTOM_LLC_WAYS: { total: 11, reserved: 1 } }, usages: { CUSTOM_LLC_WAYS: 4 } }],
      pluginData: { llc: { free: 6 } },
    });
    expect(host.free('VCPU')).toBe(11);
    expect(host.free('CUSTOM_LLC_WAYS')).toBe(6);
    expect(host.free('PCPU')).toBe(0);
    expect(host.providers.map((p) => [p.name, p.parentUuid])).toEqual([['h', undefined], ['h_llc_0', 'h-uuid']]);
    expect(host.pluginData('llc')).toEqual({ free: 6 });
    expect(definePlugin({ name: 'x' }).name).toBe('x');
  });
});
