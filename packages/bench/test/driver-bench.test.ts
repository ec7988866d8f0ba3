import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// `npm run bench -- drivers` (docs/benchmarks.md) keeps measuring what it says: the store's claim
// and the same statements on the bare driver, each run's usage checked against its claims. The
// raw runs replay the SQL the store sends, written out in the bench: when the store's claim
// changes shape (a column, a table), the replay fails here instead of in the next person's
// figures. Mutation seen caught: an allocation amount in the raw claim changed (2 -> 3 VCPU:
// "usage does not equal the claims", exit 1); a reset queued behind every raw call (the trip's
// operationsPerTrip 2, red).

const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'driver-bench.js');

describe('the SQLite driver comparison bench', () => {
  it('runs every driver on a small fleet with every claim accounted for', () => {
    expect(existsSync(script), `${script} (npm run build)`).toBe(true);
    const run = spawnSync(process.execPath, [script, '--hosts', '40', '--claims', '60', '--json'], { encoding: 'utf8', timeout: 120_000 });
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout) as {
      results: Record<string, { claimsPerSecond?: number; tripsPerClaim?: number; skipped?: string }>;
      trip: Record<'backToBackP50Us' | 'backToBackP99Us' | 'afterBusyP50Us' | 'afterBusyP99Us' | 'operationsPerTrip', number>;
      usageMismatches: Record<string, number>;
    };
    for (const name of ['store', 'store-general', 'sqlite3', 'sqlite3-prepared']) {
      expect(out.results[name]?.claimsPerSecond, name).toBeGreaterThan(0);
      expect(out.usageMismatches[name], name).toBe(0);
    }
    // The trips are counted on the store's connection: the one-statement claim's one, the
    // general transaction's one per statement. A fresh store's first claim goes the general way
    // (it learns the resource class ids there): about 14 trips more over the 60 claims.
    expect(out.results['store']!.tripsPerClaim).toBeGreaterThanOrEqual(1);
    expect(out.results['store']!.tripsPerClaim).toBeLessThanOrEqual(1.3);
    expect(out.results['store-general']!.tripsPerClaim).toBeGreaterThan(10);
    // The bare trip, both ways, in whole µs, and one work item on the driver's pool per timed
    // call: a reset queued behind each call (as the raw runs once did) would make each timed
    // call wait for two.
    expect(out.trip.operationsPerTrip, JSON.stringify(out.trip)).toBe(1);
    for (const way of ['backToBack', 'afterBusy'] as const) {
      const p50 = out.trip[`${way}P50Us`];
      expect(Number.isSafeInteger(p50) && p50 > 0, `${way}: ${JSON.stringify(out.trip)}`).toBe(true);
      expect(out.trip[`${way}P99Us`], way).toBeGreaterThanOrEqual(p50);
    }
    // better-sqlite3 is not ert's dependency: measured when installed beside, else said so.
    const better = out.results['better-sqlite3']!;
    if (better.skipped === undefined) expect(out.usageMismatches['better-sqlite3']).toBe(0);
    else expect(better.skipped).toMatch(/npm i --no-save better-sqlite3/);
  }, 150_000);

  it('refuses an unknown option, naming it', () => {
    const run = spawnSync(process.execPath, [script, '--host', '5'], { encoding: 'utf8', timeout: 60_000 });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/unknown option "--host"/);
  });
});
