import type { Inventory, ResourceClass } from './resources.js';

/**
 * A host's status as the scheduler sees it: `up`; `stale` when stored `up` but its tracker
 * has not updated it within `tracker.staleAfter`; `disabled` by an operator (`ert host disable`).
 * The scheduler's `status` filter passes only `up` hosts.
 */
export type HostStatus = 'up' | 'stale' | 'disabled';

/**
 * A host's effective status (HostStatus): `stale` when its stored status is `up` and its
 * tracker last updated it (`lastUpdate`, ms) more than `staleAfterMs` before `now`; the stored
 * status otherwise. A `staleAfterMs` of 0 or less never makes a host stale. The scheduler,
 * `ert hosts` and the API's host listings all read a host's status through it.
 */
export function effectiveStatus(stored: HostStatus, lastUpdate: number, now: number, staleAfterMs: number): HostStatus {
  if (stored === 'up' && staleAfterMs > 0 && now - lastUpdate > staleAfterMs) return 'stale';
  return stored;
}

/** One provider of a host's tree as the scheduler sees it. */
export interface ProviderState {
  /** The provider's uuid (derived from its name for the tracker's nested providers). */
  readonly uuid: string;
  /** The provider's name: the host's name for its root, `<host>_<key>` for a plugin's child. */
  readonly name: string;
  /** Undefined for the host's root provider. */
  readonly parentUuid: string | undefined;
  /** Placement's provider generation: bumped by every change of its inventories, traits, aggregates or allocations. */
  readonly generation: number;
  /** The provider's inventories by class (normalised: every field set). */
  readonly inventories: Readonly<Record<ResourceClass, Inventory>>;
  /** Amount in use per class (allocations of every consumer). */
  readonly usages: Readonly<Record<ResourceClass, number>>;
  /** The provider's traits (standard and `CUSTOM_`). */
  readonly traits: ReadonlySet<string>;
  /** Uuids of the aggregates the provider is in. */
  readonly aggregates: ReadonlySet<string>;
}

/**
 * The scheduler's in-memory view of one host: built from the store, enriched by
 * consumer plugins, updated in place when the scheduler places an instance there.
 * Filters and weighers must treat it as read-only; consumer plugins change only their
 * own slot through `placed`.
 */
export interface HostState {
  /** The host's name (its tracker's `hostName`, and its root provider's name). */
  readonly name: string;
  /** Uuid of the host's root provider (`providers[0]`). */
  readonly rootUuid: string;
  /** The effective status: a stored `up` older than `tracker.staleAfter` reads `stale`. */
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
