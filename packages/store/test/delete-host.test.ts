/**
 * `deleteHost` (issue 14's `ert host delete`, issue 20's "a host deleted on purpose removes its
 * whole tree and says what others had written"): one transaction, refused while the host has
 * instances or allocations unless forced, on SQLite and PostgreSQL.
 *
 * Mutations seen caught: the in-use check removed (the unforced delete removed a host whose
 * instance still held allocations); the children-first order reversed (the delete failed on the
 * parent's foreign key, nothing removed, on both backends).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Flavor } from '@ert/plugin-api';
import type { Store } from '@ert/store';
import { backends, inv, openStore, rejection } from './backends.js';

const flavor: Flavor = { name: 'small', vcpus: 1, memoryMb: 0, diskGb: 0, extraSpecs: {} };

describe.each(backends)('deleteHost on %s', (client) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;

  beforeAll(async () => {
    ({ store, cleanup } = await openStore(client, 'delete_host'));
  });
  afterAll(async () => {
    await cleanup();
  });

  /** A host `h<n>` (root, a tracker child, an outside grandchild), stats, an aggregate, and optionally an instance holding VCPU 2 and cpu 3. */
  async function host(withInstance: boolean): Promise<{ name: string; root: string; child: string; grandchild: string; instance: string }> {
    n += 1;
    const name = `dh-${n}`;
    const id = (k: number) => `00000000-0000-4000-c000-${String(n * 10 + k).padStart(12, '0')}`;
    const [root, child, grandchild] = [id(1), id(2), id(3)];
    await store.createProvider({ uuid: root, name, owner: 'tracker' });
    await store.createProvider({ uuid: child, name: `${name}_numa0`, parentUuid: root, owner: 'tracker' });
    await store.createProvider({ uuid: grandchild, name: `${name}_numa0:bandwidth`, parentUuid: child });
    await store.setInventories(child, undefined, { VCPU: inv(8) });
    await store.setInventories(grandchild, undefined, { CUSTOM_NET_BW_KB: inv(1000) });
    await store.setTraits(root, undefined, ['CUSTOM_OPERATOR_GOLD']);
    await store.setAggregates(root, undefined, ['00000000-0000-4000-c000-00000000aaaa']);
    await store.upsertHost({ name, rootProviderUuid: root });
    await store.writeStats(name, 'cpu', 1, { used: 0 });
    const instance = `dh-instance-${n}`;
    if (withInstance) {
      await store.writeAllocations([
        {
          consumer: { uuid: instance, projectId: 'p', userId: 'u', generation: null },
          allocations: [{ providerUuid: child, resourceClass: 'VCPU', amount: 2 }],
          instance: { uuid: instance, host: name, projectId: 'p', userId: 'u', flavor, state: 'active', assignments: {}, cpus: [3] },
        },
      ]);
    }
    return { name, root, child, grandchild, instance };
  }

  it('refuses a host with instances or allocations, removing nothing; --force removes the tree, the records and the allocations', async () => {
    const h = await host(true);
    const other = await host(true);
    const refused = await rejection(store.deleteHost(h.name));
    expect(refused.code).toBe('ERT_STORE_PROVIDER_IN_USE');
    expect(refused.message).toBe(`host ${h.name} cannot be deleted: 1 instance record(s) and 1 consumer(s) with allocations on its providers (drain them first, or force)`);
    expect(await store.getHost(h.name)).toBeDefined();
    expect(await store.getInstance(h.instance)).toBeDefined();
    expect((await store.listProviders({ rootUuid: h.root })).length).toBe(3);

    const deletion = await store.deleteHost(h.name, { force: true });
    expect(deletion).toEqual({
      host: h.name,
      providers: [
        { uuid: h.root, name: h.name, owner: 'tracker' },
        { uuid: h.child, name: `${h.name}_numa0`, owner: 'tracker' },
        { uuid: h.grandchild, name: `${h.name}_numa0:bandwidth` },
      ],
      instances: [h.instance],
      consumers: [h.instance],
    });
    expect(await store.getHost(h.name)).toBeUndefined();
    expect(await store.getInstance(h.instance)).toBeUndefined();
    expect((await store.getAllocations(h.instance)).allocations).toEqual([]);
    for (const uuid of [h.root, h.child, h.grandchild]) expect(await store.getProvider(uuid)).toBeUndefined();
    // The other host is untouched, and the freed CPU hold is gone with the record.
    expect(await store.getInstance(other.instance)).toMatchObject({ cpus: [3] });
    expect(await store.getUsages(other.child)).toEqual({ VCPU: 2 });
    expect((await store.listAggregates()).find((a) => a.uuid === '00000000-0000-4000-c000-00000000aaaa')!.providers).toEqual([other.root]);
  });

  it('deletes a host without instances unforced; an unknown host is NOT_FOUND', async () => {
    const h = await host(false);
    expect((await store.deleteHost(h.name)).providers.map((p) => p.uuid)).toEqual([h.root, h.child, h.grandchild]);
    expect(await store.getHost(h.name)).toBeUndefined();
    expect((await rejection(store.deleteHost(h.name))).code).toBe('ERT_STORE_NOT_FOUND');
  });
});
