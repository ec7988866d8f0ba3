/**
 * Synthetic `HostState`s for filters, weighers and consumers: a root provider with
 * inventories and usages, optional nested and sharing providers, plugin data by plugin
 * name; `free(class)` is capacity minus usage summed over the tree, as the scheduler's is.
 */
import {
  capacityOf,
  normalizeInventory,
  type Discovery,
  type HostState,
  type HostStatus,
  type Inventory,
  type InventoryInput,
  type ProviderState,
} from '@ert/plugin-api';

/** One provider of a synthetic host. */
export interface ProviderInit {
  /** Provider name; a child's defaults to `<host>_<key>`. */
  name?: string;
  /** Provider uuid; default `<host>-<key>-uuid` for a child, `shared-<i>-uuid` for a sharing provider. */
  uuid?: string;
  /** Nested providers: the key a plugin's `ChildProvider` has, and its parent's key. */
  key?: string;
  /** Key of an earlier child this one is nested under; the root when omitted or unknown. */
  parent?: string;
  /** The provider's inventories (Placement's defaults fill the fields not given). */
  inventories?: Record<string, InventoryInput>;
  /** Amount in use per class (default: nothing used). */
  usages?: Record<string, number>;
  /** The provider's traits. */
  traits?: string[];
  /** Uuids of the aggregates the provider is in. */
  aggregates?: string[];
}

/** What `hostState` accepts; everything has a default. */
export interface HostStateInit {
  /** `host1` by default. */
  name?: string;
  /** `up` by default. */
  status?: HostStatus;
  /** The host generation (default 1). */
  generation?: number;
  /** The root provider's inventories (Placement's defaults fill the rest) and usages. */
  inventories?: Record<string, InventoryInput>;
  /** Amount in use per class on the root (default: nothing used). */
  usages?: Record<string, number>;
  /** The root provider's traits. */
  traits?: string[];
  /** Uuids of the aggregates the root provider is in. */
  aggregates?: string[];
  /** Nested providers, parents before children (default key `child_<i>`). */
  children?: ProviderInit[];
  /** Sharing providers the host reaches (in `sharingProviders`, not counted by `free`). */
  sharing?: ProviderInit[];
  /** Consumer plugins' data by plugin name (what `host.pluginData(name)` returns). */
  pluginData?: Record<string, unknown>;
  /** Host capabilities for `capabilities:` extra specs (default none). */
  capabilities?: Record<string, string | number>;
  /** Metadata of the root's aggregates, merged (default none). */
  aggregateMetadata?: Record<string, string>;
  /** Uuids of the instances on the host (default none). */
  instances?: string[];
}

function providerState(init: ProviderInit, name: string, uuid: string, parentUuid: string | undefined): ProviderState {
  const inventories: Record<string, Inventory> = {};
  for (const [cls, inv] of Object.entries(init.inventories ?? {})) inventories[cls] = normalizeInventory(inv);
  return {
    uuid,
    name,
    parentUuid,
    generation: 1,
    inventories,
    usages: { ...(init.usages ?? {}) },
    traits: new Set(init.traits ?? []),
    aggregates: new Set(init.aggregates ?? []),
  };
}

/** A host state for filters, weighers and consumers to read. */
export function hostState(init: HostStateInit = {}): HostState {
  const name = init.name ?? 'host1';
  const root = providerState(init, name, `${name}-uuid`, undefined);
  const byKey = new Map<string, ProviderState>();
  const children = (init.children ?? []).map((child, i) => {
    const key = child.key ?? `child_${i}`;
    const parent = child.parent === undefined ? root : byKey.get(child.parent);
    const state = providerState(child, child.name ?? `${name}_${key}`, child.uuid ?? `${name}-${key}-uuid`, (parent ?? root).uuid);
    byKey.set(key, state);
    return state;
  });
  const providers = [root, ...children];
  const sharingProviders = (init.sharing ?? []).map((s, i) => providerState(s, s.name ?? `shared_${i}`, s.uuid ?? `shared-${i}-uuid`, undefined));
  const pluginData = { ...(init.pluginData ?? {}) };
  return {
    name,
    rootUuid: root.uuid,
    status: init.status ?? 'up',
    generation: init.generation ?? 1,
    providers,
    sharingProviders,
    aggregateMetadata: { ...(init.aggregateMetadata ?? {}) },
    capabilities: { ...(init.capabilities ?? {}) },
    instances: new Set(init.instances ?? []),
    free(resourceClass) {
      let free = 0;
      for (const p of providers) {
        const inv = p.inventories[resourceClass];
        if (inv) free += capacityOf(inv) - (p.usages[resourceClass] ?? 0);
      }
      return free;
    },
    pluginData: <T>(plugin: string) => pluginData[plugin] as T | undefined,
  };
}

/** The host state of a host whose only plugin reported `discovery` (its root and children, nothing used). */
export function hostStateFromDiscovery(discovery: Discovery, init: Omit<HostStateInit, 'inventories' | 'traits' | 'children'> = {}): HostState {
  return hostState({
    ...init,
    inventories: discovery.available ? discovery.host?.inventories : undefined,
    traits: discovery.available ? discovery.host?.traits : undefined,
    children: discovery.available ? (discovery.children ?? []).map((c) => ({ key: c.key, parent: c.parent, inventories: c.inventories, traits: c.traits })) : [],
  });
}
