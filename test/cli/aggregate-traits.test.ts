// Issue 20, point 5, from the CLI: `ert aggregate set-traits AGG TRAIT... [--remove]` and
// `ert aggregate set-ratio AGG CLASS RATIO` apply an operator's traits and allocation ratios
// to every host of an aggregate (the root providers; the ratio on the providers that have the
// class), and they survive the hosts' syncs by docs/ownership.md's rules: an outside writer's
// trait and ratio are kept, unless the host's config sets the ratio explicitly. Real `ert`
// processes on a real SQLite file; three hosts synced from the profiles xeon-2s-cat (node1),
// epyc-1s (node2) and cloud-vm (node3, not in the aggregate).
//
// Mutations seen caught: hostsOf returning every host (node3 got CUSTOM_GOLD and ratio 8);
// set-ratio writing only the class, not the provider's other inventories (MEMORY_MB gone from
// the roots until their next sync); the usage pre-check removed (node1 was written before the
// store refused node2: exit 1, node1's ratio 0.01); a stored ratio of 0 not kept by the
// tracker's `keepTunedFields` (packages/tracker/src/reconcile.ts; the first sync wrote VCPU
// ratio 4 back on node1 and node2).
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore, type Store } from '@ert/store';
import { PROFILES, Project, json } from './helpers.js';

const SMALL = { name: 'small', vcpus: 2, memory_mb: 256, disk_gb: 0, extra_specs: {} };
const config = (vcpu: Record<string, unknown> = {}) => ({
  tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'], staleAfter: '168h' },
  scheduler: { consumers: ['vcpu', 'memory'], filters: ['status', 'resources'] },
  plugins: { vcpu },
  flavors: [SMALL],
});

// Each test starts a dozen ert processes (three hosts synced several times): about 15 s alone,
// 30 s once beside the rest of the suite on two cores, so they get 90 s.
describe('ert aggregate set-traits / set-ratio', { timeout: 90_000 }, () => {
  let project: Project;
  let store: Store;
  // The three hosts' trackers sync at once, as three hosts do (each its own process; the
  // store serialises their writes).
  const sync = async () => {
    const hosts = [['host', 'sync'], ['host', 'sync', '--name', 'node2', '--root', path.join(PROFILES, 'epyc-1s')], ['host', 'sync', '--name', 'node3', '--root', path.join(PROFILES, 'cloud-vm')]];
    for (const r of await Promise.all(hosts.map((args) => project.run(args)))) expect(r.code, r.stderr).toBe(0);
  };
  const root = async (host: string) => (await store.getHost(host))!.rootProviderUuid;
  const ratio = async (host: string, cls: string) => (await store.getInventories(await root(host))).inventories[cls]?.allocationRatio;

  beforeAll(async () => {
    project = await Project.create();
    await project.writeConfig(config());
    expect((await project.run(['db', 'migrate'])).code).toBe(0);
    await sync();
    store = await createStore({ client: 'sqlite3', connection: path.join(project.dir, 'ert.db') });
    expect((await project.run(['aggregate', 'create', 'gold'])).code).toBe(0);
    for (const host of ['node1', 'node2']) expect((await project.run(['aggregate', 'add-host', 'gold', host])).code).toBe(0);
  });
  afterAll(async () => {
    await store?.close();
    await project.remove();
  });

  it("set-traits adds the traits to the aggregate's hosts only; they survive three syncs; --remove takes them off", async () => {
    const set = await project.run(['--json', 'aggregate', 'set-traits', 'gold', 'CUSTOM_GOLD', 'CUSTOM_RACK_7']);
    expect(set.code, set.stderr).toBe(0);
    expect(json(set).hosts.map((h: { host: string }) => h.host)).toEqual(['node1', 'node2']);
    for (let i = 0; i < 3; i++) await sync();
    for (const host of ['node1', 'node2']) expect(await store.getTraits(await root(host))).toEqual(expect.arrayContaining(['CUSTOM_GOLD', 'CUSTOM_RACK_7', 'HW_CPU_X86_AVX2']));
    expect(await store.getTraits(await root('node3'))).not.toContain('CUSTOM_GOLD');

    expect((await project.run(['aggregate', 'set-traits', 'gold', 'CUSTOM_RACK_7', '--remove'])).code).toBe(0);
    await sync();
    expect(await store.getTraits(await root('node1'))).toEqual(expect.arrayContaining(['CUSTOM_GOLD']));
    expect(await store.getTraits(await root('node1'))).not.toContain('CUSTOM_RACK_7');
    expect((await project.run(['aggregate', 'set-traits', 'gold', 'gold'])).code).toBe(2);
  });

  it("set-ratio sets the ratio where the class is, keeps the other classes, survives syncs unless the host's config sets it explicitly", async () => {
    const set = await project.run(['--json', 'aggregate', 'set-ratio', 'gold', 'VCPU', '8']);
    expect(set.code, set.stderr).toBe(0);
    expect(json(set).providers).toEqual([
      { host: 'node1', provider: 'node1', previous: 4 },
      { host: 'node2', provider: 'node2', previous: 4 },
    ]);
    expect(await ratio('node1', 'MEMORY_MB')).toBe(1);
    for (let i = 0; i < 3; i++) await sync();
    expect([await ratio('node1', 'VCPU'), await ratio('node2', 'VCPU'), await ratio('node3', 'VCPU')]).toEqual([8, 8, 4]);
    expect(await ratio('node1', 'MEMORY_MB')).toBe(1);

    // Written in the config (Nova's cpu_allocation_ratio, not initial_): the config wins at the next sync.
    await project.writeConfig(config({ allocationRatio: 2 }));
    await sync();
    expect([await ratio('node1', 'VCPU'), await ratio('node2', 'VCPU')]).toEqual([2, 2]);
    await project.writeConfig(config());
  });

  it('set-ratio 0 (capacity 0) survives syncs: the scheduler places nothing of the class there, and the host\'s claims of it are refused', async () => {
    const before = [await ratio('node1', 'VCPU'), await ratio('node2', 'VCPU'), await ratio('node3', 'VCPU')];
    expect(before.every((r) => r! > 0)).toBe(true);
    const set = await project.run(['--json', 'aggregate', 'set-ratio', 'gold', 'VCPU', '0']);
    expect(set.code, set.stderr).toBe(0);
    expect(json(set)).toMatchObject({ allocationRatio: 0, providers: [{ host: 'node1', previous: before[0] }, { host: 'node2', previous: before[1] }] });
    await sync();
    expect([await ratio('node1', 'VCPU'), await ratio('node2', 'VCPU'), await ratio('node3', 'VCPU')]).toEqual([0, 0, before[2]]);
    // node1 and node2 sort first, but have no VCPU to give: node3 takes it.
    const scheduled = await project.run(['--json', 'schedule', '--flavor', 'small']);
    expect(scheduled.code, scheduled.stderr).toBe(0);
    expect(json(scheduled).selections[0].host).toBe('node3');
    const claimed = await project.run(['claim', '--flavor', 'small', '--host', 'node1']);
    expect(claimed.code, claimed.stderr).toBe(3);
    expect(claimed.stderr).toContain('no provider has 2 free VCPU');
    expect((await store.getUsages(await root('node1'))).VCPU ?? 0).toBe(0);
  });

  it('refuses a ratio below a provider\'s usage before writing anything, and malformed arguments (exit 2)', async () => {
    expect((await project.run(['aggregate', 'set-ratio', 'gold', 'VCPU', '4'])).code).toBe(0);
    const claimed = await project.run(['claim', '--flavor', 'small', '--host', 'node2', '--root', path.join(PROFILES, 'epyc-1s')]);
    expect(claimed.code, claimed.stderr).toBe(0);
    const below = await project.run(['aggregate', 'set-ratio', 'gold', 'VCPU', '0.01']);
    expect(below.code).toBe(2);
    expect(below.stderr).toBe('ert: ratio 0.01 would leave VCPU of node2 (host node2) a capacity of 0, below its usage 2; nothing written\n');
    expect([await ratio('node1', 'VCPU'), await ratio('node2', 'VCPU')]).toEqual([4, 4]);
    // 0 only where the class is unused: node2 holds 2 VCPU.
    const zero = await project.run(['aggregate', 'set-ratio', 'gold', 'VCPU', '0']);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toBe('ert: ratio 0 would leave VCPU of node2 (host node2) a capacity of 0, below its usage 2; nothing written\n');
    expect([await ratio('node1', 'VCPU'), await ratio('node2', 'VCPU')]).toEqual([4, 4]);
    for (const args of [['VCPU', '-1'], ['VCPU', 'many'], ['vcpu', '2']]) expect((await project.run(['aggregate', 'set-ratio', 'gold', ...args])).code).toBe(2);
    expect((await project.run(['aggregate', 'set-ratio', 'silver', 'VCPU', '2'])).code).toBe(2);
  });
});
