// Plugins that lie in what they return, and stats the store cannot take. A `test` grant or
// `stats` is checked once and must then be used as checked: a getter that answers the check one
// thing and the use another (or throws the second time), a `toJSON` that writes something
// else, values JSON cannot hold (NaN, Infinity, a BigInt, a cycle) and stats too large for the
// agent API never reject a claim or a sync with a raw error, never write what was not checked,
// and never stop the confirmation of other reservations; a stats write that fails after a
// committed claim or release is a problem, not a throw that skips the events and enforcement.
// Each test names the mutation it was seen to catch. SQLite only: nothing here depends on the
// store's backend.
import { describe, expect, it } from 'vitest';
import { definePlugin, MAX_STATS_BYTES, type ClaimRequest, type InstanceRequest } from '@ert/plugin-api';
import { StoreConflictError, type Store } from '@ert/store';
import { providerUuid, type Tracker } from '../src/index.js';
import { flavor, interceptStore, ok, refused, request, useBench } from './harness.js';
// @ts-expect-error plain-JS fixtures shared with the child process of the restart test
import { counting } from './fixtures/plugins.mjs';

type GrantMode = 'honest' | 'throws-later' | 'changes-later' | 'throws-first';

/**
 * Reports CUSTOM_LIAR and grants what a claim asks of it, in a grant whose `allocations` getter
 * answers honestly until the event loop has turned once after `test` returned (the grant is
 * checked before that, and used after the tracker's next store read), then as `mode.grant`
 * says; `throws-first` throws at once. `reads` counts every read.
 */
function liar(mode: { grant: GrantMode }, reads = { n: 0 }) {
  return definePlugin({
    name: 'liar',
    resource: () => ({
      discover: () => ({ available: true, host: { inventories: { CUSTOM_LIAR: { total: 8 } } } }),
      test(request: ClaimRequest) {
        const amount = request.spec.groups[0]?.resources['CUSTOM_LIAR'];
        if (amount === undefined) return undefined;
        let late = false;
        setImmediate(() => (late = true));
        return {
          get allocations() {
            reads.n += 1;
            if (mode.grant === 'throws-first' || (late && mode.grant === 'throws-later')) throw new Error('liar: allocations read again');
            if (late && mode.grant === 'changes-later') return [{ resourceClass: 'CUSTOM_LIAR', amount: 8 }];
            return [{ resourceClass: 'CUSTOM_LIAR', amount }];
          },
        };
      },
    }),
  });
}

const GAUGE_STATS = { version: 1, schema: { type: 'object', required: ['load'], properties: { load: { type: 'number' }, note: {} } } };

/** A plugin whose stats are whatever `source.stats()` returns. */
function gauge(source: { stats: () => unknown }) {
  return definePlugin({ name: 'gauge', stats: GAUGE_STATS, resource: () => ({ discover: () => ({ available: true }), stats: () => source.stats() }) });
}

function cpuAndMem(journal: string[] = []) {
  return [counting({ name: 'cpu', resourceClass: 'VCPU', total: 8, journal }), counting({ name: 'mem', resourceClass: 'MEMORY_MB', total: 4096, journal })];
}

const liarRequest = (amount: number) => request(1, 128, { 'resources:CUSTOM_LIAR': String(amount) });
const liarAmount = (result: { allocations: Array<{ resourceClass: string; amount: number }> }) => result.allocations.find((a) => a.resourceClass === 'CUSTOM_LIAR')?.amount;

describe('plugins that lie in their results', () => {
  const bench = useBench('sqlite3');

  async function tracker(resources: ReturnType<typeof definePlugin>[], wrap: (store: Store) => Store = (s) => s, enforce: string[] = []): Promise<{ tracker: Tracker; store: Store }> {
    const store = await bench.openStore(bench.storeOptions());
    const t = await bench.tracker(bench.config({ store: bench.storeOptions(), resources, enforce }), wrap(store));
    await t.sync();
    return { tracker: t, store };
  }

  // Seen red with `copy` left out of testAll's call (the grant read live again in
  // resolveGrants): claim() rejected with the plugin's raw "liar: allocations read again" (no
  // plugin, no hook, no code).
  it('a grant is read once: a getter that answers the check and then throws rejects neither claim() nor resize()', async () => {
    const reads = { n: 0 };
    const { tracker: t } = await tracker([...cpuAndMem(), liar({ grant: 'throws-later' }, reads)]);
    const claimed = ok(await t.claim(liarRequest(2)));
    expect(liarAmount(claimed)).toBe(2);
    expect(reads.n).toBe(1);
    const resized = ok(await t.resize(claimed.instance.uuid, flavor(1, 128, { 'resources:CUSTOM_LIAR': '3' })));
    expect(liarAmount(resized)).toBe(3);
    expect(reads.n).toBe(2);
  });

  // Seen red with `copy` left out of testAll's call: 8 CUSTOM_LIAR were written where the
  // grant of 2 had been checked.
  it('a grant is read once: a getter that answers the check and then changes does not change what is written', async () => {
    const { tracker: t, store } = await tracker([...cpuAndMem(), liar({ grant: 'changes-later' })]);
    const claimed = ok(await t.claim(liarRequest(2)));
    expect(liarAmount(claimed)).toBe(2);
    expect((await store.getAllocations(claimed.instance.uuid)).allocations).toContainEqual({ providerUuid: providerUuid('host1'), resourceClass: 'CUSTOM_LIAR', amount: 2 });
  });

  // Seen red with the dispatcher's catch around `copy` removed (ERT_PLUGIN_HOOK_FAILED "failed:
  // it is not plain data: ...", not the invalid result the worker path reports for the same
  // grant), and with `copy` left out of testAll's call (the validator's read threw instead: no
  // "it is not plain data").
  it('a grant whose getter throws at once refuses the claim, naming plugin and hook', async () => {
    const { tracker: t, store } = await tracker([...cpuAndMem(), liar({ grant: 'throws-first' })]);
    const req = liarRequest(2);
    expect(refused(await t.claim(req))).toEqual([{ plugin: 'liar', reason: 'Plugin "liar" hook "test" returned an invalid result: it is not plain data: liar: allocations read again' }]);
    expect((await store.getAllocations(req.uuid)).allocations).toEqual([]);
  });

  /** A scheduler's reservation on host1 (allocations and a `scheduled` record, one write). */
  async function reserve(store: Store, req: InstanceRequest, createdAt: number): Promise<void> {
    await store.writeAllocations([
      {
        consumer: { uuid: req.uuid, projectId: req.projectId, userId: req.userId, generation: null },
        allocations: [{ providerUuid: providerUuid('host1'), resourceClass: 'VCPU', amount: 1 }],
        instance: { uuid: req.uuid, host: 'host1', projectId: req.projectId, userId: req.userId, flavor: req.flavor, state: 'scheduled', assignments: {}, createdAt, updatedAt: createdAt },
      },
    ]);
  }

  // Seen red with `copy` left out of testAll's call: the older reservation was not confirmed
  // (listed in `failed` with the raw "liar: allocations read again"); with the per-reservation
  // catch of confirmReservations removed too, confirmScheduled() rejected with that error and
  // the newer reservation stayed `scheduled`.
  it('a reservation whose grant lies is decided on the copy, and the newer reservations are confirmed too', async () => {
    const { tracker: t, store } = await tracker([...cpuAndMem(), liar({ grant: 'throws-later' })]);
    const [older, newer] = [liarRequest(2), request(1, 128)];
    await reserve(store, older, 1);
    await reserve(store, newer, 2);
    expect(await t.confirmScheduled()).toEqual({ confirmed: [older.uuid, newer.uuid], refused: [], expired: [], failed: [] });
    expect((await store.getAllocations(older.uuid)).allocations).toContainEqual({ providerUuid: providerUuid('host1'), resourceClass: 'CUSTOM_LIAR', amount: 2 });
  });

  // Seen red with the try/catch around `confirmOne` removed: confirmScheduled() rejected with
  // "poisoned read" and the newer reservation stayed `scheduled`.
  it('a reservation whose confirmation throws is reported and stays scheduled; the pass goes on to the newer ones', async () => {
    let poisoned = '';
    const { tracker: t, store } = await tracker(cpuAndMem(), (s) =>
      interceptStore(s, (method, args, call) => {
        if (method === 'getAllocations' && args[0] === poisoned) throw new Error('poisoned read');
        return call();
      }),
    );
    const [older, newer] = [request(1, 128), request(1, 128)];
    await reserve(store, older, 1);
    await reserve(store, newer, 2);
    poisoned = older.uuid;
    expect(await t.confirmScheduled()).toEqual({ confirmed: [newer.uuid], refused: [], expired: [], failed: [{ uuid: older.uuid, error: 'poisoned read' }] });
    expect((await store.getInstance(older.uuid))?.state).toBe('scheduled');
    expect((await store.getInstance(newer.uuid))?.state).toBe('active');
    poisoned = '';
    expect((await t.confirmScheduled()).confirmed).toEqual([older.uuid]);
  });
});

describe('stats: what is written is what was checked', () => {
  const bench = useBench('sqlite3');

  async function syncWith(stats: () => unknown, wrap: (store: Store) => Store = (s) => s) {
    const store = await bench.openStore(bench.storeOptions());
    const t = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [...cpuAndMem(), gauge({ stats })] }), wrap(store));
    return { tracker: t, store, report: await t.sync() };
  }

  const cycle = () => {
    const data: Record<string, unknown> = { load: 1 };
    data['note'] = data;
    return data;
  };

  // Seen red with `copy: jsonCopy` left out of collectStats (the live object checked, then
  // written by the store's JSON.stringify): NaN and Infinity passed the schema, no problem; the
  // BigInt and the cycle passed it and failed in the store's write ("Do not know how to
  // serialize a BigInt"); with the reconciler's write catch removed too, sync() rejected with
  // that TypeError (and "Converting circular structure to JSON"), after the host row was
  // written. With statsCopy's non-finite check removed, NaN came back as null (refused by the
  // schema only as "got null") and the Infinity in `note` was written as null.
  it.each([
    ['NaN', () => ({ load: Number.NaN }), 'stats.load is NaN, which JSON cannot hold'],
    ['Infinity', () => ({ load: 1, note: [0, Number.POSITIVE_INFINITY] }), 'stats.note[1] is Infinity, which JSON cannot hold'],
    ['a BigInt', () => ({ load: 1, note: { count: 10n } }), 'stats.note.count is a BigInt, which JSON cannot hold'],
    ['a cycle', cycle, 'stats cannot be written as JSON: Converting circular structure to JSON'],
  ])('stats holding %s are refused, naming plugin and hook; sync() goes on and the other plugins\u2019 stats are written', async (_what, stats, problem) => {
    const { report, store } = await syncWith(stats);
    expect(report.problems).toEqual([
      expect.objectContaining({ code: 'ERT_PLUGIN_HOOK_INVALID_RESULT', plugin: 'gauge', hook: 'stats', message: expect.stringContaining(`Plugin "gauge" hook "stats" returned an invalid result: ${problem}`) }),
    ]);
    const written = await store.readStats('host1');
    expect(written['gauge']).toBeUndefined();
    expect(written['cpu']!.data).toEqual({ used: 0, instances: [] });
  });

  // Seen red with `copy: jsonCopy` left out of collectStats (the live object checked, then
  // written): the getter's answer at the check (1) passed the schema and its later one ("lots")
  // was written.
  it('a stats getter is read once: the store holds what passed the schema', async () => {
    let reads = 0;
    const getter = await syncWith(() => {
      // Honest until the event loop turns: through the check, not through the tracker's next store read.
      let late = false;
      setImmediate(() => (late = true));
      return {
        get load() {
          reads += 1;
          return late ? 'lots' : 1;
        },
      };
    });
    expect(getter.report.problems).toEqual([]);
    expect((await getter.store.readStats('host1'))['gauge']!.data).toEqual({ load: 1 });
    expect(reads).toBe(1);
  });

  // Seen red with `copy: jsonCopy` left out of collectStats: `{ load: 1 }` passed the schema and
  // `toJSON`'s `{ load: "lots" }` was written.
  it('what `toJSON` answers is what is checked: stats it turns invalid are refused, nothing written', async () => {
    const toJson = await syncWith(() => ({ load: 1, toJSON: () => ({ load: 'lots' }) }));
    expect(toJson.report.problems).toEqual([expect.objectContaining({ code: 'ERT_PLUGIN_STATS_INVALID', plugin: 'gauge', hook: 'stats', message: expect.stringContaining('stats.load') })]);
    expect((await toJson.store.readStats('host1'))['gauge']).toBeUndefined();
  });

  // Seen red with the MAX_STATS_BYTES check removed from statsCopy: the 300 KiB stats were
  // written (through the agent API, a write over its 1 MiB body limit fails with a 413).
  it(`stats over ${MAX_STATS_BYTES} bytes of JSON are refused, naming plugin and hook`, async () => {
    const { report, store } = await syncWith(() => ({ load: 1, note: 'x'.repeat(300 * 1024) }));
    expect(report.problems).toEqual([
      expect.objectContaining({ code: 'ERT_PLUGIN_HOOK_INVALID_RESULT', plugin: 'gauge', hook: 'stats', message: expect.stringMatching(/returned an invalid result: stats take 3\d{5} bytes as JSON, more than the 262144 allowed$/) }),
    ]);
    expect((await store.readStats('host1'))['gauge']).toBeUndefined();
    // Just under the cap is written.
    const fits = await syncWith(() => ({ load: 1, note: 'x'.repeat(MAX_STATS_BYTES - 100) }));
    expect(fits.report.problems).toEqual([]);
    expect(((await fits.store.readStats('host1'))['gauge']!.data as { note: string }).note).toHaveLength(MAX_STATS_BYTES - 100);
  });

  /** A store whose `writeStats` of plugin gauge fails (as a write over the agent API's body limit does) while `failing.on`. */
  const refusingGauge = (failing: { on: boolean }) => (s: Store) =>
    interceptStore(s, (method, args, call) => {
      if (failing.on && method === 'writeStats' && args[1] === 'gauge') throw new Error('request body is too large (413)');
      return call();
    });

  // Seen red with the try/catch around store.writeStats removed from the reconciler's
  // writeStats: sync() rejected with "request body is too large (413)".
  it('a stats write the store refuses at a sync is a problem naming the plugin; its old stats expire, the others are written', async () => {
    let load = 1;
    const failing = { on: false };
    const { tracker: t, store } = await syncWith(() => ({ load }), refusingGauge(failing));
    expect((await store.readStats('host1'))['gauge']!.data).toEqual({ load: 1 });
    load = 2;
    failing.on = true;
    const report = await t.sync();
    expect(report.problems).toEqual([expect.objectContaining({ plugin: 'gauge', message: 'stats of plugin gauge could not be written: request body is too large (413)' })]);
    expect(report.changes).toEqual(['stats of gauge expired (stats of plugin gauge could not be written: request body is too large (413))']);
    expect(Object.keys(await store.readStats('host1')).sort()).toEqual(['cpu', 'mem']);
  });

  // Seen red with refreshStats' try/catch removed (release() rejected with "store read failed"
  // after its write: no `released` event, no enforce); with the reconciler's write catch removed
  // too, claim() rejected with "request body is too large (413)" after its allocations were
  // committed (no `claimed` event, no enforce); with the write catch alone removed, the claim's
  // problem no longer named the plugin (the whole refresh was lost).
  it('a stats write that fails after a committed claim or release is a problem: the events and enforcement still run', async () => {
    const journal: string[] = [];
    const failing = { on: false };
    let readFails = false;
    const store = await bench.openStore(bench.storeOptions());
    const wrapped = interceptStore(refusingGauge(failing)(store), (method, _args, call) => {
      if (readFails && method === 'readStats') throw new Error('store read failed');
      return call();
    });
    const t = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [...cpuAndMem(journal), gauge({ stats: () => ({ load: journal.length }) })], enforce: ['cpu'] }), wrapped);
    await t.sync();
    const events: string[] = [];
    t.on('claimed', (e) => events.push(`claimed:${e.instance.uuid}`));
    t.on('released', (e) => events.push(`released:${e.instance.uuid}`));

    failing.on = true;
    const req = request(1, 128);
    const claimed = ok(await t.claim(req));
    expect(claimed.problems).toEqual([expect.objectContaining({ plugin: 'gauge', message: 'stats of plugin gauge could not be written: request body is too large (413)' })]);
    expect(events).toEqual([`claimed:${req.uuid}`]);
    expect(journal).toContain(`cpu.enforce:claimed:${req.uuid}`);
    expect((await store.getInstance(req.uuid))?.state).toBe('active');

    readFails = true;
    const released = await t.release(req.uuid);
    expect(released.released).toBe(true);
    expect(released.problems).toEqual([expect.objectContaining({ message: 'stats not rewritten after the change (the next update rewrites them): store read failed' })]);
    expect(events).toEqual([`claimed:${req.uuid}`, `released:${req.uuid}`]);
    expect(journal).toContain(`cpu.enforce:released:${req.uuid}`);
    expect(await store.getInstance(req.uuid)).toBeUndefined();
  });

  // Seen red with the store's lost race treated as a refusal (the old stats expired, the
  // scheduler left without them until the next update).
  it('a stats write that loses a race keeps the old stats: the sync fails, to be tried again', async () => {
    let load = 1;
    const racing = { on: false };
    const { tracker: t, store } = await syncWith(() => ({ load }), (s) =>
      interceptStore(s, (method, args, call) => {
        if (racing.on && method === 'writeStats' && args[1] === 'gauge') throw new StoreConflictError('ERT_STORE_CONFLICT', 'writeStats: lost a race with a concurrent transaction');
        return call();
      }),
    );
    load = 2;
    racing.on = true;
    await expect(t.sync()).rejects.toMatchObject({ code: 'ERT_STORE_CONFLICT' });
    expect((await store.readStats('host1'))['gauge']!.data).toEqual({ load: 1 });
  });
});

describe('a discover result that throws when read', () => {
  const bench = useBench('sqlite3');

  // Seen red with the result read live by the normalization (no copy inside the call): the
  // problem was ERT_TRACKER_UNEXPECTED "<unprintable thrown value>", the tracker's own fault
  // rather than the plugin's invalid result.
  it('is the plugin\'s invalid result, naming plugin and hook; the other plugins publish', async () => {
    const hostile = definePlugin({
      name: 'hostile',
      resource: () => ({
        // `available` throws a value that itself throws when read (a Proxy).
        discover: () => ({
          get available(): boolean {
            throw new Proxy(
              {},
              {
                get() {
                  throw new Error('discover result read');
                },
                getPrototypeOf() {
                  throw new Error('discover result read');
                },
              },
            );
          },
        }),
      }),
    });
    const store = await bench.openStore(bench.storeOptions());
    const t = await bench.tracker(bench.config({ store: bench.storeOptions(), resources: [...cpuAndMem(), hostile] }), store);
    const report = await t.sync();
    expect(report.problems).toEqual(expect.arrayContaining([expect.objectContaining({ plugin: 'hostile', hook: 'discover', code: 'ERT_PLUGIN_HOOK_INVALID_RESULT' })]));
    expect(Object.keys((await store.getInventories(providerUuid('host1'))).inventories).sort()).toEqual(['MEMORY_MB', 'VCPU']);
  });
});
