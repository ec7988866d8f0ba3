import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Tests import workspace packages from their TypeScript sources (the `ert-source` export
// condition); processes the tests spawn run the built `dist` output, so `npm test` builds first.
const conditions = ['ert-source', 'node', 'import', 'default'];

export default defineConfig({
  resolve: { conditions },
  // Without 'import' here: vitest passes these as `node --conditions`, which would also apply
  // to require() and make CommonJS packages (pg -> pg-pool) load ESM builds they cannot extend.
  ssr: { resolve: { conditions: conditions.filter((c) => c !== 'import'), externalConditions: ['ert-source'] } },
  test: {
    // Vitest's default on a 2-core machine is one file at a time; the files mostly wait on the
    // ert processes, servers and databases they start. One more file than cores: on the 2-core
    // CI machine the suite took 452 s with three at a time against 829 s with one.
    maxWorkers: availableParallelism() + 1,
    include: ['packages/*/test/**/*.test.ts', 'plugins/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**', 'test/fixtures/**'],
    // Under CI, refuses to run without ERT_TEST_PG_URL (the PostgreSQL suites would vanish).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
