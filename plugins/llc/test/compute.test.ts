import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClaimGrant, ClaimedInstance, ClaimRequest, RequestSpec } from '@ert/plugin-api';
import llc from '../src/compute.js';
import type { LlcStats } from '../src/shared.js';
import { HOSTS, group, removeTemp, resourceOf, silentLogger, snapshot, specOf, tempProfile, validator, withDefaults } from './helpers.js';

const validStats = validator(llc.stats!.schema);
const temps: string[] = [];
afterEach(async () => {
  await Promise.all(temps.splice(0).map(removeTemp));
});
async function temp(profile: string): Promise<string> {
  // Tests write only below resctrl (cloud-vm's small CPU tree is copied for cache changes).
  const parts =
    profile === 'cloud-vm'
      ? { copy: ['sys/devices/system/cpu'] }
      : { copy: ['sys/fs/resctrl'], link: ['sys/devices/system/cpu'] };
  const dir = await tempProfile(profile, parts);
  temps.push(dir);
  return dir;
}

function waysSpec(ways: number): RequestSpec {
  return specOf([group('', { VCPU: 2, CUSTOM_LLC_WAYS: ways })]);
}
function claim(uuid: string, ways: number, kind: 'claim' | 'resize' = 'claim'): ClaimRequest {
  const spec = waysSpec(ways);
  return { instance: { uuid, projectId: 'p', userId: 'u', flavor: spec.flavor }, spec, kind };
}
function claimed(uuid: string, grant: ClaimGrant | undefined, extra: Partial<ClaimedInstance> = {}): ClaimedInstance {
  const spec = waysSpec(1);
  return {
    uuid,
    request: { uuid, projectId: 'p', userId: 'u', flavor: spec.flavor },
    spec,
    allocations: [],
    assignment: grant?.assignment,
    ...extra,
  };
}
async function hooks(profileOrRoot: string, opts: Parameters<typeof resourceOf>[2] = {}) {
  const root = path.isAbsolute(profileOrRoot) ? profileOrRoot : path.join(HOSTS, profileOrRoot);
  const h = await resourceOf(llc, root, opts);
  const discovery = await h.discover();
  return { h, discovery };
}
/** Grant then add, as the tracker does once the claim is written. */
async function take(h: Awaited<ReturnType<typeof hooks>>['h'], uuid: string, ways: number): Promise<ClaimGrant> {
  const grant = (await h.test!(claim(uuid, ways))) as ClaimGrant;
  expect(typeof grant).toBe('object');
  await h.addInstance!(claimed(uuid, grant));
  return grant;
}

describe('llc discovery on the host profiles', () => {
  it('xeon-2s-cat: two L3 domains of 11 ways, 15 usable CLOSIDs', async () => {
    const { h, discovery } = await hooks('xeon-2s-cat');
    expect(discovery).toEqual({
      available: true,
      host: { traits: ['CUSTOM_RDT_CAT'] },
      children: [0, 1].map((id) => ({
        key: `llc_${id}`,
        inventories: { CUSTOM_LLC_WAYS: { total: 11, reserved: 0, minUnit: 1, maxUnit: 11 } },
        traits: ['CUSTOM_RDT_CAT'],
      })),
    });
    const stats = (await h.stats!()) as LlcStats;
    expect(validStats(stats)).toBeUndefined();
    expect(stats).toEqual({
      available: true,
      cache: {
        level: 3,
        sizeKiB: 28160,
        ways: 11,
        domains: [
          { id: 0, cpus: '0-19,40-59' },
          { id: 1, cpus: '20-39,60-79' },
        ],
      },
      resctrl: { cdp: false, cbmMask: '7ff', numClosids: 16, minCbmBits: 1, shareableBits: '0', foreignGroups: 0, freeClosids: 15 },
      domains: [0, 1].map((id) => ({
        id,
        key: `llc_${id}`,
        cbmMask: '7ff',
        ways: 11,
        reservedMask: '0',
        freeMask: '7ff',
        largestFreeRun: 11,
        instances: [],
      })),
    });
  });

  it('xeon-4s-numa: CDP, four domains, the 8 CLOSIDs the kernel reports leave 7', async () => {
    const { h, discovery } = await hooks('xeon-4s-numa');
    expect(discovery.available).toBe(true);
    expect(discovery.host).toEqual({ traits: ['CUSTOM_RDT_CAT', 'CUSTOM_RDT_CDP'] });
    expect(discovery.children!.map((c) => [c.key, c.inventories!.CUSTOM_LLC_WAYS!.total])).toEqual([
      ['llc_0', 11],
      ['llc_1', 11],
      ['llc_2', 11],
      ['llc_3', 11],
    ]);
    const stats = (await h.stats!()) as LlcStats;
    expect(validStats(stats)).toBeUndefined();
    expect(stats.cache).toEqual({
      level: 3,
      sizeKiB: 25344,
      ways: 11,
      domains: [0, 1, 2, 3].map((s) => ({ id: s, cpus: `${8 * s}-${8 * s + 7},${32 + 8 * s}-${32 + 8 * s + 7}` })),
    });
    expect(stats.resctrl).toEqual({ cdp: true, cbmMask: '7ff', numClosids: 8, minCbmBits: 1, shareableBits: '0', foreignGroups: 0, freeClosids: 7 });
    expect(stats.available).toBe(true);
    expect(stats.domains).toEqual(
      [0, 1, 2, 3].map((id) => ({ id, key: `llc_${id}`, cbmMask: '7ff', ways: 11, reservedMask: '0', freeMask: '7ff', largestFreeRun: 11, instances: [] })),
    );
  });

  it('epyc-1s: no resctrl, so no capacity; available, so the stats giving the four CCD caches are recorded', async () => {
    const { h, discovery } = await hooks('epyc-1s');
    // No host part, no children: no inventory and no trait.
    expect(discovery).toEqual({ available: true, reason: 'no cache allocation: resctrl is not mounted (no /sys/fs/resctrl/info)' });
    const stats = (await h.stats!()) as LlcStats;
    expect(validStats(stats)).toBeUndefined();
    expect(stats).toEqual({
      available: false,
      reason: 'no cache allocation: resctrl is not mounted (no /sys/fs/resctrl/info)',
      cache: {
        level: 3,
        sizeKiB: 32768,
        ways: 16,
        domains: [0, 1, 2, 3].map((k) => ({ id: k, cpus: `${8 * k}-${8 * k + 7},${32 + 8 * k}-${32 + 8 * k + 7}` })),
      },
      resctrl: null,
      domains: [],
    });
  });

  it('says once, not at every periodic discovery, that it offers no cache allocation', async () => {
    // Mutation seen caught: the log line back in every discover (red: 3 lines for 3 discoveries).
    const lines: string[] = [];
    const logger = { ...silentLogger, info: (_fields: unknown, msg?: string) => void lines.push(msg ?? '') };
    const { h } = await hooks('epyc-1s', { logger });
    await h.discover();
    await h.discover();
    expect(lines).toEqual(['llc: no cache allocation offered']);
  });

  it('cloud-vm: one 36608K 11-way L3 shared by CPUs 0-3, no resctrl', async () => {
    const { h, discovery } = await hooks('cloud-vm');
    expect(discovery).toEqual({ available: true, reason: 'no cache allocation: resctrl is not mounted (no /sys/fs/resctrl/info)' });
    const stats = (await h.stats!()) as LlcStats;
    expect(validStats(stats)).toBeUndefined();
    expect(stats).toEqual({
      available: false,
      reason: 'no cache allocation: resctrl is not mounted (no /sys/fs/resctrl/info)',
      cache: { level: 3, sizeKiB: 36608, ways: 11, domains: [{ id: 0, cpus: '0-3' }] },
      resctrl: null,
      domains: [],
    });
  });

  it('reservedWays keeps the low ways for the host', async () => {
    const { h, discovery } = await hooks('xeon-2s-cat', { options: { reservedWays: 2 } });
    expect(discovery.children![0]!.inventories).toEqual({ CUSTOM_LLC_WAYS: { total: 11, reserved: 2, minUnit: 1, maxUnit: 9 } });
    const stats = (await h.stats!()) as LlcStats;
    expect(stats.domains[0]).toMatchObject({ ways: 9, reservedMask: '3', freeMask: '7fc', largestFreeRun: 9 });
    const grant = (await h.test!(claim('a', 3))) as ClaimGrant;
    expect(grant.assignment).toEqual({ domain: 0, mask: '1c', closid: 1 });
  });

  it('options: reservedWays defaults to 0; negative or unknown options are refused', async () => {
    expect(withDefaults(llc, {})).toEqual({ reservedWays: 0 });
    expect(() => withDefaults(llc, { reservedWays: -1 })).toThrow(/reservedWays/);
    expect(() => withDefaults(llc, { reservedways: 1 } as object)).toThrow(/additionalProperties/);
  });

  it('reservedWays covering every way leaves the plugin unavailable', async () => {
    const { discovery } = await hooks('xeon-2s-cat', { options: { reservedWays: 11 } });
    expect(discovery).toEqual({ available: false, reason: 'reservedWays 11 leaves none of the 11 ways of cbm_mask 7ff' });
  });
});

describe('llc discovery on broken trees', () => {
  it('a garbled cbm_mask: the reason names the file, no capacity, no throw', async () => {
    const root = await temp('xeon-2s-cat');
    await writeFile(path.join(root, 'sys/fs/resctrl/info/L3/cbm_mask'), 'zz#\n');
    const { h, discovery } = await hooks(root);
    expect(discovery.available).toBe(false);
    expect(discovery.reason).toContain('/sys/fs/resctrl/info/L3/cbm_mask');
    expect(discovery.children).toBeUndefined();
    const stats = (await h.stats!()) as LlcStats;
    expect(stats.domains).toEqual([]);
    expect(stats.cache?.ways).toBe(11);
    expect(await h.test!(claim('a', 2))).toMatch(/cannot grant 2 cache ways: .*cbm_mask/);
  });

  it('a non-contiguous cbm_mask is refused as garbled', async () => {
    const root = await temp('xeon-2s-cat');
    await writeFile(path.join(root, 'sys/fs/resctrl/info/L3/cbm_mask'), '7f7\n');
    const { discovery } = await hooks(root);
    expect(discovery.reason).toContain('info/L3/cbm_mask is missing or not a contiguous hex mask (got "7f7")');
  });

  it('a missing num_closids: unavailable, the reason names the file', async () => {
    const root = await temp('xeon-2s-cat');
    await rm(path.join(root, 'sys/fs/resctrl/info/L3/num_closids'));
    const { discovery } = await hooks(root);
    expect(discovery).toEqual({
      available: false,
      reason: 'no cache allocation: /sys/fs/resctrl/info/L3/num_closids is missing or not a positive integer',
    });
  });

  it('resctrl without L3 allocation (memory bandwidth only): no capacity, available so the geometry is recorded', async () => {
    const root = await temp('xeon-2s-cat');
    await rm(path.join(root, 'sys/fs/resctrl/info/L3'), { recursive: true });
    await mkdir(path.join(root, 'sys/fs/resctrl/info/MB'));
    const { h, discovery } = await hooks(root);
    const reason = 'no cache allocation: no L3 cache allocation in /sys/fs/resctrl/info (has last_cmd_status, MB)';
    expect(discovery).toEqual({ available: true, reason });
    expect(await h.stats!()).toMatchObject({ available: false, reason, resctrl: null, domains: [], cache: { level: 3, ways: 11 } });
  });

  it('a garbled cache size names the file', async () => {
    const root = await temp('cloud-vm');
    await writeFile(path.join(root, 'sys/devices/system/cpu/cpu3/cache/index3/size'), 'lots\n');
    const { discovery } = await hooks(root);
    expect(discovery).toEqual({
      available: false,
      reason: '/sys/devices/system/cpu/cpu3/cache/index3/size is missing or not "<n>K" (got "lots")',
    });
  });

  it('without cache ids (kernels before 4.14) the lowest sharing CPU names the domain', async () => {
    const root = await temp('cloud-vm');
    for (const cpu of [0, 1, 2, 3]) {
      const dir = path.join(root, `sys/devices/system/cpu/cpu${cpu}/cache/index3`);
      await rm(path.join(dir, 'id'));
      await writeFile(path.join(dir, 'shared_cpu_list'), cpu % 2 === 0 ? '0,2\n' : '1,3\n');
    }
    const { h } = await hooks(root);
    expect(((await h.stats!()) as LlcStats).cache!.domains).toEqual([
      { id: 0, cpus: '0,2' },
      { id: 1, cpus: '1,3' },
    ]);
  });

  it('CPUs that disagree on the cache geometry: the reason names both', async () => {
    const root = await temp('cloud-vm');
    await writeFile(path.join(root, 'sys/devices/system/cpu/cpu2/cache/index3/ways_of_associativity'), '12\n');
    const { discovery } = await hooks(root);
    expect(discovery).toEqual({
      available: false,
      reason:
        '/sys/devices/system/cpu/cpu2/cache/index3 describes a 36608K 12-way cache, /sys/devices/system/cpu/cpu0/cache/index3 a 36608K 11-way one',
    });
  });

  it('missing cache directories: unavailable with the reason', async () => {
    const root = await temp('cloud-vm');
    for (const cpu of [0, 1, 2, 3]) await rm(path.join(root, `sys/devices/system/cpu/cpu${cpu}/cache`), { recursive: true });
    const { h, discovery } = await hooks(root);
    expect(discovery).toEqual({ available: false, reason: 'no Unified cache described under /sys/devices/system/cpu/cpuN/cache/indexM/type' });
    expect(((await h.stats!()) as LlcStats).cache).toBeNull();
  });

  it('a missing root: unavailable, no throw', async () => {
    const { discovery } = await hooks('/nonexistent/ert-root');
    expect(discovery).toEqual({ available: false, reason: 'cannot list /sys/devices/system/cpu' });
  });

  it('foreign resctrl groups hold CLOSIDs', async () => {
    const root = await temp('xeon-2s-cat');
    await mkdir(path.join(root, 'sys/fs/resctrl/batch'));
    await mkdir(path.join(root, 'sys/fs/resctrl/mon_groups'));
    const { h } = await hooks(root);
    expect(((await h.stats!()) as LlcStats).resctrl).toMatchObject({ foreignGroups: 1, freeClosids: 14 });
  });
});

describe('llc claims', () => {
  it('grants a contiguous mask on the best-fitting domain with a CLOSID', async () => {
    const { h } = await hooks('xeon-2s-cat');
    const first = await take(h, 'a', 4);
    expect(first).toEqual({
      allocations: [{ provider: 'llc_0', resourceClass: 'CUSTOM_LLC_WAYS', amount: 4 }],
      assignment: { domain: 0, mask: 'f', closid: 1 },
      // The ways and the class of service, for the store to keep them exclusive (issue 11.4).
      units: ['L3-0/way/0', 'L3-0/way/1', 'L3-0/way/2', 'L3-0/way/3', 'clos/1'],
    });
    // Domain 0 has a 7-way run left, domain 1 an 11-way one: best fit takes domain 0.
    expect(await take(h, 'b', 4)).toEqual({
      allocations: [{ provider: 'llc_0', resourceClass: 'CUSTOM_LLC_WAYS', amount: 4 }],
      assignment: { domain: 0, mask: 'f0', closid: 2 },
      units: ['L3-0/way/4', 'L3-0/way/5', 'L3-0/way/6', 'L3-0/way/7', 'clos/2'],
    });
    // 3 left on domain 0: a 5-way request goes to domain 1.
    expect((await take(h, 'c', 5)).assignment).toEqual({ domain: 1, mask: '1f', closid: 3 });
    const stats = (await h.stats!()) as LlcStats;
    expect(validStats(stats)).toBeUndefined();
    expect(stats.resctrl!.freeClosids).toBe(12);
    expect(stats.domains.map((d) => [d.freeMask, d.largestFreeRun, d.instances])).toEqual([
      ['700', 3, [{ uuid: 'a', mask: 'f', closid: 1 }, { uuid: 'b', mask: 'f0', closid: 2 }]],
      ['7e0', 6, [{ uuid: 'c', mask: '1f', closid: 3 }]],
    ]);
  });

  it('refuses non-contiguous free ways even when their count suffices', async () => {
    const { h } = await hooks('xeon-2s-cat');
    await h.addInstance!(claimed('full', { assignment: { domain: 1, mask: '7ff', closid: 1 } }));
    await h.addInstance!(claimed('middle', { assignment: { domain: 0, mask: 'f0', closid: 2 } }));
    // Domain 0 free: ways 0-3 and 8-10 (7 ways, longest run 4).
    const refused = await h.test!(claim('x', 5));
    expect(refused).toBe('no cache domain has 5 contiguous free ways (largest free run 4; free ways per domain 0:7, 1:0)');
    // The 3-way run is the best fit for 3 ways.
    expect(((await h.test!(claim('y', 3))) as ClaimGrant).assignment).toEqual({ domain: 0, mask: '700', closid: 3 });
    expect(((await h.test!(claim('z', 4))) as ClaimGrant).assignment).toEqual({ domain: 0, mask: 'f', closid: 3 });
  });

  it('refuses when every CLOSID is in use', async () => {
    const { h } = await hooks('xeon-4s-numa');
    for (let i = 0; i < 7; i++) await take(h, `i${i}`, 1);
    expect(((await h.stats!()) as LlcStats).resctrl!.freeClosids).toBe(0);
    expect(await h.test!(claim('late', 1))).toBe('no free CLOSID (every class of service is in use)');
    await h.removeInstance!('i3');
    expect(((await h.test!(claim('late', 1))) as ClaimGrant).assignment).toMatchObject({ closid: 4 });
  });

  it('honours min_cbm_bits', async () => {
    const root = await temp('xeon-2s-cat');
    await writeFile(path.join(root, 'sys/fs/resctrl/info/L3/min_cbm_bits'), '2\n');
    const { h, discovery } = await hooks(root);
    expect(discovery.children![0]!.inventories!.CUSTOM_LLC_WAYS).toMatchObject({ minUnit: 2 });
    expect(await h.test!(claim('a', 1))).toBe('requested 1 cache ways, below min_cbm_bits 2');
    expect(((await h.test!(claim('a', 2))) as ClaimGrant).assignment).toEqual({ domain: 0, mask: '3', closid: 1 });
  });

  it('a resize does not reuse the ways or the class of service the instance holds (issue 17)', async () => {
    const { h } = await hooks('xeon-2s-cat');
    await h.addInstance!(claimed('a', { assignment: { domain: 0, mask: '7ff', closid: 1 } }));
    await h.addInstance!(claimed('b', { assignment: { domain: 1, mask: 'f', closid: 2 } }));
    // The old mask f stays held until the resize is confirmed or reverted: the new one is beside it, with a CLOSID of its own.
    expect(((await h.test!(claim('b', 5, 'resize'))) as ClaimGrant).assignment).toEqual({ domain: 1, mask: '1f0', closid: 3 });
    expect(await h.test!(claim('b', 8, 'resize'))).toMatch(/no cache domain has 8 contiguous free ways/);
  });

  it('accepts requests without cache ways and refuses ways asked in two groups', async () => {
    const { h } = await hooks('epyc-1s');
    expect(await h.test!({ ...claim('a', 1), spec: specOf([group('', { VCPU: 1 })]) })).toBeUndefined();
    expect(await h.test!(claim('a', 1))).toBe('cannot grant 1 cache ways: no cache allocation: resctrl is not mounted (no /sys/fs/resctrl/info)');
    const { h: cat } = await hooks('xeon-2s-cat');
    const twoGroups = specOf([group('', { CUSTOM_LLC_WAYS: 1 }), group('1', { CUSTOM_LLC_WAYS: 2 })]);
    expect(await cat.test!({ ...claim('a', 1), spec: twoGroups })).toBe(
      'CUSTOM_LLC_WAYS requested in 2 groups (resources, resources1); an instance gets one cache mask on one domain',
    );
  });

  it('counts an instance without assignment on the domain of its allocation; reset forgets all', async () => {
    const { h } = await hooks('xeon-2s-cat');
    await h.addInstance!(
      claimed('old', undefined, { allocations: [{ providerName: 'host1_llc_1', resourceClass: 'CUSTOM_LLC_WAYS', amount: 3 }] }),
    );
    let stats = (await h.stats!()) as LlcStats;
    expect(stats.domains[1]!.instances).toEqual([{ uuid: 'old', mask: '7', closid: 1 }]);
    await h.addInstance!(claimed('old', { assignment: { domain: 1, mask: '7', closid: 1 } })); // idempotent
    expect(((await h.stats!()) as LlcStats).resctrl!.freeClosids).toBe(14);
    await h.reset!();
    stats = (await h.stats!()) as LlcStats;
    expect(stats.domains.map((d) => d.freeMask)).toEqual(['7ff', '7ff']);
  });
});

describe('llc enforcement', () => {
  it('creates the group with its schemata and CPUs, and removes it on release', async () => {
    const root = await temp('xeon-2s-cat');
    const { h } = await hooks(root, { enforce: true });
    await take(h, 'a', 11);
    const grant = await take(h, 'b', 4);
    const instance = claimed('b', grant, { cpus: [22, 21, 61] });
    await h.enforce!({ type: 'claimed', host: 'host1', instance });
    const group = path.join(root, 'sys/fs/resctrl/ert-b');
    expect(await readFile(path.join(group, 'schemata'), 'utf8')).toBe('L3:0=7ff;1=f\n');
    expect(await readFile(path.join(group, 'cpus_list'), 'utf8')).toBe('21,22,61\n');
    await h.enforce!({ type: 'released', host: 'host1', instance });
    await expect(stat(group)).rejects.toMatchObject({ code: 'ENOENT' });
    // Releasing twice is harmless.
    await h.enforce!({ type: 'released', host: 'host1', instance });
  });

  it('writes code and data lines with CDP, and no cpus_list when the CPUs are unknown', async () => {
    const root = await temp('xeon-4s-numa');
    const { h } = await hooks(root, { enforce: true });
    await h.addInstance!(claimed('a', { assignment: { domain: 0, mask: '7ff', closid: 1 } }));
    const grant = await take(h, 'b', 2);
    expect(grant.assignment).toEqual({ domain: 1, mask: '3', closid: 2 });
    await h.enforce!({ type: 'claimed', host: 'host1', instance: claimed('b', grant) });
    const group = path.join(root, 'sys/fs/resctrl/ert-b');
    expect(await readFile(path.join(group, 'schemata'), 'utf8')).toBe('L3CODE:0=7ff;1=3;2=7ff;3=7ff\nL3DATA:0=7ff;1=3;2=7ff;3=7ff\n');
    await expect(stat(path.join(group, 'cpus_list'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a failed write raises ERT_LLC_ENFORCE_FAILED naming the file and last_cmd_status', async () => {
    const root = await temp('xeon-2s-cat');
    const { h } = await hooks(root, { enforce: true });
    const grant = await take(h, 'a', 2);
    await writeFile(path.join(root, 'sys/fs/resctrl/info/last_cmd_status'), 'Invalid domain\n');
    // A file where the group directory should be makes mkdir fail.
    await writeFile(path.join(root, 'sys/fs/resctrl/ert-a'), 'x');
    await expect(h.enforce!({ type: 'claimed', host: 'host1', instance: claimed('a', grant) })).rejects.toMatchObject({
      code: 'ERT_LLC_ENFORCE_FAILED',
      details: { file: '/sys/fs/resctrl/ert-a', instance: 'a', lastCmdStatus: 'Invalid domain' },
    });
  });

  it('writes nothing when enforcement is off', async () => {
    const root = await temp('xeon-2s-cat');
    const before = await snapshot(path.join(root, 'sys/fs/resctrl'));
    const { h } = await hooks(root, { enforce: false });
    const grant = await take(h, 'a', 3);
    await h.stats!();
    await h.enforce!({ type: 'claimed', host: 'host1', instance: claimed('a', grant) });
    expect(await snapshot(path.join(root, 'sys/fs/resctrl'))).toEqual(before);
  });
});
