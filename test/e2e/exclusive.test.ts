// Issue 11, point 4, across real `ert` processes: `ert host run` (a long-running tracker,
// views built when it started) beside `ert claim` (another process, the same host and root).
// The claim takes cache ways, a class of service or pinned CPUs the running tracker's views
// do not know about; then `ert schedule --wait` reserves on the host and the running tracker
// confirms the reservation through its plugins, which offer the same units again. The store
// refuses them, the tracker re-reads the host's instances and confirms with other units: at
// the end no unit has two holders. SQLite file, and PostgreSQL when ERT_TEST_PG_URL is set.
//
// The overlap is shown, not assumed: the running tracker logs that the store held units its
// view did not know (once per flavor), and before this change the same run confirmed the
// reservation with the claimed instance's ways. Mutations seen caught: the llc grant without
// `units` ("ways overlap" red: both instances on mask 7 of domain 0); the tracker's retry
// removed (the schedule failed: "cannot take cpu/20: instance ... holds it").
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createStore, type InstanceRecord, type Store } from '@ert/store';
import { json, runErt, startErt, stopDaemon } from '../cli/helpers.js';
import { BACKENDS, ROOT, xeonProject } from './xeon-host.js';


describe.each(BACKENDS)('ert host run beside ert claim on one host (%s)', (backend) => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('never gives a cache way, a class of service or a pinned CPU to two instances', async () => {
    const { dir, storeOptions } = await xeonProject(backend, 'exclusive', cleanups);

    const run = startErt(['host', 'run'], { cwd: dir });
    let runLog = '';
    run.stdout!.on('data', (d) => (runLog += d));
    run.stderr!.on('data', (d) => (runLog += d));
    cleanups.push(() => stopDaemon(run, 'ert host run', { output: () => runLog }));
    const store: Store = await createStore(storeOptions);
    cleanups.push(() => store.close());
    await vi.waitFor(async () => expect(await store.getHost('xeon-1')).toBeDefined(), { timeout: 30_000, interval: 100 });

    for (const flavor of ['ways', 'pinned']) {
      const claimed = await runErt(['claim', '--flavor', flavor, '--host', 'xeon-1', '--root', ROOT, '--json'], { cwd: dir });
      expect(claimed.code, claimed.stderr).toBe(0);
      const scheduled = await runErt(['schedule', '--flavor', flavor, '--wait', '--json'], { cwd: dir });
      expect(scheduled.code, scheduled.stderr + runLog).toBe(0);
      const { selections } = json<{ selections: Array<{ host: string; state: string }> }>(scheduled);
      expect(selections).toEqual([expect.objectContaining({ host: 'xeon-1', state: 'active' })]);
    }

    const records: InstanceRecord[] = await store.listInstances({ host: 'xeon-1', state: 'active' });
    expect(records).toHaveLength(4);
    const ways = records.filter((r) => r.flavor.name === 'ways').map((r) => r.assignments['llc'] as { domain: number; mask: string; closid: number });
    expect(ways).toHaveLength(2);
    if (ways[0]!.domain === ways[1]!.domain) expect(parseInt(ways[0]!.mask, 16) & parseInt(ways[1]!.mask, 16), 'ways overlap').toBe(0);
    expect(ways[0]!.closid).not.toBe(ways[1]!.closid);
    const cpus = records.filter((r) => r.flavor.name === 'pinned').flatMap((r) => r.cpus ?? []);
    expect(cpus).toHaveLength(4);
    expect(new Set(cpus).size, 'a CPU pinned twice').toBe(4);
    // The running tracker met the store's refusal once per flavor: its views were stale.
    expect(runLog.match(/the store holds units this view did not know/g), 'refusals logged').toHaveLength(2);
  }, 120_000);
});
