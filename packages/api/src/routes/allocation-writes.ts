import { isStoreError, type Allocation, type AllocationWrite } from '@ert/store';
import { ApiError, CODES } from '../errors.js';
import { atLeast, v, type Version } from '../microversion.js';
import { INCOMPLETE_CONSUMER_ID } from '../reads.js';
import { STANDARD_CLASS_SET } from '../standards.js';
import type { ApiRequest } from '../route.js';

/**
 * What the allocation writes share (`PUT /allocations/{c}`, `POST /allocations`, `POST
 * /reshaper`): Placement 8.0.0's body schemas by microversion (placement/schemas/allocation.py),
 * its checks in its order (consumer generations, then the providers named, then the resource
 * classes: handlers/allocation.py, handlers/util.py `ensure_consumer`), and its messages for
 * what the store refuses (objects/allocation.py `_check_capacity_exceeded`).
 */

const RC_PATTERN = '^[A-Z0-9_]+$';
export const UUID_PATTERN = '^[0-9a-fA-F-]{36}$';
const GROUP_PATTERN = '[a-zA-Z0-9_-]{1,64}';
const id = { type: 'string', minLength: 1, maxLength: 255 };
const resources = { type: 'object', minProperties: 1, patternProperties: { [RC_PATTERN]: { type: 'integer', minimum: 1 } }, additionalProperties: false };

/** `ALLOCATION_SCHEMA` (1.0) and `_V1_8`: a list of `{resource_provider: {uuid}, resources}`. */
export function listSchema(version: Version): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    allocations: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        properties: {
          resource_provider: { type: 'object', properties: { uuid: { type: 'string', format: 'uuid' } }, additionalProperties: false, required: ['uuid'] },
          resources,
        },
        required: ['resource_provider', 'resources'],
        additionalProperties: false,
      },
    },
  };
  const required = ['allocations'];
  if (atLeast(version, v('1.8'))) {
    properties.project_id = id;
    properties.user_id = id;
    required.push('project_id', 'user_id');
  }
  return { type: 'object', properties, required, additionalProperties: false };
}

/**
 * One consumer's allocations as an object keyed by provider (1.12+): `ALLOCATION_SCHEMA_V1_12`
 * (`deletable`: `DELETABLE_ALLOCATIONS`, an empty object allowed), `consumer_generation`
 * required from 1.28, `mappings` 1.34, `consumer_type` required 1.38.
 */
export function consumerSchema(version: Version, deletable: boolean): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    allocations: {
      type: 'object',
      minProperties: deletable ? 0 : 1,
      patternProperties: {
        [UUID_PATTERN]: {
          type: 'object',
          properties: { generation: { type: 'integer' }, resources },
          required: ['resources'],
          additionalProperties: false,
        },
      },
      additionalProperties: false,
    },
    project_id: id,
    user_id: id,
  };
  const required = ['allocations', 'project_id', 'user_id'];
  if (atLeast(version, v('1.28'))) {
    properties.consumer_generation = { type: ['integer', 'null'] };
    required.push('consumer_generation');
  }
  if (atLeast(version, v('1.34'))) {
    properties.mappings = { type: 'object', minProperties: 1, patternProperties: { [GROUP_PATTERN]: { type: 'array', minItems: 1, items: { type: 'string', format: 'uuid' } } } };
  }
  if (atLeast(version, v('1.38'))) {
    properties.consumer_type = { type: 'string', pattern: RC_PATTERN, minLength: 1, maxLength: 255 };
    required.push('consumer_type');
  }
  return { type: 'object', properties, required, additionalProperties: false };
}

/** `POST_ALLOCATIONS_V1_13` and later: consumer uuid -> that consumer's body (`minProperties`: 1, 0 in the reshaper). */
export function manyConsumersSchema(version: Version, minProperties = 1): Record<string, unknown> {
  return { type: 'object', minProperties, additionalProperties: false, patternProperties: { [UUID_PATTERN]: consumerSchema(version, true) } };
}

/** One consumer's write as the handlers read it from a body. */
export interface ConsumerWrite {
  uuid: string;
  /** Provider uuid -> class -> amount, in the body's order. */
  allocations: Array<[string, Record<string, number>]>;
  projectId: string;
  userId: string;
  /** undefined before 1.28: not checked. */
  generation?: number | null;
  /** undefined before 1.38: the consumer keeps its type. */
  consumerType?: string;
}

interface DictBody {
  allocations: Record<string, { resources: Record<string, number> }>;
  project_id?: string;
  user_id?: string;
  consumer_generation?: number | null;
  consumer_type?: string;
}

/** A consumer's body (dict form, 1.12+) as a write. Project and user default to Placement's incomplete-consumer ids. */
export function consumerWrite(uuid: string, body: DictBody, version: Version): ConsumerWrite {
  return {
    uuid,
    allocations: Object.entries(body.allocations).map(([rp, a]) => [rp, a.resources]),
    projectId: body.project_id ?? INCOMPLETE_CONSUMER_ID,
    userId: body.user_id ?? INCOMPLETE_CONSUMER_ID,
    ...(atLeast(version, v('1.28')) ? { generation: body.consumer_generation ?? null } : {}),
    ...(atLeast(version, v('1.38')) && body.consumer_type !== undefined ? { consumerType: body.consumer_type } : {}),
  };
}

/** The list form (before 1.12) as the dict form: a provider listed twice keeps its last entry, as Placement's dict does. */
export function listToDict(body: { allocations: Array<{ resource_provider: { uuid: string }; resources: Record<string, number> }>; project_id?: string; user_id?: string }): DictBody {
  const allocations: DictBody['allocations'] = {};
  for (const a of body.allocations) allocations[a.resource_provider.uuid] = { resources: a.resources };
  return { allocations, ...(body.project_id === undefined ? {} : { project_id: body.project_id, user_id: body.user_id! }) };
}

/** oslo's `is_uuid_like`, and `str(uuid.UUID(s))`: the canonical lowercase form, or undefined. */
export function canonicalUuid(s: string): string | undefined {
  const hex = s.replaceAll('urn:', '').replaceAll('uuid:', '').replace(/^[{}]+|[{}]+$/g, '').replaceAll('-', '').toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(hex)) return undefined;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const pyValue = (g: number | null | undefined): string => (g === null || g === undefined ? 'None' : String(g));

/** Placement's 409 for a consumer generation that is not the current one (`ensure_consumer`). */
export function consumerGenerationConflict(current: number | null, given: number | null | undefined): ApiError {
  const expected = current === null ? 'null' : String(current);
  return new ApiError(409, `consumer generation conflict - expected ${expected} but got ${pyValue(given)}`, CODES.concurrentUpdate);
}

/** The texts that differ between the three writes. */
export interface WriteMessages {
  /** A class no one created (Placement's `ResourceClassNotFound` caught as NotFound). */
  unknownClass(consumer: string, rc: string): string;
  /** The prefix of a lost race (`ConcurrentUpdateDetected`). */
  concurrent: string;
}

/**
 * Placement's checks before its transaction, in its order: every consumer's generation
 * (1.28+), then every provider named (400), then every resource class (400). The store
 * checks generations again inside its transaction; these give Placement's answer when
 * nothing races.
 */
export async function precheck(req: ApiRequest, writes: readonly ConsumerWrite[], messages: WriteMessages): Promise<void> {
  for (const w of writes) {
    if (w.generation === undefined) continue;
    const current = (await req.store.getAllocations(w.uuid)).generation;
    if (current !== w.generation) throw consumerGenerationConflict(current, w.generation);
  }
  for (const w of writes) {
    for (const [rp] of w.allocations) {
      if (!(await req.reads.provider(rp))) throw new ApiError(400, `Allocation for resource provider '${rp}' that does not exist.`);
    }
  }
  const classes = new Set(await req.reads.resourceClasses());
  for (const w of writes) {
    for (const [, resources] of w.allocations) {
      for (const rc of Object.keys(resources)) if (!classes.has(rc)) throw new ApiError(400, messages.unknownClass(w.uuid, rc));
    }
  }
}

/** The writes as the store takes them. */
export function storeWrites(writes: readonly ConsumerWrite[]): AllocationWrite[] {
  return writes.map((w) => ({
    consumer: {
      uuid: w.uuid,
      projectId: w.projectId,
      userId: w.userId,
      ...(w.generation === undefined ? {} : { generation: w.generation }),
      ...(w.consumerType === undefined ? {} : { consumerType: w.consumerType }),
    },
    allocations: w.allocations.flatMap(([providerUuid, resources]): Allocation[] => Object.entries(resources).map(([resourceClass, amount]) => ({ providerUuid, resourceClass, amount }))),
  }));
}

/** Placement's `[placement] allocation_conflict_retry_count`: lost races retried server-side. */
export const CONFLICT_RETRIES = 10;

/** Runs a store write, retrying lost races (ERT_STORE_CONFLICT) as Placement retries provider-generation races. */
export async function withRetries<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (!(isStoreError(err) && err.code === 'ERT_STORE_CONFLICT') || attempt >= CONFLICT_RETRIES) throw err;
    }
  }
}

/**
 * A store refusal as Placement answers it: capacity and unit constraints 409 `Unable to
 * allocate inventory: ...` (code `placement.undefined_code`), a consumer generation race 409,
 * a provider gone 400, a lost race 409 `placement.concurrent_update`. Anything else: undefined.
 */
export function allocationError(err: unknown, messages: WriteMessages): ApiError | undefined {
  if (!isStoreError(err)) return undefined;
  const d = err.details as Record<string, unknown>;
  const rc = String(d.resourceClass ?? '');
  const rp = String(d.provider ?? '');
  switch (err.code) {
    case 'ERT_STORE_CAPACITY_EXCEEDED': {
      const reason = String(d.reason ?? '');
      if (reason.startsWith('has no inventory')) return new ApiError(409, `Unable to allocate inventory: Inventory for '${rc}' on resource provider '${rp}' invalid.`);
      if (reason.startsWith('amount ')) return new ApiError(409, `Unable to allocate inventory: Unable to create allocation for '${rc}' on resource provider '${rp}'. The requested amount would violate inventory constraints.`);
      return new ApiError(409, `Unable to allocate inventory: Unable to create allocation for '${rc}' on resource provider '${rp}'. The requested amount would exceed the capacity.`);
    }
    case 'ERT_STORE_INVALID':
      if (d.requested !== undefined && d.resourceClass !== undefined) {
        return new ApiError(409, `Unable to allocate inventory: Unable to create allocation for '${rc}' on resource provider '${rp}'. The requested amount would violate inventory constraints.`);
      }
      return new ApiError(400, err.message);
    case 'ERT_STORE_CONSUMER_GENERATION_CONFLICT':
      return consumerGenerationConflict((d.actual as number | null | undefined) ?? null, d.expected as number | null | undefined);
    case 'ERT_STORE_NOT_FOUND':
      if (d.provider !== undefined) return new ApiError(400, `Allocation for resource provider '${rp}' that does not exist.`);
      return undefined;
    case 'ERT_STORE_CONFLICT':
    case 'ERT_STORE_PROVIDER_GENERATION_CONFLICT':
      return new ApiError(409, `${messages.concurrent}Another thread concurrently updated the data. Please retry your update`, CODES.concurrentUpdate);
    default:
      return undefined;
  }
}

/**
 * Writes through the store with retries; refusals as Placement's errors, in its order.
 * Placement runs its checks (`precheck`) before its transaction; the store makes the same
 * checks inside its own, so a write that passes would have passed them. They are read only
 * when the store refuses the write, to answer as Placement would, or before the write when a
 * class is not a standard one (the store creates a class it does not know; Placement refuses
 * it). A PUT of a new consumer is then one store call instead of four reads and the write.
 */
export async function writeAllocations(req: ApiRequest, writes: readonly ConsumerWrite[], messages: WriteMessages): Promise<void> {
  const standardOnly = writes.every((w) => w.allocations.every(([, resources]) => Object.keys(resources).every((rc) => STANDARD_CLASS_SET.has(rc))));
  if (!standardOnly) await precheck(req, writes, messages);
  try {
    await withRetries(() => req.store.writeAllocations(storeWrites(writes)));
  } catch (err) {
    // A refused write changed nothing: Placement's checks, in its order, give its answer.
    if (standardOnly) await precheck(req, writes, messages);
    throw allocationError(err, messages) ?? err;
  }
}
