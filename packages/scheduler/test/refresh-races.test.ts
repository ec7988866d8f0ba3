// The age and order of the host state a decision is made on (refreshIfDue, HostManager.apply),
// found by an audit against a real `ert serve`: a host disabled seconds before was chosen by
// the first decision after a quiet spell, and two members of an anti-affinity group landed on
// one host when a background refresh read before the first member's claim was applied after it.
// Real store (SQLite file; PostgreSQL when ERT_TEST_PG_URL is set), the scheduler's own clock.
//
// Mutations seen caught (each made once, the test red, then reverted):
// - refreshIfDue without the STALE_REFRESHES read (a due refresh always in the background):
//   the first test placed on the host disabled 5 s before;
// - HostManager.apply without the changed-here check (`changedAt`): the second test placed both members
//   of the anti-affinity group on `big`;
// - HostManager.apply without the unsettled-claim check: the fourth test did the same;
// - HostManager.settle matching the host object instead of its slot's name (a host reloaded
//   after its claim failed stayed unsettled, never refreshed again): the third test placed on
//   the host disabled before the refresh.
import { describe, expect, it } from 'vitest';
import { StoreError, type Store } from '@ert/store';
import { freeRam } from './fixtures.js';
import { BACKENDS, flavor, instances, useFleets } from './helpers.js';

const small = flavor('small', 1, 1024);

/** A store whose `loadHosts` can be held after it has read (`hold()`), to order a background refresh's read and apply around other work. */
function holdingStore(store: Store) {
  let gate: Promise<void> | undefined;
  let open: () => void = () => undefined;
  let read: () => void = () => undefined;
  let readDone: Promise<void> = Promise.resolve();
  const spy: Store = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'loadHosts') {
        return async (names?: string[]) => {
          const snapshots = await target.loadHosts(names);
          if (gate) {
            read();
            await gate;
          }
          return snapshots;
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    spy,
    /** The next `loadHosts` answers only after `release()`; `read` settles once it has read. */
    hold() {
      gate = new Promise((resolve) => (open = resolve));
      readDone = new Promise((resolve) => (read = resolve));
    },
    get read() {
      return readDone;
    },
    release() {
      gate = undefined;
      open();
    },
  };
}

describe.each(BACKENDS)('the host state decisions are made on (%s)', (client) => {
  const { fleet, scheduler } = useFleets(client, 'ert-refresh-races-');

  it('the first decision after a quiet spell reads the hosts first: a host disabled meanwhile is not chosen', async () => {
    const { store, options } = await fleet('quiet', [
      { name: 'big', inventories: { VCPU: 16, MEMORY_MB: 65536 } },
      { name: 'small', inventories: { VCPU: 16, MEMORY_MB: 8192 } },
    ]);
    let now = Date.now();
    const s = await scheduler(options, store, { filters: ['status', 'resources'], weighers: [{ name: 'free-ram', plugin: freeRam, multiplier: 1 }], refreshInterval: '1s' }, { staleAfter: '1h' }, { clock: { now: () => now } });
    const [first] = await s.select({ flavor: small, instances: instances(1) });
    expect(first!.host).toBe('big');
    // An operator disables the best host; the scheduler hears nothing for 5 s.
    await store.setHostStatus('big', 'disabled');
    now += 5_000;
    const [next] = await s.select({ flavor: small, instances: instances(1) });
    expect(next!.host).toBe('small');
    // Within the interval the state held is used as it is (no read): enabled again, not seen yet.
    await store.setHostStatus('big', 'up');
    now += 500;
    const [within] = await s.select({ flavor: small, instances: instances(1) });
    expect(within!.host).toBe('small');
  });

  it("a background refresh read before a member's claim does not erase it: anti-affinity holds", async () => {
    const { store, options } = await fleet('stale-apply', [
      { name: 'big', inventories: { VCPU: 16, MEMORY_MB: 65536 } },
      { name: 'small', inventories: { VCPU: 16, MEMORY_MB: 16384 } },
    ]);
    const holding = holdingStore(store);
    let now = Date.now();
    const s = await scheduler(
      options,
      holding.spy,
      { filters: ['status', 'resources', 'anti-affinity'], weighers: [{ name: 'free-ram', plugin: freeRam, multiplier: 1 }], refreshInterval: '1s' },
      { staleAfter: '1h' },
      { clock: { now: () => now } },
    );
    // Another writer changes `big`, so the next refresh reads it again.
    await store.setHostStatus('big', 'up');
    holding.hold();
    now += 1_100;
    // This decision starts the background refresh; its read of `big` is held once made.
    const [other] = await s.select({ flavor: small, instances: instances(1) });
    expect(other!.host).toBe('big');
    await holding.read;
    const [b, c] = instances(2);
    const group = { uuid: 'sg-anti', policy: 'anti-affinity' as const, members: [b!.uuid, c!.uuid] };
    const [first] = await s.select({ flavor: small, instances: [b!], hints: { serverGroup: group } });
    expect(first!.host).toBe('big');
    // The refresh's read (without b) is applied now (under the decision lock, before this
    // explanation), before the next decision.
    holding.release();
    await new Promise((resolve) => setImmediate(resolve));
    await s.explain({ flavor: small, instances: [c!] });
    const [second] = await s.select({ flavor: small, instances: [c!], hints: { serverGroup: group } });
    expect(second!.host).toBe('small');
    expect(s.host('big')!.instances.has(b!.uuid)).toBe(true);
    // And the host is read again at the next refresh: in memory as in the store.
    await s.refresh();
    expect(s.host('big')!.free('MEMORY_MB')).toBe(65536 - 2 * 1024);
    expect(s.host('big')!.instances.has(b!.uuid)).toBe(true);
  });

  it('a host whose claim failed and was reloaded is refreshed again afterwards', async () => {
    const { store, options } = await fleet('failed-claim', [
      { name: 'big', inventories: { VCPU: 16, MEMORY_MB: 65536 } },
      { name: 'small', inventories: { VCPU: 16, MEMORY_MB: 16384 } },
    ]);
    const [a, c] = instances(2);
    // a's first claim (on `big`) is refused as a lost race: `big` is reloaded (another object
    // in its slot) and the placement settled, and a goes to `small`.
    let refuse = true;
    const spy: Store = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'writeAllocations') {
          return async (...args: Parameters<Store['writeAllocations']>) => {
            if (refuse && args[0][0]?.consumer.uuid === a!.uuid) {
              refuse = false;
              throw new StoreError('ERT_STORE_CONFLICT', 'another writer got there first (test)');
            }
            return target.writeAllocations(...args);
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const s = await scheduler(options, spy, { filters: ['status', 'resources'], weighers: [{ name: 'free-ram', plugin: freeRam, multiplier: 1 }], refreshInterval: '1h' }, { staleAfter: '1h' });
    const [placed] = await s.select({ flavor: small, instances: [a!] });
    expect(placed!.host).toBe('small');
    // The next refresh sees an operator's disable of `big`: its placement is settled.
    await store.setHostStatus('big', 'disabled');
    await s.refresh();
    const [next] = await s.select({ flavor: small, instances: [c!] });
    expect(next!.host).toBe('small');
  });

  it("with overlapping claims, a refresh read while a member's claim is being written does not erase it", async () => {
    const { store, options } = await fleet('unsettled', [
      { name: 'big', inventories: { VCPU: 16, MEMORY_MB: 65536 } },
      { name: 'small', inventories: { VCPU: 16, MEMORY_MB: 16384 } },
    ]);
    const [b, c, x] = instances(3);
    // b's claim waits for `letClaim`; the refresh's read of the hosts is signalled.
    let claimWaiting: () => void = () => undefined;
    const bWaits = new Promise<void>((resolve) => (claimWaiting = resolve));
    let letClaim: () => void = () => undefined;
    const claimLet = new Promise<void>((resolve) => (letClaim = resolve));
    let hostsRead: () => void = () => undefined;
    const refreshRead = new Promise<void>((resolve) => (hostsRead = resolve));
    let watchReads = false;
    const spy: Store = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'writeAllocations') {
          return async (...args: Parameters<Store['writeAllocations']>) => {
            if (args[0][0]?.consumer.uuid === b!.uuid) {
              claimWaiting();
              await claimLet;
            }
            return target.writeAllocations(...args);
          };
        }
        if (prop === 'loadHosts') {
          return async (names?: string[]) => {
            const snapshots = await target.loadHosts(names);
            if (watchReads) hostsRead();
            return snapshots;
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    let now = Date.now();
    const s = await scheduler(
      options,
      spy,
      { filters: ['status', 'resources', 'different-host', 'anti-affinity'], weighers: [{ name: 'free-ram', plugin: freeRam, multiplier: 1 }], refreshInterval: '1s' },
      { staleAfter: '1h' },
      { clock: { now: () => now }, overlapClaims: true },
    );
    await store.setHostStatus('big', 'up');
    const group = { uuid: 'sg-anti', policy: 'anti-affinity' as const, members: [b!.uuid, c!.uuid] };
    // b is counted on `big`; its claim waits.
    const placingB = s.select({ flavor: small, instances: [b!], hints: { serverGroup: group } });
    await bWaits;
    // x (kept off b's host) starts the background refresh, which reads `big` without b.
    watchReads = true;
    now += 1_100;
    const [onSmall] = await s.select({ flavor: small, instances: [x!], hints: { differentHost: [b!.uuid] } });
    expect(onSmall!.host).toBe('small');
    await refreshRead;
    // The refresh is applied (under the decision lock, before this explanation) while b's claim
    // is still being written; then b's claim commits.
    await new Promise((resolve) => setImmediate(resolve));
    await s.explain({ flavor: small, instances: [c!] });
    letClaim();
    const [first] = await placingB;
    expect(first!.host).toBe('big');
    const [second] = await s.select({ flavor: small, instances: [c!], hints: { serverGroup: group } });
    expect(second!.host).toBe('small');
    expect(s.host('big')!.instances.has(b!.uuid)).toBe(true);
  });
});
