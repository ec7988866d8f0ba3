/*
 * An outage is logged once when it starts and once when it ends (FailureLog, issue 14), also
 * when the store goes away between the periodic update's sync and its reservation pass: the
 * pass failing with the store unreachable fails the update, which backs off; it is not a
 * "recovered" line in the middle of the outage followed by a second "store unreachable" line.
 *
 * Seen red with confirmQuietly swallowing every failure again (before this fix, and once in
 * test/e2e/agents.test.ts under load): "recovered: periodic update" while the store was still
 * down, then a second outage line.
 */
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { createLogger } from '@ert/core';
import { StoreError, type Store } from '@ert/store';
import { createTracker } from '../src/index.js';
import { interceptStore, useBench } from './harness.js';
// @ts-expect-error plain-JS fixtures shared with the child process of the restart test
import { counting } from './fixtures/plugins.mjs';

describe('the outage log of a tracker whose store goes away between sync and reservation pass', () => {
  const bench = useBench('sqlite3');

  it('one line when the outage starts, one when it ends, none in between', async () => {
    const lines: Array<{ msg: string; activity?: string }> = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as { msg: string; activity?: string });
        done();
      },
    });
    const real = await bench.openStore(bench.storeOptions());
    // Down: only the reservation pass's read fails (the reservations of the host, by state), as
    // when the server dies after the sync's calls: each periodic update's sync succeeds.
    let down = false;
    const store = interceptStore(real, (method, [filter], call) =>
      down && method === 'listInstances' && (filter as Parameters<Store['listInstances']>[0])?.state === 'scheduled'
        ? Promise.reject(new StoreError('ERT_STORE_UNAVAILABLE', 'injected: the ert server cannot be reached (listInstances)'))
        : call(),
    );
    const config = bench.config({ store: bench.storeOptions(), resources: [counting({ name: 'cpu', resourceClass: 'VCPU', total: 8 })] });
    config.tracker.interval = 50;
    config.reservations.pollInterval = 3_600_000;
    const tracker = await createTracker({ config, store, logger: createLogger({ level: 'info', destination: sink }) });
    await tracker.start();
    down = true;
    // Several periodic updates fail (backoff from 1 s; the first after 50 ms).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    down = false;
    await vi.waitFor(() => expect(lines.some((l) => l.msg.startsWith('recovered: '))).toBe(true), { timeout: 10_000, interval: 50 });
    await tracker.stop();
    const outage = lines.filter((l) => l.msg.startsWith('store unreachable'));
    const recovered = lines.filter((l) => l.msg.startsWith('recovered: '));
    expect(outage.map((l) => l.activity)).toEqual(['periodic update']);
    expect(recovered.map((l) => l.activity)).toEqual(['periodic update']);
    expect(lines.indexOf(recovered[0]!)).toBeGreaterThan(lines.indexOf(outage[0]!));
  }, 30_000);
});
