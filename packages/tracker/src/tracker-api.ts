/**
 * The tracker's contract: what `createTracker` takes and what a tracker does. The
 * implementation is tracker.ts (lifecycle and instance operations), with discovery.ts,
 * claim-plan.ts and plugin-views.ts.
 */
import type { Clock, Flavor, InstanceEventType, InstanceRequest, Logger, ResourceRequestGroup } from '@ert/plugin-api';
import type { DispatcherOptions, ErtConfig } from '@ert/core';
import type { HostStore } from '@ert/store';
import type { ConfirmReport } from './reservations.js';
import type { ClaimResult, DiscoveryReport, ReleaseResult, SyncReport, TrackerListener } from './types.js';

export interface TrackerOptions {
  config: ErtConfig;
  /**
   * The store to write to, or a function that opens it: called when the store is first needed
   * (the first sync or claim, never by `createTracker` or `discover()`), and again after it
   * rejects; the tracker does not close what it gives. So a caller can have the plugins loaded
   * and checked (`createTracker`) before any store is opened or created. When omitted the
   * tracker opens `config.store` on first write and closes it in `stop()`; `discover()` never
   * opens it.
   */
  store?: HostStore | (() => Promise<HostStore>);
  logger?: Logger;
  /** Default: `config.tracker.hostName`, then `os.hostname()`. */
  hostName?: string;
  /** Directory standing for `/` (default `config.tracker.root`). */
  root?: string;
  clock?: Clock;
  /** Observers for metrics (the tracker depends on no metrics library). A throw from one is logged and ignored. */
  observer?: TrackerObserver;
}

/** One claim through the tracker's claim path (`claim`, or a reservation being confirmed), answered. */
export interface ClaimObservation {
  /**
   * `claimed`; `refused` (a plugin or placement said no); `conflict` (the store refused the
   * write: a lost race, a generation conflict, capacity taken meanwhile); `error` (threw).
   */
  outcome: 'claimed' | 'refused' | 'conflict' | 'error';
  seconds: number;
  /** Writes tried again after the store refused a unit another process took (ERT_STORE_ASSIGNMENT_TAKEN). */
  retries: number;
}

/** What a metrics module can subscribe to. */
export interface TrackerObserver {
  /** Every plugin hook call through the dispatcher (`DispatcherOptions.onCall`). */
  onHookCall?: DispatcherOptions['onCall'];
  onClaim?(claim: ClaimObservation): void;
  /** Every reservation pass (after start, each periodic update, the watch, `confirmScheduled`). */
  onConfirm?(report: ConfirmReport): void;
}

/**
 * The compute-host tracker: discovers the host through its resource plugins, keeps the
 * host's providers, inventories, traits and stats in the store, and claims instances.
 * Every operation that calls plugins or writes runs one at a time (a mutex), so plugins
 * are never called concurrently by two operations and claims on the host are serialized.
 */
export interface Tracker {
  readonly hostName: string;
  /** Uuid of the host's root provider (derived from the host name; stable across restarts). */
  readonly rootUuid: string;
  /** The latest sync report (start, sync or periodic update). */
  readonly lastSync: SyncReport | undefined;
  /** Run every plugin's `discover` and `stats` and merge provider configs. Writes nothing. Throws on conflicting inventory. */
  discover(): Promise<DiscoveryReport>;
  /**
   * Reconcile the host into the store: discover, `reset` each plugin and re-add every live
   * instance, then write only what differs (providers, inventories, traits, stats), touch
   * the host row (`up`, lastUpdate) and mark other hosts stale. Idempotent.
   */
  sync(): Promise<SyncReport>;
  /**
   * `sync()`, emitting `updated` for each live instance (so enforcement is re-applied after a
   * restart), then a periodic `sync()` every `config.tracker.interval`, which re-adds the live
   * instances to the plugins' views but emits no events. Throws on start-up errors.
   *
   * A periodic update (or a reservation pass) that fails is retried with capped exponential
   * backoff and jitter (from 1 s up to `tracker.interval`), and the failure is logged once when
   * it starts and once when it ends. With `waitForStore`, a store that cannot be reached at
   * start (ERT_STORE_UNAVAILABLE: PostgreSQL or the `--server` down) is retried the same way
   * until it answers; `stop()` meanwhile makes `start` reject with ERT_TRACKER_STATE.
   */
  start(options?: { waitForStore?: boolean }): Promise<SyncReport>;
  /** Stop the timer, wait for operations in flight (the reservation watch's look included: no store call follows the returned promise), call every plugin's `close`, close the store if the tracker opened it. Idempotent: a second call waits for the same shutdown. */
  stop(): Promise<void>;
  /**
   * Claim an instance on this host; all-or-nothing. Adopts allocations the scheduler already
   * wrote for it. A refusal (plugin reasons, placement, a lost store race) is `{ ok: false }`;
   * it throws ERT_TRACKER_HOST_NOT_SYNCED before the first `sync()` / `start()` and
   * ERT_TRACKER_STATE after `stop()`.
   */
  claim(request: InstanceRequest): Promise<ClaimResult>;
  /** Release an instance (and a pending resize's old allocations). Unknown instances: `{ released: false }`. */
  release(uuid: string): Promise<ReleaseResult>;
  /**
   * Resize an active instance of this host (Nova's same-host resize, docs/lifecycle.md): the
   * new flavor's allocations go to the instance and the old ones stay held by its migration
   * consumer (`migrationUuid`) until `confirmResize` or `revertResize`, in the store and in
   * every plugin's view alike. The new flavor must therefore fit beside the old one; when it
   * does not, the result is `{ ok: false }` with the refusing plugin's reason (which names
   * the class, pages, ways or CPUs missing), and nothing changes. The instance keeps its
   * image and its request groups (`flavor.image`, `flavor.requestGroups` of its record): a
   * new flavor without them is merged with the instance's.
   */
  resize(uuid: string, flavor: Flavor): Promise<ClaimResult>;
  /**
   * Extend a live instance's allocation in place with one more request group (a
   * hot-attached port's or device's resource request, docs/request-groups.md; Nova's
   * interface attach). Only the addition is tested and fitted: every plugin's `test` sees
   * kind `extend` with a spec of that group alone (a grant refuses it), and Placement's
   * rules put it on one provider of the host's tree beside what the instance holds. One
   * transaction, checked against the consumer generation read first, writes the grown
   * allocation and the record (its `flavor.requestGroups` with the group and the provider
   * serving it); plugins then re-add the instance and `resized` is emitted. A refusal (a
   * plugin, placement, capacity, a concurrent writer, an instance that is not active here or
   * is mid-resize or move, a requester it already has) changes nothing.
   */
  attach(uuid: string, group: ResourceRequestGroup): Promise<ClaimResult>;
  /**
   * Shrink a live instance's allocation in place: its request group of `requester` (e.g. a
   * detached port) and that group's amounts on the provider serving it go, in one
   * transaction checked against the consumer generation; plugins re-add the instance and
   * `resized` is emitted. An unknown requester changes nothing.
   */
  detach(uuid: string, requester: string): Promise<ClaimResult>;
  /** Finish a resize: the migration consumer's old allocations, pages, ways and CPUs are released; the instance keeps the new ones. */
  confirmResize(uuid: string): Promise<ClaimResult>;
  /** Undo a resize or a cold migration: the new allocations are released and the instance gets the old host, flavor, allocations, assignments and CPUs back. */
  revertResize(uuid: string): Promise<ClaimResult>;
  /**
   * Cold-migrate an active instance of another host to this one; called on the destination
   * host's tracker (Nova's semantics, docs/lifecycle.md). This host's plugins test the
   * instance's flavor as a claim; then one transaction gives the instance this host's
   * allocations (record on this host, state `resizing`) and moves its allocations on the
   * source host to its migration consumer (a `resizing` record on the source host), where
   * they stay held until `confirmResize` (released) or `revertResize` (the instance goes
   * back) on this tracker. The source host's plugins see the move at their next update
   * (`sync`, periodic, or a restart); until then they count the same amounts under the
   * instance's uuid. A refusal (this host's plugins, placement, the store) changes nothing.
   */
  migrate(uuid: string): Promise<ClaimResult>;
  /**
   * Evacuate an active instance from a host that is down (status `stale` or `disabled`) to
   * this one; called on the destination's tracker. Like `migrate`, but the instance is
   * `active` here at once: its allocations on the source host stay held on its migration
   * consumer until the source host's tracker starts again and releases them (Nova's
   * evacuation). Refused while the source host is `up`.
   */
  evacuate(uuid: string): Promise<ClaimResult>;
  /** Listen to instance events; returns a function that removes the listener. */
  on(type: InstanceEventType, listener: TrackerListener): () => void;
  /**
   * Confirm the reservations schedulers made on this host (instances in state `scheduled`,
   * docs/lifecycle.md): each goes through the claim path, adopting the reservation's
   * allocations, and turns `active` with its plugins' assignments; a refusal releases it and
   * records `refused` with the reason, naming the plugin. Reservations of any host older than
   * `reservations.timeout` are expired first. Also runs after start, after every periodic
   * update, and whenever the watch (every `reservations.pollInterval` while started) sees one.
   * A reservation whose confirmation fails with an error (not a refusal) stays `scheduled`, is
   * listed in `failed`, and the pass goes on with the next; only an unreachable store stops it.
   */
  confirmScheduled(): Promise<ConfirmReport>;
}
