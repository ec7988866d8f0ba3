/*
 * `ert claim` and `ert release` print and exit with what the tracker reports, with the real
 * llc plugin enforcing on a copy of the xeon-2s-cat profile. An enforcement failure is made
 * real: the file `sys/fs/resctrl/ert-<uuid>` stands where llc must create the instance's
 * resctrl group (mkdir fails on claim, rmdir on release).
 * Seen red on: claim dropping the tracker's `problems` (exit 0 under the `report` policy);
 * release printing `released: true` whatever the tracker said (exit 0 with problems).
 */
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Project, json } from './helpers.js';

const LLC2 = { name: 'llc2', vcpus: 2, memory_mb: 2048, disk_gb: 0, extra_specs: { 'llc:ways': '2' } };

describe('ert claim and release report what happened', () => {
  let project: Project;
  beforeAll(async () => {
    project = await Project.create();
    await project.writeConfig({
      tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory', 'llc'], enforce: ['llc'], enforcementFailure: 'report' },
      flavors: [LLC2],
    });
  });
  afterAll(async () => {
    await project?.remove();
  });

  const group = (uuid: string) => join(project.root, 'sys/fs/resctrl', `ert-${uuid}`);

  it('a clean claim and release exit 0; release prints released: true because the tracker released it', async () => {
    const uuid = '21111111-2222-4333-8444-555555555555';
    const claim = await project.run(['claim', '--flavor', 'llc2', '--uuid', uuid, '--json']);
    expect(claim.code, claim.stderr).toBe(0);
    expect(json(claim)).toMatchObject({ instance: uuid, host: 'node1' });
    // Enforcement did program the group.
    expect(existsSync(join(group(uuid), 'schemata'))).toBe(true);
    const release = await project.run(['release', uuid, '--json']);
    expect(release.code, release.stderr).toBe(0);
    expect(json(release)).toEqual({ instance: uuid, host: 'node1', released: true });
    expect(existsSync(group(uuid))).toBe(false);
  });

  it('a claim whose enforcement fails under the report policy exits 4 naming the plugin; the instance stays claimed', async () => {
    const uuid = '31111111-2222-4333-8444-555555555555';
    await mkdir(join(project.root, 'sys/fs/resctrl'), { recursive: true });
    await writeFile(group(uuid), 'in the way\n');
    const claim = await project.run(['claim', '--flavor', 'llc2', '--uuid', uuid, '--json']);
    expect(claim.code, claim.stderr).toBe(4);
    expect(claim.stderr).toMatch(new RegExp(`^ert: claimed ${uuid} \\(llc2\\) on host node1, but 1 problem\\(s\\) followed: Plugin "llc" hook "enforce" failed: llc: writing /sys/fs/resctrl/ert-${uuid} failed`));
    expect(claim.stderr.trim().split('\n')).toHaveLength(1);
    const { error } = json(claim);
    expect(error.code).toBe('ERT_CLI_CLAIMED_WITH_PROBLEMS');
    expect(error.details).toMatchObject({ instance: uuid, host: 'node1', problems: [{ code: 'ERT_PLUGIN_HOOK_FAILED', plugin: 'llc', hook: 'enforce', instance: uuid }] });
    expect(error.details.allocations.map((a: { resourceClass: string }) => a.resourceClass).sort()).toEqual(['CUSTOM_LLC_WAYS', 'MEMORY_MB', 'VCPU']);
    // Claimed all the same (the report policy keeps it).
    expect(json(await project.run(['hosts', '--json'])).hosts[0].instances).toBe(1);

    // Its release cannot remove the group either: released, with the problem, exit 4.
    const release = await project.run(['release', uuid, '--json']);
    expect(release.code, release.stderr).toBe(4);
    expect(release.stderr).toMatch(new RegExp(`^ert: released ${uuid} on host node1, but 1 problem\\(s\\) followed: Plugin "llc" hook "enforce" failed: llc: cannot remove /sys/fs/resctrl/ert-${uuid}`));
    const released = json(release).error;
    expect(released.code).toBe('ERT_CLI_RELEASED_WITH_PROBLEMS');
    expect(released.details).toMatchObject({ instance: uuid, host: 'node1', released: true, problems: [{ plugin: 'llc', hook: 'enforce' }] });
    expect(json(await project.run(['hosts', '--json'])).hosts[0].instances).toBe(0);
    await rm(group(uuid));
  });

  it('without --json the failure is the same one line and the same status', async () => {
    const uuid = '41111111-2222-4333-8444-555555555555';
    await writeFile(group(uuid), 'in the way\n');
    const claim = await project.run(['claim', '--flavor', 'llc2', '--uuid', uuid]);
    expect(claim.code).toBe(4);
    expect(claim.stdout).toBe('');
    expect(claim.stderr).toMatch(/^ert: claimed .* but 1 problem\(s\) followed: Plugin "llc" hook "enforce" failed: /);
    await rm(group(uuid));
    const release = await project.run(['release', uuid]);
    expect(release.code, release.stderr).toBe(0);
    expect(release.stdout).toBe(`released ${uuid} on node1\n`);
  });

  // Issue 12. Caught: the claim printing provider uuids and nothing of the plugins' assignments.
  it('a claim names the provider of each allocation and what each plugin assigned', async () => {
    const uuid = '51111111-2222-4333-8444-555555555555';
    const claim = await project.run(['claim', '--flavor', 'llc2', '--uuid', uuid]);
    expect(claim.code, claim.stderr).toBe(0);
    expect(claim.stdout).toMatch(
      new RegExp(
        `^claimed ${uuid} \\(llc2\\) on node1\nPROVIDER +CLASS +AMOUNT\n` +
          'node1_llc_0 +CUSTOM_LLC_WAYS +2\nnode1 +VCPU +2\nnode1 +MEMORY_MB +2048\n' +
          'PLUGIN +ASSIGNED\nllc +\\{"domain":0,"mask":"3","closid":1\\}\n$',
      ),
    );
    const other = '61111111-2222-4333-8444-555555555555';
    const asJson = json(await project.run(['claim', '--flavor', 'llc2', '--uuid', other, '--json']));
    expect(asJson).toMatchObject({ instance: other, host: 'node1', flavor: 'llc2', assignments: { llc: { domain: 0, mask: 'c', closid: 2 } } });
    expect(asJson.allocations).toContainEqual(expect.objectContaining({ providerName: 'node1_llc_0', resourceClass: 'CUSTOM_LLC_WAYS', amount: 2 }));
    for (const id of [uuid, other]) expect((await project.run(['release', id])).code).toBe(0);
  });
});
