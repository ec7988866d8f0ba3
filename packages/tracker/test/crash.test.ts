/*
 * Crash atomicity (issue 17, issue 11 point 5). Claim, resize, confirm, revert and release
 * each write the store in one transaction (`writeAllocations`, records written with
 * `instance` and removed with `removeInstance`), so that a tracker that dies at any point
 * leaves every instance either as it was before the step or as the step leaves it: never an
 * instance record without its allocations, allocations without an instance record, or a
 * migration record nobody refers to. After a restart, every plugin's view equals the store
 * (`violations()`, ./real-host.ts). Real parts only: the five real plugins on the
 * xeon-2s-cat profile, real SQLite files and PostgreSQL schemas, real child processes killed
 * with SIGKILL at a hook point they report through a pipe.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Flavor, InstanceRequest } from '@ert/plugin-api';
import type { Store, StoreOptions } from '@ert/store';
import { migrationUuid } from '../src/index.js';
import { buildPackage, REPO_ROOT } from '../../../test/build.js';
import { BACKENDS, ok, useBench } from './harness.js';
import { DEDICATED, PROFILES, newUuid, realFlavor, realHost, violations, type RealHost } from './real-host.js';

const PROFILE = 'xeon-2s-cat';
const CHILD = fileURLToPath(new URL('./fixtures/crasher.mjs', import.meta.url));
const GB = 1024;
const small = realFlavor('small', 2, 2 * GB, { 'llc:ways': '2', 'hw:cpu_policy': 'dedicated' });
const large = realFlavor('large', 3, 3 * GB, { 'llc:ways': '3', 'hw:cpu_policy': 'dedicated' });
/** Unpinned, for instances beside those (the profile has 9 dedicated CPUs). */
const floating = realFlavor('floating', 1, GB, { 'llc:ways': '1' });
const floatingLarge = realFlavor('floating-large', 2, GB, { 'llc:ways': '1' });


function requestOf(uuid: string, flavor: Flavor): InstanceRequest {
  return { uuid, projectId: 'p', userId: 'u', flavor };
}

/* ------------------------------------------------------------------ what "half-written" means */

interface KnexLike {
  (table: string): { leftJoin(a: string, b: string, c: string): { whereNull(c: string): { select(c: string): Promise<Array<{ uuid: string }>> } } };
}

/**
 * Everything in the store that only a step cut in half can leave (empty when nothing is):
 * an instance record that should hold allocations and holds none (records that hold nothing
 * by definition, a reservation's `refused` or `expired` outcome, excepted), or that refers to
 * a migration record that does not exist; a migration record (`resizing`, referring to no
 * other) that no instance refers to; a consumer holding allocations without an instance
 * record (read with SQL: the store API has no list of consumers).
 */
export async function halfWritten(store: Store): Promise<string[]> {
  const out: string[] = [];
  const records = await store.listInstances();
  const byUuid = new Map(records.map((r) => [r.uuid, r]));
  for (const r of records) {
    const { allocations } = await store.getAllocations(r.uuid);
    const holdsNothing = (r.state as string) === 'refused' || (r.state as string) === 'expired';
    if (!holdsNothing && allocations.length === 0) out.push(`instance record ${r.uuid} (${r.state} on ${r.host}) holds no allocations`);
    if (holdsNothing && allocations.length > 0) out.push(`instance record ${r.uuid} (${r.state} on ${r.host}) still holds allocations`);
    if (r.migrationUuid && !byUuid.has(r.migrationUuid)) out.push(`instance ${r.uuid} refers to migration record ${r.migrationUuid}, which does not exist`);
    if (r.state === 'resizing' && !r.migrationUuid && !records.some((o) => o.migrationUuid === r.uuid)) out.push(`migration record ${r.uuid} is an orphan: no instance refers to it`);
  }
  const knex = (store as unknown as { knex: KnexLike }).knex;
  for (const row of await knex('consumers as c').leftJoin('instances as i', 'i.uuid', 'c.uuid').whereNull('i.uuid').select('c.uuid')) {
    out.push(`consumer ${row.uuid} holds allocations without an instance record`);
  }
  return out;
}

/** What the store holds for one instance and its migration consumer, by class (no provider names, no uuids). */
async function shape(store: Store, uuid: string): Promise<Shape> {
  const amounts = async (consumer: string) => {
    const out: Record<string, number> = {};
    for (const a of (await store.getAllocations(consumer)).allocations) out[a.resourceClass] = (out[a.resourceClass] ?? 0) + a.amount;
    return out;
  };
  const record = await store.getInstance(uuid);
  const migration = await store.getInstance(migrationUuid(uuid));
  return {
    instance: record ? { state: record.state, flavor: record.flavor.name, migrating: record.migrationUuid !== undefined } : null,
    held: await amounts(uuid),
    migration: migration ? { state: migration.state, flavor: migration.flavor.name } : null,
    migrationHeld: await amounts(migrationUuid(uuid)),
  };
}

/** What `shape` returns. */
interface Shape {
  instance: { state: string; flavor: string; migrating: boolean } | null;
  held: Record<string, number>;
  migration: { state: string; flavor: string } | null;
  migrationHeld: Record<string, number>;
}

/** The shapes a step goes between (held amounts as a subset: the flavor's PCPU, ways and memory). */
const NOTHING: Shape = { instance: null, held: {}, migration: null, migrationHeld: {} };
const ACTIVE_SMALL: Shape = { instance: { state: 'active', flavor: 'small', migrating: false }, held: { PCPU: 2, CUSTOM_LLC_WAYS: 2, MEMORY_MB: 2 * GB }, migration: null, migrationHeld: {} };
const ACTIVE_LARGE: Shape = { instance: { state: 'active', flavor: 'large', migrating: false }, held: { PCPU: 3, CUSTOM_LLC_WAYS: 3, MEMORY_MB: 3 * GB }, migration: null, migrationHeld: {} };
const RESIZING: Shape = {
  instance: { state: 'resizing', flavor: 'large', migrating: true },
  held: { PCPU: 3, CUSTOM_LLC_WAYS: 3, MEMORY_MB: 3 * GB },
  migration: { state: 'resizing', flavor: 'small' },
  migrationHeld: { PCPU: 2, CUSTOM_LLC_WAYS: 2, MEMORY_MB: 2 * GB },
};

async function expectShape(store: Store, uuid: string, expected: Shape): Promise<void> {
  const actual = await shape(store, uuid);
  expect(actual).toMatchObject(expected);
  // toMatchObject takes {} as "anything": an empty expectation means nothing held.
  if (Object.keys(expected.held).length === 0) expect(actual.held).toEqual({});
  if (Object.keys(expected.migrationHeld).length === 0) expect(actual.migrationHeld).toEqual({});
}

/* ------------------------------------------------------------------ a store that fails at a chosen write */

const READS = /^(get|list|load|read|hostGenerations$|schemaStatus$|checkSchema$|close$|migrate$)/;

/**
 * The store, unchanged, except that once armed it throws at the `at`-th write call (any method
 * but reads), before making it: the process "dies" between that write and the one before.
 * `calls` names the write calls made since arming, the failing one last.
 */
function faultyStore(store: Store) {
  const fault = { at: 0, calls: [] as string[], hit: undefined as string | undefined };
  const proxy = new Proxy(store, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      // `knex` (callable, for halfWritten's query) as it is; methods run on the store itself.
      if (typeof value !== 'function' || typeof key !== 'string' || key === 'knex') return value;
      if (READS.test(key)) return (value as (...a: unknown[]) => unknown).bind(target);
      return (...args: unknown[]) => {
        if (fault.at > 0) {
          fault.calls.push(key);
          if (fault.calls.length === fault.at) {
            fault.hit = key;
            fault.at = 0;
            return Promise.reject(new Error(`injected fault at write ${fault.calls.length} (${key})`));
          }
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    store: proxy,
    arm(at: number) {
      Object.assign(fault, { at, calls: [], hit: undefined });
    },
    disarm() {
      fault.at = 0;
    },
    fault,
  };
}

/* ------------------------------------------------------------------ a tracker killed in a child process */

/** The plugin options realHost uses, for the child's config. */
const PLUGINS = { vcpu: { allocationRatio: 1, dedicatedCpus: DEDICATED[PROFILE] } };

type Step = { op: 'claim'; request: InstanceRequest } | { op: 'resize'; uuid: string; flavor: Flavor } | { op: 'confirm' | 'revert' | 'release'; uuid: string };
type KillPoint = { at: 'hook'; plugin: string; hook: string; uuid: string } | { at: 'query'; sql: string };

/**
 * Runs `steps` in a child tracker (built dist) on `options`; during the last step the child
 * stops at `kill` and says so on stdout; it is SIGKILLed the moment that line arrives.
 * Resolves with where it stopped.
 */
async function killedAt(options: StoreOptions, hostName: string, steps: Step[], kill: KillPoint, armAtStart = false): Promise<unknown> {
  const child = spawn(process.execPath, [CHILD], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  child.stdin.end(JSON.stringify({ store: options, hostName, root: path.join(PROFILES, PROFILE), plugins: PLUGINS, steps, kill, armAtStart }) + '\n');
  const line = await new Promise<string | undefined>((resolve) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    void exited.then(() => resolve(undefined));
  });
  const report = line === undefined ? undefined : (JSON.parse(line) as { killPoint?: unknown; finished?: boolean });
  if (!report?.killPoint) {
    child.kill('SIGKILL');
    throw new Error(`the child did not stop at its kill point (${line ?? 'no output'}; exit ${JSON.stringify(await exited)}): ${stderr}`);
  }
  child.kill('SIGKILL');
  expect((await exited).signal).toBe('SIGKILL');
  return report.killPoint;
}

/* ------------------------------------------------------------------ the tests */

describe.each(BACKENDS)('crash atomicity on %s', (backend) => {
  const bench = useBench(backend);

  /** Every guarantee at once: the views equal the store, nothing is half-written. */
  async function whole(host: RealHost): Promise<void> {
    expect(await violations(host)).toEqual([]);
    expect(await halfWritten(host.store)).toEqual([]);
  }

  // A store fault before each write call of each step in turn (the tracker dies between two
  // writes), then a restart: each instance is as before the step when the fault came at or
  // before the step's one transaction, as after it when later (stats), and the views equal
  // the store. Mutations seen caught: release as its three former calls (writeAllocations,
  // deleteInstance of the migration record, deleteInstance): after a fault at the second,
  // records without allocations; confirm and revert as writeAllocations then deleteInstance
  // of the migration record: a fault at the second left the orphaned migration record (the
  // restart reported it, and deleted it: the recovery branch, which the last test checks).
  it('a store fault at any write of claim, resize, confirm, revert or release leaves each instance before or after the step; restarted, the views equal the store', async () => {
    const options = bench.storeOptions();
    const faulty = faultyStore(await bench.openStore(options));
    const host = await realHost(bench, PROFILE, { shared: { store: faulty.store, options } });
    const steps: Array<{ name: string; setup: (uuid: string) => Promise<void>; run: (uuid: string) => Promise<unknown>; before: Shape; after: Shape }> = [
      { name: 'claim', setup: async () => {}, run: (uuid) => host.tracker.claim(requestOf(uuid, small)), before: NOTHING, after: ACTIVE_SMALL },
      { name: 'resize', setup: async (uuid) => void ok(await host.tracker.claim(requestOf(uuid, small))), run: (uuid) => host.tracker.resize(uuid, large), before: ACTIVE_SMALL, after: RESIZING },
      ...(['confirm', 'revert', 'release'] as const).map((name) => ({
        name,
        setup: async (uuid: string) => {
          ok(await host.tracker.claim(requestOf(uuid, small)));
          ok(await host.tracker.resize(uuid, large));
        },
        run: (uuid: string) => (name === 'confirm' ? host.tracker.confirmResize(uuid) : name === 'revert' ? host.tracker.revertResize(uuid) : host.tracker.release(uuid)),
        before: RESIZING,
        after: name === 'confirm' ? ACTIVE_LARGE : name === 'revert' ? ACTIVE_SMALL : NOTHING,
      })),
    ];
    for (const step of steps) {
      const seen: string[] = [];
      for (let at = 1; ; at++) {
        const uuid = newUuid();
        await step.setup(uuid);
        faulty.arm(at);
        // A store error at the step's transaction is a refusal (claim, resize) or a throw (the
        // others); at a stats write after it, a problem of a step that is done.
        const outcome = await step.run(uuid).then(
          (result) => {
            const { ok, reasons, problems } = result as { ok?: boolean; reasons?: unknown; problems?: Array<{ message: string }> };
            if (ok === false) return JSON.stringify(reasons);
            return problems?.some((p) => /injected fault/.test(p.message)) ? 'done, with the fault as a problem' : 'done';
          },
          (err: Error) => err.message,
        );
        faulty.disarm();
        const hit = faulty.fault.hit;
        if (hit === undefined) {
          // No write left to fail at: the step went through.
          expect(outcome).toBe('done');
          await expectShape(host.store, uuid, step.after);
          await whole(host);
        } else {
          // The step's transaction is its first write call; after it the step is committed, and
          // a failed stats write must not skip what follows (events, enforcement, the answer).
          if (at === 1) expect(outcome).toMatch(/injected fault/);
          else expect(outcome).toBe('done, with the fault as a problem');
          seen.push(`${at}:${hit}`);
          await host.restart();
          // The step's store write is its first write call; a fault after it leaves the step done.
          await expectShape(host.store, uuid, at === 1 ? step.before : step.after);
          await whole(host);
        }
        // Back to nothing, for the next round.
        if (await host.store.getInstance(uuid)) expect((await host.tracker.release(uuid)).released).toBe(true);
        await whole(host);
        if (hit === undefined) break;
      }
      // The fault was injected at every write of the step, the one transaction first.
      expect(seen[0], `${step.name}: ${seen.join(', ')}`).toBe('1:writeAllocations');
      expect(seen.slice(1).every((s) => s.endsWith(':writeStats')), `${step.name}: ${seen.join(', ')}`).toBe(true);
    }
  }, 120_000);

  // A real tracker process killed with SIGKILL at a hook point: inside a plugin hook right
  // before or right after the step's store write, or in the middle of the store's transaction
  // (stopped when the store sends the instance-record DELETE to the database: the allocations
  // are already deleted, nothing is committed). Right after the kill the store holds the
  // instance before or after the step, nothing half-written; a restarted tracker's views
  // equal the store, and the instance's life can be finished.
  // Mutations seen caught: release as its three former calls (killed at the record DELETE:
  // both records left, without allocations); confirm and revert as writeAllocations then
  // deleteInstance (killed there: the migration record left, an orphan, and the start
  // reported deleting it).
  const MID_TRANSACTION = '^delete from [`"]instances[`"]';
  const cases: Array<{ name: string; setup: (uuid: string) => Step[]; last: (uuid: string) => Step; kill: (uuid: string) => KillPoint; expected: Shape }> = [
    { name: 'claim, in llc test (before the write)', setup: () => [], last: (u) => ({ op: 'claim', request: requestOf(u, small) }), kill: (u) => ({ at: 'hook', plugin: 'llc', hook: 'test', uuid: u }), expected: NOTHING },
    { name: 'claim, in llc addInstance (after the write)', setup: () => [], last: (u) => ({ op: 'claim', request: requestOf(u, small) }), kill: (u) => ({ at: 'hook', plugin: 'llc', hook: 'addInstance', uuid: u }), expected: ACTIVE_SMALL },
    {
      name: 'resize, in vcpu addInstance (after the write)',
      setup: (u) => [{ op: 'claim', request: requestOf(u, small) }],
      last: (u) => ({ op: 'resize', uuid: u, flavor: large }),
      kill: (u) => ({ at: 'hook', plugin: 'vcpu', hook: 'addInstance', uuid: u }),
      expected: RESIZING,
    },
    ...(['confirm', 'revert', 'release'] as const).flatMap((op) => [
      {
        name: `${op}, in the middle of its store transaction`,
        setup: (u: string): Step[] => [
          { op: 'claim', request: requestOf(u, small) },
          { op: 'resize', uuid: u, flavor: large },
        ],
        last: (u: string): Step => ({ op, uuid: u }),
        kill: (): KillPoint => ({ at: 'query', sql: MID_TRANSACTION }),
        expected: RESIZING,
      },
      {
        name: `${op}, in memory removeInstance (after the write)`,
        setup: (u: string): Step[] => [
          { op: 'claim', request: requestOf(u, small) },
          { op: 'resize', uuid: u, flavor: large },
        ],
        last: (u: string): Step => ({ op, uuid: u }),
        // confirm drops the migration record from the views; revert and release the instance first.
        kill: (u: string): KillPoint => ({ at: 'hook', plugin: 'memory', hook: 'removeInstance', uuid: op === 'confirm' ? migrationUuid(u) : u }),
        expected: op === 'confirm' ? ACTIVE_LARGE : op === 'revert' ? ACTIVE_SMALL : NOTHING,
      },
    ]),
  ];

  it.each(cases)('a tracker SIGKILLed during $name: the store holds the instance before or after the step; restarted, the views equal it', async ({ setup, last, kill, expected }) => {
    const options = bench.storeOptions();
    const store = await bench.openStore(options);
    const hostName = `crash-${newUuid().slice(-4)}`;
    const uuid = newUuid();
    const other = newUuid();
    // Another instance on the host, claimed first, must come through untouched.
    const where = await killedAt(options, hostName, [{ op: 'claim', request: requestOf(other, small) }, ...setup(uuid), last(uuid)], kill(uuid));
    expect(where).toBeDefined();
    await expectShape(store, uuid, expected);
    await expectShape(store, other, ACTIVE_SMALL);
    expect(await halfWritten(store)).toEqual([]);

    const host = await realHost(bench, PROFILE, { hostName, shared: { store, options } });
    await whole(host);
    await expectShape(store, uuid, expected);
    // And the instance's life goes on from there, down to nothing held.
    if (expected.instance?.state === 'resizing') ok(await host.tracker.confirmResize(uuid));
    if (expected.instance) expect((await host.tracker.release(uuid)).released).toBe(true);
    expect((await host.tracker.release(other)).released).toBe(true);
    await whole(host);
    const [snapshot] = await store.loadHosts([hostName]);
    for (const p of snapshot!.providers) expect(Object.values(p.usages).every((u) => u === 0), p.name).toBe(true);
  }, 60_000);

  // The other recovery branch of rebuildViews, killed: an instance evacuated from a host that
  // was down; that host's tracker starts again and releases the old allocations held there as
  // it clears the instance's reference to them -- killed in the middle of that transaction (at
  // the migration record's DELETE). Nothing is half-written; the next start does the recovery.
  // Mutation seen caught: the recovery as its three former calls (deleteAllocations,
  // deleteInstance, upsertInstance): killed at the DELETE, the migration record was left
  // without allocations.
  it('a source host tracker SIGKILLed while releasing what an evacuated instance held there: the next start finishes the recovery', async () => {
    const options = bench.storeOptions();
    const store = await bench.openStore(options);
    const src = await realHost(bench, PROFILE, { hostName: 'src', shared: { store, options } });
    const dst = await realHost(bench, PROFILE, { hostName: 'dst', shared: { store, options } });
    const uuid = newUuid();
    ok(await src.tracker.claim(requestOf(uuid, small)));
    await src.stop();
    await store.setHostStatus('src', 'stale');
    ok(await dst.tracker.evacuate(uuid));
    const evacuated = { instance: { state: 'active', flavor: 'small', migrating: true }, held: ACTIVE_SMALL.held, migration: { state: 'resizing', flavor: 'small' }, migrationHeld: ACTIVE_SMALL.held };
    await expectShape(store, uuid, evacuated);

    await killedAt(options, 'src', [], { at: 'query', sql: MID_TRANSACTION }, true);
    await expectShape(store, uuid, evacuated);
    expect(await halfWritten(store)).toEqual([]);

    const back = await realHost(bench, PROFILE, { hostName: 'src', shared: { store, options } });
    expect(back.tracker.lastSync!.changes).toContain(`released what instance ${uuid} held here before it was evacuated to host dst`);
    await expectShape(store, uuid, { ...ACTIVE_SMALL, instance: { state: 'active', flavor: 'small', migrating: false } });
    await whole(back);
    await whole(dst);
    expect((await dst.tracker.release(uuid)).released).toBe(true);
    await whole(dst);
  }, 60_000);

  // The recovery branch for orphaned migration records (rebuildViews): a migration record no
  // instance refers to any more, as the former confirm (and revert) left when the tracker died
  // between its two calls (the instance active, its migration record still there without
  // allocations), or one still holding allocations whose instance was removed. The restarted
  // tracker deletes each, with its allocations, in one write; reports it; its views equal the
  // store; a second restart finds nothing to do.
  // Mutations seen caught: the orphan branch's write removed (the record stayed: violations
  // and halfWritten both red); the write without `removeInstance` (record left without
  // allocations); the orphan test `owner?.state !== 'resizing'` inverted.
  it('a restarted tracker deletes orphaned migration records with their allocations, and reports each', async () => {
    const host = await realHost(bench, PROFILE);
    const { store } = host;
    const kept = newUuid();
    ok(await host.tracker.claim(requestOf(kept, floating)));
    ok(await host.tracker.resize(kept, floatingLarge));
    // 1. As the former confirm left it, killed between its writeAllocations and deleteInstance.
    const confirmed = newUuid();
    ok(await host.tracker.claim(requestOf(confirmed, small)));
    ok(await host.tracker.resize(confirmed, large));
    const record = (await store.getInstance(confirmed))!;
    const current = await store.getAllocations(confirmed);
    const active = { ...record, state: 'active' as const };
    delete active.migrationUuid;
    delete active.previousFlavor;
    await store.writeAllocations([
      { consumer: { uuid: migrationUuid(confirmed), projectId: 'p', userId: 'u' }, allocations: [] },
      { consumer: { uuid: confirmed, projectId: 'p', userId: 'u', generation: current.generation }, allocations: current.allocations, instance: active },
    ]);
    // 2. A migration record still holding the old allocations whose instance was removed.
    const removed = newUuid();
    ok(await host.tracker.claim(requestOf(removed, floating)));
    ok(await host.tracker.resize(removed, floatingLarge));
    await store.writeAllocations([{ consumer: { uuid: removed, projectId: 'p', userId: 'u' }, allocations: [], removeInstance: true }]);
    expect((await store.getAllocations(migrationUuid(removed))).allocations).not.toEqual([]);
    expect((await halfWritten(store)).sort()).toEqual(
      [`migration record ${migrationUuid(confirmed)} is an orphan: no instance refers to it`, `instance record ${migrationUuid(confirmed)} (resizing on ${host.hostName}) holds no allocations`, `migration record ${migrationUuid(removed)} is an orphan: no instance refers to it`].sort(),
    );

    await host.stop();
    host.tracker = await bench.tracker(host.config, store);
    const report = await host.tracker.start();
    expect(report.problems.map((p) => p.message).sort()).toEqual([`deleted orphaned migration record ${migrationUuid(confirmed)}`, `deleted orphaned migration record ${migrationUuid(removed)}`].sort());
    await whole(host);
    await expectShape(store, confirmed, ACTIVE_LARGE);
    await expectShape(store, removed, NOTHING);
    expect(await shape(store, kept)).toMatchObject({
      instance: { state: 'resizing', flavor: 'floating-large', migrating: true },
      held: { VCPU: 2, CUSTOM_LLC_WAYS: 1 },
      migration: { state: 'resizing', flavor: 'floating' },
      migrationHeld: { VCPU: 1, CUSTOM_LLC_WAYS: 1 },
    });
    // The pending resize's record was not taken for an orphan; a second restart has nothing to do.
    const again = await host.restart();
    expect(again.changes).toEqual([]);
    await whole(host);
    ok(await host.tracker.confirmResize(kept));
    for (const uuid of [kept, confirmed]) expect((await host.tracker.release(uuid)).released).toBe(true);
    await whole(host);
  }, 60_000);
});

// The child runs the built dist of the tracker, the store and the plugins: build them first
// (incremental, so never stale: a mutation of the sources is what the child runs).
beforeAll(() => {
  buildPackage(path.join(REPO_ROOT, 'packages', 'tracker'));
  for (const plugin of ['vcpu', 'memory', 'compute-units', 'llc', 'pstate']) buildPackage(path.join(REPO_ROOT, 'plugins', plugin));
}, 300_000);
