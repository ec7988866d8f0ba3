import { isErtError, messageOf } from '@ert/plugin-api';
import type { Clock, Flavor, HostState, ImageMeta, InstanceRequest, Logger, PlacementRequest, RequestSpec, ResourceRequestGroup, SchedulingHints } from '@ert/plugin-api';
import { createLogger, createPluginRuntime } from '@ert/core';
import type { ErtConfig, HookTiming, PluginRuntime } from '@ert/core';
import { checkPlacementRequest, fitRequest, parseFlavor, specFromPlacementRequest, withGroupProviders } from '@ert/placement';
import { expireReservations, withdrawInstance } from '@ert/store';
import type { Allocation, Store } from '@ert/store';
import { affinityHosts, builtinFilters } from './builtins.js';
import { NoValidHostError, SchedulerError, SchedulerErrorCode } from './errors.js';
import { buildExplanation, buildSummary, type ReasonOf } from './explain.js';
import type { Explanation } from './explain.js';
import { HostManager } from './host-manager.js';
import type { ConsumerEntry, HookCaller } from './host-manager.js';
import { Memo } from './memo.js';
import { MemoCache, SpareMemoArrays } from './memo-cache.js';
import { Ranker } from './ranking.js';
import { awaitOutcomes } from './confirmation.js';
import type { Refusal, SelectOptions } from './confirmation.js';
import type { FilterEntry, Ranking, WeigherEntry } from './memo.js';
import { HostNarrowing, narrowRequest } from './request-filters.js';
import type { RequestScope } from './request-filters.js';

/** One instance of a scheduling request. */
export interface InstanceToSchedule {
  uuid: string;
  projectId: string;
  userId: string;
}

/**
 * What `select` and `explain` take: one flavor for every instance of the batch, or instead
 * of a flavor a Placement-style request (groups, traits, aggregates, group_policy,
 * same_subtree, root_required; checked by `@ert/placement`'s checkPlacementRequest). With
 * `placement` the instances are recorded with the flavor `placement-request` whose amounts
 * are the request's totals; plugin extra specs need a flavor.
 */
export interface ScheduleRequest {
  flavor?: Flavor;
  placement?: PlacementRequest;
  /**
   * The image the instances boot from: its properties (`trait:NAME=required|forbidden`,
   * `hw_cpu_policy`, `hw_mem_page_size`, ...) are merged with the flavor's extra specs by
   * Nova's rules (docs/images.md); a conflict is ERT_SPEC_CONFLICT naming both. The image
   * is kept on the flavor of each instance record (`flavor.image`), so the host's tracker
   * confirms the reservation with the same request. Needs `flavor`.
   */
  image?: ImageMeta;
  /**
   * Request groups beyond the flavor, for every instance of the batch: ports' and devices'
   * resource requests (docs/request-groups.md), each a numbered group of its own whose
   * resources come from one provider of the chosen host's tree, claimed in the same
   * allocation as the flavor. Kept on the flavor of each instance record
   * (`flavor.requestGroups`, with the provider serving each), so the host's tracker confirms
   * the reservation with them. Needs `flavor`.
   */
  requestGroups?: ResourceRequestGroup[];
  instances: InstanceToSchedule[];
  hints?: SchedulingHints;
  /**
   * The availability zone the instances must go to: the hosts of the aggregates whose
   * `availability_zone` metadata is this name (the `availability-zone` request filter,
   * docs/request-filters.md).
   */
  availabilityZone?: string;
  /**
   * Aggregates (uuids or names) the instances must stay out of (the `forbidden-aggregates`
   * request filter; Nova's requested_destination.forbidden_aggregates).
   */
  forbiddenAggregates?: string[];
}

/** Where one instance went: the host claimed in the store, the allocations written, alternates. */
export interface Selection {
  instanceUuid: string;
  host: string;
  allocations: Allocation[];
  /** Up to maxAttempts - 1 other hosts that passed every filter, best first. */
  alternates: string[];
  /** With `requestGroups`: requester -> [uuid of the provider serving its group] (Placement 1.34's mappings). */
  mappings?: Record<string, string[]>;
  /** With `awaitConfirmation`: `active`, the host's tracker confirmed it through its plugins. */
  state?: 'active';
  /** With `awaitConfirmation`: hosts whose tracker refused the instance (or that let it expire) before this one took it, in order. */
  refusals?: Refusal[];
}

/**
 * An instance of a batch that failed which stayed in the store: its host's tracker confirmed
 * it (`active`, or later states only the tracker ends) before the batch failed, so withdrawing
 * it would take it from under the tracker's plugins. The failed select's error lists these in
 * `details.keptInstances`; release them through their hosts (`ert release`).
 */
export interface KeptInstance {
  instanceUuid: string;
  host: string;
  state: string;
}

/**
 * How a decision finds the best host. `indexed` (default) memoises every filter result and raw
 * weigher score per (request, host version), so a decision re-evaluates only hosts that changed
 * since the same request was last ranked; `full-scan` calls every filter and weigher for every
 * host on every decision. Both return the same host (tested); `full-scan` exists to prove it.
 */
export type RankingStrategy = 'indexed' | 'full-scan';

export interface SchedulerOptions {
  config: ErtConfig;
  store: Store;
  logger?: Logger;
  /** Source of randomness for `hostSubsetSize` (default Math.random). */
  random?: () => number;
  clock?: Clock;
  strategy?: RankingStrategy;
  /**
   * Let decisions of concurrent `select` calls go on while earlier claims are being written
   * (default false: each `select` runs alone, claims included). Decisions stay serialised and
   * each counts every earlier placement in memory before its claim is written; the store's
   * write-combining then commits concurrent claims together. A claim that fails is undone in
   * memory by reloading its host.
   */
  overlapClaims?: boolean;
}

/** The scheduler: see packages/scheduler/README.md. */
export interface Scheduler {
  /**
   * Bring host states up to date with the store now (incremental after the first load).
   * `select` and `explain` also refresh when `scheduler.refreshInterval` has passed.
   */
  refresh(): Promise<{ loaded: number; removed: number }>;
  /**
   * Place every instance of the request: for each, the best host is claimed in the store
   * (allocations and the instance record, state `scheduled`, in one transaction), then counted
   * in memory so the next instance of the batch sees it. A lost race (conflict or capacity
   * exceeded) reloads that host and tries the next candidate, up to `maxAttempts` hosts. All or
   * nothing: when an instance cannot be placed, what the batch claimed is released and a
   * NoValidHostError is thrown. A malformed flavor (unknown key, bad value) throws the
   * placement RequestSpecError before any host is looked at. Calls are serialised (with
   * `overlapClaims`, only their decisions are; claims are written concurrently).
   * With `awaitConfirmation` (confirmation.ts) it then waits until each host's tracker has
   * confirmed (`active`) or refused each reservation, and places a refused or expired one
   * again on another host; every selection returned is then `active`. Every call first
   * expires reservations older than `reservations.timeout` (at most once per
   * `scheduler.refreshInterval`).
   */
  select(request: ScheduleRequest, options?: SelectOptions): Promise<Selection[]>;
  /**
   * Which filter removed each host and why, counts per filter, and the weights of the
   * candidates, for the request's flavor (as for its first instance). Changes nothing.
   */
  explain(request: ScheduleRequest): Promise<Explanation>;
  /** The host state of one host, as the scheduler holds it now. */
  host(name: string): HostState | undefined;
  /** Number of hosts held. */
  readonly hostCount: number;
  /** Per-plugin hook call counters from the dispatcher. */
  timings(): HookTiming[];
  /** Stop accepting calls (waits for the running one). The store is the caller's to close. */
  close(): Promise<void>;
}

/**
 * Memos kept (one per distinct request, in a MemoCache: shapes asked for once are dropped
 * first, least recently used first): as many as fit in
 * MEMO_BUDGET_BYTES at MEMO_BYTES_PER_HOST per host slot (a memo's arrays, about 80-100 bytes
 * a host), at least MEMO_MIN and at most MEMO_MAX: 64 at 10,000 hosts, 16 at 100,000. A
 * repeated shape whose memo was dropped is ranked as a new one; with 16 memos at 10,000 hosts
 * of the mixed workload, 43 % of the rankings were on new memos (docs/benchmarks.md).
 */
const MEMO_MIN = 16;
const MEMO_MAX = 64;
const MEMO_BUDGET_BYTES = 64 * 2 ** 20;
const MEMO_BYTES_PER_HOST = 96;
/** Fewest host slots of a memo's arrays. */
const MEMO_MIN_SLOTS = 16;

/** How many memos to keep for a fleet of `capacity` host slots. */
export function memoLimit(capacity: number): number {
  return Math.min(MEMO_MAX, Math.max(MEMO_MIN, Math.floor(MEMO_BUDGET_BYTES / (Math.max(capacity, 1) * MEMO_BYTES_PER_HOST))));
}
/** Parsed requests kept (see `parse`); the least recently used is dropped. */
const PARSED_LIMIT = 64;
/**
 * A decision waits for the hosts to be read when their last read began this many
 * `refreshInterval`s ago or more (`refreshIfDue`): the bound on the age of the state decided on.
 */
const STALE_REFRESHES = 2;

/** A request's parsed flavor and hints, with the spec serialised once (the memo key). */
interface ParsedRequest {
  spec: RequestSpec;
  key: string;
}

/** A parsed request with what its request filters read of it. */
interface ScopedRequest extends ParsedRequest {
  scope: RequestScope;
}

const RETRY_ON_OTHER_HOST = new Set(['ERT_STORE_CAPACITY_EXCEEDED', 'ERT_STORE_PROVIDER_GENERATION_CONFLICT', 'ERT_STORE_CONFLICT']);

/**
 * Create a scheduler over `store`: loads the consumer, filter and weigher plugins named in
 * `config.scheduler` (built-in filters by name too) through core's plugin runtime, then every
 * host from the store. Embeddable: the CLI uses exactly this.
 */
export async function createScheduler(options: SchedulerOptions): Promise<Scheduler> {
  const { config, store } = options;
  const logger = options.logger ?? createLogger({ level: config.log.level });
  const clock = options.clock ?? { now: () => Date.now() };
  // Assigned once below; the built-in filters' locator closes over it before the manager exists.
  // eslint-disable-next-line prefer-const
  let manager: HostManager | undefined;
  const builtins = builtinFilters(
    { hostOf: (uuid) => manager?.hostOfInstance(uuid)?.name, holdersOf: (uuid) => manager?.holdersOf(uuid) },
    { placementSearchBudget: config.scheduler.placementSearchBudget },
  );
  const runtime = await createPluginRuntime({ config, logger, side: 'scheduler', builtins });
  const callHook: HookCaller = (plugin, hook, fn) => runtime.dispatcher.callSync(plugin, hook, fn);
  const consumers: ConsumerEntry[] = runtime.consumers.map((c) => ({ name: c.name, hooks: c.hooks }));
  const filters: FilterEntry[] = runtime.filters.map((f) => ({ name: f.name, hooks: f.hooks }));
  const weighers: WeigherEntry[] = runtime.weighers.map((w) => ({ name: w.name, hooks: w.hooks, multiplier: w.multiplier }));
  manager = new HostManager(store, consumers, callHook, clock, config.tracker.staleAfter, logger);
  const scheduler = new DefaultScheduler(config, store, runtime, manager, new Ranker(filters, weighers, callHook), {
    logger,
    clock,
    random: options.random ?? Math.random,
    strategy: options.strategy ?? 'indexed',
    overlapClaims: options.overlapClaims ?? false,
  });
  await scheduler.refresh();
  return scheduler;
}

/** The hosts tried for one instance and why each failed (carried across re-placements after a refusal). */
interface PlaceAttempts {
  tried: Set<string>;
  attempts: Array<{ host: string; error: string }>;
}

/** Runs `fn` holding the decision lock (or directly, when the caller already holds it). */
type Locked = <T>(fn: () => Promise<T>) => Promise<T>;

class DefaultScheduler implements Scheduler {
  private readonly memos = new MemoCache();
  /** Arrays for the next new memos: evicted memos', and spares allocated when hosts are loaded. */
  private readonly spares = new SpareMemoArrays();
  /**
   * Host slots of every memo's arrays: 1/16 more than the hosts' slots, set again each time
   * the fleet outgrows them (so a host added does not make every memo and spare anew).
   */
  private memoCapacity = 0;
  private readonly parsed = new Map<string, ParsedRequest>();
  /** The decision lock: every change to host states in memory runs in this chain. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Selects running with overlapping claims (for close). */
  private readonly running = new Set<Promise<unknown>>();
  private backgroundRefresh: Promise<void> | undefined;
  private lastRefresh = -Infinity;
  private lastReap = -Infinity;
  private closed = false;

  constructor(
    private readonly config: ErtConfig,
    private readonly store: Store,
    private readonly runtime: PluginRuntime,
    private readonly manager: HostManager,
    private readonly ranker: Ranker,
    private readonly env: { logger: Logger; clock: Clock; random: () => number; strategy: RankingStrategy; overlapClaims: boolean },
  ) {}

  get hostCount(): number {
    return this.manager.size;
  }

  host(name: string): HostState | undefined {
    return this.manager.host(name);
  }

  timings(): HookTiming[] {
    return this.runtime.dispatcher.timings();
  }

  refresh(): Promise<{ loaded: number; removed: number }> {
    return this.serial(() => this.refreshNow());
  }

  select(request: ScheduleRequest, options: SelectOptions = {}): Promise<Selection[]> {
    if (!this.env.overlapClaims) return this.serial(() => this.selectNow(request, (fn) => fn(), options));
    if (this.closed) return Promise.reject(closedError());
    const run = this.selectNow(request, (fn) => this.serial(fn), options);
    this.running.add(run);
    void run.catch(() => undefined).finally(() => this.running.delete(run));
    return run;
  }

  explain(request: ScheduleRequest): Promise<Explanation> {
    return this.serial(async () => {
      const parsed = this.scoped(request);
      await this.refreshIfDue();
      const memo = this.memoFor(parsed);
      const ranking = this.rank(memo, this.manager.slots.length);
      return buildExplanation(this.manager.slots, memo, ranking, this.reasons(memo));
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.running]);
    await this.backgroundRefresh;
    await this.queue.catch(() => undefined);
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed && this.running.size === 0) return Promise.reject(closedError());
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async refreshNow(): Promise<{ loaded: number; removed: number }> {
    const began = this.env.clock.now();
    const result = await this.manager.refresh();
    this.lastRefresh = began;
    this.prepareForHosts();
    return result;
  }

  /**
   * Called holding the lock before a decision. With `refreshInterval` 0 the hosts are refreshed
   * right now. Otherwise, when the interval has passed, the changes are read in the background
   * and applied under the lock once read, so under steady traffic no decision waits for the
   * store's reads; but when the last read began STALE_REFRESHES intervals ago or more (the
   * first decision after a quiet spell, or a read that hangs), the hosts are read now, before
   * deciding: a decision never uses host state read longer ago than that (a host disabled
   * minutes before was chosen from the state held since).
   */
  private async refreshIfDue(): Promise<void> {
    const interval = this.config.scheduler.refreshInterval;
    const now = this.env.clock.now();
    if (interval <= 0 || now - this.lastRefresh >= STALE_REFRESHES * interval) {
      // A background read still running began earlier: `apply` drops it once this one is in.
      await this.refreshNow();
      return;
    }
    if (now - this.lastRefresh < interval || this.backgroundRefresh) return;
    this.lastRefresh = now;
    this.backgroundRefresh = this.manager
      .fetch()
      .then((changes) =>
        this.closed
          ? undefined
          : this.serial(async () => {
              this.manager.apply(changes);
              this.prepareForHosts();
            }),
      )
      .catch((error: unknown) => this.env.logger.warn({ err: error }, `host refresh failed: ${messageOf(error)}`))
      .finally(() => {
        this.backgroundRefresh = undefined;
      });
  }

  /**
   * Validate the request and parse its flavor; throws before anything is touched. Parsing is
   * pure (flavor, hints and the loaded plugins' keys), so the spec of a flavor and hints seen
   * recently is re-used, with its memo key, instead of parsed and serialised again.
   */
  private parse(request: ScheduleRequest): ParsedRequest {
    validateRequest(request);
    const hints = withBatchMembers(request.hints, request.instances);
    const flavor =
      request.image !== undefined || request.requestGroups !== undefined
        ? { ...request.flavor!, ...(request.image !== undefined ? { image: request.image } : {}), ...(request.requestGroups !== undefined ? { requestGroups: request.requestGroups } : {}) }
        : request.flavor;
    const input = JSON.stringify([flavor ?? null, request.placement ?? null, hints]);
    let parsed = this.parsed.get(input);
    if (parsed) {
      this.parsed.delete(input);
    } else {
      const spec =
        request.placement !== undefined
          ? specFromPlacementRequest(checkPlacementRequest(request.placement), hints)
          : parseFlavor(flavor!, { keys: this.runtime.extraSpecKeys, hints });
      // A claim of nothing writes no allocations, so the store could not tell a second claim of
      // the uuid from the first (its check is the consumer's allocations); Placement refuses a
      // request without resources too.
      if (spec.groups.every((group) => Object.values(group.resources).every((amount) => amount <= 0))) {
        const what = request.placement !== undefined ? 'the Placement-style request' : `flavor "${flavor!.name}"`;
        throw new SchedulerError(SchedulerErrorCode.INVALID_REQUEST, `invalid scheduling request: ${what} claims no resources (every class 0 or dropped)`, { key: request.placement !== undefined ? 'placement' : 'flavor' });
      }
      parsed = { spec, key: JSON.stringify(spec) };
      if (this.parsed.size >= PARSED_LIMIT) this.parsed.delete(this.parsed.keys().next().value!);
    }
    this.parsed.set(input, parsed);
    return parsed;
  }

  /** `parse`, plus the request's scope for the request filters (refused when no configured request filter reads a field it sets). */
  private scoped(request: ScheduleRequest): ScopedRequest {
    const parsed = this.parse(request);
    const configured = this.config.scheduler.requestFilters;
    const unread = (field: string, filter: string) =>
      new SchedulerError(
        SchedulerErrorCode.INVALID_REQUEST,
        `invalid scheduling request: ${field} needs the request filter ${filter}, which scheduler.requestFilters does not list (configured: ${configured.join(', ') || 'none'})`,
        { key: field },
      );
    if (request.availabilityZone !== undefined && !configured.includes('availability-zone')) throw unread('availabilityZone', 'availability-zone');
    if ((request.forbiddenAggregates?.length ?? 0) > 0 && !configured.includes('forbidden-aggregates')) throw unread('forbiddenAggregates', 'forbidden-aggregates');
    const scope: RequestScope = {
      projects: [...new Set(request.instances.map((i) => i.projectId))].sort(),
      ...(request.availabilityZone !== undefined ? { availabilityZone: request.availabilityZone } : {}),
      ...(request.forbiddenAggregates !== undefined ? { forbiddenAggregates: [...request.forbiddenAggregates] } : {}),
    };
    return { ...parsed, scope };
  }

  private async selectNow(request: ScheduleRequest, locked: Locked, options: SelectOptions = {}): Promise<Selection[]> {
    const parsed = this.scoped(request);
    await this.reapIfDue();
    await locked(() => this.refreshIfDue());
    const selections: Selection[] = [];
    const tries = new Map<string, PlaceAttempts>();
    try {
      for (const instance of request.instances) {
        const attempts: PlaceAttempts = { tried: new Set(), attempts: [] };
        tries.set(instance.uuid, attempts);
        selections.push(await this.placeOne({ ...instance, flavor: parsed.spec.flavor }, parsed, locked, attempts));
      }
      if (options.awaitConfirmation) await this.confirm(request, parsed, locked, selections, tries, options);
    } catch (error) {
      const kept = await this.release(selections, locked);
      if (kept.length > 0 && isErtError(error)) {
        // The batch failed, yet these are live on their hosts: the caller must know (error
        // details are built per error, so adding to them changes no other error).
        (error.details as Record<string, unknown>).keptInstances = kept;
        error.message += `; ${kept.length} instance(s) of the batch stay, confirmed by their hosts before it failed (${kept.map((k) => `${k.instanceUuid} on ${k.host}`).join(', ')}): release them through their hosts`;
      }
      throw error;
    }
    return selections;
  }

  /**
   * Claim the best host for one instance. The decision (rank, fit, count the placement in
   * memory) holds the lock; the claim is written after it, so with `overlapClaims` the next
   * decision need not wait for the store. A lost race or a failed write reloads that host
   * (undoing the placement counted in memory) and tries the next candidate.
   */
  private async placeOne(instance: InstanceRequest, parsed: ScopedRequest, locked: Locked, carry: PlaceAttempts = { tried: new Set(), attempts: [] }): Promise<Selection> {
    const { spec } = parsed;
    const { maxAttempts, hostSubsetSize } = this.config.scheduler;
    // Hosts tried so far for this instance (a reservation refused by its host counts as one).
    const { tried, attempts } = carry;
    while (attempts.length < maxAttempts) {
      const decision = await locked(async () => {
        const memo = this.memoFor(parsed);
        const limit = Math.max(maxAttempts, hostSubsetSize) + tried.size;
        const ranking = this.rank(memo, limit);
        const candidates = ranking.candidates.filter((c) => !tried.has(c.host.name));
        if (candidates.length === 0) {
          // A bounded ranking evaluated only some hosts: explain from a complete one.
          throw new NoValidHostError(instance.uuid, spec.flavor.name, buildSummary(this.manager.slots, memo, ranking.bounded ? this.rank(memo, 0) : ranking, this.reasons(memo), this.nameRank()), attempts);
        }
        const pick = Math.min(Math.floor(this.env.random() * Math.min(hostSubsetSize, candidates.length)), candidates.length - 1);
        const chosen = candidates[pick]!.host;
        tried.add(chosen.name);
        const withMappings = (spec.flavor.requestGroups?.length ?? 0) > 0;
        const fit = fitRequest(spec, { providers: chosen.providers, sharingProviders: chosen.sharingProviders }, { budget: this.config.scheduler.placementSearchBudget, withMappings });
        if (!fit.ok) return { host: chosen.name, problem: fit.reason };
        const counted = this.manager.applyPlacement(chosen, instance, spec, fit.allocations);
        if (counted.problem !== undefined) {
          // A consumer's `placed` failed: no claim on this host (fail closed); the reload undoes
          // what was counted in memory and rebuilds the consumers' data from the store.
          try {
            await this.manager.reload([chosen.name]);
          } finally {
            this.manager.settle(counted);
          }
          return { host: chosen.name, problem: counted.problem };
        }
        const alternates = candidates
          .filter((c) => c.host !== chosen)
          .slice(0, maxAttempts - 1)
          .map((c) => c.host.name);
        return { host: chosen.name, allocations: fit.allocations, alternates, flavor: withMappings ? withGroupProviders(instance.flavor, fit.mappings) : instance.flavor, counted };
      });
      if (!decision.allocations) {
        attempts.push({ host: decision.host, error: decision.problem! });
        continue;
      }
      try {
        const written = await this.store.writeAllocations([
          {
            consumer: { uuid: instance.uuid, projectId: instance.projectId, userId: instance.userId, generation: null },
            allocations: decision.allocations,
            instance: {
              uuid: instance.uuid,
              host: decision.host,
              projectId: instance.projectId,
              userId: instance.userId,
              flavor: decision.flavor!,
              state: 'scheduled',
              assignments: {},
            },
          },
        ]);
        // Synchronous, so no decision runs in between: hosts the claim alone changed in the
        // store take their new generation (the placement is in memory already).
        this.manager.acknowledge(written.hosts);
        this.manager.settle(decision.counted!);
      } catch (error) {
        // Nothing was written (or, ERT_STORE_UNAVAILABLE, it may have been: the store could not
        // learn whether a commit whose answer was lost went through): the placement counted in
        // memory must go, and the host is read again (the store is the truth).
        try {
          await locked(() => this.manager.reload([decision.host]));
        } finally {
          this.manager.settle(decision.counted!);
        }
        if (!isErtError(error) || !RETRY_ON_OTHER_HOST.has(error.code)) {
          if (isErtError(error) && error.code === 'ERT_STORE_CONSUMER_GENERATION_CONFLICT') {
            throw new SchedulerError(SchedulerErrorCode.INSTANCE_EXISTS, `instance ${instance.uuid} already has allocations in the store`, { instanceUuid: instance.uuid }, { cause: error });
          }
          throw error;
        }
        // Another writer got there first: go on with the next candidate.
        attempts.push({ host: decision.host, error: `${error.code}: ${error.message}` });
        this.env.logger.debug({ host: decision.host, instance: instance.uuid, code: error.code }, 'claim lost a race; trying the next host');
        continue;
      }
      const mappings = groupMappings(decision.flavor!);
      return { instanceUuid: instance.uuid, host: decision.host, allocations: decision.allocations.map((a) => ({ ...a })), alternates: decision.alternates, ...(mappings ? { mappings } : {}) };
    }
    return locked(async () => {
      const memo = this.memoFor(parsed);
      throw new NoValidHostError(instance.uuid, spec.flavor.name, buildSummary(this.manager.slots, memo, this.rank(memo, 0), this.reasons(memo), this.nameRank()), attempts);
    });
  }

  /**
   * Wait for the hosts' trackers to confirm or refuse the batch's reservations; place each
   * refused or expired one again (its earlier hosts excluded), and wait again, until every
   * selection is `active`. A reservation still `scheduled` at the deadline is expired here
   * (generation-checked: one its tracker confirms meanwhile stays). Throws NoValidHostError
   * (its attempts name each refusing host and reason) when an instance runs out of hosts.
   */
  private async confirm(request: ScheduleRequest, parsed: ScopedRequest, locked: Locked, selections: Selection[], tries: Map<string, PlaceAttempts>, options: SelectOptions): Promise<void> {
    const timeout = options.confirmTimeout ?? this.config.reservations.timeout;
    const byUuid = new Map(request.instances.map((i) => [i.uuid, i]));
    let pending = selections.map((_, i) => i);
    while (pending.length > 0) {
      const deadline = this.env.clock.now() + timeout;
      const outcomes = await awaitOutcomes(this.store, pending.map((i) => selections[i]!.instanceUuid), { pollMs: this.config.reservations.pollInterval, deadline, clock: this.env.clock });
      const again: number[] = [];
      for (const index of pending) {
        const selection = selections[index]!;
        let record = outcomes.get(selection.instanceUuid);
        if (record?.state === 'scheduled') {
          const reason = `reservation on host ${selection.host} not confirmed by its tracker within ${timeout} ms (confirmTimeout); expired by the scheduler`;
          await expireReservations(this.store, { now: this.env.clock.now(), timeoutMs: 0, uuids: [selection.instanceUuid], reason });
          record = await this.store.getInstance(selection.instanceUuid);
        }
        if (record?.state === 'active' && record.host === selection.host) {
          selection.state = 'active';
          continue;
        }
        const state = record?.state === 'expired' ? 'expired' : 'refused';
        const reason = record?.reason ?? `the reservation on host ${selection.host} is ${record ? record.state : 'gone'}`;
        const refusals = [...(selection.refusals ?? []), { host: selection.host, state, reason } satisfies Refusal];
        tries.get(selection.instanceUuid)!.attempts.push({ host: selection.host, error: `${state} by host ${selection.host}: ${reason}` });
        this.env.logger.info({ instance: selection.instanceUuid, host: selection.host, state, reason }, 'reservation not taken; placing it on another host');
        // The host's usage changed in the store (the reservation released): count it again.
        await locked(() => this.manager.reload([selection.host]));
        const instance = byUuid.get(selection.instanceUuid)!;
        let placed: Selection;
        try {
          placed = await this.placeOne({ ...instance, flavor: parsed.spec.flavor }, parsed, locked, tries.get(selection.instanceUuid)!);
        } catch (error) {
          // The host's tracker confirmed it after all, between the expiry and this claim: it stays there.
          const now = isErtError(error) && error.code === SchedulerErrorCode.INSTANCE_EXISTS ? await this.store.getInstance(selection.instanceUuid) : undefined;
          if (now?.state !== 'active') throw error;
          const { allocations } = await this.store.getAllocations(selection.instanceUuid);
          selections[index] = { instanceUuid: selection.instanceUuid, host: now.host, allocations, alternates: selection.alternates, state: 'active', refusals };
          continue;
        }
        selections[index] = { ...placed, refusals };
        again.push(index);
      }
      pending = again;
    }
  }

  /** Expire reservations nobody confirmed within `reservations.timeout` (any host), at most once per refresh or poll interval. */
  private async reapIfDue(): Promise<void> {
    const now = this.env.clock.now();
    if (now - this.lastReap < Math.max(this.config.scheduler.refreshInterval, this.config.reservations.pollInterval)) return;
    this.lastReap = now;
    try {
      const expired = await expireReservations(this.store, { now, timeoutMs: this.config.reservations.timeout });
      if (expired.length > 0) this.env.logger.warn({ instances: expired.map((r) => r.uuid) }, 'expired reservations nobody confirmed in time');
    } catch (error) {
      this.env.logger.warn({ err: error }, `expiring reservations failed: ${messageOf(error)}`);
    }
  }

  /**
   * Undo the claims of a failed batch (store first, then the in-memory hosts by reloading them):
   * each reservation is withdrawn in one generation-checked write (`withdrawInstance`), so one
   * its host's tracker confirmed meanwhile (`active`: its plugins hold it) is not taken from
   * under the tracker but stays, the tracker's to release. Returns those that stayed.
   */
  private async release(selections: readonly Selection[], locked: Locked): Promise<KeptInstance[]> {
    const kept: KeptInstance[] = [];
    for (const selection of selections) {
      try {
        const withdrawal = await withdrawInstance(this.store, selection.instanceUuid);
        if (withdrawal.outcome === 'held') kept.push({ instanceUuid: selection.instanceUuid, host: withdrawal.record.host, state: withdrawal.record.state });
      } catch (error) {
        this.env.logger.error({ instance: selection.instanceUuid, host: selection.host, err: error }, `could not release the claim of a failed batch: ${messageOf(error)}`);
      }
    }
    if (selections.length > 0) await locked(() => this.manager.reload([...new Set(selections.map((s) => s.host))]));
    if (kept.length > 0) {
      this.env.logger.warn({ instances: kept }, 'a failed batch left instances their hosts had confirmed; release them through their hosts');
    }
    return kept;
  }

  private rank(memo: Memo, limit: number): Ranking {
    return this.ranker.rank(this.manager, memo, limit, this.env.strategy === 'full-scan');
  }

  /** Why each host was rejected for `memo`'s request, asked when an explanation shows it (read before the hosts change). */
  private reasons(memo: Memo): ReasonOf {
    return (slot) => this.ranker.reasonOf(this.manager.slots, memo, slot);
  }

  /** Each slot's place in the name order of the hosts held now (the rankings' tie order). */
  private nameRank(): Int32Array {
    return this.ranker.nameOrder.of(this.manager.slots, this.manager.layout);
  }

  /**
   * The memo of this request. The key is the whole spec (flavor, extra specs, hints) plus the
   * hosts of an affinity group's placed members, the only thing outside one host a built-in
   * filter reads, plus the request filters' narrowing (worked out from the aggregates now
   * held: a change of their metadata makes another key).
   */
  private memoFor({ spec, key: specKey, scope }: ScopedRequest): Memo {
    const narrowing = narrowRequest(this.config.scheduler.requestFilters, spec, scope, this.manager.aggregates);
    const key = `${specKey}|${affinityHosts(spec, { hostOf: (uuid) => this.manager.hostOfInstance(uuid)?.name }).join(',')}|${JSON.stringify(narrowing)}`;
    this.reserveMemoArrays();
    const slots = this.memoCapacity;
    let memo = this.memos.get(key, memoLimit(slots));
    if (memo && this.env.strategy === 'indexed') return memo;
    memo = new Memo(this.ranker.prepare(spec, new HostNarrowing(narrowing)), slots, this.spares.take(slots), this.ranker.weigherCount);
    // A plugin whose appliesTo threw rejects every host of this memo: prepare again next time
    // rather than keep a passing failure for as long as the memo lives.
    const broken = memo.prepared.filters.some((f) => f.broken !== undefined) || memo.prepared.weighers.some((w) => w.broken !== undefined);
    if (broken) {
      this.memos.delete(key);
      return memo;
    }
    // Decisions are serial and nothing keeps a memo past one: the memo evicted gives its arrays
    // to the spares, for the next new memo.
    const evicted = this.memos.add(key, memo, memoLimit(slots));
    if (evicted !== undefined) this.spares.give(evicted);
    return memo;
  }

  /**
   * What depends on the hosts only, done when they are loaded rather than in the next decision:
   * the memos' arrays, and the hosts' name order (sorting 100,000 names took 30-100 ms of a
   * process's first decision).
   */
  private prepareForHosts(): void {
    this.reserveMemoArrays();
    this.nameRank();
  }

  /**
   * Allocate the memos' arrays ahead (as many as memos are kept, plus one) at the first load
   * and when the fleet outgrows `memoCapacity`, not during the first decisions. The memos
   * kept then are dropped first: too small for the hosts, each would be made anew anyway.
   */
  private reserveMemoArrays(): void {
    const loaded = this.manager.slots.length;
    if (this.memoCapacity > 0 && loaded <= this.memoCapacity) return;
    this.memoCapacity = Math.max(MEMO_MIN_SLOTS, Math.ceil((loaded * 17) / 16));
    this.memos.clear();
    this.spares.reserve(this.memoCapacity, memoLimit(this.memoCapacity) + 1, this.ranker.weigherCount);
  }
}

function closedError(): SchedulerError {
  return new SchedulerError(SchedulerErrorCode.CLOSED, 'the scheduler is closed');
}

/** Refuse malformed requests with the field at fault named. */
function validateRequest(request: ScheduleRequest): void {
  const problem = (message: string, details: Record<string, unknown> = {}) =>
    new SchedulerError(SchedulerErrorCode.INVALID_REQUEST, `invalid scheduling request: ${message}`, details);
  if (!request || typeof request !== 'object') throw problem('not an object');
  if ((request.flavor === undefined) === (request.placement === undefined)) throw problem('give either flavor or placement (a Placement-style request), not both or neither');
  if (request.flavor !== undefined && (request.flavor === null || typeof request.flavor !== 'object')) throw problem('flavor must be an object');
  if (request.image !== undefined) {
    if (request.flavor === undefined) throw problem('image needs a flavor: its properties merge with the flavor\'s extra specs', { key: 'image' });
    if (request.image === null || typeof request.image !== 'object' || request.image.properties === null || typeof request.image.properties !== 'object' || Array.isArray(request.image.properties)) {
      throw problem('image must be { properties: { NAME: VALUE } }', { key: 'image', value: request.image });
    }
    if (request.flavor?.image !== undefined) throw problem('give the image once: as image, or as flavor.image', { key: 'image' });
  }
  if (request.requestGroups !== undefined) {
    if (request.flavor === undefined) throw problem('requestGroups need a flavor: they are claimed with it', { key: 'requestGroups' });
    if (!Array.isArray(request.requestGroups)) throw problem('requestGroups must be a list of { requester, resources, required?, forbidden? }', { key: 'requestGroups', value: request.requestGroups });
    if (request.flavor?.requestGroups !== undefined) throw problem('give the request groups once: as requestGroups, or as flavor.requestGroups', { key: 'requestGroups' });
  }
  if (!Array.isArray(request.instances) || request.instances.length === 0) throw problem('instances must be a non-empty list');
  if (request.availabilityZone !== undefined && (typeof request.availabilityZone !== 'string' || request.availabilityZone.length === 0)) {
    throw problem('availabilityZone must be a non-empty string', { key: 'availabilityZone', value: request.availabilityZone });
  }
  if (request.forbiddenAggregates !== undefined && (!Array.isArray(request.forbiddenAggregates) || request.forbiddenAggregates.some((a) => typeof a !== 'string' || a.length === 0))) {
    throw problem('forbiddenAggregates must be a list of aggregate uuids or names', { key: 'forbiddenAggregates', value: request.forbiddenAggregates });
  }
  // A BigInt (from a library caller) would otherwise end in JSON.stringify's TypeError.
  for (const [key, value] of [['flavor', request.flavor], ['placement', request.placement], ['hints', request.hints], ['image', request.image], ['requestGroups', request.requestGroups]] as const) {
    const at = bigintPath(value, key);
    if (at !== undefined) throw problem(`${at} is a BigInt; give a number or a string`, { key: at });
  }
  const seen = new Set<string>();
  request.instances.forEach((instance, i) => {
    for (const field of ['uuid', 'projectId', 'userId'] as const) {
      if (typeof instance?.[field] !== 'string' || instance[field].length === 0) {
        throw problem(`instances[${i}].${field} must be a non-empty string`, { key: `instances[${i}].${field}`, value: instance?.[field] });
      }
    }
    if (seen.has(instance.uuid)) throw problem(`instance ${instance.uuid} appears twice`, { key: `instances[${i}].uuid`, value: instance.uuid });
    seen.add(instance.uuid);
  });
}

/** The key path of the first BigInt inside `value` (plain objects and arrays), or undefined. */
function bigintPath(value: unknown, path: string, depth = 0): string | undefined {
  if (typeof value === 'bigint') return path;
  if (typeof value !== 'object' || value === null || depth > 32) return undefined;
  for (const [key, child] of Object.entries(value)) {
    const found = bigintPath(child, Array.isArray(value) ? `${path}[${key}]` : /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** requester -> [provider uuid] of each request group of a placed flavor (Placement's mappings shape); undefined when it has none. */
function groupMappings(flavor: Flavor): Record<string, string[]> | undefined {
  const groups = flavor.requestGroups;
  if (groups === undefined || groups.length === 0) return undefined;
  return Object.fromEntries(groups.filter((g) => g.provider !== undefined).map((g) => [g.requester, [g.provider!]]));
}

/** A server group's members include the instances being scheduled with it (as in Nova). */
function withBatchMembers(hints: SchedulingHints | undefined, instances: readonly InstanceToSchedule[]): SchedulingHints {
  if (!hints?.serverGroup) return hints ?? {};
  const members = new Set(hints.serverGroup.members);
  for (const instance of instances) members.add(instance.uuid);
  return { ...hints, serverGroup: { ...hints.serverGroup, members: [...members] } };
}
