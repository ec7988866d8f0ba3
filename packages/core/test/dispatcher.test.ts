import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PluginHookError, createDispatcher, createLogger, type Dispatcher, type HookCallObservation } from '../src/index.js';

async function hookError(promise: Promise<unknown> | (() => unknown)): Promise<PluginHookError> {
  let err: unknown;
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(PluginHookError);
  return err as PluginHookError;
}

function timing(d: Dispatcher, plugin: string, hook: string) {
  return d.timings().find((t) => t.plugin === plugin && t.hook === hook);
}

describe('Dispatcher.call', () => {
  it('returns what a sync or async hook returns', async () => {
    const d = createDispatcher();
    expect(await d.call('vcpu', 'discover', () => ({ available: true }))).toEqual({ available: true });
    expect(await d.call('vcpu', 'stats', async () => 7)).toBe(7);
  });

  it('wraps a sync throw, keeping the cause', async () => {
    const d = createDispatcher();
    const boom = new Error('sysfs gone');
    const err = await hookError(
      d.call('llc', 'discover', () => {
        throw boom;
      }),
    );
    expect(err.code).toBe('ERT_PLUGIN_HOOK_FAILED');
    expect(err.details).toEqual({ plugin: 'llc', hook: 'discover' });
    expect(err.message).toBe('Plugin "llc" hook "discover" failed: sysfs gone');
    expect(err.cause).toBe(boom);
  });

  it('wraps a rejection, including a non-Error one', async () => {
    const d = createDispatcher();
    const err = await hookError(d.call('pstate', 'enforce', () => Promise.reject(new Error('EPERM'))));
    expect(err.code).toBe('ERT_PLUGIN_HOOK_FAILED');
    expect(err.message).toBe('Plugin "pstate" hook "enforce" failed: EPERM');
    const odd = await hookError(d.call('pstate', 'enforce', () => Promise.reject('just a string')));
    expect(odd.cause).toBe('just a string');
    expect(odd.message).toContain('just a string');
  });

  it('reports a promise that never settles as a timeout instead of waiting forever', async () => {
    const d = createDispatcher({ defaultTimeoutMs: 10_000 });
    const err = await hookError(d.call('cu', 'test', () => new Promise<never>(() => undefined), { timeoutMs: 20 }));
    expect(err.code).toBe('ERT_PLUGIN_HOOK_TIMEOUT');
    expect(err.details).toEqual({ plugin: 'cu', hook: 'test', timeoutMs: 20 });
    expect(err.message).toBe('Plugin "cu" hook "test" did not finish within 20 ms');
  });

  it('uses the default timeout when the call gives none', async () => {
    const d = createDispatcher({ defaultTimeoutMs: 15 });
    const err = await hookError(d.call('cu', 'discover', () => new Promise<never>(() => undefined)));
    expect(err.details.timeoutMs).toBe(15);
  });

  it('ignores a rejection that arrives after the timeout', async () => {
    const d = createDispatcher();
    let rejectLate: (e: Error) => void = () => undefined;
    const err = await hookError(d.call('cu', 'test', () => new Promise<never>((_, reject) => (rejectLate = reject)), { timeoutMs: 5 }));
    expect(err.code).toBe('ERT_PLUGIN_HOOK_TIMEOUT');
    rejectLate(new Error('too late')); // must not surface as an unhandled rejection
    await new Promise((r) => setImmediate(r));
  });

  // Seen red with `call` starting `fn` at once whatever timed out before (no wait): the
  // second reset ran while the first was still running ('reset 2 starts' before 'reset 1 ends').
  it('does not start a plugin\u2019s next call until its call that timed out has settled; other plugins are not held', async () => {
    const d = createDispatcher();
    const log: string[] = [];
    let finish: () => void = () => undefined;
    const first = d.call('mask', 'reset', () => {
      log.push('reset 1 starts');
      return new Promise<void>((resolve) => (finish = resolve)).then(() => void log.push('reset 1 ends'));
    }, { timeoutMs: 10 });
    expect((await hookError(first)).code).toBe('ERT_PLUGIN_HOOK_TIMEOUT');
    expect(await d.call('cpu', 'reset', () => 'not held', { timeoutMs: 1000 })).toBe('not held');
    const second = d.call('mask', 'reset', () => void log.push('reset 2 starts'), { timeoutMs: 1000 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(log).toEqual(['reset 1 starts']);
    finish();
    await second;
    expect(log).toEqual(['reset 1 starts', 'reset 1 ends', 'reset 2 starts']);
    // Settled: the plugin's calls start at once again.
    expect(await d.call('mask', 'test', () => 'now')).toBe('now');
  });

  // Seen red with the same mutation: the later calls' hooks ran (started: 2), beside the hung one.
  it('a plugin whose call never settles: its later calls do not start, saying why', async () => {
    const d = createDispatcher({ defaultTimeoutMs: 10 });
    let started = 0;
    await hookError(d.call('cu', 'reset', () => new Promise<never>(() => undefined)));
    const messages = {
      addInstance: `Plugin "cu" hook "addInstance" did not finish within 10 ms (it did not start: the plugin's call of hook "reset" that timed out before had not finished)`,
      test: 'Plugin "cu" hook "test" did not start: hook "reset" of plugin "cu" timed out earlier and has not finished',
    };
    for (const [hook, message] of Object.entries(messages)) {
      const err = await hookError(d.call('cu', hook, () => void (started += 1)));
      expect(err.code).toBe('ERT_PLUGIN_HOOK_TIMEOUT');
      expect(err.details).toEqual({ plugin: 'cu', hook, timeoutMs: 10 });
      expect(err.message).toBe(message);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(started).toBe(0);
  });

  // Seen red with the hopeless mark removed from `call`'s timer (`previous.hopeless = true`
  // deleted): the call after the first waiter waited its whole timeout instead of rejecting at
  // once: `expect(order).toEqual(['third rejected', 'timer fired'])` got
  // ['timer fired', 'third rejected']. Times are only ordered against a timer, never measured.
  it('one hang costs one waiter\u2019s timeout: after a waiter timed out without starting, later calls reject at once without calling fn, until the hung call settles', async () => {
    const d = createDispatcher();
    const observed: HookCallObservation[] = [];
    const observer = createDispatcher({ onCall: (c) => observed.push(c) });
    let calls = 0;
    const settle: Array<() => void> = [];
    for (const disp of [d, observer]) {
      await hookError(disp.call('hung', 'discover', () => new Promise<void>((resolve) => void settle.push(resolve)), { timeoutMs: 10 }));
      // The first call after the timeout still waits for it, within its own timeout.
      const waiter = await hookError(disp.call('hung', 'enforce', () => void (calls += 1), { timeoutMs: 10 }));
      expect(waiter.message).toBe(`Plugin "hung" hook "enforce" did not finish within 10 ms (it did not start: the plugin's call of hook "discover" that timed out before had not finished)`);
    }
    // A later call, with a timeout far longer than the timer below, rejects before that timer fires.
    const order: string[] = [];
    const timer = new Promise<void>((resolve) => setTimeout(() => resolve(void order.push('timer fired')), 50));
    const third = d.call('hung', 'enforce', () => void (calls += 1), { timeoutMs: 1000 }).then(
      () => order.push('third resolved'),
      (err: unknown) => {
        order.push('third rejected');
        return err;
      },
    );
    const err = (await third) as PluginHookError;
    await timer;
    expect(order).toEqual(['third rejected', 'timer fired']);
    expect(err).toBeInstanceOf(PluginHookError);
    expect(err.code).toBe('ERT_PLUGIN_HOOK_TIMEOUT');
    expect(err.details).toEqual({ plugin: 'hung', hook: 'enforce', timeoutMs: 1000 });
    expect(err.message).toBe('Plugin "hung" hook "enforce" did not start: hook "discover" of plugin "hung" timed out earlier and has not finished');
    // With no limit either; and the observer counts such a call as a timeout.
    expect((await hookError(d.call('hung', 'close', () => void (calls += 1), { timeoutMs: 0 }))).code).toBe('ERT_PLUGIN_HOOK_TIMEOUT');
    expect((await hookError(observer.call('hung', 'test', () => void (calls += 1), { timeoutMs: 1000 }))).code).toBe('ERT_PLUGIN_HOOK_TIMEOUT');
    expect(observed.map((o) => `${o.hook}:${o.outcome}`)).toEqual(['discover:timeout', 'enforce:timeout', 'test:timeout']);
    expect(calls).toBe(0);
    expect(timing(d, 'hung', 'enforce')).toMatchObject({ calls: 2, failures: 2 });
    // The hung call settles: the plugin's calls run again.
    for (const resolve of settle) resolve();
    await new Promise((resolve) => setImmediate(resolve));
    expect(await d.call('hung', 'enforce', () => ++calls, { timeoutMs: 1000 })).toBe(1);
    expect(await observer.call('hung', 'enforce', () => ++calls, { timeoutMs: 1000 })).toBe(2);
  });

  // Seen red with `holdUntilSettled` also called for a waiter that never started (`begun &&`
  // dropped from the catch's condition, as before this fix): the first waiter's entry replaced
  // the hopeless one, so `removeInstance` waited ("did not finish within 10 ms (it did not
  // start..." instead of "did not start: hook "reset"..."). With that and the suffix built from
  // `this.unsettled.get(plugin) === previous` (both as before this fix): the second waiter's
  // message lost its suffix ('Plugin "two" hook "test" did not finish within 20 ms').
  it('two calls waiting at once for a hung call: both say they did not start, and fn is not called', async () => {
    const d = createDispatcher();
    let calls = 0;
    await hookError(d.call('two', 'reset', () => new Promise<never>(() => undefined), { timeoutMs: 10 }));
    const [a, b] = await Promise.all([
      hookError(d.call('two', 'addInstance', () => void (calls += 1), { timeoutMs: 10 })),
      hookError(d.call('two', 'test', () => void (calls += 1), { timeoutMs: 20 })),
    ]);
    expect(a.message).toContain('(it did not start: the plugin\'s call of hook "reset" that timed out before had not finished)');
    expect(b.message).toContain('(it did not start: the plugin\'s call of hook "reset" that timed out before had not finished)');
    // Neither left an entry of its own: the hung `reset` is what the next call is refused for, at once.
    expect((await hookError(d.call('two', 'removeInstance', () => void (calls += 1), { timeoutMs: 10 }))).message).toBe(
      'Plugin "two" hook "removeInstance" did not start: hook "reset" of plugin "two" timed out earlier and has not finished',
    );
    expect(calls).toBe(0);
  });

  it('turns garbage into ERT_PLUGIN_HOOK_INVALID_RESULT (string, false or throwing validators)', async () => {
    const d = createDispatcher();
    const isDiscovery = (r: unknown) => (typeof r === 'object' && r !== null && 'available' in r ? undefined : 'expected { available, ... }');
    const err = await hookError(d.call('vcpu', 'discover', () => 42 as unknown, { validate: isDiscovery }));
    expect(err.code).toBe('ERT_PLUGIN_HOOK_INVALID_RESULT');
    expect(err.details).toEqual({ plugin: 'vcpu', hook: 'discover', problem: 'expected { available, ... }' });
    expect(err.message).toBe('Plugin "vcpu" hook "discover" returned an invalid result: expected { available, ... }');
    const refused = await hookError(d.call('vcpu', 'stats', () => null, { validate: () => false }));
    expect(refused.code).toBe('ERT_PLUGIN_HOOK_INVALID_RESULT');
    const thrown = await hookError(
      d.call('vcpu', 'stats', () => ({}), {
        validate: () => {
          throw new Error('stats.cores: missing');
        },
      }),
    );
    expect(thrown.details.problem).toBe('stats.cores: missing');
    expect(await d.call('vcpu', 'discover', () => ({ available: true }), { validate: isDiscovery })).toEqual({ available: true });
  });

  it('records per-plugin per-hook timings', async () => {
    const d = createDispatcher();
    await d.call('vcpu', 'discover', () => 1);
    await d.call('vcpu', 'discover', async () => 2);
    await hookError(
      d.call('vcpu', 'discover', () => {
        throw new Error('x');
      }),
    );
    await d.call('memory', 'discover', () => 3);
    const vcpu = timing(d, 'vcpu', 'discover')!;
    expect(vcpu).toMatchObject({ plugin: 'vcpu', hook: 'discover', calls: 3, failures: 1 });
    expect(vcpu.totalMs).toBeGreaterThanOrEqual(vcpu.maxMs);
    expect(vcpu.maxMs).toBeGreaterThanOrEqual(0);
    expect(timing(d, 'memory', 'discover')).toMatchObject({ calls: 1, failures: 0 });
    expect(d.timings()).toHaveLength(2);
    vcpu.calls = 99; // a snapshot, not the live counter
    expect(timing(d, 'vcpu', 'discover')!.calls).toBe(3);
  });
});

describe('Dispatcher.callSync', () => {
  it('returns the result and counts calls and failures', () => {
    const d = createDispatcher();
    expect(d.callSync('ram', 'weigh', () => 0.5)).toBe(0.5);
    expect(() =>
      d.callSync('ram', 'weigh', () => {
        throw new TypeError('host.free is not a function');
      }),
    ).toThrow('Plugin "ram" hook "weigh" failed: host.free is not a function');
    expect(timing(d, 'ram', 'weigh')).toMatchObject({ calls: 2, failures: 1, totalMs: 0, maxMs: 0 });
  });

  it('keeps one counter per plugin and hook, listed in order of first call', () => {
    const d = createDispatcher();
    d.callSync('ram', 'weigh', () => 1);
    d.callSync('ram', 'filter', () => undefined);
    d.callSync('cpu', 'weigh', () => 2);
    d.callSync('ram', 'weigh', () => 3);
    expect(d.timings().map((t) => [t.plugin, t.hook, t.calls])).toEqual([
      ['ram', 'weigh', 2],
      ['ram', 'filter', 1],
      ['cpu', 'weigh', 1],
    ]);
  });

  it('wraps a throw with code, details and cause', () => {
    const d = createDispatcher();
    const cause = new Error('bad');
    let err: unknown;
    try {
      d.callSync('llc', 'filter', () => {
        throw cause;
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PluginHookError);
    expect((err as PluginHookError).code).toBe('ERT_PLUGIN_HOOK_FAILED');
    expect((err as PluginHookError).details).toEqual({ plugin: 'llc', hook: 'filter' });
    expect((err as PluginHookError).cause).toBe(cause);
  });

  it('validates when asked', () => {
    const d = createDispatcher();
    const finite = (n: number) => (Number.isFinite(n) ? undefined : `expected a finite number, got ${n}`);
    expect(() => d.callSync('ram', 'weigh', () => Number.NaN, finite)).toThrow(
      'Plugin "ram" hook "weigh" returned an invalid result: expected a finite number, got NaN',
    );
    expect(d.callSync('ram', 'weigh', () => 3, finite)).toBe(3);
    expect(timing(d, 'ram', 'weigh')).toMatchObject({ calls: 2, failures: 1 });
  });

  // Mutation seen caught: the thenable check removed from callSync (the promise came back as
  // the result, and its rejection was unhandled).
  it('refuses a promise from a synchronous hook, naming plugin and hook, and handles its rejection', async () => {
    const warnings: Array<{ obj: unknown; msg: unknown }> = [];
    const logger = { trace() {}, debug() {}, info() {}, error() {}, warn: (obj: unknown, msg?: unknown) => void warnings.push({ obj, msg }), child: () => logger };
    const d = createDispatcher({ logger });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const err = await hookError(() => d.callSync('gpu', 'filter', () => Promise.reject(new Error('device gone'))));
      expect(err.code).toBe('ERT_PLUGIN_HOOK_INVALID_RESULT');
      expect(err.message).toBe('Plugin "gpu" hook "filter" returned a promise; this hook must be synchronous');
      expect(err.details).toEqual({ plugin: 'gpu', hook: 'filter', problem: 'returned a promise' });
      // A resolved promise is refused too: its value cannot be waited for on this path.
      expect(() => d.callSync('gpu', 'weigh', async () => 1)).toThrow('Plugin "gpu" hook "weigh" returned a promise');
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
      expect(warnings.map((w) => w.msg)).toEqual(['Plugin "gpu" hook "filter" rejected after it was refused as a promise: device gone']);
      expect(timing(d, 'gpu', 'filter')).toMatchObject({ calls: 1, failures: 1 });
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

/** Values a plugin can throw that have no readable text (each made fresh per use). */
const UNPRINTABLE: Array<[string, () => unknown]> = [
  ['Object.create(null)', () => Object.create(null)],
  [
    'an object whose toString throws',
    () => ({
      toString() {
        throw new Error('toString exploded');
      },
    }),
  ],
  [
    'a Proxy whose getPrototypeOf throws',
    () =>
      new Proxy(
        {},
        {
          getPrototypeOf() {
            throw new Error('getPrototypeOf exploded');
          },
        },
      ),
  ],
  [
    'an Error whose message getter throws',
    () =>
      Object.defineProperty(new Error('hidden'), 'message', {
        get() {
          throw new Error('message getter exploded');
        },
      }),
  ],
  [
    // Read once by messageOf, then again by the logger (pino reads an error's cause's message).
    'an Error whose message reads once, then throws',
    () => {
      let reads = 0;
      return Object.defineProperty(new Error('hidden'), 'message', {
        get() {
          reads += 1;
          if (reads > 1) throw new Error('message getter exploded on the second read');
          return 'lying once';
        },
      });
    },
  ],
];

/** Whatever `fn` throws or rejects with (fails the test when it returns). */
async function caught(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

/*
 * A plugin that throws a value without readable text must still get a typed error naming
 * plugin and hook, be counted as a failure, and never crash the process: `callSync` serves
 * every scheduler hook, and an unhandled rejection ends `ert serve`. With the real pino logger
 * (what `ert serve` and `ert host run` log with), which reads a cause's message again.
 * Seen red: messageOf back to `instanceof Error ? .message : String()` (call() rejected with
 * the bare TypeError "Cannot convert object to primitive value", and callSync's rejection
 * handler threw: unhandled rejections); that and the `outcome = 'failed'` before `wrap`
 * removed (the observer saw 'ok'); `Dispatcher.warn` without its try (the lying message:
 * call() rejected with "message getter exploded on the second read", thrown by pino, and
 * callSync's handler left an unhandled rejection); `wrap` keeping an unprintable value as
 * `cause` (the caller's own pino call threw "message getter exploded").
 */
describe('Dispatcher: thrown values without readable text', () => {
  let unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled = [];
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled);
  });

  for (const [what, make] of UNPRINTABLE) {
    it(`${what}: call() and callSync() fail typed, naming plugin and hook, counted as failures, nothing unhandled`, async () => {
      const lines: string[] = [];
      const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void lines.push(line) } });
      const seen: HookCallObservation[] = [];
      const d = createDispatcher({ logger, onCall: (call) => seen.push(call) });
      const fromCall = [
        await caught(() =>
          d.call('gpu', 'test', () => {
            throw make();
          }),
        ),
        await caught(() => d.call('gpu', 'stats', () => Promise.reject(make()))),
      ];
      expect(seen.map((c) => [c.hook, c.outcome])).toEqual([
        ['test', 'failed'],
        ['stats', 'failed'],
      ]);
      for (const [i, hook] of (['test', 'stats'] as const).entries()) {
        const err = fromCall[i] as PluginHookError;
        expect(err).toBeInstanceOf(PluginHookError);
        expect(err.code).toBe('ERT_PLUGIN_HOOK_FAILED');
        expect(err.details).toEqual({ plugin: 'gpu', hook });
        expect(err.message).toMatch(new RegExp(`^Plugin "gpu" hook "${hook}" failed: (<unprintable thrown value>|lying once)$`));
        // The caller logs it too (the tracker does, with the same pino): an unprintable value is
        // not kept as its cause, which pino would read.
        if (err.message.endsWith('<unprintable thrown value>')) expect(() => logger.error({ err }, 'caller logs it')).not.toThrow();
      }
      const fromSync = (await caught(() =>
        d.callSync('gpu', 'filter', () => {
          throw make();
        }),
      )) as PluginHookError;
      expect(fromSync).toBeInstanceOf(PluginHookError);
      expect([fromSync.code, fromSync.details]).toEqual(['ERT_PLUGIN_HOOK_FAILED', { plugin: 'gpu', hook: 'filter' }]);
      // A synchronous hook whose promise rejects later with such a value: refused now, its
      // rejection logged when it comes, never unhandled.
      const refused = (await caught(() => d.callSync('gpu', 'weigh', () => Promise.reject(make())))) as PluginHookError;
      expect([refused.code, refused.details.hook]).toEqual(['ERT_PLUGIN_HOOK_INVALID_RESULT', 'weigh']);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
      expect(d.timings().map((t) => [t.hook, t.failures])).toEqual([
        ['test', 1],
        ['stats', 1],
        ['filter', 1],
        ['weigh', 1],
      ]);
      // Every call() failure and the late rejection were logged, naming plugin and hook.
      const logged = lines.map((line) => JSON.parse(line) as { plugin?: string; hook?: string }).filter((l) => l.hook !== undefined);
      expect(logged.map((l) => [l.plugin, l.hook])).toEqual([
        ['gpu', 'test'],
        ['gpu', 'stats'],
        ['gpu', 'weigh'],
      ]);
    });
  }

  // Seen red with the `then` read outside callSync's try (the getter's own error escaped).
  it('callSync: a result whose `then` getter throws is the plugin\'s failure, named', async () => {
    const d = createDispatcher();
    const err = (await caught(() =>
      d.callSync('gpu', 'consume', () => ({
        get then() {
          throw new Error('then exploded');
        },
      })),
    )) as PluginHookError;
    expect(err).toBeInstanceOf(PluginHookError);
    expect([err.code, err.details, err.message]).toEqual(['ERT_PLUGIN_HOOK_FAILED', { plugin: 'gpu', hook: 'consume' }, 'Plugin "gpu" hook "consume" failed: then exploded']);
  });
});
