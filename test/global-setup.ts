import { randomUUID } from 'node:crypto';
import type { TestProject } from 'vitest/node';
import { BUILD_RUN_ENV } from './build.js';

/**
 * vitest global setup: under CI (`CI` set to anything but "" / "0" / "false"), refuse to run
 * when ERT_TEST_PG_URL is not set. The store, scheduler, tracker and CLI suites run on
 * PostgreSQL only when it is set; without this check they would silently cover SQLite alone
 * in CI. `.ci/run` starts a throwaway server and exports the URL (see docs/development.md).
 *
 * Proved by test/ci/ci.test.ts (a real vitest run with CI=true and no URL exits non-zero);
 * mutation seen caught there: `globalSetup` removed from vitest.config.ts.
 */
export function ciRequiresPostgres(env: NodeJS.ProcessEnv): string | undefined {
  const ci = (env.CI ?? '').trim().toLowerCase();
  if (ci === '' || ci === '0' || ci === 'false') return undefined;
  if (env.ERT_TEST_PG_URL) return undefined;
  return (
    'CI is set but ERT_TEST_PG_URL is not: the PostgreSQL suites would not run. ' +
    'Start a server with `scripts/test-postgres.sh start <dir> <port>` and export its URL as ERT_TEST_PG_URL (what .ci/run does).'
  );
}

export default function setup(project: TestProject): void {
  const problem = ciRequiresPostgres(process.env);
  if (problem !== undefined) throw new Error(problem);
  // One run's id, so test/build.ts builds each package once per run rather than once per test
  // file (81 `tsc -b` checks, about 50 CPU-seconds, in a full run). Not in watch mode, where
  // sources change between reruns of the same process.
  if (project.vitest.config.watch) delete process.env[BUILD_RUN_ENV];
  else process.env[BUILD_RUN_ENV] = randomUUID();
}
