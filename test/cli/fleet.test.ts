// Issue 14 (host and fleet lifecycle from the CLI) and issue 12 (every starter flavor placeable):
// aggregates with metadata make an aggregate_instance_extra_specs flavor placeable, a disabled
// host receives nothing and stays disabled (with its reason) across its tracker's syncs, and
// `ert db status` reports the store. Real `ert` processes on a real SQLite file.
//
// Mutations seen caught: `aggregate add-host` writing the aggregates without the new one (the
// ssd flavor stayed unplaceable); setHostStatus not recording the reason (ert hosts showed
// plain "disabled").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Project, json } from './helpers.js';

const SSD = { name: 'ssd', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: { 'aggregate_instance_extra_specs:ssd': 'true' } };
const SMALL = { name: 'small', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: {} };

describe('ert aggregate, host disable/enable, db status', () => {
  let project: Project;
  beforeAll(async () => {
    project = await Project.create();
    await project.writeConfig({
      tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'], staleAfter: '168h' },
      scheduler: { consumers: ['vcpu', 'memory'], filters: ['status', 'aggregate-extra-specs', 'resources'] },
      flavors: [SSD, SMALL],
    });
    expect((await project.run(['db', 'migrate'])).code).toBe(0);
    expect((await project.run(['host', 'sync'])).code).toBe(0);
  });
  afterAll(async () => {
    await project.remove();
  });

  it('an aggregate with metadata makes a flavor that asks for it placeable on its hosts', async () => {
    const before = await project.run(['schedule', '--flavor', 'ssd']);
    expect(before.code).toBe(3);
    expect(before.stdout).toContain('node1: aggregate metadata has no "ssd" (wanted "true")');

    const created = json(await project.run(['--json', 'aggregate', 'create', 'fast-ssd', '--metadata', 'ssd=true', 'rack=a1']));
    expect(created).toMatchObject({ name: 'fast-ssd', metadata: { ssd: 'true', rack: 'a1' }, hosts: [] });
    expect((await project.run(['aggregate', 'add-host', 'fast-ssd', 'node1'])).stdout).toBe('added host node1 to aggregate fast-ssd\n');
    expect(json(await project.run(['--json', 'aggregate', 'list'])).aggregates).toEqual([{ uuid: created.uuid, name: 'fast-ssd', metadata: { ssd: 'true', rack: 'a1' }, hosts: ['node1'] }]);
    const placed = await project.run(['--json', 'schedule', '--flavor', 'ssd']);
    expect(placed.code, placed.stderr).toBe(0);
    expect(json(placed).selections).toEqual([expect.objectContaining({ host: 'node1' })]);

    // Metadata changed: the flavor no longer matches; the host left: neither.
    expect(json(await project.run(['--json', 'aggregate', 'set-metadata', created.uuid, 'ssd=false', '--unset', 'rack'])).metadata).toEqual({ ssd: 'false' });
    expect((await project.run(['schedule', '--flavor', 'ssd'])).code).toBe(3);
    expect((await project.run(['aggregate', 'remove-host', 'fast-ssd', 'node1'])).code).toBe(0);
    expect(json(await project.run(['--json', 'aggregate', 'list'])).aggregates[0].hosts).toEqual([]);
  });

  it('refuses what it cannot do, exit 2, naming the value', async () => {
    const dup = await project.run(['aggregate', 'create', 'fast-ssd']);
    expect([dup.code, dup.stderr]).toEqual([2, 'ert: an aggregate named "fast-ssd" exists already\n']);
    const missing = await project.run(['aggregate', 'add-host', 'slow', 'node1']);
    expect([missing.code, missing.stderr]).toEqual([2, 'ert: no aggregate "slow" in the store; known: fast-ssd\n']);
    const host = await project.run(['aggregate', 'add-host', 'fast-ssd', 'nod1']);
    expect(host.code).toBe(2);
    expect(host.stderr).toContain('no host "nod1" in the store; did you mean node1?');
    const pair = await project.run(['aggregate', 'set-metadata', 'fast-ssd', 'ssd']);
    expect([pair.code, pair.stderr]).toEqual([2, 'ert: metadata must be key=value, got "ssd"\n']);
  });

  it('a disabled host receives nothing, keeps its reason across its tracker\u2019s sync, and is up again when enabled', async () => {
    expect((await project.run(['host', 'disable', 'node1', '--reason', 'disk swap'])).stdout).toBe('disabled host node1 (disk swap): the scheduler skips it; its instances stay\n');
    const refused = await project.run(['schedule', '--flavor', 'small']);
    expect(refused.code).toBe(3);
    expect(refused.stdout).toContain('node1: host is disabled');
    expect((await project.run(['host', 'sync'])).code).toBe(0);
    expect(json(await project.run(['--json', 'hosts'])).hosts[0]).toMatchObject({ name: 'node1', status: 'disabled', statusReason: 'disk swap' });
    expect((await project.run(['hosts'])).stdout).toMatch(/^node1\s+disabled \(disk swap\)\s/m);
    expect((await project.run(['host', 'enable', 'node1'])).code).toBe(0);
    const hosts = json(await project.run(['--json', 'hosts'])).hosts;
    expect(hosts[0].status).toBe('up');
    expect(hosts[0].statusReason).toBeUndefined();
    expect((await project.run(['schedule', '--flavor', 'small'])).code).toBe(0);
    expect((await project.run(['host', 'disable', 'nope'])).code).toBe(2);
  });

  // Issue 14 (ert trait) on issue 20's ownership: an operator's trait survives the host's
  // syncs; a trait the host's plugins report comes back. Seen red with the CLI writing the
  // traits as the tracker's owner (the operator's trait was then the tracker's and its next
  // sync removed it).
  it('ert trait: an operator\u2019s trait survives the host\u2019s syncs; a trait the plugins report comes back', async () => {
    const added = await project.run(['trait', 'add', 'CUSTOM_OPERATOR_GOLD', '--host', 'node1']);
    expect([added.code, added.stdout]).toEqual([0, 'added trait CUSTOM_OPERATOR_GOLD to node1\n']);
    const removed = await project.run(['trait', 'remove', 'HW_CPU_X86_AVX2', '--host', 'node1']);
    expect(removed.stdout).toBe('removed trait HW_CPU_X86_AVX2 from node1 (the host\u2019s plugins report it: its next sync adds it again)\n');
    expect((await project.run(['host', 'sync'])).code).toBe(0);
    // After the sync (another trait added to read the whole set): the operator's trait is kept, the plugins' is back.
    const traits = json(await project.run(['--json', 'trait', 'add', 'CUSTOM_PROBE', '--host', 'node1'])).traits;
    expect(traits).toEqual(expect.arrayContaining(['CUSTOM_OPERATOR_GOLD', 'HW_CPU_X86_AVX2']));
    const bad = await project.run(['trait', 'add', 'gold', '--host', 'node1']);
    expect([bad.code, bad.stderr]).toEqual([2, 'ert: "gold" is not a trait name: CUSTOM_ followed by A-Z, 0-9 and _, or a standard trait (os-traits 2.9.0)\n']);
    expect((await project.run(['trait', 'add', 'CUSTOM_X'])).code).toBe(2);
    expect((await project.run(['trait', 'add', 'CUSTOM_X', '--provider', 'nope'])).code).toBe(2);
  });

  it('db status: the schema against this ert, and what the store holds', async () => {
    const status = json(await project.run(['--json', 'db', 'status']));
    expect(status).toMatchObject({ client: 'sqlite3', pending: [], unknown: [], hosts: 1, aggregates: 1 });
    expect(status.applied).toBeGreaterThanOrEqual(8);
    expect(status.instances).toBeGreaterThanOrEqual(2);
    const human = await project.run(['db', 'status']);
    expect(human.stdout).toMatch(/^schema: \S+ \(\d+ migrations applied, none pending\)$/m);
  });
  // store.withdrawInstance: a reservation goes with its allocations; an active instance is its tracker's.
  it('instance show and delete: a reservation is removed with its allocations; an active instance is left to its tracker', async () => {
    const scheduled = json(await project.run(['--json', 'schedule', '--flavor', 'small'])).selections[0];
    const shown = json(await project.run(['--json', 'instance', 'show', scheduled.instanceUuid])).instance;
    expect(shown).toMatchObject({ uuid: scheduled.instanceUuid, host: 'node1', state: 'scheduled', flavor: 'small' });
    expect(shown.allocations.map((a: { providerName: string; resourceClass: string; amount: number }) => [a.providerName, a.resourceClass, a.amount]).sort()).toEqual([
      ['node1', 'MEMORY_MB', 2048],
      ['node1', 'VCPU', 2],
    ]);
    expect((await project.run(['instance', 'delete', scheduled.instanceUuid])).stdout).toBe(`deleted instance ${scheduled.instanceUuid}\n`);
    expect((await project.run(['instance', 'show', scheduled.instanceUuid])).code).toBe(2);
    const claimed = json(await project.run(['--json', 'claim', '--flavor', 'small'])).instance;
    const held = await project.run(['instance', 'delete', claimed]);
    expect(held.code).toBe(2);
    expect(held.stderr).toContain(`instance ${claimed} is active on host node1: its host's tracker releases it (ert release ${claimed}`);
    expect((await project.run(['instance', 'delete', '00000000-0000-4000-8000-00000000dead'])).code).toBe(2);
  });

  it('host delete: refused while the host has instances (exit 1, nothing removed); --force removes it and its tree; a sync registers it again', async () => {
    const refused = await project.run(['host', 'delete', 'node1']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^ert: host node1 cannot be deleted: \d+ instance record\(s\) and \d+ consumer\(s\) with allocations on its providers \(drain them first, or force\)\n$/);
    expect(json(await project.run(['--json', 'hosts'])).hosts).toHaveLength(1);
    const deleted = await project.run(['--json', 'host', 'delete', 'node1', '--force']);
    expect(deleted.code, deleted.stderr).toBe(0);
    const deletion = json(deleted);
    expect(deletion.providers.map((p: { name: string; owner?: string }) => [p.name, p.owner])).toEqual([['node1', 'tracker']]);
    expect(deletion.instances.length).toBeGreaterThan(0);
    expect(json(await project.run(['--json', 'hosts'])).hosts).toEqual([]);
    expect(json(await project.run(['--json', 'instances'])).instances).toEqual([]);
    expect((await project.run(['host', 'delete', 'node1'])).code).toBe(2);
    expect((await project.run(['host', 'sync'])).code).toBe(0);
    expect(json(await project.run(['--json', 'hosts'])).hosts.map((h: { name: string }) => h.name)).toEqual(['node1']);
  });
});
