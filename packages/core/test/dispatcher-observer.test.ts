import { describe, expect, it } from 'vitest';
import { createDispatcher, type HookCallObservation } from '../src/index.js';

/** `DispatcherOptions.onCall`: how metrics see every hook call without core depending on them. */
describe('Dispatcher onCall', () => {
  it('tells every settled call with its plugin, hook, duration and outcome', async () => {
    const seen: HookCallObservation[] = [];
    const d = createDispatcher({ onCall: (call) => seen.push(call) });
    await d.call('vcpu', 'discover', async () => {
      await new Promise((r) => setTimeout(r, 20));
      return 1;
    });
    await d.call('llc', 'test', () => {
      throw new Error('boom');
    }).catch(() => undefined);
    await d.call('gpu', 'stats', () => new Promise(() => undefined), { timeoutMs: 10 }).catch(() => undefined);
    await d.call('mem', 'discover', () => 3, { validate: () => 'no' }).catch(() => undefined);
    expect(seen.map(({ plugin, hook, outcome }) => ({ plugin, hook, outcome }))).toEqual([
      { plugin: 'vcpu', hook: 'discover', outcome: 'ok' },
      { plugin: 'llc', hook: 'test', outcome: 'failed' },
      { plugin: 'gpu', hook: 'stats', outcome: 'timeout' },
      { plugin: 'mem', hook: 'discover', outcome: 'invalid' },
    ]);
    expect(seen[0]!.seconds).toBeGreaterThanOrEqual(0.015);
    expect(seen[0]!.seconds).toBeLessThan(5);
  });

  it('an observer that throws changes no call', async () => {
    const d = createDispatcher({
      onCall: () => {
        throw new Error('observer down');
      },
    });
    await expect(d.call('vcpu', 'discover', () => 7)).resolves.toBe(7);
    expect(d.timings()[0]).toMatchObject({ calls: 1, failures: 0 });
  });
});
