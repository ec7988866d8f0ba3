import { afterAll, describe, expect, it } from 'vitest';
import { createScheduler } from '../src/index.js';
import { flavor, hostImport, instances, openStore, schedulerConfig, tempDir } from './helpers.js';

/**
 * Issue 11, point 14: values a library caller can pass that JSON cannot carry. A BigInt in a
 * flavor's extra specs made `select` throw JSON.stringify's bare TypeError ("Do not know how
 * to serialize a BigInt"), with no key named. Mutation seen caught: the bigintPath check
 * removed from validateRequest (that TypeError again).
 */
describe('scheduler requests from a library caller', () => {
  const tmp = tempDir('ert-sched-values-');
  afterAll(() => tmp.cleanup());

  it('a BigInt is ERT_SCHEDULER_INVALID_REQUEST naming its key; null is ERT_SPEC_INVALID_VALUE naming the extra spec', async () => {
    const { store, options } = await openStore('sqlite3', tmp.dir, 'values');
    await store.importHosts([hostImport({ name: 'h1', inventories: { VCPU: 8, MEMORY_MB: 8192 } })]);
    const s = await createScheduler({ config: schedulerConfig(options, tmp.dir, { filters: ['status', 'resources'] }), store });
    try {
      const base = flavor('f', 1, 512);
      const bigint = await s.select({ instances: instances(1), flavor: { ...base, extraSpecs: { 'resources:VCPU': 10n as unknown as string } } }).catch((e: unknown) => e);
      expect(bigint).toMatchObject({
        code: 'ERT_SCHEDULER_INVALID_REQUEST',
        message: 'invalid scheduling request: flavor.extraSpecs["resources:VCPU"] is a BigInt; give a number or a string',
        details: { key: 'flavor.extraSpecs["resources:VCPU"]' },
      });
      const vcpus = await s.select({ instances: instances(1), flavor: { ...base, vcpus: 2n as unknown as number } }).catch((e: unknown) => e);
      expect(vcpus).toMatchObject({ code: 'ERT_SCHEDULER_INVALID_REQUEST', details: { key: 'flavor.vcpus' } });
      const nul = await s.select({ instances: instances(1), flavor: { ...base, extraSpecs: { 'resources:VCPU': null as unknown as string } } }).catch((e: unknown) => e);
      expect(nul).toMatchObject({ code: 'ERT_SPEC_INVALID_VALUE', message: expect.stringContaining('resources:VCPU') });
      // The same flavor with plain values is placed.
      expect((await s.select({ instances: instances(1), flavor: { ...base, extraSpecs: { 'resources:VCPU': '2' } } }))[0]!.host).toBe('h1');
    } finally {
      await s.close();
      await store.close();
    }
  });
});
