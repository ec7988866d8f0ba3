import { describe, expect, it } from 'vitest';
import { PluginHookError, createDispatcher, type Dispatcher } from '../src/index.js';

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
