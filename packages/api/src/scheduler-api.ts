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
 */
import { randomUUID } from 'node:crypto';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { capacityOf, isErtError, messageOf, type Flavor, type HostStatus, type ImageMeta, type PlacementRequest, type ResourceRequestGroup, type SchedulingHints } from '@ert/plugin-api';
import { PlacementQueryError, parseCandidatesQuery } from '@ert/placement';
import { availabilityZonesOf } from '@ert/placement';
import { withdrawInstance, type Allocation, type HostSnapshot, type InstanceRecord, type InstanceState, type ProviderSnapshot, type StatsRecord, type Store } from '@ert/store';
import type { Authenticator, Credentials } from './auth.js';
import { DECISION_OUTCOMES, DecisionLog, type DecisionOutcome } from './decisions.js';
import { eventStream, HostChangeFeed } from './events.js';
import type { DecisionEvent } from './metrics.js';
import type { Policy } from './policy.js';
import { HostSnapshots } from './host-snapshots.js';
import { warmOnListen } from './warm-up.js';
import { hostFacets } from './host-facets.js';

/** Where `ert serve` mounts the scheduler API. */
export const SCHEDULER_PREFIX = '/scheduler/v1';

/** Stable codes of the scheduler API's own errors (the scheduler's and the store's keep theirs). */
export const SchedulerApiErrorCodes = {
  UNAUTHORIZED: 'ERT_API_UNAUTHORIZED',
  FORBIDDEN: 'ERT_API_FORBIDDEN',
  NOT_FOUND: 'ERT_API_NOT_FOUND',
  BAD_REQUEST: 'ERT_API_BAD_REQUEST',
  UNSUPPORTED_MEDIA_TYPE: 'ERT_API_UNSUPPORTED_MEDIA_TYPE',
  UNKNOWN_FLAVOR: 'ERT_API_UNKNOWN_FLAVOR',
  UNKNOWN_INSTANCE: 'ERT_API_UNKNOWN_INSTANCE',
  UNKNOWN_HOST: 'ERT_API_UNKNOWN_HOST',
  INSTANCE_NOT_RELEASABLE: 'ERT_API_INSTANCE_NOT_RELEASABLE',
  INTERNAL: 'ERT_API_INTERNAL',
} as const;

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

/** An error answered as `{"error": {"code", "message", "details"}}`. */
export class SchedulerApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'SchedulerApiError';
  }
}

/** Answers `err` as `{"error": {"code", "message", "details"}}` with its status. */
export function sendErtError(reply: FastifyReply, err: SchedulerApiError): FastifyReply {
  return reply
    .code(err.status)
    .header('content-type', 'application/json')
    .send(JSON.stringify({ error: { code: err.code, message: err.message, details: err.details } }));
}

/**
 * The error answers of ert's own APIs (the scheduler API, the agent API), on `app`'s context:
 * an unknown route is 404 `ERT_API_NOT_FOUND`; an ErtError answers with the status of its
 * code (`statusOfCode`) and its code and details; Fastify's own 4xx (a body too large, bad
 * JSON) are `ERT_API_BAD_REQUEST` with their status; anything else is logged and 500
 * `ERT_API_INTERNAL`. `what` names the API in the logs.
 */
export function useErtErrors(app: FastifyInstance, what: string): void {
  app.setNotFoundHandler(async (request, reply) =>
    sendErtError(reply, new SchedulerApiError(404, SchedulerApiErrorCodes.NOT_FOUND, `no route ${request.method} ${request.url.split('?')[0]}`, { method: request.method })),
  );
  app.setErrorHandler(async (err, request, reply) => {
    if (err instanceof SchedulerApiError) return sendErtError(reply, err);
    if (isErtError(err)) {
      const status = statusOfCode(err.code);
      if (status === 500) request.log.error({ err }, `${what} error`);
      return sendErtError(reply, new SchedulerApiError(status, err.code, err.message, { ...err.details }));
    }
    const status = (err as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) return sendErtError(reply, new SchedulerApiError(status, SchedulerApiErrorCodes.BAD_REQUEST, messageOf(err)));
    request.log.error({ err }, 'unexpected error');
    return sendErtError(reply, new SchedulerApiError(500, SchedulerApiErrorCodes.INTERNAL, messageOf(err)));
  });
}

/** The HTTP status of an ErtError's code (docs/api.md, "Scheduler API", Errors). */
export function statusOfCode(code: string): number {
  if (code === 'ERT_SCHEDULER_NO_VALID_HOST' || code === 'ERT_SCHEDULER_INSTANCE_EXISTS' || /^ERT_STORE_.*(CONFLICT|CAPACITY_EXCEEDED|ASSIGNMENT_TAKEN|IN_USE)$/.test(code)) return 409;
  if (code === 'ERT_SCHEDULER_INVALID_REQUEST' || code === 'ERT_STORE_INVALID' || code.startsWith('ERT_SPEC_') || code.startsWith('ERT_PLACEMENT_')) return 400;
  if (code === 'ERT_SCHEDULER_CLOSED' || code === 'ERT_STORE_UNAVAILABLE' || code === 'ERT_STORE_LOCKED' || code.startsWith('ERT_STORE_SCHEMA_')) return 503;
  if (code === 'ERT_STORE_NOT_FOUND') return 404;
  return 500;
}

// ---- schemas (validation and the OpenAPI document) -------------------------------------------

const UUID = { type: 'string', pattern: '^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$' } as const;
const UUID_LIST = { type: 'array', items: UUID } as const;

const INLINE_FLAVOR = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'vcpus', 'memory_mb'],
  properties: {
    name: { type: 'string', minLength: 1 },
    vcpus: { type: 'integer', minimum: 0 },
    memory_mb: { type: 'integer', minimum: 0 },
    disk_gb: { type: 'integer', minimum: 0, description: 'Default 0.' },
    extra_specs: { type: 'object', additionalProperties: { type: 'string' }, description: 'Default {}.' },
  },
} as const;

const IMAGE_PROPERTIES = {
  type: 'object',
  additionalProperties: { type: 'string' },
  description: 'trait:NAME=required|forbidden, and hw_<name> for the flavor extra spec hw:<name> (hw_cpu_policy, hw_mem_page_size, ...).',
} as const;

const REQUEST_BODY = {
  type: 'object',
  additionalProperties: false,
  oneOf: [{ required: ['flavor'] }, { required: ['placement'] }],
  properties: {
    flavor: { description: 'A configured flavor by name, or a flavor given inline. Give either flavor or placement.', oneOf: [{ type: 'string', minLength: 1 }, INLINE_FLAVOR] },
    placement: {
      description:
        "Instead of a flavor, a Placement-style request: the query string of GET /allocation_candidates at microversion 1.39 (`resources=VCPU:2,MEMORY_MB:2048&required=HW_CPU_X86_AVX2&resources1=...&group_policy=isolate`; no `limit`), or the same as an object (@ert/placement's PlacementRequest: groups, groupPolicy, sameSubtree, rootRequiredTraits, rootForbiddenTraits). The instances are recorded with the flavor `placement-request`; plugin extra specs need a flavor.",
      oneOf: [{ type: 'string', minLength: 1 }, { type: 'object' }],
    },
    count: { type: 'integer', minimum: 1, maximum: 1000, default: 1, description: 'Instances to place (all or none).' },
    instance_uuids: { ...UUID_LIST, minItems: 1, maxItems: 1000, description: "The instances' uuids (as many as count); default: new ones." },
    hints: {
      type: 'object',
      additionalProperties: false,
      properties: {
        same_host: UUID_LIST,
        different_host: UUID_LIST,
        server_group: {
          type: 'object',
          additionalProperties: false,
          required: ['uuid', 'policy'],
          properties: { uuid: UUID, policy: { enum: ['affinity', 'anti-affinity'] }, members: UUID_LIST },
        },
      },
    },
    availability_zone: {
      type: 'string',
      minLength: 1,
      description: 'The availability zone the instances must go to: the hosts of the aggregates whose availability_zone metadata is this name (request filter availability-zone, docs/request-filters.md).',
    },
    forbidden_aggregates: {
      type: 'array',
      items: { type: 'string', minLength: 1 },
      description: 'Aggregates (uuids or names) the instances must stay out of (request filter forbidden-aggregates).',
    },
    image: {
      type: 'object',
      additionalProperties: false,
      required: ['properties'],
      properties: { properties: IMAGE_PROPERTIES },
      description:
        "The image the instances boot from, as Nova's image metadata: its properties are merged with the flavor's extra specs by Nova's rules (docs/images.md); a conflict is 400 ERT_SPEC_CONFLICT naming both. Needs a flavor. Or give image_properties.",
    },
    image_properties: { ...IMAGE_PROPERTIES, description: 'The same as image.properties (give one of the two).' },
    request_groups: {
      type: 'array',
      maxItems: 64,
      description:
        "Request groups beyond the flavor, for each instance: ports' and devices' resource requests (Neutron's resource_request), each a numbered group whose resources come from one provider of the host's tree, claimed with the flavor in one allocation (docs/request-groups.md). Needs a flavor; two or more numbered groups need the flavor's group_policy.",
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['requester_id', 'resources'],
        properties: {
          requester_id: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$', description: "Who asks (the port's uuid): the group's suffix." },
          resources: { type: 'object', minProperties: 1, additionalProperties: { type: 'integer', minimum: 1 } },
          required: { type: 'array', items: { type: 'string' }, description: 'Traits the serving provider must have.' },
          forbidden: { type: 'array', items: { type: 'string' }, description: 'Traits it must not have.' },
        },
      },
    },
    wait: { type: 'boolean', default: false, description: "select: wait until each host's tracker confirmed its reservation (placing a refused one elsewhere)." },
    confirm_timeout_ms: { type: 'integer', minimum: 1, description: 'select with wait: how long one round of confirmations may take (default reservations.timeout).' },
  },
} as const;

const ERROR_BODY = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message', 'details'],
      properties: { code: { type: 'string', example: 'ERT_SCHEDULER_NO_VALID_HOST' }, message: { type: 'string' }, details: { type: 'object' } },
    },
  },
} as const;

const ALLOCATIONS = {
  type: 'object',
  description: 'Placement-style: provider uuid -> {"resources": {class: amount}}.',
  additionalProperties: { type: 'object', properties: { resources: { type: 'object', additionalProperties: { type: 'integer' } } } },
} as const;

const SELECTION = {
  type: 'object',
  required: ['uuid', 'host', 'alternates', 'allocations', 'state'],
  properties: {
    uuid: { type: 'string' },
    host: { type: 'string' },
    alternates: { type: 'array', items: { type: 'string' } },
    allocations: ALLOCATIONS,
    state: { enum: ['scheduled', 'active'] },
    refusals: { type: 'array', items: { type: 'object', properties: { host: { type: 'string' }, state: { type: 'string' }, reason: { type: 'string' } } } },
    mappings: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } }, description: 'With request_groups: requester_id -> [uuid of the provider serving its group] (Placement 1.34 mappings).' },
  },
} as const;

const INSTANCE = {
  type: 'object',
  required: ['uuid', 'host', 'state', 'flavor', 'project_id', 'user_id', 'created_at', 'updated_at'],
  properties: {
    uuid: { type: 'string' },
    host: { type: 'string' },
    state: { enum: ['scheduled', 'active', 'resizing', 'error', 'refused', 'expired'] },
    flavor: { type: 'string' },
    reason: { type: 'string' },
    project_id: { type: 'string' },
    user_id: { type: 'string' },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
    allocations: ALLOCATIONS,
  },
} as const;

const HOST = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    status: { enum: ['up', 'stale', 'disabled'] },
    status_reason: { type: 'string' },
    last_update: { type: 'string', format: 'date-time' },
    generation: { type: 'integer' },
    providers: { type: 'integer' },
    instances: { type: 'integer' },
    resources: {
      type: 'object',
      description: 'Per resource class over the host tree: capacity ((total - reserved) * allocation_ratio), used, free.',
      additionalProperties: { type: 'object', properties: { capacity: { type: 'integer' }, used: { type: 'integer' }, free: { type: 'integer' } } },
    },
    stats: {
      type: 'array',
      items: { type: 'object', properties: { plugin: { type: 'string' }, schema_version: { type: 'integer' }, updated_at: { type: 'string', format: 'date-time' }, age_ms: { type: 'integer' }, stale: { type: 'boolean' } } },
    },
  },
} as const;

/** What an instance holds of its host beyond allocations (GET /instances/{uuid}, GET /hosts/{name}). */
const HOLDS = {
  assignments: { type: 'object', description: "Per plugin, what it assigned (ClaimGrant.assignment): the llc plugin's {domain, mask, closid}, ..." },
  cpus: { type: 'array', items: { type: 'integer' }, description: 'Host CPUs the instance is pinned to; absent when it floats.' },
  units: { type: 'array', items: { type: 'string' }, description: 'Units of the host it holds alone (<plugin>/<unit>).' },
  pools: { type: 'object', additionalProperties: { type: 'object', properties: { amount: { type: 'integer' }, capacity: { type: 'integer' } } }, description: '<plugin>/<pool> -> amount drawn of a capacity.' },
} as const;

const PROVIDER_DETAIL = {
  type: 'object',
  required: ['uuid', 'name', 'generation', 'parent_provider_uuid', 'root_provider_uuid', 'inventories', 'traits', 'aggregates'],
  properties: {
    uuid: { type: 'string' },
    name: { type: 'string' },
    generation: { type: 'integer' },
    parent_provider_uuid: { type: 'string', nullable: true },
    root_provider_uuid: { type: 'string' },
    inventories: {
      type: 'object',
      description: "Per class: Placement's inventory fields, capacity ((total - reserved) * allocation_ratio) and used.",
      additionalProperties: {
        type: 'object',
        properties: {
          total: { type: 'integer' },
          reserved: { type: 'integer' },
          min_unit: { type: 'integer' },
          max_unit: { type: 'integer' },
          step_size: { type: 'integer' },
          allocation_ratio: { type: 'number' },
          capacity: { type: 'integer' },
          used: { type: 'integer' },
        },
      },
    },
    traits: { type: 'array', items: { type: 'string' } },
    aggregates: { type: 'array', items: { type: 'string' } },
  },
} as const;

const HOST_DETAIL = {
  type: 'object',
  required: ['host', 'providers', 'sharing_providers', 'aggregate_metadata', 'stats', 'instances'],
  properties: {
    host: { ...HOST, description: 'As GET /hosts lists it, with the profile the host was read from (machine) when recorded.' },
    providers: { type: 'array', items: PROVIDER_DETAIL, description: "The host's tree, root first, parents before children." },
    sharing_providers: { type: 'array', items: PROVIDER_DETAIL, description: 'Sharing providers (MISC_SHARES_VIA_AGGREGATE) in an aggregate of the tree.' },
    aggregate_metadata: { type: 'object', additionalProperties: { type: 'string' }, description: "Metadata of the root provider's aggregates, merged." },
    stats: {
      type: 'array',
      description: "Every plugin's latest stats of the host (the data as its plugin's stats schema describes it), with their age.",
      items: {
        type: 'object',
        required: ['plugin', 'schema_version', 'updated_at', 'age_ms', 'stale', 'data'],
        properties: { plugin: { type: 'string' }, schema_version: { type: 'integer' }, updated_at: { type: 'string', format: 'date-time' }, age_ms: { type: 'integer' }, stale: { type: 'boolean' }, data: {} },
      },
    },
    instances: { type: 'array', items: { ...INSTANCE, properties: { ...INSTANCE.properties, ...HOLDS } }, description: 'The instance records on the host with their allocations and assignments.' },
  },
} as const;

const ZONE = {
  type: 'object',
  required: ['name', 'aggregates', 'hosts'],
  properties: {
    name: { type: 'string' },
    aggregates: { type: 'array', items: { type: 'string' }, description: 'Uuids of the aggregates whose availability_zone metadata names the zone.' },
    hosts: { type: 'array', items: { type: 'string' }, description: 'Hosts whose root provider is in one of them.' },
  },
} as const;

const FLAVOR = {
  type: 'object',
  properties: { name: { type: 'string' }, vcpus: { type: 'integer' }, memory_mb: { type: 'integer' }, disk_gb: { type: 'integer' }, extra_specs: { type: 'object', additionalProperties: { type: 'string' } } },
} as const;

const DECISION = {
  type: 'object',
  required: ['id', 'at', 'outcome', 'request', 'user_id', 'duration_ms'],
  properties: {
    id: { type: 'integer', description: "1 for the process's first decision, then one more each." },
    at: { type: 'string', format: 'date-time' },
    outcome: { enum: [...DECISION_OUTCOMES] },
    request: { type: 'object', description: 'The body of POST /select as sent, without instance_uuids.' },
    user_id: { type: 'string' },
    project_id: { type: 'string' },
    duration_ms: { type: 'number' },
    hosts_considered: { type: 'integer', description: 'Placed: the hosts the scheduler held; no valid host: the hosts its explanation counted. Absent when the request failed before any host was looked at.' },
    hosts_passed: { type: 'integer', description: 'No valid host: the hosts that passed every filter.' },
    instances: { type: 'array', items: { type: 'object', properties: { uuid: { type: 'string' }, host: { type: 'string' }, alternates: { type: 'integer' }, state: { type: 'string' } } } },
    error: {
      type: 'object',
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        filters: { type: 'array', items: { type: 'object', properties: { filter: { type: 'string' }, removed: { type: 'integer' } } } },
        attempts: { type: 'array', items: { type: 'object', properties: { host: { type: 'string' }, error: { type: 'string' } } } },
      },
    },
  },
} as const;

/** Policy base rules of Placement's policy (overridable in the policy file). */
type Rule = 'system_reader_api' | 'system_admin_api' | 'none';

interface SchedulerRoute {
  method: 'GET' | 'POST' | 'DELETE';
  /** OpenAPI form (`/instances/{uuid}`), below the prefix. */
  path: string;
  operationId: string;
  summary: string;
  rule: Rule;
  body?: object;
  query?: Record<string, object>;
  /** Status -> [description, schema or none]. */
  responses: Record<number, [string, object?]>;
}

const errors = (...statuses: number[]): Record<number, [string, object]> =>
  Object.fromEntries(
    statuses.map((s) => [
      s,
      [
        {
          400: 'Malformed body or query; a bad extra spec (ERT_SPEC_*) or request (ERT_SCHEDULER_INVALID_REQUEST)',
          401: 'No credentials (ERT_API_UNAUTHORIZED)',
          403: 'The policy refuses (ERT_API_FORBIDDEN)',
          404: 'Unknown flavor, instance or host (ERT_API_UNKNOWN_FLAVOR, ERT_API_UNKNOWN_INSTANCE, ERT_API_UNKNOWN_HOST)',
          409: 'No valid host (ERT_SCHEDULER_NO_VALID_HOST), uuid in use (ERT_SCHEDULER_INSTANCE_EXISTS), a store conflict, or an instance its tracker must release (ERT_API_INSTANCE_NOT_RELEASABLE)',
          415: 'Not application/json (ERT_API_UNSUPPORTED_MEDIA_TYPE)',
        }[s]!,
        ERROR_BODY,
      ],
    ]),
  );

/** Every route of the scheduler API, as data: the server and the OpenAPI document are built from it. */
export const SCHEDULER_ROUTES: readonly SchedulerRoute[] = [
  {
    method: 'POST',
    path: '/select',
    operationId: 'select',
    summary: 'Place count instances of a flavor (all or none), claiming each in the store as a reservation (scheduled).',
    rule: 'system_admin_api',
    body: REQUEST_BODY,
    responses: { 200: ['Where each instance went', { type: 'object', required: ['instances'], properties: { instances: { type: 'array', items: SELECTION } } }], ...errors(400, 401, 403, 404, 409, 415) },
  },
  {
    method: 'POST',
    path: '/explain',
    operationId: 'explain',
    summary: "Per host, the filter that removed it and why; counts per filter; the candidates' weights. Changes nothing.",
    rule: 'system_reader_api',
    body: REQUEST_BODY,
    responses: { 200: ["The scheduler's explanation (as `ert schedule --explain --json` prints it)", { type: 'object' }], ...errors(400, 401, 403, 404, 415) },
  },
  {
    method: 'GET',
    path: '/hosts',
    operationId: 'listHosts',
    summary: "Every host: the scheduler's status, capacity and usage per class, stats freshness (without it with stats=false: the web view's fleet and table, 60% less).",
    rule: 'system_reader_api',
    query: { stats: { enum: ['true', 'false'], description: 'false: without each host\'s "stats" (default true).' } },
    responses: { 200: ['The hosts', { type: 'object', properties: { hosts: { type: 'array', items: HOST } } }], ...errors(400, 401, 403) },
  },
  {
    method: 'GET',
    path: '/hosts/{name}',
    operationId: 'showHost',
    summary: "One host: its summary (as GET /hosts), its provider tree with inventories and usage, every plugin's latest stats with their data and age, and its instances with allocations and assignments (cache ways, pinned CPUs).",
    rule: 'system_reader_api',
    responses: { 200: ['The host', HOST_DETAIL], ...errors(401, 403, 404) },
  },
  {
    method: 'GET',
    path: '/instances',
    operationId: 'listInstances',
    summary: 'Instance records, optionally of one host or in one state.',
    rule: 'system_reader_api',
    query: { host: { type: 'string', minLength: 1 }, state: { enum: ['scheduled', 'active', 'resizing', 'error', 'refused', 'expired'] } },
    responses: { 200: ['The instances', { type: 'object', properties: { instances: { type: 'array', items: INSTANCE } } }], ...errors(400, 401, 403) },
  },
  {
    method: 'GET',
    path: '/instances/{uuid}',
    operationId: 'showInstance',
    summary: 'One instance record with its allocations.',
    rule: 'system_reader_api',
    responses: { 200: ['The instance', { type: 'object', properties: { instance: { ...INSTANCE, properties: { ...INSTANCE.properties, ...HOLDS } } } }], ...errors(401, 403, 404) },
  },
  {
    method: 'DELETE',
    path: '/instances/{uuid}',
    operationId: 'deleteInstance',
    summary:
      "Release a reservation (scheduled) or forget an ended one (refused, expired): the record and its allocations go in one store write. An active, resizing or error instance is its host's tracker's to release (`ert release`): 409.",
    rule: 'system_admin_api',
    responses: { 204: ['Released'], ...errors(401, 403, 404, 409) },
  },
  {
    method: 'GET',
    path: '/flavors',
    operationId: 'listFlavors',
    summary: 'The configured flavors.',
    rule: 'system_reader_api',
    responses: { 200: ['The flavors', { type: 'object', properties: { flavors: { type: 'array', items: FLAVOR } } }], ...errors(401, 403) },
  },
  {
    method: 'GET',
    path: '/availability-zones',
    operationId: 'listAvailabilityZones',
    summary: 'The availability zones (aggregates with availability_zone metadata) with their hosts, and the hosts in no zone.',
    rule: 'system_reader_api',
    responses: {
      200: ['The zones', { type: 'object', required: ['zones', 'hosts_without_zone'], properties: { zones: { type: 'array', items: ZONE }, hosts_without_zone: { type: 'array', items: { type: 'string' } } } }],
      ...errors(401, 403),
    },
  },
  {
    method: 'GET',
    path: '/events',
    operationId: 'events',
    summary:
      'Server-sent events (text/event-stream) of the hosts that change: `event: ready` once listening, then per poll of the store (every second) that found changes `event: hosts` with data {"hosts": [summaries as GET /hosts lists them], "removed": [names]}: claims, releases, stats, status. Coalesced per poll; a slow reader gets its pending changes merged.',
    rule: 'system_reader_api',
    responses: { 200: ['An endless text/event-stream'], ...errors(401, 403) },
  },
  {
    method: 'GET',
    path: '/host-facets',
    operationId: 'hostFacets',
    summary:
      "Every host's traits (of any provider of its tree) and aggregates (its root provider's), grouped: hosts with the same traits and aggregates are one group of names, with indexes into the lists of traits and aggregates (host-facets.ts). The web view's trait and aggregate filters.",
    rule: 'system_reader_api',
    responses: {
      200: [
        'The facets',
        {
          type: 'object',
          required: ['traits', 'aggregates', 'groups'],
          properties: {
            traits: { type: 'array', items: { type: 'string' } },
            aggregates: {
              type: 'array',
              items: { type: 'object', required: ['uuid', 'metadata', 'hosts'], properties: { uuid: { type: 'string' }, name: { type: 'string' }, metadata: { type: 'object', additionalProperties: { type: 'string' } }, hosts: { type: 'integer' } } },
            },
            groups: {
              type: 'array',
              items: {
                type: 'object',
                required: ['traits', 'aggregates', 'hosts'],
                properties: { traits: { type: 'array', items: { type: 'integer' } }, aggregates: { type: 'array', items: { type: 'integer' } }, hosts: { type: 'array', items: { type: 'string' } } },
              },
            },
          },
        },
      ],
      ...errors(401, 403),
    },
  },
  {
    method: 'GET',
    path: '/decisions',
    operationId: 'listDecisions',
    summary:
      "The latest scheduling decisions of this process, newest first: every POST /select that reached the scheduler API's handler, placed or not, with the request, the caller, the hosts chosen, the time taken, the hosts considered and, when not placed, the error's code and reason (no valid host: the hosts removed per filter). Kept in memory, the last 200 by default (a restart forgets them); with ert serve --workers N each worker answers with its own (`process`).",
    rule: 'system_reader_api',
    query: { limit: { type: 'string', pattern: '^[1-9][0-9]{0,5}$', description: 'At most this many (a whole number from 1).' }, outcome: { enum: [...DECISION_OUTCOMES] } },
    responses: {
      200: [
        'The decisions',
        {
          type: 'object',
          required: ['process', 'kept', 'recorded', 'decisions'],
          properties: {
            process: { type: 'integer', description: 'The pid of the process that answered (its own decisions).' },
            kept: { type: 'integer', description: 'How many decisions the ring keeps.' },
            recorded: { type: 'integer', description: 'Decisions recorded since the process started, kept or dropped.' },
            decisions: { type: 'array', items: DECISION },
          },
        },
      ],
      ...errors(400, 401, 403),
    },
  },
  {
    method: 'GET',
    path: '/openapi.json',
    operationId: 'openapi',
    summary: 'This document (no authentication).',
    rule: 'none',
    responses: { 200: ['OpenAPI 3.0 document', { type: 'object' }] },
  },
];

/** The OpenAPI 3.0 document of the scheduler API (checked in as docs/scheduler-openapi.json). */
export function schedulerOpenApi(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of SCHEDULER_ROUTES) {
    const params = [
      ...[...route.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
      ...Object.entries(route.query ?? {}).map(([name, schema]) => ({ name, in: 'query', required: false, schema })),
    ];
    (paths[route.path] ??= {})[route.method.toLowerCase()] = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.rule === 'none' ? { security: [] } : { 'x-ert-policy-rule': route.rule }),
      ...(params.length > 0 ? { parameters: params } : {}),
      ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: route.body } } } } : {}),
      responses: Object.fromEntries(
        Object.entries(route.responses).map(([status, [description, schema]]) => [status, { description, ...(schema ? { content: { 'application/json': { schema } } } : {}) }]),
      ),
    };
  }
  return {
    openapi: '3.0.3',
    info: { title: 'ert scheduler API', version: '1', description: 'Scheduling over HTTP under ert serve (docs/api.md, "Scheduler API").' },
    servers: [{ url: SCHEDULER_PREFIX }],
    components: { securitySchemes: { token: { type: 'apiKey', in: 'header', name: 'X-Auth-Token' } } },
    security: [{ token: [] }],
    paths,
  };
}

// ---- the routes ------------------------------------------------------------------------------

interface RequestBody {
  flavor?: string | { name: string; vcpus: number; memory_mb: number; disk_gb?: number; extra_specs?: Record<string, string> };
  placement?: string | Record<string, unknown>;
  count: number;
  instance_uuids?: string[];
  hints?: { same_host?: string[]; different_host?: string[]; server_group?: { uuid: string; policy: 'affinity' | 'anti-affinity'; members?: string[] } };
  availability_zone?: string;
  forbidden_aggregates?: string[];
  image?: { properties: Record<string, string> };
  image_properties?: Record<string, string>;
  request_groups?: Array<{ requester_id: string; resources: Record<string, number>; required?: string[]; forbidden?: string[] }>;
  wait: boolean;
  confirm_timeout_ms?: number;
}

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

/** Ajv's first error as one line (`/count must be >= 1`). */
export function schemaProblem(errors: ErrorObject[] | null | undefined): string {
  const e = errors?.[0];
  if (!e) return 'invalid';
  const where = e.instancePath || 'body';
  if (e.keyword === 'additionalProperties') return `${where}: unknown property "${(e.params as { additionalProperty: string }).additionalProperty}"`;
  return `${where} ${e.message ?? 'is invalid'}`;
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

  /** The scheduler's request for a body, the caller's project and user owning the instances. */
  const scheduleRequest = (body: RequestBody, credentials: Credentials) => {
    if (body.instance_uuids !== undefined && body.instance_uuids.length !== body.count) {
      throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `instance_uuids has ${body.instance_uuids.length} uuids for count ${body.count}`, { count: body.count });
    }
    const what = body.flavor !== undefined ? { flavor: flavorOf({ ...body, flavor: body.flavor }) } : { placement: placementOf(body.placement!) };
    if (body.image !== undefined && body.image_properties !== undefined) {
      throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, 'give the image once: image or image_properties', { key: 'image' });
    }
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

  /** Answers with a status and a JSON body, or `streamed` when it answered on the raw response itself. */
  type Handler = (request: FastifyRequest, body: unknown, reply: FastifyReply) => Promise<{ status: number; body?: unknown; streamed?: true }>;

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

  const handlers: Record<string, Handler> = {
    select: async (request, raw) => {
      const body = raw as RequestBody;
      const req = scheduleRequest(body, request.credentials!);
      const started = performance.now();
      const observe = (outcome: DecisionEvent['outcome']) => ctx.onDecision?.({ outcome, seconds: (performance.now() - started) / 1000, instances: req.instances.length });
      let selections;
      try {
        selections = await (
          await scheduler()
        ).select(req, body.wait ? { awaitConfirmation: true, ...(body.confirm_timeout_ms !== undefined ? { confirmTimeout: body.confirm_timeout_ms } : {}) } : {});
      } catch (err) {
        observe(isErtError(err) && err.code === 'ERT_SCHEDULER_NO_VALID_HOST' ? 'no_valid_host' : 'error');
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
    },
    explain: async (request, raw) => ({ status: 200, body: await (await scheduler()).explain(scheduleRequest(raw as RequestBody, request.credentials!)) }),
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
      const { uuid } = request.params as { uuid: string };
      const record = await ctx.store.getInstance(uuid);
      if (!record) throw unknownInstance(uuid);
      const { allocations } = await ctx.store.getAllocations(uuid);
      return { status: 200, body: { instance: { ...instanceView(record), ...holdsView(record), allocations: placementAllocations(allocations) } } };
    },
    deleteInstance: async (request) => {
      const { uuid } = request.params as { uuid: string };
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

  // Every select is recorded in the decisions' ring (decisions.ts), placed or not.
  const select = handlers.select!;
  handlers.select = (request, body, reply) =>
    decisions.track(body, request.credentials!, () => select(request, body, reply), async () => (await backend?.catch(() => undefined))?.hostCount);
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
          if (query && !query(request.query)) throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `invalid query: ${schemaProblem(query.errors)}`);
          let parsed: unknown;
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
            if (!body(parsed)) throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `invalid body: ${schemaProblem(body.errors)}`, { errors: body.errors ?? [] });
          }
          const result = await handle(request, parsed, reply);
          if (result.streamed) return reply;
          reply.code(result.status);
          if (result.body === undefined) return reply.send();
          return reply.header('content-type', 'application/json').send(JSON.stringify(result.body));
        },
      });
    }
  };
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
