/*
 * What an `ert` command loads before it runs. Ajv's compiler, tsyringe (with reflect-metadata)
 * and semver are loaded where they are first needed (a plugin's options or stats schema, a
 * plugin runtime, a plugin's API check), the config's validators are generated code, and
 * `effectiveStatus` sits in @ert/plugin-api, so a command that loads no plugin (`ert hosts`,
 * `ert usage`) loads none of them and not @ert/scheduler: with them it took about 30 % more
 * CPU to start. The built `ert` runs with a preload (`--import`) that records every module the
 * ESM loader loads (a module hook) and, at exit, the modules in require's cache (the files
 * CommonJS packages require() among themselves).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Project } from './helpers.js';

/** Module paths of what a command that loads no plugin must not load. */
const LAZY = {
  ajvCompiler: '/node_modules/ajv/dist/compile/',
  tsyringe: '/node_modules/tsyringe/',
  reflectMetadata: '/node_modules/reflect-metadata/',
  semver: '/node_modules/semver/',
  scheduler: '/packages/scheduler/dist/',
};
type Loaded = Record<keyof typeof LAZY, boolean>;

const HOOKS = `import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  appendFileSync(process.env.LOADED_MODULES_OUT, url + '\\n');
  return next(url, context);
}
`;
const PRELOAD = `import { register, createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
register('./hooks.mjs', import.meta.url);
const require = createRequire(import.meta.url);
process.on('exit', () => appendFileSync(process.env.LOADED_MODULES_OUT, Object.keys(require.cache).join('\\n') + '\\n'));
`;

describe('ert loads what a command needs', () => {
  let project: Project;
  let preload: string;
  const loadedBy = async (args: string[]): Promise<Loaded> => {
    const out = join(project.dir, `loaded-${args.join('-')}.txt`);
    await writeFile(out, '');
    const result = await project.run(args, { NODE_OPTIONS: `--import ${pathToFileURL(preload).href}`, LOADED_MODULES_OUT: out });
    expect(result.code, result.stderr).toBe(0);
    const loaded = (await readFile(out, 'utf8')).split('\n').map((line) => decodeURIComponent(line));
    expect(loaded.some((file) => file.includes('/packages/cli/dist/bin.js')), 'the preload saw the entry point').toBe(true);
    return Object.fromEntries(Object.entries(LAZY).map(([name, path]) => [name, loaded.some((file) => file.includes(path))])) as Loaded;
  };

  beforeAll(async () => {
    project = await Project.create();
    await project.writeConfig({ tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'] }, scheduler: { consumers: ['vcpu', 'memory'], filters: ['status', 'resources'], weighers: [] } });
    preload = join(project.dir, 'preload.mjs');
    await writeFile(join(project.dir, 'hooks.mjs'), HOOKS);
    await writeFile(preload, PRELOAD);
  });
  afterAll(async () => {
    await project?.remove();
  });

  // The control, so the checks below cannot pass for not seeing a package: `host sync` loads
  // the four CommonJS packages, `schedule` the scheduler. Caught: each static import put back
  // once (`import { Ajv2020 } from 'ajv/dist/2020.js'` in core's schema.ts, `import { container }
  // from 'tsyringe'` and `import 'reflect-metadata'` in runtime.ts, `import semver from
  // 'semver'` in loader.ts, `effectiveStatus` from '@ert/scheduler' in the CLI's inventory.ts):
  // that package showed as loaded by `hosts`.
  it('host sync and schedule load them; hosts and usage load none', async () => {
    const synced = await loadedBy(['host', 'sync']);
    expect(synced).toMatchObject({ ajvCompiler: true, tsyringe: true, reflectMetadata: true, semver: true });
    expect((await loadedBy(['schedule', '--flavor', 'small'])).scheduler).toBe(true);
    const none: Loaded = { ajvCompiler: false, tsyringe: false, reflectMetadata: false, semver: false, scheduler: false };
    expect(await loadedBy(['hosts'])).toEqual(none);
    expect(await loadedBy(['usage'])).toEqual(none);
  });
});
