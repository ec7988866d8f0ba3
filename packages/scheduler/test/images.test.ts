import { describe, expect, it } from 'vitest';
import { RequestSpecError } from '@ert/placement';
import { NoValidHostError } from '../src/index.js';
import { flavor, instances, useProfileHosts } from './helpers.js';

/*
 * Image properties (issue 20, point 3; docs/images.md) through the scheduler with the six
 * first-party plugins of config/ert.config.yaml, over three hosts whose real trackers
 * discovered the profiles of config/hosts:
 * - xeon-2s-cat: AVX-512, 8 dedicated CPUs (PCPU: the isolated 36-39,76-79);
 * - epyc-1s: no AVX-512, 8 dedicated CPUs (28-31,60-63);
 * - cloud-vm: AVX-512, no dedicated CPUs.
 * The reservation of an image asking dedicated CPUs is then confirmed by the host's own
 * tracker, whose plugins see the same merged request (the image travels on the record's flavor).
 */
const PROFILES = ['xeon-2s-cat', 'epyc-1s', 'cloud-vm'] as const;
const XEON_ISOLATED = [36, 37, 38, 39, 76, 77, 78, 79];

describe('image properties through the scheduler and the tracker, real plugins', () => {
  const world = useProfileHosts('sqlite3', 'images', PROFILES);

  const small = flavor('small', 1, 512);

  it('an image trait required keeps the request off hosts without it; forbidden keeps it off hosts with it', async () => {
    // Seen red: with mergeImageProperties' trait branch not taking the image's trait, all three hosts passed both explains.
    expect((await world.scheduler.explain({ flavor: small, instances: instances(1) })).passed).toBe(3);
    const required = await world.scheduler.explain({ flavor: small, image: { properties: { 'trait:HW_CPU_X86_AVX512F': 'required' } }, instances: instances(1) });
    expect(required.weighed.map((w) => w.host).sort()).toEqual(['cloud-vm', 'xeon-2s-cat']);
    expect(required.rejected.map((r) => r.host)).toEqual(['epyc-1s']);
    const forbidden = await world.scheduler.explain({ flavor: small, image: { properties: { 'trait:HW_CPU_X86_AVX512F': 'forbidden' } }, instances: instances(1) });
    expect(forbidden.weighed.map((w) => w.host)).toEqual(['epyc-1s']);

    const placed = await world.scheduler.select({ flavor: small, image: { properties: { 'trait:HW_CPU_X86_AVX512F': 'forbidden' } }, instances: instances(2) });
    expect(placed.map((s) => s.host)).toEqual(['epyc-1s', 'epyc-1s']);
  });

  it('a dedicated-CPU image on a flavor that sets no CPU policy: PCPU on a host with dedicated CPUs, confirmed by its tracker with pinned CPUs', async () => {
    // Seen red: with placeOne recording `{ ...spec.flavor, image: undefined }` (the image not
    // kept on the record), the host's tracker confirmed it as a shared instance: no CPUs pinned
    // (and the record held no image).
    const [one] = instances(1);
    const [selection] = await world.scheduler.select({ flavor: flavor('plain', 2, 1024), image: { properties: { hw_cpu_policy: 'dedicated', 'trait:HW_CPU_X86_AVX512F': 'required' } }, instances: [one!] });
    // Only xeon-2s-cat has both AVX-512 and dedicated CPUs.
    expect(selection!.host).toBe('xeon-2s-cat');
    expect(selection!.allocations.filter((a) => a.resourceClass === 'PCPU').map((a) => a.amount)).toEqual([2]);
    expect(selection!.allocations.some((a) => a.resourceClass === 'VCPU')).toBe(false);
    const reserved = await world.store.getInstance(one!.uuid);
    expect(reserved).toMatchObject({ state: 'scheduled', flavor: { name: 'plain', extraSpecs: {}, image: { properties: { hw_cpu_policy: 'dedicated' } } } });

    const report = await world.trackers.get('xeon-2s-cat')!.confirmScheduled();
    expect(report.refused).toEqual([]);
    expect(report.confirmed).toEqual([one!.uuid]);
    const confirmed = await world.store.getInstance(one!.uuid);
    expect(confirmed?.state).toBe('active');
    // The vcpu plugin pinned two of the host's dedicated CPUs: it saw hw:cpu_policy=dedicated.
    expect(confirmed?.cpus).toHaveLength(2);
    for (const cpu of confirmed!.cpus!) expect(XEON_ISOLATED).toContain(cpu);
    // The next periodic update rebuilds the plugins' views from the record: still pinned, still PCPU.
    await world.trackers.get('xeon-2s-cat')!.sync();
    expect((await world.store.getInstance(one!.uuid))?.cpus).toEqual(confirmed!.cpus);

    // A resize changes the flavor, not the image (Nova): the new flavor is merged with it.
    // Seen red: without the carry-over in tracker.resize, the resized instance asked VCPU and pinned nothing.
    const xeon = world.trackers.get('xeon-2s-cat')!;
    const resized = await xeon.resize(one!.uuid, flavor('plain-3', 3, 1024));
    expect(resized.ok).toBe(true);
    const record = await world.store.getInstance(one!.uuid);
    expect(record).toMatchObject({ state: 'resizing', flavor: { name: 'plain-3', image: { properties: { hw_cpu_policy: 'dedicated' } } } });
    expect(record?.cpus).toHaveLength(3);
    const { allocations } = await world.store.getAllocations(one!.uuid);
    expect(allocations.filter((a) => a.resourceClass === 'PCPU').map((a) => a.amount)).toEqual([3]);
    expect((await xeon.confirmResize(one!.uuid)).ok).toBe(true);
  });

  it('an image asking dedicated CPUs on an explicitly shared flavor is refused before any host is looked at, naming both', async () => {
    // Seen red: with the shared-flavor rule removed from mergeImageProperties, the request was placed on a VCPU host.
    const error = await world.scheduler
      .select({ flavor: flavor('shared', 2, 1024, { 'hw:cpu_policy': 'shared' }), image: { properties: { hw_cpu_policy: 'dedicated' } }, instances: instances(1) })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestSpecError);
    expect((error as RequestSpecError).code).toBe('ERT_SPEC_CONFLICT');
    expect((error as Error).message).toBe('flavor hw:cpu_policy=shared conflicts with image hw_cpu_policy=dedicated: a shared flavor does not let the image ask for dedicated CPUs');
    // An image property on a request without a flavor is refused too.
    await expect(world.scheduler.select({ placement: { groups: [{ suffix: '', resources: { VCPU: 1 }, requiredTraits: [], forbiddenTraits: [], memberOf: [] }], groupPolicy: 'none' }, image: { properties: {} }, instances: instances(1) })).rejects.toThrow(/image needs a flavor/);
  });

  it('the image is part of the request: the same flavor with and without it is ranked apart', async () => {
    // Seen red: with the parse cache keyed on request.flavor alone, the second explain reused the first's spec (3 hosts passed).
    const f = flavor('tiny', 1, 256);
    expect((await world.scheduler.explain({ flavor: f, instances: instances(1) })).passed).toBe(3);
    expect((await world.scheduler.explain({ flavor: f, image: { properties: { hw_cpu_policy: 'dedicated' } }, instances: instances(1) })).weighed.map((w) => w.host).sort()).toEqual(['epyc-1s', 'xeon-2s-cat']);
    const err = await world.scheduler.select({ flavor: flavor('huge', 64, 1024), image: { properties: { hw_cpu_policy: 'dedicated' } }, instances: instances(1) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoValidHostError);
  });
});
