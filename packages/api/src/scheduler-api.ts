/**
 * The scheduler API of `ert serve` (docs/api.md, "Scheduler API"): `POST /select`,
 * `POST /explain`, `GET /hosts`, `GET /hosts/{name}`, `GET /instances`, `GET|DELETE /instances/{uuid}`,
 * `GET /flavors`, `GET /availability-zones`, `GET /events` (server-sent events: hosts that
 * changed), `GET /host-facets` (traits and aggregates of the hosts), `GET /decisions` (the
 * latest selects, decisions.ts) and this module's OpenAPI document, under `/scheduler/v1`, outside the
 * Placement prefix. Same authentication as the Placement API (the serve process's
 * authenticator); its policy's base rules decide: `system_reader_api` for reads and
 * `explain`, `system_admin_api` for `select` and `DELETE`. Every error is
 * `{"error": {"code", "message", "details"}}` with a stable `ERT_*` code.
 *
 * This package depends on no scheduler: the process gives a factory (`ert serve` passes
 * `@ert/scheduler`'s `createScheduler`), called once, at the first request that needs it.
 * The routes, their schemas and the OpenAPI document are scheduler-routes.ts; the error
 * answers, shared with the agent API, ert-errors.ts.
 */
import { randomUUID } from 'node:crypto';
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { capacityOf, isErtError, messageOf, type Flavor, type HostStatus, type ImageMeta, type PlacementRequest, type ResourceRequestGroup, type SchedulingHints } from '@ert/plugin-api';
import { PlacementQueryError, parseCandidatesQuery } from '@ert/placement';
import { availabilityZonesOf } from '@ert/placement';
import { withdrawInstance, type Allocation, type HostSnapshot, type InstanceRecord, type InstanceState, type ProviderSnapshot, type StatsRecord, type Store } from '@ert/store';
import type { Authenticator, Credentials } from './auth.js';
import { DecisionLog, type DecisionOutcome } from './decisions.js';
import { eventStream, HostChangeFeed } from './events.js';
import type { DecisionEvent } from './metrics.js';
import type { Policy } from './policy.js';
import { HostSnapshots } from './host-snapshots.js';
import { warmOnListen } from './warm-up.js';
import { INSTANCE_EXISTS, SchedulerApiError, SchedulerApiErrorCodes, schemaProblem, useErtErrors } from './ert-errors.js';
import { canonicalUuid } from './routes/allocation-writes.js';
import { SCHEDULER_PREFIX, SCHEDULER_ROUTES, UUID_PATTERN, schedulerOpenApi, type RequestBody } from './scheduler-routes.js';
import { hostFacets } from './host-facets.js';

/** One instance of a request, as `@ert/scheduler`'s ScheduleRequest takes it. */
interface InstanceToSchedule {
  uuid: string;
  projectId: string;
  userId: string;
}

/** A request as `@ert/scheduler`'s ScheduleRequest takes it (the fields this API sets). */
interface BackendRequest {
  flavor?: Flavor;
  placement?: PlacementRequest;
  instances: InstanceToSchedule[];
  hints?: SchedulingHints;
  availabilityZone?: string;
  forbiddenAggregates?: string[];
  image?: ImageMeta;
  requestGroups?: ResourceRequestGroup[];
}

/** What this module needs of a scheduler (`@ert/scheduler`'s Scheduler, structurally). */
export interface SchedulerBackend {
  select(
    request: BackendRequest,
    options?: { awaitConfirmation?: boolean; confirmTimeout?: number },
  ): Promise<
    Array<{
      instanceUuid: string;
      host: string;
      allocations: Allocation[];
      alternates: string[];
      state?: 'active';
      refusals?: Array<{ host: string; state: string; reason: string }>;
      mappings?: Record<string, string[]>;
    }>
  >;
  explain(request: BackendRequest): Promise<unknown>;
  close?(): Promise<void>;
  /** Hosts the scheduler holds (GET /decisions: the hosts a placement considered). */
  readonly hostCount?: number;
}

export interface SchedulerApiOptions {
  /** Creates the process's one scheduler; called once, at the first `select` or `explain`. */
  createScheduler: () => Promise<SchedulerBackend>;
  /** The configured flavors (`GET /flavors`, and `"flavor": "<name>"`). */
  flavors: readonly Flavor[];
  /** A host's status as the scheduler sees it (`@ert/scheduler`'s effectiveStatus). */
  effectiveStatus: (stored: HostStatus, lastUpdate: number, now: number, staleAfterMs: number) => HostStatus;
  /** tracker.staleAfter, ms. */
  staleAfter: number;
  /** Called once per `POST /select` (`ErtMetrics.observeDecision`). */
  onDecision?: (decision: DecisionEvent) => void;
  /** `GET /events`: how often the store's host generations are polled while a client listens, ms (default 1000). */
  eventsIntervalMs?: number;
  /**
   * Read every host's snapshot once the server listens (`ert serve`), so that the first
   * `GET /hosts` (the web view's fleet) joins that read or finds it done instead of reading
   * every host itself. The server answers meanwhile; `onHostSnapshotsRead` is told when the
   * read ended (`ert serve`'s readiness check `host-snapshots` waits for it).
   */
  warmHostSnapshots?: boolean;
  /** Told once the read of `warmHostSnapshots` ended: the hosts read and how long it took, or why it failed (GET /hosts then reads them itself). */
  onHostSnapshotsRead?: (outcome: { hosts: number; ms: number } | { error: unknown }) => void;
  /** `GET /decisions`: how many of the latest decisions are kept (default 200). */
  decisionsKept?: number;
}

/** What `createApi` adds: the store and the Placement API's authenticator and policy. */
export interface SchedulerApiContext extends SchedulerApiOptions {
  store: Store;
  authenticate: Authenticator;
  policy: Policy;
}

// ---- the routes ------------------------------------------------------------------------------

const iso = (ms: number | undefined): string => new Date(ms ?? 0).toISOString();

function placementAllocations(allocations: readonly Allocation[]): Record<string, { resources: Record<string, number> }> {
  const out: Record<string, { resources: Record<string, number> }> = {};
  for (const a of allocations) (out[a.providerUuid] ??= { resources: {} }).resources[a.resourceClass] = a.amount;
  return out;
}

function instanceView(r: InstanceRecord): Record<string, unknown> {
  return {
    uuid: r.uuid,
    host: r.host,
    state: r.state,
    flavor: r.flavor.name,
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    project_id: r.projectId,
    user_id: r.userId,
    created_at: iso(r.createdAt),
    updated_at: iso(r.updatedAt),
  };
}

/** An instance's holds beyond allocations: assignments per plugin, pinned CPUs, units, pools. */
function holdsView(r: InstanceRecord): Record<string, unknown> {
  return {
    assignments: r.assignments,
    ...(r.cpus !== undefined ? { cpus: r.cpus } : {}),
    ...(r.units !== undefined ? { units: r.units } : {}),
    ...(r.pools !== undefined ? { pools: r.pools } : {}),
  };
}

/** A provider of a host's tree as GET /hosts/{name} shows it (Placement's names for its fields). */
function providerDetail(p: ProviderSnapshot): Record<string, unknown> {
  return {
    uuid: p.uuid,
    name: p.name,
    generation: p.generation,
    parent_provider_uuid: p.parentUuid ?? null,
    root_provider_uuid: p.rootUuid,
    inventories: Object.fromEntries(
      Object.entries(p.inventories)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([rc, inv]) => [
          rc,
          { total: inv.total, reserved: inv.reserved, min_unit: inv.minUnit, max_unit: inv.maxUnit, step_size: inv.stepSize, allocation_ratio: inv.allocationRatio, capacity: capacityOf(inv), used: p.usages[rc] ?? 0 },
        ]),
    ),
    traits: [...p.traits].sort(),
    aggregates: [...p.aggregates].sort(),
  };
}

const flavorView = (f: Flavor) => ({ name: f.name, vcpus: f.vcpus, memory_mb: f.memoryMb, disk_gb: f.diskGb, extra_specs: f.extraSpecs });

/**
 * A body's `placement`: a query string of GET /allocation_candidates (parsed as Placement
 * 1.39 parses it: its refusals are 400 `ERT_API_BAD_REQUEST` with Placement's code in
 * `details.placementCode`) or an object, which the scheduler
 * checks (`checkPlacementRequest`: `ERT_SPEC_INVALID_VALUE` naming the field).
 */
function placementOf(placement: string | Record<string, unknown>): PlacementRequest {
  if (typeof placement !== 'string') return placement as unknown as PlacementRequest;
  let parsed;
  try {
    parsed = parseCandidatesQuery(new URLSearchParams(placement.replace(/^\?/, '')), { major: 1, minor: 39 });
  } catch (err) {
    if (!(err instanceof PlacementQueryError)) throw err;
    throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `placement: ${err.message}`, { field: 'placement', placementCode: err.code });
  }
  if (parsed.limit !== undefined) throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, 'placement: limit is a GET /allocation_candidates parameter, not part of a request to place', { field: 'placement' });
  return parsed.request;
}

const UUID_LIKE = new RegExp(UUID_PATTERN);

/** A uuid the schema let through (UUID_PATTERN), in its canonical form: lower case, dashed (as Placement takes a consumer's). */
const canonical = (uuid: string): string => canonicalUuid(uuid) ?? uuid;

/**
 * A `select` or `explain` body the schema passed, as the scheduler takes it: its uuids
 * canonical (`instance_uuids`, the hints', `forbidden_aggregates` entries that are uuids), so
 * that one uuid in two spellings is one instance, and its `placement` query parsed. What the
 * schema cannot say is refused here, 400 `ERT_API_BAD_REQUEST` naming the field: as many
 * `instance_uuids` as `count`, each once; the image given once; a `placement` query Placement
 * would take. Nothing here is a scheduling decision (decisions.ts): a refusal is the
 * request's, as a schema's is.
 */
function checkedBody(raw: RequestBody): { body: RequestBody; placement?: PlacementRequest } {
  const uuids = raw.instance_uuids?.map(canonical);
  if (uuids !== undefined && uuids.length !== raw.count) {
    throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `instance_uuids has ${uuids.length} uuids for count ${raw.count}`, { field: 'instance_uuids', count: raw.count });
  }
  const first = new Map<string, number>();
  uuids?.forEach((uuid, i) => {
    const earlier = first.get(uuid);
    if (earlier !== undefined) {
      throw new SchedulerApiError(
        400,
        SchedulerApiErrorCodes.BAD_REQUEST,
        `instance_uuids/${i}: instance ${uuid} is there twice (as instance_uuids/${earlier}); uuids are compared in their canonical form, lower case with dashes`,
        { field: `instance_uuids/${i}`, uuid },
      );
    }
    first.set(uuid, i);
  });
  if (raw.image !== undefined && raw.image_properties !== undefined) {
    throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, 'give the image once: image or image_properties', { field: 'image', key: 'image' });
  }
  const h = raw.hints;
  const body: RequestBody = {
    ...raw,
    ...(uuids !== undefined ? { instance_uuids: uuids } : {}),
    ...(h !== undefined
      ? {
          hints: {
            ...(h.same_host ? { same_host: h.same_host.map(canonical) } : {}),
            ...(h.different_host ? { different_host: h.different_host.map(canonical) } : {}),
            ...(h.server_group ? { server_group: { ...h.server_group, uuid: canonical(h.server_group.uuid), ...(h.server_group.members ? { members: h.server_group.members.map(canonical) } : {}) } } : {}),
          },
        }
      : {}),
    // Uuids or names: an entry that is a uuid is that uuid, in whatever spelling.
    ...(raw.forbidden_aggregates !== undefined ? { forbidden_aggregates: raw.forbidden_aggregates.map((ref) => (UUID_LIKE.test(ref) ? canonical(ref) : ref)) } : {}),
  };
  return { body, ...(raw.placement !== undefined ? { placement: placementOf(raw.placement) } : {}) };
}

/** The Fastify plugin of the scheduler API (`createApi` registers it at SCHEDULER_PREFIX). */
export function schedulerApi(ctx: SchedulerApiContext): (app: FastifyInstance) => Promise<void> {
  const ajv = new Ajv({ strict: false, useDefaults: true, allErrors: false });
  let backend: Promise<SchedulerBackend> | undefined;
  const scheduler = (): Promise<SchedulerBackend> => {
    backend ??= ctx.createScheduler().catch((err: unknown) => {
      backend = undefined;
      throw err;
    });
    return backend;
  };

  const flavorOf = (body: RequestBody & { flavor: NonNullable<RequestBody['flavor']> }): Flavor => {
    if (typeof body.flavor !== 'string') {
      const f = body.flavor;
      return { name: f.name, vcpus: f.vcpus, memoryMb: f.memory_mb, diskGb: f.disk_gb ?? 0, extraSpecs: f.extra_specs ?? {} };
    }
    const name = body.flavor;
    const found = ctx.flavors.find((f) => f.name === name);
    if (!found) {
      const known = ctx.flavors.map((f) => f.name);
      throw new SchedulerApiError(404, SchedulerApiErrorCodes.UNKNOWN_FLAVOR, `unknown flavor "${name}"; known flavors: ${known.length > 0 ? known.join(', ') : '(none)'}`, { flavor: name, known });
    }
    return found;
  };

  /**
   * The scheduler's request for a checked body (`checkedBody`), the caller's project and user
   * owning the instances. An unknown flavor is 404: a decision that ended in an error.
   */
  const scheduleRequest = ({ body, placement }: ReturnType<typeof checkedBody>, credentials: Credentials) => {
    const what = body.flavor !== undefined ? { flavor: flavorOf({ ...body, flavor: body.flavor }) } : { placement: placement! };
    const imageProperties = body.image?.properties ?? body.image_properties;
    const owner = { projectId: credentials.projectId ?? credentials.userId, userId: credentials.userId };
    const instances = (body.instance_uuids ?? Array.from({ length: body.count }, () => randomUUID())).map((uuid) => ({ uuid, ...owner }));
    const h = body.hints;
    const hints: SchedulingHints | undefined =
      h === undefined
        ? undefined
        : {
            ...(h.same_host ? { sameHost: h.same_host } : {}),
            ...(h.different_host ? { differentHost: h.different_host } : {}),
            ...(h.server_group ? { serverGroup: { uuid: h.server_group.uuid, policy: h.server_group.policy, members: h.server_group.members ?? [] } } : {}),
          };
    return {
      ...what,
      instances,
      ...(hints ? { hints } : {}),
      ...(body.availability_zone !== undefined ? { availabilityZone: body.availability_zone } : {}),
      ...(body.forbidden_aggregates !== undefined ? { forbiddenAggregates: body.forbidden_aggregates } : {}),
      ...(imageProperties !== undefined ? { image: { properties: imageProperties } } : {}),
      ...(body.request_groups !== undefined
        ? {
            requestGroups: body.request_groups.map((g) => ({
              requester: g.requester_id,
              resources: g.resources,
              ...(g.required !== undefined ? { required: g.required } : {}),
              ...(g.forbidden !== undefined ? { forbidden: g.forbidden } : {}),
            })),
          }
        : {}),
    };
  };

  /** A host as GET /hosts lists it: the scheduler's status, capacity and usage per class, stats freshness. */
  /** What of a host's summary its snapshot alone decides, kept per snapshot (HostSnapshots keeps one until the host's generation moves). */
  const fixedParts = new WeakMap<HostSnapshot, { last_update: string; generation: number; providers: number; instances: number; resources: Record<string, { capacity: number; used: number; free: number }> }>();
  const hostSummary = (s: HostSnapshot, now: number, withStats = true) => {
    let fixed = fixedParts.get(s);
    if (!fixed) {
      const resources: Record<string, { capacity: number; used: number; free: number }> = {};
      for (const provider of s.providers) {
        for (const [rc, inventory] of Object.entries(provider.inventories)) {
          const entry = (resources[rc] ??= { capacity: 0, used: 0, free: 0 });
          entry.capacity += capacityOf(inventory);
          entry.used += provider.usages[rc] ?? 0;
          entry.free = Math.max(entry.capacity - entry.used, 0);
        }
      }
      fixed = {
        last_update: iso(s.host.lastUpdate),
        generation: s.host.generation,
        providers: s.providers.length,
        instances: s.instances.length,
        resources: Object.fromEntries(Object.entries(resources).sort(([a], [b]) => a.localeCompare(b))),
      };
      fixedParts.set(s, fixed);
    }
    return {
      name: s.host.name,
      status: ctx.effectiveStatus(s.host.status, s.host.lastUpdate, now, ctx.staleAfter),
      ...(s.host.statusReason !== undefined ? { status_reason: s.host.statusReason } : {}),
      ...fixed,
      ...(withStats
        ? {
            stats: Object.values(s.stats)
              .map((st) => statsFreshness(st, s, now))
              .sort((a, b) => a.plugin.localeCompare(b.plugin)),
          }
        : {}),
    };
  };

  /** One plugin's stats of a host: when written, how old, and whether too old (tracker.staleAfter). */
  const statsFreshness = (st: StatsRecord, s: HostSnapshot, now: number) => ({
    plugin: st.plugin,
    schema_version: st.schemaVersion,
    updated_at: iso(st.updatedAt),
    age_ms: now - st.updatedAt,
    stale: ctx.staleAfter > 0 && now - Math.max(st.updatedAt, s.host.lastUpdate) > ctx.staleAfter,
  });

  /**
   * Answers with a status and a JSON body, or `streamed` when it answered on the raw response
   * itself. `body` is the body as its schema passed it (defaults filled in), `sent` a copy of
   * its top level as the client sent it (the schemas' defaults are all at the top level).
   */
  type Handler = (request: FastifyRequest, body: unknown, reply: FastifyReply, sent: unknown) => Promise<{ status: number; body?: unknown; streamed?: true }>;

  /**
   * 409 `ERT_SCHEDULER_INSTANCE_EXISTS` when the store holds a record of one of `uuids`, not
   * refused or expired (those hold nothing: a uuid whose reservation its host refused may be
   * placed again, as the scheduler itself does with `wait`). The scheduler's claim refuses a
   * uuid that holds allocations, in the store's transaction; a record holds none when its
   * instance claimed nothing, and that is this check's. Read before the scheduler is called, so
   * a record written meanwhile by another request with no allocations is not seen: every
   * request this API takes claims something (vcpus and memory_mb from 1), except one whose
   * extra specs or Placement-style request drop every class.
   */
  const refuseTaken = async (uuids: readonly string[]): Promise<void> => {
    const records = await Promise.all(uuids.map((uuid) => ctx.store.getInstance(uuid)));
    const taken = records.find((r) => r !== undefined && r.state !== 'refused' && r.state !== 'expired');
    if (taken) {
      throw new SchedulerApiError(409, INSTANCE_EXISTS, `instance ${taken.uuid} already exists in the store (${taken.state} on host ${taken.host}): give a new uuid`, {
        instanceUuid: taken.uuid,
        host: taken.host,
        state: taken.state,
      });
    }
  };

  const hostSnapshots = new HostSnapshots(ctx.store);
  // The live feed reads the same kept snapshots as GET /hosts: one poller of the store.
  const feed = new HostChangeFeed({
    snapshots: () => hostSnapshots.all(),
    summaries: (snapshots) => {
      const now = Date.now();
      return snapshots.map((s) => hostSummary(s, now));
    },
    intervalMs: ctx.eventsIntervalMs ?? 1000,
  });
  const decisions = new DecisionLog(ctx.decisionsKept);
  let serverClosing: () => void = () => {};
  const closing = new Promise<void>((resolve) => (serverClosing = resolve));

  /**
   * One decision: the request's flavor read (an unknown flavor, a bad extra spec: a decision
   * that ended in an error), the instances placed or not, observed in the metrics
   * (`onDecision`) as the decisions' list records it (decisions.ts). An instance uuid the
   * store's claim found in use (a request of the same uuid won the race) is no decision.
   */
  const decide = async (request: FastifyRequest, checked: ReturnType<typeof checkedBody>): Promise<{ status: number; body: unknown }> => {
    const { body } = checked;
    const started = performance.now();
    let instances: number | undefined;
    const observe = (outcome: DecisionEvent['outcome']) => ctx.onDecision?.({ outcome, seconds: (performance.now() - started) / 1000, ...(instances !== undefined ? { instances } : {}) });
    let selections;
    try {
      const req = scheduleRequest(checked, request.credentials!);
      instances = req.instances.length;
      selections = await (
        await scheduler()
      ).select(req, body.wait ? { awaitConfirmation: true, ...(body.confirm_timeout_ms !== undefined ? { confirmTimeout: body.confirm_timeout_ms } : {}) } : {});
    } catch (err) {
      if (!uuidInUse(err)) observe(isErtError(err) && err.code === 'ERT_SCHEDULER_NO_VALID_HOST' ? 'no_valid_host' : 'error');
      throw err;
    }
    observe('placed');
    return {
      status: 200,
      body: {
        instances: selections.map((s) => ({
          uuid: s.instanceUuid,
          host: s.host,
          alternates: s.alternates,
          allocations: placementAllocations(s.allocations),
          state: s.state ?? 'scheduled',
          ...(s.refusals && s.refusals.length > 0 ? { refusals: s.refusals } : {}),
          ...(s.mappings !== undefined ? { mappings: s.mappings } : {}),
        })),
      },
    };
  };

  const handlers: Record<string, Handler> = {
    select: async (request, raw, _reply, sent) => {
      // The request's own refusals come first and are no decision (docs/api.md): a body the
      // schema passed but checkedBody refuses (400), an instance uuid in use (409).
      const checked = checkedBody(raw as RequestBody);
      const { body } = checked;
      if (body.instance_uuids !== undefined) await refuseTaken(body.instance_uuids);
      return decisions.track(sent, request.credentials!, () => decide(request, checked), async () => (await backend?.catch(() => undefined))?.hostCount, uuidInUse);
    },
    explain: async (request, raw) => ({ status: 200, body: await (await scheduler()).explain(scheduleRequest(checkedBody(raw as RequestBody), request.credentials!)) }),
    listHosts: async (request) => {
      const now = Date.now();
      const withStats = (request.query as { stats?: string }).stats !== 'false';
      return { status: 200, body: { hosts: (await hostSnapshots.all()).map((s) => hostSummary(s, now, withStats)).sort((a, b) => a.name.localeCompare(b.name)) } };
    },
    showHost: async (request) => {
      const { name } = request.params as { name: string };
      const [snapshot] = await ctx.store.loadHosts([name]);
      if (!snapshot) throw new SchedulerApiError(404, SchedulerApiErrorCodes.UNKNOWN_HOST, `no host ${name} in the store`, { host: name });
      const records = await ctx.store.listInstances({ host: name });
      const allocations = await Promise.all(records.map(async (r) => (await ctx.store.getAllocations(r.uuid)).allocations));
      const now = Date.now();
      return {
        status: 200,
        body: {
          host: { ...hostSummary(snapshot, now), ...(snapshot.host.machine !== undefined ? { machine: snapshot.host.machine } : {}) },
          providers: snapshot.providers.map(providerDetail),
          sharing_providers: snapshot.sharingProviders.map(providerDetail),
          aggregate_metadata: snapshot.aggregateMetadata,
          stats: Object.values(snapshot.stats)
            .map((st) => ({ ...statsFreshness(st, snapshot, now), data: st.data }))
            .sort((a, b) => a.plugin.localeCompare(b.plugin)),
          instances: records.map((r, i) => ({ ...instanceView(r), ...holdsView(r), allocations: placementAllocations(allocations[i]!) })),
        },
      };
    },
    listInstances: async (request) => {
      const q = request.query as { host?: string; state?: InstanceState };
      const records = await ctx.store.listInstances({ ...(q.host !== undefined ? { host: q.host } : {}), ...(q.state !== undefined ? { state: q.state } : {}) });
      return { status: 200, body: { instances: records.map(instanceView) } };
    },
    showInstance: async (request) => {
      // Any spelling of the uuid, as the select's bodies take it (`canonical`).
      const uuid = canonical((request.params as { uuid: string }).uuid);
      const record = await ctx.store.getInstance(uuid);
      if (!record) throw unknownInstance(uuid);
      const { allocations } = await ctx.store.getAllocations(uuid);
      return { status: 200, body: { instance: { ...instanceView(record), ...holdsView(record), allocations: placementAllocations(allocations) } } };
    },
    deleteInstance: async (request) => {
      const uuid = canonical((request.params as { uuid: string }).uuid);
      const withdrawal = await withdrawInstance(ctx.store, uuid);
      if (withdrawal.outcome === 'unknown') throw unknownInstance(uuid);
      if (withdrawal.outcome === 'held') throw notReleasable(withdrawal.record);
      return { status: 204 };
    },
    listFlavors: async () => ({ status: 200, body: { flavors: ctx.flavors.map(flavorView) } }),
    listAvailabilityZones: async () => {
      const [aggregates, hosts] = await Promise.all([ctx.store.listAggregates(), ctx.store.listHosts()]);
      const { zones, hostsWithoutZone } = availabilityZonesOf(aggregates, hosts);
      return { status: 200, body: { zones, hosts_without_zone: hostsWithoutZone } };
    },
    openapi: async () => ({ status: 200, body: schedulerOpenApi() }),
    events: async (request, _body, reply) => {
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
      res.flushHeaders();
      eventStream(feed, res, closing).catch((err: unknown) => {
        request.log.error({ err }, 'event stream failed');
        if (!res.writableEnded) res.end();
      });
      return { status: 200, streamed: true };
    },
  };

  handlers.hostFacets = async () => {
    const [snapshots, aggregates] = await Promise.all([hostSnapshots.all(), ctx.store.listAggregates()]);
    return { status: 200, body: hostFacets(snapshots, aggregates) };
  };
  handlers.listDecisions = async (request) => {
    const q = request.query as { limit?: string; outcome?: DecisionOutcome };
    const listed = decisions.list({ ...(q.limit !== undefined ? { limit: Number(q.limit) } : {}), ...(q.outcome !== undefined ? { outcome: q.outcome } : {}) });
    return { status: 200, body: { process: process.pid, kept: decisions.limit, recorded: decisions.recorded, decisions: listed } };
  };

  return async (app) => {
    if (ctx.warmHostSnapshots) {
      warmOnListen(
        app,
        async () => {
          const started = performance.now();
          const all = await hostSnapshots.all();
          // The summaries' and facets' parts kept per snapshot, made now rather than at the first view.
          const now = Date.now();
          for (const s of all) hostSummary(s, now, false);
          hostFacets(all, []);
          return { hosts: all.length, ms: Math.round(performance.now() - started) };
        },
        { done: 'host snapshots read', failed: 'host snapshots not read at start (GET /hosts reads them)', tell: ctx.onHostSnapshotsRead },
      );
    }
    // Open event streams would keep the server from closing: end them first.
    app.addHook('preClose', async () => {
      serverClosing();
      feed.stop();
    });
    app.addHook('onClose', async () => {
      if (backend) await (await backend.catch(() => undefined))?.close?.();
    });
    useErtErrors(app, 'scheduler API');

    for (const route of SCHEDULER_ROUTES) {
      const body: ValidateFunction | undefined = route.body ? ajv.compile(route.body) : undefined;
      const query: ValidateFunction | undefined = route.query ? ajv.compile({ type: 'object', additionalProperties: false, properties: route.query }) : undefined;
      const handle = handlers[route.operationId]!;
      app.route({
        method: route.method,
        url: route.path.replaceAll(/\{(\w+)\}/g, ':$1'),
        handler: async (request, reply) => {
          if (route.rule !== 'none') {
            const credentials = ctx.authenticate(request.headers);
            if (!credentials) throw new SchedulerApiError(401, SchedulerApiErrorCodes.UNAUTHORIZED, 'authentication required: send X-Auth-Token (the same credentials as the Placement API)');
            request.credentials = credentials;
            if (!ctx.policy.allowed(route.rule, credentials)) {
              throw new SchedulerApiError(403, SchedulerApiErrorCodes.FORBIDDEN, `policy does not allow ${route.rule} (${route.method} ${SCHEDULER_PREFIX}${route.path})`, { rule: route.rule });
            }
          }
          if (query && !query(request.query)) throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `invalid query: ${schemaProblem(query.errors, 'query')}`);
          let parsed: unknown;
          let sent: unknown;
          if (body) {
            const contentType = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
            if (contentType !== 'application/json') {
              throw new SchedulerApiError(415, SchedulerApiErrorCodes.UNSUPPORTED_MEDIA_TYPE, `send application/json, not ${contentType || 'no content type'}`);
            }
            try {
              parsed = JSON.parse(typeof request.body === 'string' ? request.body : '');
            } catch (err) {
              throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `malformed JSON: ${messageOf(err)}`);
            }
            if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
              throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `invalid body: the body must be a JSON object, not ${parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `a ${typeof parsed}`}`);
            }
            const problem = route.bodyCheck?.(parsed as Record<string, unknown>);
            if (problem !== undefined) throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `invalid body: ${problem}`);
            // Before the schema fills in its defaults (at the top level only).
            sent = { ...parsed };
            if (!body(parsed)) throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `invalid body: ${schemaProblem(body.errors)}`, { errors: body.errors ?? [] });
          }
          const result = await handle(request, parsed, reply, sent);
          if (result.streamed) return reply;
          reply.code(result.status);
          if (result.body === undefined) return reply.send();
          return reply.header('content-type', 'application/json').send(JSON.stringify(result.body));
        },
      });
    }
  };
}

/** An instance uuid the store holds already: the request's refusal, not a scheduling decision. */
function uuidInUse(err: unknown): boolean {
  return isErtError(err) && err.code === INSTANCE_EXISTS;
}

function unknownInstance(uuid: string): SchedulerApiError {
  return new SchedulerApiError(404, SchedulerApiErrorCodes.UNKNOWN_INSTANCE, `no instance ${uuid} in the store`, { uuid });
}

function notReleasable(record: InstanceRecord): SchedulerApiError {
  return new SchedulerApiError(
    409,
    SchedulerApiErrorCodes.INSTANCE_NOT_RELEASABLE,
    `instance ${record.uuid} is ${record.state} on host ${record.host}: its host's tracker releases it ("ert release ${record.uuid}" on ${record.host}), so that its plugins' views stay equal to the store`,
    { uuid: record.uuid, host: record.host, state: record.state },
  );
}
