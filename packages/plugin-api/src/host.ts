import type { Inventory, ResourceClass } from './resources.js';

export type HostStatus = 'up' | 'stale' | 'disabled';

/** One provider of a host's tree as the scheduler sees it. */
export interface ProviderState {
  readonly uuid: string;
  readonly name: string;
  /** Undefined for the host's root provider. */
  readonly parentUuid: string | undefined;
  readonly generation: number;
  readonly inventories: Readonly<Record<ResourceClass, Inventory>>;
  /** Amount in use per class (allocations of every consumer). */
  readonly usages: Readonly<Record<ResourceClass, number>>;
  readonly traits: ReadonlySet<string>;
  readonly aggregates: ReadonlySet<string>;
}

/**
 * The scheduler's in-memory view of one host: built from the store, enriched by
 * consumer plugins, updated in place when the scheduler places an instance there.
 * Filters and weighers must treat it as read-only; consumer plugins change only their
 * own slot through `placed`.
 */
export interface HostState {
  readonly name: string;
  readonly rootUuid: string;
  readonly status: HostStatus;
  /** Changes whenever anything in the host's tree or stats changes in the store. */
  readonly generation: number;
  /** The host's providers, root first, then nested ones (parents before children). */
  readonly providers: readonly ProviderState[];
  /** Sharing providers reachable through the tree's aggregates. */
  readonly sharingProviders: readonly ProviderState[];
  /** Metadata of the aggregates the root is in (for aggregate_instance_extra_specs). */
  readonly aggregateMetadata: Readonly<Record<string, string>>;
  /** Host capabilities for `capabilities:` extra specs (e.g. cpu_info, hypervisor_type). */
  readonly capabilities: Readonly<Record<string, string | number>>;
  /** Uuids of the instances on the host (for same/different-host and server groups). */
  readonly instances: ReadonlySet<string>;
  /** Free amount of a class, summed over the tree (capacity - used); 0 when absent. */
  free(resourceClass: ResourceClass): number;
  /** The data a consumer plugin produced for this host, by plugin name. */
  pluginData<T>(plugin: string): T | undefined;
}
