import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CoreServices, createServiceToken, definePlugin, type Clock, type PluginContext, type ResourceContext } from '@ert/plugin-api';
import {
  ConfigError,
  PluginHookError,
  PluginLoadError,
  TOKENS,
  configFromObject,
  createLogger,
  createPluginRuntime,
  type PluginRuntimeOptions,
} from '../src/index.js';

const fixtureDir = fileURLToPath(new URL('../../../test/fixtures/loader/', import.meta.url));

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({ level: 'debug', destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) } });
  return { lines, logger };
}

async function rejection<E>(promise: Promise<unknown>, type: new (...args: never[]) => E): Promise<E> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(type);
  return err as E;
}

const fixedClock: Clock = { now: () => 1_700_000_000_000 };

/** A plugin whose factories hand back their context so tests can inspect it. */
const probe = definePlugin<{ perCore: number; mode: string }>({
  name: 'probe',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: { perCore: { type: 'integer', minimum: 1, default: 10 }, mode: { enum: ['fast', 'safe'], default: 'safe' } },
  },
  extraSpecs: [{ key: 'probe:level', description: 'probe level', schema: { type: 'integer' } }],
  resource: (ctx) => ({ discover: () => ({ available: true }), ctx }) as never,
  consumer: (ctx) => ({ reads: [1], consume: () => null, ctx }) as never,
  filter: (ctx) => ({ filter: () => undefined, ctx }) as never,
  weigher: (ctx) => ({ weigh: () => 1, ctx }) as never,
});
const other = definePlugin({
  name: 'other',
  resource: (ctx) => ({ discover: () => ({ available: true }), ctx }) as never,
  filter: (ctx) => ({ filter: () => undefined, ctx }) as never,
});
const ctxOf = (hooks: unknown) => (hooks as { ctx: PluginContext<unknown> }).ctx;

function runtime(input: Record<string, unknown>, more: Partial<PluginRuntimeOptions> & Pick<PluginRuntimeOptions, 'side'>) {
  const config = configFromObject(input, { configDir: fixtureDir, configFile: `${fixtureDir}ert.yaml` });
  return createPluginRuntime({ config, logger: capture().logger, clock: fixedClock, ...more });
}

describe('createPluginRuntime: compute side', () => {
  it('loads resource plugins in order from every source, with their context', async () => {
    const rt = await runtime(
      { tracker: { resources: ['fixture', './plugins/local.js', probe], enforce: ['probe'], root: './host' } },
      { side: 'compute', hostName: 'node-1' },
    );
    expect(rt.resources.map((r) => [r.name, r.resolved.source])).toEqual([
      ['fixture', 'package'],
      ['local', 'path'],
      ['probe', 'object'],
    ]);
    const ctx = ctxOf(rt.resources[2]!.hooks) as ResourceContext<unknown>;
    expect(ctx.hostName).toBe('node-1');
    expect(ctx.root).toBe(`${fixtureDir}host`);
    expect(ctx.enforce).toBe(true);
    expect(rt.resources.map((r) => r.enforce)).toEqual([false, false, true]);
    expect(await rt.resources[0]!.hooks.discover()).toEqual({ available: true, host: { inventories: { CUSTOM_FIXTURE: { total: 4 } } } });
    expect(rt.consumers).toEqual([]);
    expect(rt.dispatcher.timings().map((t) => `${t.plugin}.${t.hook}`)).toEqual(['fixture.resource', 'local.resource', 'probe.resource']);
  });

  it('refuses tracker.enforce naming a plugin that is not loaded', async () => {
    const err = await rejection(runtime({ tracker: { resources: [probe], enforce: ['llc'] } }, { side: 'compute' }), ConfigError);
    expect(err.code).toBe('ERT_CONFIG_INVALID');
    expect(err.message).toContain('tracker.enforce names "llc", expected names of tracker.resources plugins (probe)');
  });
});

describe('createPluginRuntime: scheduler side', () => {
  it('one package serves consumer, filter and weigher, with one context per plugin name', async () => {
    const rt = await runtime(
      { scheduler: { consumers: ['gpu'], filters: ['gpu', 'status'], weighers: [{ name: 'gpu', multiplier: 2.5 }] } },
      { side: 'scheduler', builtins: { status: definePlugin({ name: 'status', filter: () => ({ filter: () => undefined }) }) } },
    );
    expect(rt.consumers.map((c) => c.name)).toEqual(['gpu']);
    expect(rt.filters.map((f) => [f.name, f.resolved.source])).toEqual([
      ['gpu', 'package'],
      ['status', 'builtin'],
    ]);
    expect(rt.weighers[0]).toMatchObject({ name: 'gpu', multiplier: 2.5 });
    expect(rt.filters[0]!.logger).toBe(rt.consumers[0]!.logger);
    expect(rt.filters[0]!.services).toBe(rt.weighers[0]!.services);
    expect(rt.resources).toEqual([]);
  });

  it('refuses the same plugin twice in one list, and two plugins under one name', async () => {
    const twice = await rejection(runtime({ scheduler: { filters: [probe, probe] } }, { side: 'scheduler' }), PluginLoadError);
    expect(twice.code).toBe('ERT_PLUGIN_NAME_CONFLICT');
    expect(twice.message).toBe('Plugin "probe" is listed twice in scheduler.filters');
    const clash = await rejection(
      runtime({ scheduler: { filters: [{ name: 'x', plugin: probe }, { name: 'x', plugin: other }] } }, { side: 'scheduler' }),
      PluginLoadError,
    );
    expect(clash.code).toBe('ERT_PLUGIN_NAME_CONFLICT');
  });
});

describe('plugin options', () => {
  it('are validated with defaults applied, without touching the config', async () => {
    const input = { tracker: { resources: [probe, './plugins/local.js'] }, plugins: { probe: { mode: 'fast' } } };
    const rt = await runtime(input, { side: 'compute' });
    expect(rt.resources[0]!.options).toEqual({ mode: 'fast', perCore: 10 });
    expect(ctxOf(rt.resources[0]!.hooks).options).toEqual({ mode: 'fast', perCore: 10 });
    expect(rt.resources[1]!.options).toEqual({ perCore: 10 });
    expect(rt.config.plugins).toEqual({ probe: { mode: 'fast' } });
  });

  it('a plugin without a schema gets its options as given', async () => {
    const rt = await runtime({ tracker: { resources: [other] }, plugins: { other: { anything: [1, 2] } } }, { side: 'compute' });
    expect(rt.resources[0]!.options).toEqual({ anything: [1, 2] });
  });

  it('invalid options name the plugin, key path and value', async () => {
    const err = await rejection(
      runtime({ tracker: { resources: [probe] }, plugins: { probe: { perCore: 0, mode: 'turbo', extra: true } } }, { side: 'compute' }),
      PluginLoadError,
    );
    expect(err.code).toBe('ERT_PLUGIN_OPTIONS_INVALID');
    const file = `${fixtureDir}ert.yaml`;
    expect(err.message.split('\n')).toEqual([
      `Plugin "probe" options in ${file} are invalid:`,
      `${file}: plugins.probe.extra: got true, expected no such key; known keys here: perCore, mode`,
      `${file}: plugins.probe.perCore: got 0, expected a number >= 1`,
      `${file}: plugins.probe.mode: got "turbo", expected one of "fast", "safe"`,
    ]);
    expect(err.details.plugin).toBe('probe');
  });
});

describe('loggers and containers', () => {
  it('each plugin logs through its own child logger bound to { plugin: name }', async () => {
    const { lines, logger } = capture();
    const config = configFromObject({ tracker: { resources: [probe, other] } }, { configDir: fixtureDir });
    const rt = await createPluginRuntime({ config, side: 'compute', logger });
    ctxOf(rt.resources[0]!.hooks).logger.info({ cores: 4 }, 'discovered');
    rt.resources[1]!.logger.warn('other speaks');
    expect(lines.map((l) => [l.plugin, l.msg])).toEqual([
      ['probe', 'discovered'],
      ['other', 'other speaks'],
    ]);
    expect(lines[0]!.cores).toBe(4);
  });

  it('each plugin has its own container: registrations stay private, the clock is provided', async () => {
    const rt = await runtime({ tracker: { resources: [probe, other] } }, { side: 'compute' });
    const a = ctxOf(rt.resources[0]!.hooks).services;
    const b = ctxOf(rt.resources[1]!.hooks).services;
    expect(a.resolve(CoreServices.clock).now()).toBe(1_700_000_000_000);
    expect(b.resolve(CoreServices.clock)).toBe(fixedClock);
    const cache = createServiceToken<Map<string, number>>('test.cache');
    a.register(cache, new Map([['x', 1]]));
    expect(a.resolve(cache).get('x')).toBe(1);
    expect(a.isRegistered(cache)).toBe(true);
    expect(b.isRegistered(cache)).toBe(false);
    expect(() => b.resolve(cache)).toThrow('No service registered for "test.cache"');
  });

  it('the root container holds the host services under TOKENS', async () => {
    const rt = await runtime({ tracker: { resources: [probe] } }, { side: 'compute' });
    expect(rt.container.resolve(TOKENS.Config)).toBe(rt.config);
    expect(rt.container.resolve(TOKENS.Dispatcher)).toBe(rt.dispatcher);
    expect(rt.container.resolve(TOKENS.Logger)).toBe(rt.logger);
    expect(rt.container.resolve(TOKENS.Clock)).toBe(fixedClock);
  });
});

describe('factories and extra-spec keys', () => {
  it('a factory that throws is a PluginHookError tagged with plugin and kind', async () => {
    const broken = definePlugin({
      name: 'broken',
      resource: () => {
        throw new Error('no /sys here');
      },
    });
    const err = await rejection(runtime({ tracker: { resources: [broken] } }, { side: 'compute' }), PluginHookError);
    expect(err.code).toBe('ERT_PLUGIN_HOOK_FAILED');
    expect(err.details).toEqual({ plugin: 'broken', hook: 'resource' });
  });

  it('a factory returning garbage is refused', async () => {
    const garbage = definePlugin({ name: 'garbage', consumer: () => ({ consume: () => null }) as never, filter: () => 'nope' as never });
    const consumer = await rejection(runtime({ scheduler: { consumers: [garbage] } }, { side: 'scheduler' }), PluginHookError);
    expect(consumer.code).toBe('ERT_PLUGIN_HOOK_INVALID_RESULT');
    expect(consumer.message).toContain('consumer "reads" must be a list of stats schema versions');
    const filter = await rejection(runtime({ scheduler: { filters: [garbage] } }, { side: 'scheduler' }), PluginHookError);
    expect(filter.message).toBe('Plugin "garbage" hook "filter" returned an invalid result: expected a hooks object, got "nope"');
  });

  it('collects every plugin\'s extra-spec keys and refuses a key owned twice', async () => {
    const rt = await runtime({ scheduler: { filters: [probe, other] } }, { side: 'scheduler' });
    expect(rt.extraSpecKeys.map((k) => k.key)).toEqual(['probe:level']);
    const rival = definePlugin({
      name: 'rival',
      extraSpecs: [{ key: 'probe:level', description: 'mine', schema: { type: 'string' } }],
      filter: () => ({ filter: () => undefined }),
    });
    const err = await rejection(runtime({ scheduler: { filters: [probe, rival] } }, { side: 'scheduler' }), PluginLoadError);
    expect(err.code).toBe('ERT_PLUGIN_EXTRA_SPEC_CONFLICT');
    expect(err.message).toBe('Extra-spec key "probe:level" is owned by two plugins: "probe" and "rival"');
  });
});

// A path or package ref is known by the name its definePlugin gives (docs/plugins.md), so
// `plugins.<name>` of such a plugin is checked once it is loaded. Seen red with the check at
// config time for every ref (the path's options `plugins.local` refused as a typo).
describe('plugins.<name> of a path plugin', () => {
  it('accepts the loaded plugin\u2019s own name and refuses a typo, naming the key', async () => {
    const rt = await runtime({ tracker: { resources: ['./plugins/local.js'] }, plugins: { local: {} } }, { side: 'compute' });
    expect(rt.resources.map((r) => r.name)).toEqual(['local']);
    const err = await rejection(runtime({ tracker: { resources: ['./plugins/local.js'] }, plugins: { locl: {} } }, { side: 'compute' }), ConfigError);
    expect(err.message).toContain('plugins.locl: expected options of a configured plugin; no plugin named "locl"');
  });

  it('gives no verdict while a ref of the other side is a path this process does not load', async () => {
    const rt = await runtime({ tracker: { resources: ['fixture'] }, scheduler: { filters: ['./plugins/local.js'] }, plugins: { local: {} } }, { side: 'compute' });
    expect(rt.resources.map((r) => r.name)).toEqual(['fixture']);
  });
});
