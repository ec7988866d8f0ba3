import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// `npm run bench -- api` keeps measuring what it says on a small world: `ert serve` loaded
// through its API, every candidates answer 200 with candidates, every PUT answered, the
// usages adding up to the claims answered 204 (the bench exits 1 otherwise), and the process
// exiting once done (its client keeps connections alive; a hang is killed at the timeout).
// Mutation seen caught: the client's content-length one byte short (every request body cut:
// the load's first POST answered 400, exit 1).

const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'api-bench.js');

describe('the Placement API bench', () => {
  it('loads, asks, claims and checks against ert serve on SQLite, then exits', () => {
    expect(existsSync(script), `${script} (npm run build)`).toBe(true);
    const run = spawnSync(process.execPath, [script, '--store', 'sqlite', '--flat', '40', '--trees', '10', '--requests', '3', '--clients', '16', '--puts', '200', '--workers', '1', '--no-placement', '--json'], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(run.signal, run.stderr).toBeNull();
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout) as { results: Array<{ server: string; flatCandidates: { requests: number; failed: number }; treeCandidates: { failed: number }; claims: { requests: number; ok: number; conflicts: number; failed: number; perSecond: number } }> };
    expect(out.results).toHaveLength(1);
    const [ert] = out.results;
    expect(ert!.server).toMatch(/^ert serve/);
    expect(ert!.flatCandidates).toMatchObject({ requests: 3, failed: 0 });
    expect(ert!.treeCandidates.failed).toBe(0);
    expect(ert!.claims.requests).toBe(200);
    expect(ert!.claims.ok + ert!.claims.conflicts).toBe(200);
    expect(ert!.claims.failed).toBe(0);
    expect(ert!.claims.perSecond).toBeGreaterThan(0);
  }, 150_000);
});
