import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { definePlugin, isPlugin } from '@ert/plugin-api';
import { ConfigError, configFromObject, loadConfig, maskPasswords, parseDuration } from '../src/index.js';

function tempDir(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'ert-config-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

async function configError(promise: Promise<unknown> | (() => unknown)): Promise<ConfigError> {
  let err: unknown;
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ConfigError);
  return err as ConfigError;
}

const noEnv = {};

describe('loadConfig: every place cosmiconfig searches', () => {
  const yaml = 'tracker:\n  interval: 30s\n';
  const json = JSON.stringify({ tracker: { interval: '30s' } });
  const cases: Array<[string, string]> = [
    ['.ertrc', yaml],
    ['.ertrc.json', json],
    ['.ertrc.yaml', yaml],
    ['.ertrc.yml', yaml],
    ['ert.config.ts', "const config: { tracker: { interval: string } } = { tracker: { interval: '30s' } };\nexport default config;\n"],
    ['ert.config.mjs', "export default { tracker: { interval: '30s' } };\n"],
    ['ert.config.js', "module.exports = { tracker: { interval: '30s' } };\n"],
    ['ert.config.json', json],
    ['ert.config.yaml', yaml],
    ['ert.config.yml', yaml],
  ];
  for (const [file, text] of cases) {
    it(`finds ${file}`, async () => {
      const dir = tempDir({ [file]: text });
      const config = await loadConfig({ cwd: dir, env: noEnv });
      expect(config.configFile).toBe(join(dir, file));
      expect(config.configDir).toBe(dir);
      expect(config.tracker.interval).toBe(30_000);
    });
  }

  it('finds the ert key of package.json, and skips a package.json without one', async () => {
    const dir = tempDir({ 'package.json': JSON.stringify({ name: 'site', ert: { tracker: { interval: '2m' } } }) });
    expect((await loadConfig({ cwd: dir, env: noEnv })).tracker.interval).toBe(120_000);
    const other = tempDir({ 'package.json': JSON.stringify({ name: 'site' }), 'ert.config.yaml': 'tracker: { interval: 5s }\n' });
    const config = await loadConfig({ cwd: other, env: noEnv });
    expect(config.configFile).toBe(join(other, 'ert.config.yaml'));
  });

  it('an explicit path wins over ERT_CONFIG, which wins over the search', async () => {
    const dir = tempDir({
      'ert.config.yaml': 'tracker: { interval: 1s }\n',
      'conf/by-env.yaml': 'tracker: { interval: 2s }\n',
      'conf/by-path.yaml': 'tracker: { interval: 3s }\n',
    });
    expect((await loadConfig({ cwd: dir, env: noEnv })).tracker.interval).toBe(1000);
    expect((await loadConfig({ cwd: dir, env: { ERT_CONFIG: 'conf/by-env.yaml' } })).tracker.interval).toBe(2000);
    const byPath = await loadConfig({ cwd: dir, path: 'conf/by-path.yaml', env: { ERT_CONFIG: 'conf/by-env.yaml' } });
    expect(byPath.tracker.interval).toBe(3000);
    expect(byPath.configDir).toBe(join(dir, 'conf'));
  });

  it('an empty file is the defaults', async () => {
    const dir = tempDir({ 'ert.config.yaml': '' });
    expect((await loadConfig({ cwd: dir, env: noEnv })).tracker.interval).toBe(60_000);
  });

  it('the repository default config is valid', async () => {
    const path = fileURLToPath(new URL('../../../config/ert.config.yaml', import.meta.url));
    const config = await loadConfig({ path, env: noEnv });
    expect(config.tracker.resources.map((r) => r.name)).toContain('vcpu');
    expect(config.flavors.length).toBeGreaterThan(0);
  });
});

describe('loadConfig: not found and parse errors', () => {
  it('an explicit path that does not exist', async () => {
    const dir = tempDir();
    const err = await configError(loadConfig({ cwd: dir, path: 'nope.yaml', env: noEnv }));
    expect(err.code).toBe('ERT_CONFIG_NOT_FOUND');
    expect(err.message).toBe(`Config file ${join(dir, 'nope.yaml')} (from the path given) does not exist`);
    const viaEnv = await configError(loadConfig({ cwd: dir, env: { ERT_CONFIG: '/nowhere/ert.yaml' } }));
    expect(viaEnv.message).toBe('Config file /nowhere/ert.yaml (from ERT_CONFIG) does not exist');
  });

  it('an explicit package.json without an ert key', async () => {
    const dir = tempDir({ 'package.json': '{ "name": "x" }' });
    const err = await configError(loadConfig({ cwd: dir, path: 'package.json', env: noEnv }));
    expect(err.code).toBe('ERT_CONFIG_NOT_FOUND');
    expect(err.message).toBe(`Config file ${join(dir, 'package.json')} holds no ert config (no "ert" key)`);
  });

  it('nothing found in the directory', async () => {
    const dir = tempDir();
    const err = await configError(loadConfig({ cwd: dir, env: noEnv }));
    expect(err.code).toBe('ERT_CONFIG_NOT_FOUND');
    expect(err.message).toContain(`No ert config in ${dir}`);
    expect(err.message).toContain('ert.config.yaml');
  });

  it('invalid YAML names the file', async () => {
    const dir = tempDir({ 'ert.config.yaml': 'tracker:\n  interval: [60s\n' });
    const err = await configError(loadConfig({ cwd: dir, env: noEnv }));
    expect(err.code).toBe('ERT_CONFIG_PARSE');
    expect(err.message).toMatch(new RegExp(`^Config file ${join(dir, 'ert.config.yaml')} cannot be parsed: `));
  });

  it('invalid JSON names the file', async () => {
    const dir = tempDir({ '.ertrc.json': '{ "tracker": ' });
    const err = await configError(loadConfig({ cwd: dir, env: noEnv }));
    expect(err.code).toBe('ERT_CONFIG_PARSE');
    expect(err.details.file).toBe(join(dir, '.ertrc.json'));
  });

  it('a JS config that throws names the file', async () => {
    const dir = tempDir({ 'ert.config.mjs': "throw new Error('boom in config');\n" });
    const err = await configError(loadConfig({ cwd: dir, env: noEnv }));
    expect(err.code).toBe('ERT_CONFIG_PARSE');
    expect(err.message).toContain('boom in config');
  });
});

describe('defaults and resolution', () => {
  it('applies every default', () => {
    const config = configFromObject({}, { configDir: '/etc/ert' });
    expect(config).toEqual({
      configDir: '/etc/ert',
      store: { client: 'sqlite3', connection: '/etc/ert/ert.db', busyTimeoutMs: 5000 },
      log: { level: 'info' },
      tracker: {
        root: '/',
        resources: [],
        interval: 60_000,
        staleAfter: 180_000,
        hookTimeout: 5000,
        enforce: [],
        enforcementFailure: 'report',
        isolation: 'inprocess',
      },
      scheduler: { consumers: [], filters: [], weighers: [], maxAttempts: 3, hostSubsetSize: 1, refreshInterval: 1000, hookTimeout: 1000, placementSearchBudget: 50000, requestFilters: ['availability-zone', 'forbidden-aggregates'] },
      reservations: { timeout: 120_000, pollInterval: 500 },
      plugins: {},
      flavors: [],
    });
  });

  it('staleAfter defaults to three intervals; durations accept every form', () => {
    expect(configFromObject({ tracker: { interval: '5m' } }, { configDir: '/' }).tracker.staleAfter).toBe(900_000);
    const t = configFromObject({ tracker: { interval: 250, staleAfter: '1h', hookTimeout: '500ms' } }, { configDir: '/' }).tracker;
    expect([t.interval, t.staleAfter, t.hookTimeout]).toEqual([250, 3_600_000, 500]);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(() => parseDuration('5 minutes')).toThrow('"5 minutes" is not a duration');
  });

  it('resolves relative paths from the config directory', () => {
    const config = configFromObject(
      {
        store: { connection: 'data/ert.db' },
        tracker: { root: './fixtures/host', providerConfigs: 'providers.d', resources: [{ name: 'gpu', use: './plugins/gpu.js' }, 'vcpu'] },
      },
      { configDir: '/srv/ert' },
    );
    expect(config.store.connection).toBe('/srv/ert/data/ert.db');
    expect(config.tracker.root).toBe('/srv/ert/fixtures/host');
    expect(config.tracker.providerConfigs).toBe('/srv/ert/providers.d');
    expect(config.tracker.resources).toEqual([{ name: 'gpu', use: '/srv/ert/plugins/gpu.js' }, { name: 'vcpu' }]);
    expect(configFromObject({ store: { connection: ':memory:' } }, { configDir: '/x' }).store.connection).toBe(':memory:');
  });

  it('normalises plugin refs and weigher multipliers', () => {
    const config = configFromObject(
      { scheduler: { filters: ['status', '@acme/ert-foo'], weighers: ['ram', { name: 'llc', multiplier: 2 }, { name: 'cu', use: 'compute-units' }] } },
      { configDir: '/' },
    );
    expect(config.scheduler.filters).toEqual([{ name: 'status' }, { name: '@acme/ert-foo' }]);
    expect(config.scheduler.weighers).toEqual([
      { name: 'ram', multiplier: 1 },
      { name: 'llc', multiplier: 2 },
      { name: 'cu', use: 'compute-units', multiplier: 1 },
    ]);
  });

  it('takes plugin objects from a JS config, directly or as { plugin, multiplier }', () => {
    const gpu = definePlugin({ name: 'gpu', weigher: () => ({ weigh: () => 1 }) });
    const input = { tracker: { resources: [gpu] }, scheduler: { weighers: [{ plugin: gpu, multiplier: 3 }] } };
    const config = configFromObject(input, { configDir: '/' });
    expect(config.tracker.resources[0]).toEqual({ name: 'gpu', plugin: gpu });
    expect(config.tracker.resources[0]!.plugin).toBe(gpu);
    expect(config.scheduler.weighers[0]).toEqual({ name: 'gpu', plugin: gpu, multiplier: 3 });
    expect(input.tracker.resources[0]).toBe(gpu); // the input is not modified
  });

  it('loads plugin objects from an ert.config.mjs', async () => {
    const dir = tempDir({
      'ert.config.mjs': [
        "// Brands like definePlugin; test workers cannot import @ert/plugin-api's TypeScript sources natively.",
        "const plugin = Object.freeze({ name: 'inline', resource: () => ({ discover: () => ({ available: true }) }), [Symbol.for('ert.plugin')]: true, apiVersion: '0.1.0' });",
        'export default { tracker: { resources: [plugin] } };',
        '',
      ].join('\n'),
    });
    const config = await loadConfig({ cwd: dir, env: noEnv });
    expect(config.tracker.resources[0]!.name).toBe('inline');
    expect(isPlugin(config.tracker.resources[0]!.plugin)).toBe(true);
  });

  it('maps flavors to the contract (inline and from a file holding a list or { flavors })', () => {
    const inline = configFromObject(
      { flavors: [{ name: 'm1.small', vcpus: 1, memory_mb: 2048, extra_specs: { 'resources:CUSTOM_CU': 10, 'hw:cpu_policy': 'dedicated' } }] },
      { configDir: '/' },
    );
    expect(inline.flavors).toEqual([
      { name: 'm1.small', vcpus: 1, memoryMb: 2048, diskGb: 0, extraSpecs: { 'resources:CUSTOM_CU': '10', 'hw:cpu_policy': 'dedicated' } },
    ]);
    const dir = tempDir({
      'flavors.yaml': '- { name: a, vcpus: 2, memory_mb: 512, disk_gb: 10 }\n',
      'more/flavors.yml': 'flavors:\n  - { name: b, vcpus: 4, memory_mb: 1024 }\n',
    });
    expect(configFromObject({ flavors: 'flavors.yaml' }, { configDir: dir }).flavors).toEqual([
      { name: 'a', vcpus: 2, memoryMb: 512, diskGb: 10, extraSpecs: {} },
    ]);
    expect(configFromObject({ flavors: './more/flavors.yml' }, { configDir: dir }).flavors[0]!.name).toBe('b');
  });
});

describe('env overrides', () => {
  it('ERT_STORE_CONNECTION with a postgres URL selects pg', async () => {
    const dir = tempDir({ 'ert.config.yaml': 'store: { client: sqlite3, connection: ./a.db, schema: s1 }\n' });
    const url = 'postgres://postgres@127.0.0.1:55433/ert_test';
    const config = await loadConfig({ cwd: dir, env: { ERT_STORE_CONNECTION: url } });
    expect(config.store).toEqual({ client: 'pg', connection: url, schema: 's1', busyTimeoutMs: 5000 });
    const alt = await loadConfig({ cwd: dir, env: { ERT_STORE_CONNECTION: 'postgresql://h/db' } });
    expect(alt.store.client).toBe('pg');
  });

  it('ERT_STORE_CONNECTION with a path selects sqlite3, resolved from cwd', async () => {
    const dir = tempDir({ 'conf/ert.yaml': 'store: { client: pg, connection: "postgres://h/db" }\n' });
    const config = await loadConfig({ cwd: dir, path: 'conf/ert.yaml', env: { ERT_STORE_CONNECTION: 'var/x.db' } });
    expect(config.store).toEqual({ client: 'sqlite3', connection: join(dir, 'var/x.db'), busyTimeoutMs: 5000 });
  });
});

describe('validation errors: one line per problem naming file, key, value and expectation', () => {
  const file = '/etc/ert/ert.config.yaml';
  const invalid = (input: unknown) => configError(() => configFromObject(input, { configDir: '/etc/ert', configFile: file }));

  it('an unknown top-level key', async () => {
    const err = await invalid({ trackr: {} });
    expect(err.code).toBe('ERT_CONFIG_INVALID');
    expect(err.message).toBe(
      `Invalid config ${file} (1 problem):\n${file}: trackr: got {}, expected no such key; known keys here: store, log, tracker, scheduler, reservations, api, plugins, flavors`,
    );
  });

  it('an unknown or repeated request filter (scheduler.requestFilters names built-in ones)', async () => {
    const err = await invalid({ scheduler: { requestFilters: ['availability-zone', 'tenant-isolaton'] } });
    expect(err.message.split('\n')[1]).toContain('scheduler.requestFilters[1]: got "tenant-isolaton"');
    expect(err.message).toContain('tenant-isolation');
    const twice = await invalid({ scheduler: { requestFilters: ['tenant-isolation', 'tenant-isolation'] } });
    expect(twice.message).toContain('scheduler.requestFilters');
    expect(configFromObject({ scheduler: { requestFilters: [] } }, { configDir: '/etc/ert' }).scheduler.requestFilters).toEqual([]);
  });

  it('an unknown section key (a typo)', async () => {
    const err = await invalid({ tracker: { intervall: '60s' } });
    expect(err.message.split('\n')[1]).toBe(
      `${file}: tracker.intervall: got "60s", expected no such key; known keys here: hostName, root, resources, interval, staleAfter, providerConfigs, hookTimeout, enforce, enforcementFailure, isolation`,
    );
  });

  it('a bad duration, a bad enum and a wrong type, all reported at once', async () => {
    const err = await invalid({ tracker: { interval: 'soon', enforcementFailure: 'ignore' }, scheduler: { maxAttempts: 'three' } });
    expect(err.message.split('\n')).toEqual([
      `Invalid config ${file} (3 problems):`,
      `${file}: tracker.interval: got "soon", expected a duration such as "500ms", "60s", "5m", "1h" or a number of milliseconds`,
      `${file}: tracker.enforcementFailure: got "ignore", expected one of "report", "undo"`,
      `${file}: scheduler.maxAttempts: got "three", expected an integer`,
    ]);
    expect(err.details.problems).toEqual([
      { path: 'tracker.interval', value: 'soon', expected: expect.stringContaining('a duration') },
      { path: 'tracker.enforcementFailure', value: 'ignore', expected: 'one of "report", "undo"' },
      { path: 'scheduler.maxAttempts', value: 'three', expected: 'an integer' },
    ]);
  });

  it('a number out of range and a bad log level', async () => {
    const err = await invalid({ scheduler: { hostSubsetSize: 0 }, log: { level: 'verbose' } });
    expect(err.message).toContain(`${file}: scheduler.hostSubsetSize: got 0, expected a number >= 1`);
    expect(err.message).toContain(`${file}: log.level: got "verbose", expected one of "fatal", "error", "warn", "info", "debug", "trace", "silent"`);
  });

  it('a bad plugin ref', async () => {
    const err = await invalid({ tracker: { resources: ['vcpu', 42, { use: './x.js' }, { name: 'a', multiplier: 2 }] } });
    const lines = err.message.split('\n').slice(1);
    expect(lines).toContain(`${file}: tracker.resources[1]: got 42, expected a plugin name or path, a plugin object, or { name, use }`);
    expect(lines).toContain(`${file}: tracker.resources[2]: got {"use":"./x.js"}, expected a plugin name or path, a plugin object, or { name, use }`);
    expect(lines).toContain(`${file}: tracker.resources[3].multiplier: got 2, expected no such key; known keys here: name, use, plugin`);
  });

  it('a plugin field that is not a plugin object', async () => {
    const err = await invalid({ scheduler: { filters: [{ name: 'x', plugin: { name: 'x' } }] } });
    expect(err.message).toContain(`${file}: scheduler.filters[0].plugin: got {"name":"x"}, expected a plugin object made by definePlugin`);
  });

  it('the store: unknown client, pg without a connection', async () => {
    expect((await invalid({ store: { client: 'mysql' } })).message).toContain(`${file}: store.client: got "mysql", expected one of "sqlite3", "pg"`);
    expect((await invalid({ store: { client: 'pg' } })).message).toContain(
      `${file}: store.connection: missing, expected a postgres:// URL (required with client pg)`,
    );
  });

  it('inline flavors: missing, wrong and unknown keys, non-string extra specs, duplicates', async () => {
    const err = await invalid({
      flavors: [
        { name: 'a', vcpus: 0, memory_mb: 1, ram: 5, extra_specs: { 'hw:numa': { nodes: 2 } } },
        { vcpus: 1, memory_mb: 1 },
      ],
    });
    const lines = err.message.split('\n').slice(1);
    expect(lines).toEqual(
      expect.arrayContaining([
        `${file}: flavors[0].vcpus: got 0, expected a number >= 1`,
        `${file}: flavors[0].ram: got 5, expected no such key; known keys here: name, vcpus, memory_mb, disk_gb, extra_specs`,
        `${file}: flavors[0].extra_specs["hw:numa"]: got {"nodes":2}, expected a string`,
        `${file}: flavors[1].name: missing, expected a value (the key is required)`,
      ]),
    );
    expect(lines).toHaveLength(4);
    const dup = await invalid({ flavors: [{ name: 'a', vcpus: 1, memory_mb: 1 }, { name: 'a', vcpus: 2, memory_mb: 2 }] });
    expect(dup.message).toContain(`${file}: flavors[1].name: got "a", expected a flavor name not used by an earlier flavor`);
  });

  it('a flavors file: errors name that file; a missing file is not found', async () => {
    const dir = tempDir({ 'flavors.yaml': 'flavors:\n  - { name: a, vcpus: two, memory_mb: 1 }\n' });
    const err = await configError(() => configFromObject({ flavors: 'flavors.yaml' }, { configDir: dir, configFile: join(dir, 'ert.yaml') }));
    expect(err.message.split('\n')[1]).toBe(`${join(dir, 'flavors.yaml')}: flavors[0].vcpus: got "two", expected an integer`);
    const missing = await configError(() => configFromObject({ flavors: 'none.yaml' }, { configDir: dir }));
    expect(missing.code).toBe('ERT_CONFIG_NOT_FOUND');
    expect(missing.message).toContain(join(dir, 'none.yaml'));
  });

  it('a config that is not an object', async () => {
    const err = await invalid(['vcpu']);
    expect(err.message).toBe(`Invalid config ${file} (1 problem):\n${file}: (top level): got ["vcpu"], expected an object (the config)`);
  });

  it('a file with problems names the file it was loaded from', async () => {
    const dir = tempDir({ '.ertrc.yml': 'tracker:\n  hookTimeout: -5\n' });
    const err = await configError(loadConfig({ cwd: dir, env: noEnv }));
    expect(err.message.split('\n')[1]).toBe(
      `${join(dir, '.ertrc.yml')}: tracker.hookTimeout: got -5, expected a duration such as "500ms", "60s", "5m", "1h" or a number of milliseconds`,
    );
  });
});

/**
 * Issue 11, points 10 and 14 (config side). Each test names the mutation it was seen to
 * catch (made once, red, reverted).
 */
describe('config bounds (issue 11)', () => {
  const file = '/etc/ert/ert.config.yaml';
  const from = (input: unknown) => () => configFromObject(input, { configDir: '/etc/ert', configFile: file });

  // Caught: `durationAt` not checking MAX_DURATION_MS (700h was accepted as 2520000000 ms,
  // which Node's setTimeout turns into a 1 ms loop).
  it('a duration above 2^31-1 ms is a config error naming the key, for every duration key', async () => {
    for (const key of ['tracker.interval', 'tracker.staleAfter', 'tracker.hookTimeout', 'scheduler.refreshInterval', 'scheduler.hookTimeout', 'store.busyTimeout']) {
      const [section, name] = key.split('.') as [string, string];
      const err = await configError(from({ [section]: { [name]: '700h' } }));
      expect(err.code).toBe('ERT_CONFIG_INVALID');
      expect(err.message).toContain(`${file}: ${key}: got "700h", expected a duration of at most 2147483647 ms`);
    }
    // The largest accepted value, and the default staleAfter of a long interval, stay within it.
    const ok = configFromObject({ tracker: { interval: 2147483647 } }, { configDir: '/x' });
    expect(ok.tracker.interval).toBe(2147483647);
    expect(ok.tracker.staleAfter).toBe(2147483647);
    expect((await configError(from({ tracker: { interval: 2147483648 } }))).message).toContain('tracker.interval: got 2147483648');
  });

  // The dispatcher reads a timeout of 0 as "no limit", so `hookTimeout: 0` silently turned
  // timeouts off (a hanging `test` held every claim and stop() forever), and so did anything
  // under 0.5 ms, rounded to 0. Seen red with `hookTimeoutAt` back to `durationAt`, for either
  // key (the value was accepted: "expected undefined to be an instance of ConfigError").
  it('a hook timeout below 1 ms (0, or a fraction that rounds to 0) is a config error naming the key', async () => {
    for (const key of ['tracker.hookTimeout', 'scheduler.hookTimeout']) {
      const [section, name] = key.split('.') as [string, string];
      for (const value of [0, '0ms', '0s', '0.4ms', 0.4]) {
        const err = await configError(from({ [section]: { [name]: value } }));
        expect(err.code).toBe('ERT_CONFIG_INVALID');
        expect(err.message).toContain(`${file}: ${key}: got ${JSON.stringify(value)}, expected a duration of at least 1 ms (a hook timeout cannot be turned off`);
      }
      expect(configFromObject({ [section]: { [name]: '0.5ms' } }, { configDir: '/x' })[section as 'tracker'].hookTimeout).toBe(1);
      expect(configFromObject({ [section]: { [name]: 1 } }, { configDir: '/x' })[section as 'tracker'].hookTimeout).toBe(1);
    }
  });

  // A period or deadline of 0 is meaningless: `tracker.interval: 0` looped the tracker at
  // 100% CPU, `reservations.timeout: 0` expired every reservation at once, `tracker.staleAfter:
  // 0` made the scheduler never see a stale host while each tracker marked every other host
  // stale. Seen red with `positiveDurationAt` back to `durationAt` for each key (accepted:
  // "expected undefined to be an instance of ConfigError"), and with it applied to
  // scheduler.refreshInterval (0 refused).
  it('a zero tracker.interval, tracker.staleAfter, reservations.timeout or pollInterval is a config error naming the key; busyTimeout and refreshInterval take 0', async () => {
    for (const key of ['tracker.interval', 'tracker.staleAfter', 'reservations.timeout', 'reservations.pollInterval']) {
      const [section, name] = key.split('.') as [string, string];
      for (const value of [0, '0s', '0.4ms']) {
        const err = await configError(from({ [section]: { [name]: value } }));
        expect(err.code).toBe('ERT_CONFIG_INVALID');
        expect(err.message).toContain(`${file}: ${key}: got ${JSON.stringify(value)}, expected a duration of at least 1 ms (`);
      }
    }
    const zero = configFromObject({ store: { busyTimeout: 0 }, scheduler: { refreshInterval: '0s' }, reservations: { pollInterval: '0.5ms' } }, { configDir: '/x' });
    expect([zero.store.busyTimeoutMs, zero.scheduler.refreshInterval, zero.reservations.pollInterval]).toEqual([0, 0, 1]);
  });

  // Seen red with the URL check removed from configFromObject (client omitted: sqlite3, the URL
  // resolved as a path, "/etc/ert/postgres:/ert:s3cret@db:5432/ert").
  it('a postgres:// store.connection selects pg when client is omitted, and is refused with client sqlite3 (password masked)', async () => {
    for (const url of ['postgres://ert:s3cret@db:5432/ert', 'postgresql://db/ert']) {
      expect(configFromObject({ store: { connection: url } }, { configDir: '/etc/ert' }).store).toEqual({ client: 'pg', connection: url, busyTimeoutMs: 5000 });
    }
    const err = await configError(from({ store: { client: 'sqlite3', connection: 'postgres://ert:s3cret@db:5432/ert' } }));
    expect(err.code).toBe('ERT_CONFIG_INVALID');
    expect(err.message).toBe(
      `Invalid config ${file} (1 problem):\n${file}: store.client: got "sqlite3", expected pg: store.connection is a PostgreSQL URL (postgres://ert:***@db:5432/ert); set client: pg, or give store.connection a SQLite file path`,
    );
    expect(JSON.stringify(err.details)).not.toContain('s3cret');
    // A path that merely mentions postgres stays a SQLite file.
    expect(configFromObject({ store: { connection: './postgres.db' } }, { configDir: '/etc/ert' }).store).toMatchObject({ client: 'sqlite3', connection: '/etc/ert/postgres.db' });
  });

  // Seen red with maskPasswords back on describeConnection's `//user:pw@` (the one-slash form
  // kept its password) and without its `password=` pattern (`?password=s3cret` shown).
  it('maskPasswords masks the password of every URL form, and nothing else', () => {
    const cases: Array<[string, string]> = [
      ['postgres://ert:s3cret@db:5432/ert', 'postgres://ert:***@db:5432/ert'],
      ['/srv/x/postgres:/ert:s3cret@127.0.0.1:1/ert: SQLITE_CANTOPEN', '/srv/x/postgres:/ert:***@127.0.0.1:1/ert: SQLITE_CANTOPEN'],
      ['cannot open postgresql://u:p@ss@db/x (schema a)', 'cannot open postgresql://u:***@db/x (schema a)'],
      ['postgres://db/ert?user=ert&password=s3cret&sslmode=require', 'postgres://db/ert?user=ert&password=***&sslmode=require'],
      ['postgres://ert@db/ert', 'postgres://ert@db/ert'],
      ['/var/lib/ert/ert.db', '/var/lib/ert/ert.db'],
      ['flavor "a" in /etc/ert/flavors.yaml: extra spec hw:cpu_policy=dedicated', 'flavor "a" in /etc/ert/flavors.yaml: extra spec hw:cpu_policy=dedicated'],
    ];
    for (const [text, masked] of cases) expect(maskPasswords(text)).toBe(masked);
  });

  // Caught: the `busyTimeout` key removed from the store schema (an unknown-key error), and
  // `busyTimeoutMs` not passed on to StoreOptions (undefined).
  it('store.busyTimeout is a duration passed to the store in ms (default 5s)', () => {
    expect(configFromObject({ store: { busyTimeout: '750ms' } }, { configDir: '/x' }).store.busyTimeoutMs).toBe(750);
    expect(configFromObject({}, { configDir: '/x' }).store.busyTimeoutMs).toBe(5000);
  });

  // Caught: `refuseCycle` removed from loadConfig's path (the CLI printed "Maximum call stack
  // size exceeded", exit 1).
  it('a recursive YAML alias is one ERT_CONFIG_PARSE error naming the file and the key', async () => {
    const dir = tempDir({ 'ert.config.yaml': 'plugins: &a\n  x: *a\n', 'flavors.yaml': '- &f { name: a, vcpus: 1, memory_mb: 1, extra_specs: { k: [*f] } }\n' });
    const err = await configError(loadConfig({ cwd: dir, env: noEnv }));
    expect(err.code).toBe('ERT_CONFIG_PARSE');
    expect(err.message).toBe(`Config file ${join(dir, 'ert.config.yaml')} cannot be used: plugins.x contains itself (a recursive YAML alias or a circular object)`);
    writeFileSync(join(dir, 'ert.config.yaml'), 'flavors: ./flavors.yaml\n');
    const flavors = await configError(loadConfig({ cwd: dir, env: noEnv }));
    expect(flavors.message).toContain(`Config file ${join(dir, 'flavors.yaml')} cannot be used: [0].extra_specs.k[0] contains itself`);
  });

  // Caught: describeValue without its bigint case ("got 10", as if the number were fine).
  it('BigInt and null values in flavors through the library are refused, named as what they are', async () => {
    const bigint = await configError(from({ flavors: [{ name: 'x', vcpus: 10n, memory_mb: 1, extra_specs: { a: 10n } }] }));
    expect(bigint.message).toContain('flavors[0].vcpus: got 10n (a BigInt), expected an integer');
    expect(bigint.message).toContain('flavors[0].extra_specs.a: got 10n (a BigInt), expected a string');
    const nul = await configError(from({ flavors: [{ name: 'x', vcpus: 1, memory_mb: 1, extra_specs: { a: null } }] }));
    expect(nul.message).toContain('flavors[0].extra_specs.a: got null, expected a string');
  });
});
