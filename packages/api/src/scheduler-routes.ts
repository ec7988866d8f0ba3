/**
 * The scheduler API's routes as data (scheduler-api.ts serves them): each route's method,
 * path, policy rule, body and query schemas and responses, from which the server validates
 * requests and `schedulerOpenApi` builds the OpenAPI document (docs/scheduler-openapi.json).
 */
import { DECISION_OUTCOMES } from './decisions.js';

/** Where `ert serve` mounts the scheduler API. */
export const SCHEDULER_PREFIX = '/scheduler/v1';

/** What a uuid of the body may look like: any case, dashes or not (taken in its canonical lower-case dashed form, `canonicalUuid`). */
export const UUID_PATTERN = '^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$';
const UUID = { type: 'string', pattern: UUID_PATTERN, description: 'Any case, with or without dashes: taken in its canonical lower-case dashed form.' } as const;
const UUID_LIST = { type: 'array', items: UUID } as const;

/** Nova's bound on a flavor's numbers (its database's MAX_INT). */
const MAX_INT = 2147483647;

const INLINE_FLAVOR = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'vcpus', 'memory_mb'],
  description: "Nova's flavor rules: vcpus and memory_mb from 1, disk_gb from 0, all at most 2147483647. A class the instance must not claim is dropped with an extra spec (`resources:VCPU=0`), as in Nova.",
  properties: {
    name: { type: 'string', minLength: 1 },
    vcpus: { type: 'integer', minimum: 1, maximum: MAX_INT },
    memory_mb: { type: 'integer', minimum: 1, maximum: MAX_INT },
    disk_gb: { type: 'integer', minimum: 0, maximum: MAX_INT, description: 'Default 0.' },
    extra_specs: { type: 'object', additionalProperties: { type: 'string' }, description: 'Default {}.' },
  },
} as const;

const IMAGE_PROPERTIES = {
  type: 'object',
  additionalProperties: { type: 'string' },
  description: 'trait:NAME=required|forbidden, and hw_<name> for the flavor extra spec hw:<name> (hw_cpu_policy, hw_mem_page_size, ...).',
} as const;

/** REQUEST_BODY's `oneOf`, worded: exactly one of flavor and placement. */
function flavorOrPlacement(body: Readonly<Record<string, unknown>>): string | undefined {
  const flavor = Object.hasOwn(body, 'flavor');
  if (flavor !== Object.hasOwn(body, 'placement')) return undefined;
  return flavor ? 'give flavor or placement, not both' : 'give flavor (a configured flavor\'s name, or a flavor inline) or placement (a Placement-style request)';
}

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
    instance_uuids: {
      ...UUID_LIST,
      minItems: 1,
      maxItems: 1000,
      description:
        "select: the instances' uuids (as many as count, each once in its canonical form); default: new ones. A uuid whose instance record is in the store (not refused or expired) is 409 ERT_SCHEDULER_INSTANCE_EXISTS.",
    },
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
      description: 'Aggregates (uuids or names) the instances must stay out of (request filter forbidden-aggregates). An entry that is a uuid in any case, with or without dashes, is taken in its canonical form.',
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
    request: { type: 'object', description: 'The body of POST /select as sent (not the defaults the server filled in), without instance_uuids.' },
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
export type Rule = 'system_reader_api' | 'system_admin_api' | 'none';

export interface SchedulerRoute {
  method: 'GET' | 'POST' | 'DELETE';
  /** OpenAPI form (`/instances/{uuid}`), below the prefix. */
  path: string;
  operationId: string;
  summary: string;
  rule: Rule;
  body?: object;
  /**
   * A check of the body (a JSON object) before its schema, worded for the caller: what the
   * schema says in a way Ajv's message would not (a `oneOf` it names no field for).
   */
  bodyCheck?: (body: Readonly<Record<string, unknown>>) => string | undefined;
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
          413: 'A body over 1 MiB (ERT_API_BODY_TOO_LARGE)',
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
    bodyCheck: flavorOrPlacement,
    responses: { 200: ['Where each instance went', { type: 'object', required: ['instances'], properties: { instances: { type: 'array', items: SELECTION } } }], ...errors(400, 401, 403, 404, 409, 413, 415) },
  },
  {
    method: 'POST',
    path: '/explain',
    operationId: 'explain',
    summary: "Per host, the filter that removed it and why; counts per filter; the candidates' weights. Changes nothing.",
    rule: 'system_reader_api',
    body: REQUEST_BODY,
    bodyCheck: flavorOrPlacement,
    responses: { 200: ["The scheduler's explanation (as `ert schedule --explain --json` prints it)", { type: 'object' }], ...errors(400, 401, 403, 404, 413, 415) },
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
      "The latest scheduling decisions of this process, newest first: every POST /select whose request passed validation (body, policy, instance_uuids not taken), placed or not, with the request, the caller, the hosts chosen, the time taken, the hosts considered and, when not placed, the error's code and reason (no valid host: the hosts removed per filter). Kept in memory, the last 200 by default (a restart forgets them); with ert serve --workers N each worker answers with its own (`process`).",
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

/** A `POST /select` or `POST /explain` body as REQUEST_BODY validates it (defaults applied). */
export interface RequestBody {
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
