import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Project, startErt } from './helpers.js';

/**
 * `ert host run` on a store that is down at start (issue 14, "the agent survives the server or
 * database being down at start"): it keeps trying with backoff, says so once (naming the
 * store, its password masked), and a stop signal meanwhile ends it cleanly (exit 0).
 *
 * Mutation seen red: host run's wait not recognising the CLI's "cannot open the store" error
 * whose cause is ERT_STORE_UNAVAILABLE (it exited 1 at once).
 */
describe('ert host run with its store down at start', () => {
  let project: Project;
  beforeAll(async () => {
    project = await Project.create();
  });
  afterAll(async () => {
    await project?.remove();
  });

  it('waits with backoff, says so once, and stops on SIGTERM with exit 0', async () => {
    const run = startErt(['--config', project.configFile, 'host', 'run', '--root', project.root], {
      cwd: project.dir,
      env: { ERT_STORE_CONNECTION: 'postgres://ert:secret@127.0.0.1:1/nowhere' },
    });
    let stderr = '';
    run.stderr!.on('data', (d) => (stderr += d));
    await vi.waitFor(() => expect(stderr).toMatch(/retrying with backoff/), { timeout: 20_000, interval: 100 });
    // Still waiting a few attempts later (1 s doubling), and said once.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(run.exitCode).toBeNull();
    run.kill('SIGTERM');
    const [code] = await once(run, 'exit');
    expect(code).toBe(0);
    expect(stderr.match(/retrying with backoff/g)).toHaveLength(1);
    expect(stderr).toMatch(/cannot open the pg store postgres:\/\/ert:\*\*\*@127\.0\.0\.1:1\/nowhere: .*ECONNREFUSED/);
    expect(stderr).toMatch(/stop signal received before the store could be reached/);
    expect(stderr).not.toContain('secret');
  }, 40_000);
});
