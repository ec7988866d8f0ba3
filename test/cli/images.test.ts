// Issue 20, point 3, from the CLI: `ert schedule --image-property KEY=VALUE` and
// `ert claim --image-property KEY=VALUE` (repeatable) give the image's properties, merged with
// the flavor's extra specs by Nova's rules (docs/images.md). Real `ert` processes on a real
// SQLite file; the host is xeon-2s-cat (AVX-512; dedicated CPUs 36-39,76-79 with vcpu
// `dedicatedCpus: isolated`).
//
// Mutations seen caught: withImageProperties returning the flavor unchanged (the dedicated
// image was claimed as VCPU with no pinned CPUs; the forbidden trait was placed, exit 0);
// schedule.ts reading the flavor without withImageProperties (the scheduled reservation asked VCPU).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Project, json } from './helpers.js';

const PLAIN = { name: 'plain', vcpus: 2, memory_mb: 256, disk_gb: 0, extra_specs: {} };
const SHARED = { name: 'shared', vcpus: 2, memory_mb: 256, disk_gb: 0, extra_specs: { 'hw:cpu_policy': 'shared' } };
const ISOLATED = [36, 37, 38, 39, 76, 77, 78, 79];

describe('ert schedule / ert claim --image-property', () => {
  let project: Project;
  beforeAll(async () => {
    project = await Project.create();
    await project.writeConfig({
      tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'], staleAfter: '168h' },
      scheduler: { consumers: ['vcpu', 'memory'], filters: ['status', 'resources', 'vcpu'] },
      plugins: { vcpu: { dedicatedCpus: 'isolated' } },
      flavors: [PLAIN, SHARED],
    });
    expect((await project.run(['db', 'migrate'])).code).toBe(0);
    expect((await project.run(['host', 'sync'])).code).toBe(0);
  });
  afterAll(async () => {
    await project.remove();
  });

  it('claim: a dedicated-CPU image on a flavor without a policy is pinned to dedicated CPUs', async () => {
    const claimed = await project.run(['--json', 'claim', '--flavor', 'plain', '--image-property', 'hw_cpu_policy=dedicated']);
    expect(claimed.code, claimed.stderr).toBe(0);
    const result = json(claimed);
    expect(result.allocations.map((a: { resourceClass: string; amount: number }) => [a.resourceClass, a.amount]).sort()).toEqual([['MEMORY_MB', 256], ['PCPU', 2]]);
    expect(result.cpus).toHaveLength(2);
    for (const cpu of result.cpus) expect(ISOLATED).toContain(cpu);
    const shown = json(await project.run(['--json', 'instance', 'show', result.instance]));
    expect(shown.instance.flavor).toBe('plain');
  });

  it('schedule: image traits and CPU policy reach the scheduler, repeatable', async () => {
    const placed = await project.run(['--json', 'schedule', '--flavor', 'plain', '--image-property', 'hw_cpu_policy=dedicated', '--image-property', 'trait:HW_CPU_X86_AVX512F=required']);
    expect(placed.code, placed.stderr).toBe(0);
    const [selection] = json(placed).selections;
    expect(selection.host).toBe('node1');
    expect(selection.allocations.map((a: { resourceClass: string }) => a.resourceClass).sort()).toEqual(['MEMORY_MB', 'PCPU']);

    const forbidden = await project.run(['schedule', '--flavor', 'plain', '--image-property', 'trait:HW_CPU_X86_AVX512F=forbidden']);
    expect(forbidden.code).toBe(3);
  });

  it('a conflict between flavor and image, or a malformed pair, is a usage error (exit 2) naming both', async () => {
    const conflict = await project.run(['schedule', '--flavor', 'shared', '--image-property', 'hw_cpu_policy=dedicated']);
    expect(conflict.code).toBe(2);
    expect(conflict.stderr).toMatch(/^ert: flavor "shared" in .*: flavor hw:cpu_policy=shared conflicts with image hw_cpu_policy=dedicated: a shared flavor does not let the image ask for dedicated CPUs\n$/);
    const claim = await project.run(['claim', '--flavor', 'shared', '--image-property', 'hw_cpu_policy=dedicated']);
    expect(claim.code).toBe(2);
    expect(claim.stderr).toContain('flavor hw:cpu_policy=shared conflicts with image hw_cpu_policy=dedicated');
    const bad = await project.run(['schedule', '--flavor', 'plain', '--image-property', 'hw_cpu_policy']);
    expect([bad.code, bad.stderr]).toEqual([2, 'ert: --image-property must be KEY=VALUE (trait:NAME=required, hw_cpu_policy=dedicated), got "hw_cpu_policy"\n']);
  });
});
