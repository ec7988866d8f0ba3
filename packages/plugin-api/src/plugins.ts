import type { JsonSchema, JsonValue } from './json.js';
import type { ExtraSpecKey, InstanceRequest, RequestSpec } from './requests.js';
import type { HostState } from './host.js';
import type { HostSummaries, SummaryBound } from './summaries.js';
import type { InventoryInput, ResourceClass } from './resources.js';
import type { Logger, ServiceContainer } from './services.js';
import { PLUGIN_API_VERSION } from './version.js';

/* ------------------------------------------------------------------------------------
 * Plugin definitions
 *
 * A plugin package has two entry points named in its package.json manifest:
 *   "ert": { "compute": "./compute", "scheduler": "./scheduler",
 *            "provides": ["resource", "consumer", "filter", "weigher"] }
 * and the plugin API range it works with as `"peerDependencies": { "@ert/plugin-api": "^0.1.0" }`.
 * Each entry's default export is made by `definePlugin`. The compute entry supplies
 * `resource`; the scheduler entry any of `consumer`, `filter`, `weigher`. A compute host
 * never imports the scheduler entry and the reverse, so each side loads only its code.
 * ---------------------------------------------------------------------------------- */

/**
 * What a plugin can be used as: `resource` (compute side: discovers and claims), `consumer`
 * (scheduler: turns stats into host data), `filter` and `weigher` (scheduler decisions).
 */
export type PluginKind = 'resource' | 'consumer' | 'filter' | 'weigher';
/** Every `PluginKind`, in the order the host reports them. */
export const PLUGIN_KINDS: readonly PluginKind[] = ['resource', 'consumer', 'filter', 'weigher'];

/** The schema and version of the stats a plugin writes. Bump the version on any change
 *  a reader could notice; consumers list the versions they read. */
export interface StatsSchema {
  /** Integer stored with every stats record; `ConsumerHooks.reads` lists the ones a consumer understands. */
  version: number;
  /** JSON Schema the tracker validates `stats()` against before writing (data that fails is not written). */
  schema: JsonSchema;
}

/** What every hook factory receives. */
export interface PluginContext<Options> {
  /** The name the plugin is configured under (its short name). */
  readonly name: string;
  /** `plugins.<name>` from the config, validated against `optionsSchema`, defaults applied. */
  readonly options: Options;
  /** A child logger bound to `{ plugin: name }`. */
  readonly logger: Logger;
  /** The plugin's own child container (see `CoreServices`). */
  readonly services: ServiceContainer;
}

/** Context of the compute side. */
export interface ResourceContext<Options> extends PluginContext<Options> {
  /** The host's name; the root provider is named after it. */
  readonly hostName: string;
  /** Directory that stands for `/` when reading `/proc` and `/sys` (fixtures in tests). */
  readonly root: string;
  /** Whether the operator enabled enforcement (`enforce` hook) for this plugin. */
  readonly enforce: boolean;
}

/* ----------------------------- compute side: resource ------------------------------ */

/** Inventories and traits a plugin contributes to one provider. */
export interface ProviderContribution {
  /** Inventories by class (Placement's defaults fill the fields not given); none when omitted. */
  inventories?: Record<ResourceClass, InventoryInput>;
  /** Traits to set on the provider (standard os-traits names or `CUSTOM_`). */
  traits?: string[];
}

/** A nested provider the plugin owns. The tracker names it `<host>_<key>` and derives a
 *  uuid from that name, so it is the same across restarts. */
export interface ChildProvider extends ProviderContribution {
  /** Stable key, unique within the host, `[a-z0-9_]+` (e.g. `llc_0`). */
  key: string;
  /** Key of another child provider of this plugin; the host's root when omitted. */
  parent?: string;
}

/** What `discover` reports. When `available` is false the plugin publishes no capacity
 *  (no inventory, rather than zero) and `reason` says why; the other plugins go on. */
export interface Discovery {
  /** False when the host has none of the plugin's resource or it cannot be read now. */
  available: boolean;
  /** Why the plugin is unavailable (naming the file at fault); shown in reports and logs. */
  reason?: string;
  /** Contribution to the host's root provider. */
  host?: ProviderContribution;
  /** Nested providers the plugin owns, parents listed before their children. */
  children?: ChildProvider[];
}

/** Where a plugin places an amount: the host root (no `provider`) or one of its children. */
export interface AllocationRequest {
  /** Child key from `Discovery.children`; the host's root when omitted. */
  provider?: string;
  /** A class the plugin's `discover` reports on that provider. */
  resourceClass: ResourceClass;
  /** Positive integer, checked against the inventory as any allocation (capacity, units, step). */
  amount: number;
}

/** The request a compute plugin tests. */
export interface ClaimRequest {
  /** The instance to claim for (for a resize: with its new flavor). */
  instance: InstanceRequest;
  /** The parsed request: read amounts here (`requestedAmount`), not from the flavor. */
  spec: RequestSpec;
  /**
   * `claim` for a new instance, `resize` for a new flavor of a live one, `extend` for request
   * groups added to a live instance (`Tracker.attach`, e.g. a hot-attached port). During a
   * resize the instance's current allocation stays held until the resize is confirmed or
   * reverted (Nova's semantics): when `test` runs, the view holds it under the migration
   * consumer's uuid and nothing under the instance's, so counting everything in the view is
   * right for both kinds. For `extend`, `spec` holds only the groups being added (its
   * unnumbered group is empty and it has no plugin specs) and the view still holds the
   * instance as it is: test the addition. An `extend` is placed by Placement's rules; a grant
   * for it (allocations, CPUs, units, pools or an assignment) refuses it, naming the plugin,
   * as the instance keeps what its claim assigned.
   */
  kind: 'claim' | 'resize' | 'extend';
}

/**
 * A plugin's yes to a claim. `allocations` place the classes the plugin decides itself
 * (e.g. LLC ways on the cache domain with a contiguous run), which must be classes its
 * `discover` reports (a grant of another plugin's class refuses the claim, naming the
 * plugin); the tracker places the other requested classes by Placement's rules. `assignment` is the plugin's own record
 * of the decision (e.g. the way mask); it is stored with the instance, given back in
 * `addInstance` and in events, and must be JSON. `cpus` are the host CPUs this plugin pins
 * the instance to (e.g. dedicated CPUs for `hw:cpu_policy=dedicated`); at most one plugin
 * may grant them for a claim (two is a refused claim naming both). The tracker stores them
 * with the instance and passes them to every plugin in `ClaimedInstance.cpus`.
 */
export interface ClaimGrant {
  /** Where the plugin places the classes it decides itself; the tracker places the other requested classes. */
  allocations?: AllocationRequest[];
  /** The plugin's record of the decision (JSON), stored with the instance and given back in `ClaimedInstance.assignment`. */
  assignment?: JsonValue;
  /**
   * Host CPUs (logical CPU numbers, distinct, non-negative) this plugin pins the instance to.
   * Each is an exclusive unit of the host (see `units`): the store refuses a claim pinning a
   * CPU another instance on the host is pinned to.
   */
  cpus?: number[];
  /**
   * Concrete units of the host this grant takes for the instance alone, named by the plugin
   * (e.g. `L3-1/way/5` for a cache way, `clos/3` for a class of service): distinct, non-empty,
   * at most 200 characters. The store records them as `<plugin>/<unit>` with the instance and
   * refuses a write (ERT_STORE_ASSIGNMENT_TAKEN, naming unit and holder) that gives a unit to
   * a second instance of the host, whichever process wrote the first: two trackers on one
   * host (a restarted agent beside a stale one, `ert claim` beside `host run`) cannot
   * double-book. A view that drifted from the store is what this catches; the plugin's own
   * view still decides which units to offer.
   */
  units?: string[];
  /**
   * Counted pools the grant draws from, by pool name (e.g. `node0/2048kB` huge pages):
   * `amount` taken (a positive integer) of a pool of `capacity` (the pool's size as the plugin
   * reads it now). The store refuses a write (ERT_STORE_ASSIGNMENT_TAKEN) whose amount, added
   * to what the host's other instances hold from the same pool, exceeds `capacity`. For
   * resources counted per host that are not inventories of a provider.
   */
  pools?: Record<string, { amount: number; capacity: number }>;
}

/** Result of `test`: nothing (accept), a reason string (refuse), or a grant (accept). */
export type TestResult = void | undefined | string | ClaimGrant;

/** An instance as a compute plugin holds it in its view. */
export interface ClaimedInstance {
  /** The instance's uuid, or its migration uuid for the allocation a resize still holds. */
  uuid: string;
  /** The request the instance was claimed with (its current flavor). */
  request: InstanceRequest;
  /** `request`'s flavor parsed, as `ClaimRequest.spec` was. */
  spec: RequestSpec;
  /** Allocations written for it, with child keys resolved to provider names. */
  allocations: Array<{ providerName: string; resourceClass: ResourceClass; amount: number }>;
  /** This plugin's `ClaimGrant.assignment`, if it gave one. */
  assignment?: JsonValue;
  /**
   * Host CPUs the instance is pinned to (some plugin's `ClaimGrant.cpus`, sorted), given to
   * every plugin, not only the one that granted them, in `addInstance`, events and `enforce`;
   * the same after a tracker restart. Undefined when no plugin pinned it: the instance
   * floats over shared CPUs, which other tenants use too.
   */
  cpus?: number[];
}

/**
 * `claimed`: a claim was written; `released`: its allocations were removed; `resized`: its
 * flavor changed (or a resize was reverted); `updated`: sent for every live instance on the
 * tracker's `start()` and after a confirmed resize, to re-apply enforcement.
 */
export type InstanceEventType = 'claimed' | 'released' | 'resized' | 'updated';

/** An instance event, for enforcement. `previous` is the instance before a resize. */
export interface InstanceEvent {
  /** What happened to the instance. */
  type: InstanceEventType;
  /** Name of the host the tracker runs for. */
  host: string;
  /** The instance as it is now (for `released`: as it was). */
  instance: ClaimedInstance;
  /** For `resized`: the instance before the resize. */
  previous?: ClaimedInstance;
}

/**
 * The compute-side hooks. The tracker calls them through its dispatcher (errors tagged
 * with plugin and hook, per-call timeout) and never concurrently for one plugin.
 */
export interface ResourceHooks<Stats = unknown> {
  /**
   * Read the hardware and report inventories, traits and nested providers. Runs at start
   * and at every periodic update. Must be idempotent and must not change the host. A
   * missing or unreadable file is not an exception: return `{ available: false, reason }`.
   */
  discover(): Discovery | Promise<Discovery>;
  /** Forget every instance. Called before the tracker re-adds the live ones (start, update). */
  reset?(): void | Promise<void>;
  /**
   * Would `request` fit this plugin's current view? Return nothing to accept, a reason
   * to refuse, or a `ClaimGrant`. Must not change the view (the tracker calls
   * `addInstance` once the claim is written). Throwing, timing out or returning anything
   * else refuses the claim (fail closed).
   */
  test?(request: ClaimRequest): TestResult | Promise<TestResult>;
  /** Count an instance in the view. Idempotent for the same uuid. */
  addInstance?(instance: ClaimedInstance): void | Promise<void>;
  /** Stop counting an instance. Idempotent; unknown uuids are ignored. */
  removeInstance?(uuid: string): void | Promise<void>;
  /**
   * The stats to record now (hardware facts and the view, e.g. free way bitmaps). Called
   * after discovery and after every change of instances. Validated against the plugin's
   * `stats` schema before anything is written; data that fails is refused at the writer.
   */
  stats?(): Stats | Promise<Stats>;
  /**
   * Act on an instance event (program cache ways, set a governor). Called only when the
   * operator enabled enforcement for this plugin, after the store was written. A throw is
   * reported; the tracker's `enforcementFailure` policy says whether the claim is undone.
   */
  enforce?(event: InstanceEvent): void | Promise<void>;
  /** Release handles and timers. Called once at shutdown. */
  close?(): void | Promise<void>;
}

/* ---------------------------- scheduler side ---------------------------------------- */

const EXCLUDE = Symbol.for('ert.exclude');
/** Returned by `consume` to exclude the host, with the reason shown in explanations. */
export interface Exclusion {
  /** The reason; read it with `exclusionReason`. */
  readonly [EXCLUDE]: string;
}
/** Wrap a reason as the `Exclusion` a consumer's `consume` returns. Pure. */
export function exclude(reason: string): Exclusion {
  return { [EXCLUDE]: reason };
}
/** The reason of an `Exclusion` made by `exclude`; undefined for any other value. Pure. */
export function exclusionReason(value: unknown): string | undefined {
  return typeof value === 'object' && value !== null && EXCLUDE in value ? String((value as Exclusion)[EXCLUDE]) : undefined;
}

/** Allocations the scheduler just wrote for an instance on a host. */
export interface Placement {
  /** Name of the host the instance was placed on. */
  host: string;
  /** The instance placed. */
  instance: InstanceRequest;
  /** The request it was placed for. */
  spec: RequestSpec;
  /** What was written, per provider uuid (the host's providers or sharing providers). */
  allocations: Array<{ providerUuid: string; resourceClass: ResourceClass; amount: number }>;
}

/**
 * Turns a plugin's stats into its slot of the host state (`HostState.pluginData(name)`).
 * HostData should be small: it is held for every host.
 */
export interface ConsumerHooks<Stats = unknown, HostData = unknown> {
  /** Stats schema versions this consumer reads. A host whose stats have another version is
   *  excluded with a reason, never a crash. */
  readonly reads: readonly number[];
  /**
   * Build this plugin's data for one host from its stats (undefined when the host has
   * none: the plugin is unavailable there). Called whenever the host is (re)loaded.
   * Return `exclude(reason)` to keep the host out of every decision.
   */
  consume(stats: Stats | undefined, host: HostState): HostData | Exclusion;
  /**
   * The scheduler placed an instance on this host: return the updated data so the next
   * decision in the batch sees it. Must not throw for a placement it cannot interpret.
   */
  placed?(data: HostData, placement: Placement, host: HostState): HostData;
  /**
   * Optional: the numbers this plugin's filters and weighers can be judged by without being
   * called (`HostSummaries`, published as `<plugin>.<key>`), for the data just built by
   * `consume` or `placed`. Called after each of them; pure and cheap. The scheduler keeps
   * them in typed arrays to rank a request never seen before without calling every filter
   * and weigher on every host (see `FilterHooks.summaryBounds`, `WeigherHooks.summaryScore`
   * and docs/plugins.md, "Host summaries"). A throw leaves this host's summaries unknown
   * (the host is then evaluated one hook call at a time, as without summaries). Summaries
   * are published again only after `consume` and `placed`: derive them from `data`, or from
   * what of `host` changes only with those (not a sharing provider's usage, nor the status),
   * or a bound read from them can rule out a host your filter would accept.
   */
  summarize?(data: HostData, host: HostState): HostSummaries;
}

/**
 * Removes hosts that cannot take the request. Called for many hosts per decision: keep it
 * pure (no I/O, no mutation) and cheap. Return nothing to pass, or the reason.
 */
export interface FilterHooks {
  /** Skip this filter for requests it has nothing to say about (a cheap pre-check). */
  appliesTo?(spec: RequestSpec): boolean;
  /**
   * Called once per candidate host and request (after `appliesTo`). Return nothing to let
   * the host pass, or a reason to reject it (shown in explanations). Must be pure, so the
   * same host state and spec always give the same answer. A throw rejects the host (fail
   * closed) with a reason naming the plugin and hook.
   */
  filter(host: HostState, spec: RequestSpec): string | undefined | void;
  /**
   * Optional, called once per request (after `appliesTo`): necessary conditions on published
   * summaries. A host whose summary is known and below a bound's `atLeast` must be one that
   * `filter` rejects, so the scheduler may leave it out without calling `filter` (pruning
   * must never drop a host `filter` would accept), also when it evaluates every host, and
   * call `filter` later only for the reason an explanation shows. Return nothing when no
   * bound applies. A throw is taken as no bounds.
   */
  summaryBounds?(spec: RequestSpec): readonly SummaryBound[] | undefined;
  /**
   * Optional, called once per request (after `appliesTo`): when `filter` can accept only a
   * few hosts known by name (an affinity group's hosts, say), their names: every host not
   * named is one `filter` rejects, so the scheduler looks at the named ones only. Return
   * nothing when any host may pass. A throw is taken as no restriction.
   */
  candidateHosts?(spec: RequestSpec): readonly string[] | undefined;
}

/**
 * Scores hosts that passed the filters. Raw scores are min-max normalised over the
 * candidates, multiplied by the configured multiplier and summed; higher wins.
 */
export interface WeigherHooks {
  /** Skip this weigher for requests it has nothing to say about (a cheap pre-check). */
  appliesTo?(spec: RequestSpec): boolean;
  /**
   * Called once per host that passed the filters, per decision. Return a finite raw score
   * (any scale; higher is better). A throw or a non-finite result excludes the host (fail
   * closed) with a reason naming the plugin. Must be pure: the same host state and spec
   * always give the same score.
   */
  weigh(host: HostState, spec: RequestSpec): number;
  /**
   * Optional, called once per request (after `appliesTo`): the name of a published summary
   * equal to `weigh(host, spec)` for every host that passes the filters (hosts whose summary
   * is unknown are weighed by calling `weigh`). With a summary for every weigher that
   * applies, the scheduler ranks a new request by reading typed arrays and calls filters
   * and weighers only on the hosts that decide the result (the best ones and each weigher's
   * lowest and highest). Return nothing when the score depends on more than one summary.
   * A throw is taken as no summary.
   */
  summaryScore?(spec: RequestSpec): string | undefined;
}

/* ------------------------------- inventory field sources ---------------------------- */

/**
 * The inventory fields other writers may tune through the Placement API
 * (`openstack resource provider inventory set --allocation-ratio/--reserved`). The tracker
 * always writes the other fields (total, minUnit, maxUnit, stepSize) as its plugins report them.
 */
export type TunableInventoryField = 'allocationRatio' | 'reserved';

/** Tunable fields by resource class (`{ VCPU: ['allocationRatio'] }`). */
export type TunableFieldsByClass = Partial<Record<ResourceClass, readonly TunableInventoryField[]>>;

/**
 * Where a resource plugin's `allocationRatio` and `reserved` come from, so the tracker can
 * apply Nova's rule (docs/ownership.md, "Allocation ratio and reserved"): a value the config
 * sets explicitly is written on every sync (Nova's `cpu_allocation_ratio`); any other value
 * is a default, written when the class is created on a provider and kept afterwards, so an
 * API write persists (Nova's `initial_cpu_allocation_ratio`). Fields this declaration does
 * not name are defaults. Classes are matched on every provider the plugin reports them on.
 */
export interface InventoryFieldSources {
  /**
   * Option key (a top-level key of `plugins.<name>`) -> the fields it sets, by class. The
   * fields are explicit when that key is written in the config file (present in
   * `plugins.<name>` as written, not filled in from `optionsSchema`'s default).
   */
  fromOptions?: Readonly<Record<string, TunableFieldsByClass>>;
  /** Fields that are facts, not defaults (PCPU's ratio 1, cache ways reserved in hardware): always written. */
  fixed?: TunableFieldsByClass;
}

/* ----------------------------------- the plugin ------------------------------------- */

/**
 * What `definePlugin` takes: a name, schemas, the extra-spec keys the plugin owns, and one
 * factory per kind it provides. Both entries of a package usually share everything but the
 * factories.
 */
export interface PluginDefinition<Options = unknown, Stats = unknown, HostData = unknown> {
  /** Short name (`vcpu`); what configs call it unless they give another. */
  name: string;
  /** JSON Schema of `plugins.<name>` options; defaults are applied from it. */
  optionsSchema?: JsonSchema;
  /** Schema and version of the stats `stats()` returns and consumers read. */
  stats?: StatsSchema;
  /** Extra-spec keys this plugin owns (shared by both entries). */
  extraSpecs?: readonly ExtraSpecKey<any>[];
  /**
   * Compute side: which options set the inventories' `allocationRatio` and `reserved`
   * (`InventoryFieldSources`). Without it every such value is a default: written when the
   * class is created on a provider, then kept as the store has it.
   */
  inventoryFields?: InventoryFieldSources;
  /*
   * The factories below are called once per process when the plugin is loaded for that
   * kind, through the dispatcher (hook name = the kind), with the plugin's validated options,
   * child logger and container. They return the hooks object (or a promise of it); a throw,
   * a timeout or a result without the kind's required function refuses the plugin at
   * start. They may open handles (released in `close`) but must not change the host.
   */
  /** Compute side: the resource hooks of one tracker. */
  resource?(ctx: ResourceContext<Options>): ResourceHooks<Stats> | Promise<ResourceHooks<Stats>>;
  /** Scheduler side: the consumer hooks that turn this plugin's stats into host-state data. */
  consumer?(ctx: PluginContext<Options>): ConsumerHooks<Stats, HostData> | Promise<ConsumerHooks<Stats, HostData>>;
  /** Scheduler side: a filter. */
  filter?(ctx: PluginContext<Options>): FilterHooks | Promise<FilterHooks>;
  /** Scheduler side: a weigher (its multiplier comes from the config). */
  weigher?(ctx: PluginContext<Options>): WeigherHooks | Promise<WeigherHooks>;
}

const PLUGIN_BRAND = Symbol.for('ert.plugin');

/** A branded plugin definition, as `definePlugin` returns it. */
export type Plugin<Options = unknown, Stats = unknown, HostData = unknown> = PluginDefinition<Options, Stats, HostData> & {
  readonly [PLUGIN_BRAND]: true;
  /** The PLUGIN_API_VERSION (the @ert/plugin-api package version) the plugin was made with. */
  readonly apiVersion: string;
};

/** Make a plugin. Plain objects and closures; no classes or decorators needed. */
export function definePlugin<Options = unknown, Stats = unknown, HostData = unknown>(
  definition: PluginDefinition<Options, Stats, HostData>,
): Plugin<Options, Stats, HostData> {
  // A malformed declaration (not an array, not objects) is refused when the host loads the plugin, not here.
  if (Array.isArray(definition.extraSpecs)) for (const key of definition.extraSpecs) recordExtraSpecOwner(key, definition.name);
  return Object.freeze({ ...definition, [PLUGIN_BRAND]: true as const, apiVersion: PLUGIN_API_VERSION });
}

const EXTRA_SPEC_OWNERS = Symbol.for('ert.extraSpecOwners');

/**
 * Key object -> the name of the plugin made with it (null: plugins of two names were), kept on
 * `globalThis` under a `Symbol.for` name so that every copy of this package (a plugin may
 * resolve another one than the host) shares it, as they share the plugin brand.
 */
function extraSpecOwners(): WeakMap<object, string | null> {
  const holder = globalThis as unknown as Record<symbol, WeakMap<object, string | null> | undefined>;
  return (holder[EXTRA_SPEC_OWNERS] ??= new WeakMap());
}

function recordExtraSpecOwner(key: ExtraSpecKey<any>, name: string): void {
  if (typeof key !== 'object' || key === null) return;
  const owners = extraSpecOwners();
  const known = owners.get(key);
  owners.set(key, known === undefined || known === name ? name : null);
}

/**
 * The name of the plugin whose extra-spec key `key` is: the `name` of the `definePlugin` call
 * that declared this very key object in `extraSpecs` (both entries of a package declare the
 * same keys under the same name). Undefined for a key no plugin was made with, or one that
 * plugins of different names declare. `@ert/placement`'s parser names it in every error about
 * the key (`plugin "llc": extra spec "llc:ways=abc": ...`, `details.plugin`).
 */
export function extraSpecKeyOwner(key: ExtraSpecKey<any>): string | undefined {
  return extraSpecOwners().get(key) ?? undefined;
}

/** True for objects made by `definePlugin` (by any copy of this package). */
export function isPlugin(value: unknown): value is Plugin {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PLUGIN_BRAND] === true;
}

/** The kinds a plugin object provides. */
export function kindsOf(plugin: PluginDefinition): PluginKind[] {
  return PLUGIN_KINDS.filter((k) => typeof plugin[k] === 'function');
}

/**
 * The `ert` block of a plugin package's package.json. The plugin API range is not part of
 * it: it is the package's `peerDependencies["@ert/plugin-api"]`.
 */
export interface PluginManifest {
  /** Export subpath (`./compute`) of the compute entry. */
  compute?: string;
  /** Export subpath of the scheduler entry. */
  scheduler?: string;
  /** The kinds the entries implement; a config using the plugin for another kind is refused at load. */
  provides: PluginKind[];
}
