import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ciRequiresPostgres } from '../global-setup.js';
import { REPO } from '../cli/helpers.js';

/*
 * What CI runs (.ci/run) and the guard that keeps the PostgreSQL suites from vanishing
 * under CI (test/global-setup.ts, vitest's globalSetup).
 */

function vitest(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(REPO, 'node_modules/vitest/vitest.mjs'), 'run', 'packages/core/test/random.test.ts'], {
      cwd: REPO,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('the PostgreSQL guard under CI', () => {
  it('refuses CI without ERT_TEST_PG_URL and accepts every other combination', () => {
    expect(ciRequiresPostgres({ CI: 'true' })).toMatch(/^CI is set but ERT_TEST_PG_URL is not: the PostgreSQL suites would not run/);
    expect(ciRequiresPostgres({ CI: '1' })).toBeDefined();
    expect(ciRequiresPostgres({ CI: 'true', ERT_TEST_PG_URL: '' })).toBeDefined();
    expect(ciRequiresPostgres({ CI: 'true', ERT_TEST_PG_URL: 'postgres://postgres@127.0.0.1:5432/ert_test' })).toBeUndefined();
    expect(ciRequiresPostgres({})).toBeUndefined();
    expect(ciRequiresPostgres({ CI: 'false' })).toBeUndefined();
    expect(ciRequiresPostgres({ CI: '0' })).toBeUndefined();
  });

  // Mutation seen caught: with `globalSetup` removed from vitest.config.ts, this run passed
  // (exit 0) on SQLite alone.
  it('makes a real vitest run fail with CI=true and no ERT_TEST_PG_URL', { timeout: 60_000 }, async () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ERT_') && !k.startsWith('VITEST') && k !== 'NODE_OPTIONS'));
    const refused = await vitest({ ...env, CI: 'true' });
    expect(refused.code, refused.output).not.toBe(0);
    expect(refused.output).toContain('CI is set but ERT_TEST_PG_URL is not');
    const local = await vitest({ ...env, CI: '' });
    expect(local.code, local.output).toBe(0);
  });
});

describe('.ci/run', () => {
  // Mutation seen caught: deleting the ESLint line of .ci/run (or the --max-warnings=0 flag).
  it('exports CI=true and ERT_TEST_PG_URL, runs the tests, then ESLint with zero warnings as npm run lint does', () => {
    const script = readFileSync(join(REPO, '.ci/run'), 'utf8');
    const lines = script.split('\n').map((l) => l.trim());
    expect(lines).toContain('export CI=true');
    expect(lines).toContain('export ERT_TEST_PG_URL');
    const test = lines.indexOf('npm test');
    const lint = lines.indexOf('npx eslint . --max-warnings=0');
    expect(test).toBeGreaterThan(lines.indexOf('export ERT_TEST_PG_URL'));
    // npm test builds and type-checks (code and tests) first, so ESLint alone completes npm run lint.
    expect(lint).toBeGreaterThan(test);
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.lint).toMatch(/eslint \. --max-warnings=0$/);
    expect(pkg.scripts.test).toMatch(/^npm run build && tsc -p tsconfig\.tests\.json && vitest run/);
  });
});
