/*
 * `TrackerOptions.store` as a function (what `ert host sync`, `host run` and `claim` give, so
 * that the plugins are loaded and checked before any store is created): `createTracker` and
 * `discover()` never call it; the first sync does; a rejection is the sync's and the next sync
 * asks again; the tracker does not close what it gave.
 *
 * Mutations seen caught: the opener called by createTracker (called 1 time before any sync,
 * not 0); the rejected opening kept (the second sync rejected again with "not yet", the opener
 * asked once); the store given closed by stop() (ownsStore true for a function: "the store
 * ... is closed" at the read after stop).
 */
import { describe, expect, it } from 'vitest';
import type { Store } from '@ert/store';
import { createTracker } from '../src/index.js';
import { BACKENDS, useBench } from './harness.js';
// @ts-expect-error plain-JS fixtures shared with the child process of the restart test
import { counting } from './fixtures/plugins.mjs';

describe.each(BACKENDS)('a tracker given a function that opens its store (%s)', (backend) => {
  const bench = useBench(backend);

  it('is asked for the store at the first sync only, again after a rejection, and leaves it open', async () => {
    const store: Store = await bench.openStore(bench.storeOptions());
    let calls = 0;
    let ready = false;
    const opener = async (): Promise<Store> => {
      calls += 1;
      if (!ready) throw new Error('not yet');
      return store;
    };
    const config = bench.config({ store: bench.storeOptions(), resources: [counting({ name: 'cpu', resourceClass: 'VCPU', total: 8 })] });
    const tracker = await createTracker({ config, store: opener });
    try {
      await tracker.discover();
      expect(calls).toBe(0);
      await expect(tracker.sync()).rejects.toThrow('not yet');
      expect(calls).toBe(1);
      ready = true;
      const report = await tracker.sync();
      expect(report.host).toBe('host1');
      expect(calls).toBe(2);
      await tracker.sync();
      expect(calls).toBe(2);
    } finally {
      await tracker.stop();
    }
    expect((await store.getHost('host1'))?.name).toBe('host1');
  });
});
