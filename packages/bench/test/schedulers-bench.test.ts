import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// `npm run bench -- schedulers` (issue 15: several schedulers on one PostgreSQL) keeps
// measuring what it says: real scheduler processes deciding at the same time on one store
// (their decision spans overlap), every placed instance's claim in the store and nothing over
// capacity. Mutation seen caught: a process reporting an instance it never placed (the
// claim check counted it missing: exit 1).

const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'schedulers-bench.js');
const pg = process.env['ERT_TEST_PG_URL'];

describe.skipIf(!pg)('the schedulers-on-one-PostgreSQL bench', () => {
  it('runs one and two scheduler processes on a small fleet, deciding together, every claim accounted for', () => {
    expect(existsSync(script), `${script} (npm run build)`).toBe(true);
    const run = spawnSync(process.execPath, [script, '--processes', '1,2', '--hosts', '60', '--decisions', '120', '--json'], { encoding: 'utf8', timeout: 150_000, env: { ...process.env, ERT_TEST_PG_URL: pg } });
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout) as { runs: Array<{ processes: number; placed: number; failed: number; decisionsPerSecond: number; overlapSeconds: number; wrongAnswers: number; overCapacity: number; missingClaims: number }> };
    expect(out.runs.map((r) => r.processes)).toEqual([1, 2]);
    for (const r of out.runs) {
      expect(r.placed + r.failed).toBe(120);
      expect(r.placed).toBeGreaterThan(0);
      expect(r.decisionsPerSecond).toBeGreaterThan(0);
      expect(r.wrongAnswers).toBe(0);
    }
    // The two processes decided at the same time, not one after the other.
    expect(out.runs[1]!.overlapSeconds).toBeGreaterThan(0);
  }, 180_000);

  it('refuses to run without a PostgreSQL server, saying how to give one', () => {
    const env = { ...process.env };
    delete env['ERT_TEST_PG_URL'];
    const run = spawnSync(process.execPath, [script, '--hosts', '5'], { encoding: 'utf8', timeout: 60_000, env });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain('--pg URL (or ERT_TEST_PG_URL)');
  });
});
