import type { ClaimedInstance, Inventory, InstanceEvent, InstanceEventType, JsonValue, ResourceClass } from '@ert/plugin-api';
import type { Allocation, InstanceRecord } from '@ert/store';
import type { DesiredProvider } from './tree.js';

/**
 * Something that went wrong without stopping the operation: a plugin hook that failed,
 * stats refused by their schema, inventory kept because allocations use it, an
 * enforcement failure. `code` is the stable code of the underlying error.
 */
export interface Problem {
  code: string;
  message: string;
  plugin?: string;
  hook?: string;
  provider?: string;
  resourceClass?: string;
  file?: string;
  instance?: string;
}

/** One plugin's part of a discovery. */
export interface PluginDiscoveryReport {
  plugin: string;
  /** False when the plugin said so, threw, timed out or returned an invalid Discovery. */
  available: boolean;
  reason?: string;
  /** The providers the plugin contributed to, with what it reported there. */
  providers: Array<{ name: string; uuid: string; parentName?: string; inventories: Record<ResourceClass, Inventory>; traits: string[] }>;
  /** The plugin's stats, already validated against its schema (absent when it has none, or they were refused). */
  stats?: { schemaVersion: number; data: JsonValue };
  /** Why the stats were refused (ERT_PLUGIN_STATS_INVALID) or could not be read. */
  statsProblem?: Problem;
  /** Wall time of `discover` (and `stats`), in ms. */
  timingMs: number;
}

/** What `Tracker.discover()` found; nothing of it has been written. */
export interface DiscoveryReport {
  host: string;
  rootUuid: string;
  plugins: PluginDiscoveryReport[];
  /** The merged tree (plugins and provider configs), root first, parents before children. */
  providers: DesiredProvider[];
  /** Provider config files read and entries that matched no provider of this host. */
  providerConfigs: { entries: number; unmatched: Array<{ file: string; index: number; identification: { name?: string; uuid?: string } }> };
  /** Every plugin failure, refused stats and unmatched provider config entry. */
  problems: Problem[];
}

/** What `Tracker.sync()` (and every periodic update) did. */
export interface SyncReport {
  host: string;
  rootUuid: string;
  discovery: DiscoveryReport;
  /** One line per write, e.g. `inventories of host1_llc_0: CUSTOM_LLC_WAYS`; empty when nothing changed. */
  changes: string[];
  /** Discovery problems plus what the reconciliation kept or could not do. */
  problems: Problem[];
  /** Live instances re-added to the plugins. */
  instances: number;
  /** Other hosts this update marked stale. */
  staleHosts: string[];
}

/** The result of `claim`, `resize`, `confirmResize` and `revertResize`. */
export type ClaimResult =
  | {
      ok: true;
      instance: ClaimedInstance;
      /** Every allocation the instance's consumer now holds. */
      allocations: Allocation[];
      record: InstanceRecord;
      /** Failures after the write (addInstance, stats, enforcement under the `report` policy). */
      problems: Problem[];
    }
  | { ok: false; reasons: Array<{ plugin?: string; reason: string }> };

/** The result of `release`. */
export interface ReleaseResult {
  /** False when the instance was not on this host (nothing was done). */
  released: boolean;
  problems: Problem[];
}

export type TrackerListener = (event: InstanceEvent) => void;
export type { InstanceEventType };
