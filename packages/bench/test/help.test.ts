import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Every `npm run bench -- <name>` answers --help with its usage and exit 0, and names an
// unknown option (before this, three of them took --help for an unknown option).

const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist');
const BENCHES = { store: 'store-bench.js', scheduler: 'scheduler-bench.js', placement: 'placement-bench.js', isolation: 'isolation-bench.js', api: 'api-bench.js', drivers: 'driver-bench.js', schedulers: 'schedulers-bench.js' };

describe('bench --help', () => {
  it.each(Object.entries(BENCHES))('npm run bench -- %s --help prints its usage and exits 0', (name, file) => {
    const run = spawnSync(process.execPath, [path.join(dist, file), '--help'], { encoding: 'utf8', timeout: 60_000 });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^usage: npm run bench -- ${name} `));
    const unknown = spawnSync(process.execPath, [path.join(dist, file), '--frobnicate'], { encoding: 'utf8', timeout: 60_000 });
    expect(unknown.status).not.toBe(0);
    expect(unknown.stderr).toContain('--frobnicate');
  });
});
