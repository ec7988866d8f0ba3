import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { providerUuid } from '../src/index.js';
import { BACKENDS, useBench } from './harness.js';

const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));
const PROFILE = fileURLToPath(new URL('../../../config/hosts/xeon-2s-cat', import.meta.url));
const BUILT = path.join(PACKAGE_DIR, 'dist/index.js');

/** The README's host-agent example: its first ```ts block. */
function readmeExample(): string {
  const readme = readFileSync(path.join(PACKAGE_DIR, 'README.md'), 'utf8');
  const block = /```ts\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error('packages/tracker/README.md has no ```ts block');
  return block[1]!;
}

describe.each(BACKENDS)('the README host agent on %s', (backend) => {
  const bench = useBench(backend);

  it('runs as written: starts, claims, stops on SIGTERM with status 0, leaving the claim in the store', async () => {
    expect(existsSync(BUILT), `build first: npx tsc -b packages/tracker (${BUILT} is missing)`).toBe(true);
    const storeOptions = bench.storeOptions();
    const configFile = path.join(bench.dir, 'ert.config.yaml');
    // JSON is YAML: the store options (a PostgreSQL schema too) go in as they are.
    const config = {
      store: storeOptions,
      log: { level: 'silent' },
      tracker: { hostName: 'agent', root: PROFILE, resources: ['vcpu', 'memory'], interval: '1h', hookTimeout: '5s' },
    };
    await writeFile(configFile, JSON.stringify(config));

    // The example is plain JavaScript as well as TypeScript; run it from this package so that
    // @ert/core and @ert/tracker resolve as they do for an agent that depends on them.
    const child = spawn(process.execPath, ['--input-type=module', '-e', readmeExample()], {
      cwd: PACKAGE_DIR,
      env: { ...process.env, ERT_CONFIG: configFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (l) => {
        if (l.startsWith('claimed ')) resolve(l);
      });
      void exited.then(({ code }) => reject(new Error(`the example exited (${code}) before claiming: ${stderr}`)));
    });
    child.kill('SIGTERM');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(stderr).toBe('');

    const [, uuid, allocations] = /^claimed (\S+) (.*)$/.exec(line)!;
    expect(JSON.parse(allocations!)).toEqual(
      expect.arrayContaining([
        { providerName: 'agent', resourceClass: 'VCPU', amount: 1 },
        { providerName: 'agent', resourceClass: 'MEMORY_MB', amount: 2048 },
      ]),
    );
    const store = await bench.openStore(storeOptions);
    expect(await store.getInstance(uuid!)).toMatchObject({ host: 'agent', state: 'active', projectId: 'demo', flavor: { name: 'm1.small', vcpus: 1, memoryMb: 2048 } });
    expect((await store.getAllocations(uuid!)).allocations).toHaveLength(2);
    expect(await store.getHost('agent')).toMatchObject({ status: 'up', rootProviderUuid: providerUuid('agent') });
  });
});
