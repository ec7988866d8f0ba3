/*
 * Ports' request groups from the CLI (issue 20, point 4; docs/request-groups.md): `ert claim`
 * and `ert schedule` with `--request-group`, and `ert instance attach` / `detach` extending and
 * shrinking a live instance in place, exit codes and messages as docs/cli.md says. The host's
 * SR-IOV physical function (`node1_nic_pf0`, 4 virtual functions on physnet PUBLIC) comes from
 * a provider config file, as an operator describes what no plugin discovers.
 * Seen red with the claim command not passing --request-group on (no virtual function
 * allocated) and with `instance attach` not turning the tracker's refusal into exit 3.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Project, json } from './helpers.js';

const VF = 'CUSTOM_NIC_VF';

describe('request groups from the CLI', () => {
  let project: Project;
  beforeAll(async () => {
    project = await Project.create();
    await mkdir(join(project.dir, 'providers.d'));
    await writeFile(
      join(project.dir, 'providers.d/bridge.yaml'),
      ['schema_version: "1.0"', 'providers:', '  - identification:', '      name: nic_pf0', '    parent: "$HOST"', '    inventories:', '      additional:', `        - ${VF}: { total: 4 }`, '    traits:', '      additional: [CUSTOM_PHYSNET_PUBLIC]', ''].join('\n'),
    );
    await project.writeConfig({ tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'], providerConfigs: './providers.d' }, scheduler: { filters: ['status', 'traits', 'resources'] } });
    expect((await project.run(['host', 'sync'])).code).toBe(0);
  });
  afterAll(async () => {
    await project?.remove();
  });

  const vfsUsed = async (): Promise<number> => {
    const { usage } = json(await project.run(['usage', '--json'])) as { usage: Array<{ resourceClass: string; used: number }> };
    return usage.find((u) => u.resourceClass === VF)!.used;
  };

  it('claim and schedule take --request-group; attach and detach change a live instance in place', async () => {
    const uuid = '41111111-2222-4333-8444-555555555555';
    const claim = await project.run(['claim', '--flavor', 'small', '--uuid', uuid, '--request-group', `port-1:${VF}=1;required=CUSTOM_PHYSNET_PUBLIC`, '--json']);
    expect(claim.code, claim.stderr).toBe(0);
    const claimed = json(claim);
    expect(claimed.allocations).toContainEqual(expect.objectContaining({ providerName: 'node1_nic_pf0', resourceClass: VF, amount: 1 }));
    expect(claimed.requestGroups).toEqual([{ requester: 'port-1', resources: { [VF]: 1 }, required: ['CUSTOM_PHYSNET_PUBLIC'], provider: expect.any(String) }]);

    const schedule = await project.run(['schedule', '--flavor', 'small', '--request-group', `port-2:${VF}=1`, '--json']);
    expect(schedule.code, schedule.stderr).toBe(0);
    expect(json(schedule).selections[0].mappings).toEqual({ 'port-2': [claimed.requestGroups[0].provider] });
    expect(await vfsUsed()).toBe(2);

    const attach = await project.run(['instance', 'attach', uuid, '--request-group', `port-3:${VF}=1`]);
    expect(attach.code, attach.stderr).toBe(0);
    expect(attach.stdout).toContain(`attached request group port-3 (instance ${uuid} on node1)`);
    expect(attach.stdout).toMatch(/port-3\s+CUSTOM_NIC_VF=1\s+node1_nic_pf0/);
    expect(await vfsUsed()).toBe(3);

    // 1 left: refused (exit 3) naming the class; nothing changes.
    const full = await project.run(['instance', 'attach', uuid, '--request-group', `port-4:${VF}=2`]);
    expect(full.code).toBe(3);
    expect(full.stderr).toMatch(new RegExp(`^ert: attach of request group port-4 to instance ${uuid} on host node1 refused: .*${VF}`));
    expect(await vfsUsed()).toBe(3);

    const shown = await project.run(['instance', 'show', uuid]);
    expect(shown.stdout).toContain(`  request group port-1: ${VF}=1 on node1_nic_pf0\n  request group port-3: ${VF}=1 on node1_nic_pf0\n`);

    const detach = await project.run(['instance', 'detach', uuid, '--requester', 'port-1', '--json']);
    expect(detach.code, detach.stderr).toBe(0);
    expect(json(detach).requestGroups.map((g: { requester: string }) => g.requester)).toEqual(['port-3']);
    expect(await vfsUsed()).toBe(2);
  });

  it('bad input exits 2 naming the option or the request group key; an unknown instance exits 2', async () => {
    const malformed = await project.run(['claim', '--flavor', 'small', '--request-group', 'port-1']);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('--request-group must be REQUESTER:CLASS=N');
    const badClass = await project.run(['schedule', '--flavor', 'small', '--request-group', 'port-1:bandwidth=5']);
    expect(badClass.code).toBe(2);
    expect(badClass.stderr).toContain('requestGroups[0].resources.bandwidth');
    const unknown = await project.run(['instance', 'detach', '51111111-2222-4333-8444-555555555555', '--requester', 'port-1']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no instance 51111111-2222-4333-8444-555555555555 in the store');
  });
});
