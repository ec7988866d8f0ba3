import { ApiError, notFound } from '../errors.js';
import { atLeast, v, type Version } from '../microversion.js';
import type { ApiRequest, ApiReply, RouteDef, VersionedHandler } from '../route.js';
import { sortedObject } from './common.js';
import { canonicalUuid, consumerSchema, consumerWrite, listSchema, listToDict, manyConsumersSchema, writeAllocations, type WriteMessages } from './allocation-writes.js';

/** `PUT /allocations/{c}`'s texts (handlers/allocation.py `_set_allocations_for_consumer`). */
const PUT_MESSAGES: WriteMessages = {
  unknownClass: (consumer, rc) => `Unable to allocate inventory for consumer ${consumer}: No such resource class ${rc}.`,
  concurrent: 'Inventory and/or allocations changed while attempting to allocate: ',
};

/** `POST /allocations`'s texts (`set_allocations`: no colon after "inventory"). */
const POST_MESSAGES: WriteMessages = {
  unknownClass: (_consumer, rc) => `Unable to allocate inventory No such resource class ${rc}.`,
  concurrent: 'Inventory and/or allocations changed while attempting to allocate: ',
};

/**
 * `PUT /allocations/{c}`: replace one consumer's allocations. The list body before 1.12, the
 * object keyed by provider from 1.12; project and user required from 1.8 (before, Placement's
 * incomplete-consumer ids); `consumer_generation` required and checked from 1.28 (null for a
 * new consumer; `allocations: {}` then empties the consumer); `consumer_type` 1.38.
 */
async function putAllocations(req: ApiRequest): Promise<ApiReply> {
  const raw = req.params.consumer!;
  const uuid = canonicalUuid(raw);
  if (uuid === undefined) throw new ApiError(400, `Malformed consumer_uuid: ${raw}`);
  const body = atLeast(req.version, v('1.12')) ? (req.body as Parameters<typeof consumerWrite>[1]) : listToDict(req.body as Parameters<typeof listToDict>[0]);
  const write = consumerWrite(uuid, body, req.version);
  await writeAllocations(req, [write], PUT_MESSAGES);
  return { status: 204, cacheHeaders: false };
}

const putHandler = (min: Parameters<typeof v>[0], max: Parameters<typeof v>[0] | undefined, schema: (version: Version) => Record<string, unknown>): VersionedHandler => ({
  range: { min: v(min), ...(max === undefined ? {} : { max: v(max) }) },
  policy: { rule: 'placement:allocations:update' },
  body: schema,
  handle: putAllocations,
});

/** `POST /allocations` (1.13): several consumers' allocations in one transaction, all or nothing. */
async function postAllocations(req: ApiRequest): Promise<ApiReply> {
  const body = req.body as Record<string, Parameters<typeof consumerWrite>[1]>;
  const writes = Object.entries(body).map(([uuid, consumer]) => consumerWrite(uuid, consumer, req.version));
  await writeAllocations(req, writes, POST_MESSAGES);
  return { status: 204, cacheHeaders: false };
}

/** `DELETE /allocations/{c}`: 204, or 404 when the consumer holds nothing. */
async function deleteAllocations(req: ApiRequest): Promise<ApiReply> {
  const uuid = req.params.consumer!;
  const { allocations } = await req.store.getAllocations(uuid);
  if (allocations.length === 0) throw notFound(`No allocations for consumer '${uuid}'`);
  await req.store.deleteAllocations(uuid);
  return { status: 204, cacheHeaders: false };
}

/**
 * `GET /allocations/{consumer}` (1.0; project and user 1.12, consumer generation 1.28, type
 * 1.38), `PUT` and `DELETE` of it, and `POST /allocations` (1.13).
 */
export const allocationRoutes: RouteDef[] = [
  {
    path: '/allocations',
    placementMethods: ['POST'],
    handlers: {
      POST: [{ range: { min: v('1.13') }, policy: { rule: 'placement:allocations:manage' }, body: (version) => manyConsumersSchema(version), handle: postAllocations }],
    },
  },
  {
    path: '/allocations/:consumer',
    placementMethods: ['GET', 'PUT', 'DELETE'],
    handlers: {
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'placement:allocations:list' },
          accept: true,
          async handle(req) {
            const consumer = await req.reads.consumer(req.params.consumer!);
            if (!consumer) return { status: 200, body: { allocations: {} } };
            const byProvider = new Map<string, Array<[string, number]>>();
            for (const a of consumer.allocations) {
              const list = byProvider.get(a.providerUuid) ?? byProvider.set(a.providerUuid, []).get(a.providerUuid)!;
              list.push([a.resourceClass, a.amount]);
            }
            const allocations: Record<string, unknown> = {};
            for (const [uuid, resources] of [...byProvider].sort(([a], [b]) => (a < b ? -1 : 1))) {
              const provider = await req.reads.provider(uuid);
              if (!provider) throw notFound(`No resource provider with uuid ${uuid} found`);
              allocations[uuid] = { resources: sortedObject(resources), generation: provider.generation };
            }
            const body: Record<string, unknown> = { allocations };
            if (atLeast(req.version, v('1.12'))) {
              body.project_id = consumer.projectId;
              body.user_id = consumer.userId;
            }
            if (atLeast(req.version, v('1.28'))) body.consumer_generation = consumer.generation;
            if (atLeast(req.version, v('1.38'))) body.consumer_type = consumer.consumerType;
            return { status: 200, body };
          },
        },
      ],
      PUT: [
        putHandler('1.0', '1.11', listSchema),
        putHandler('1.12', '1.27', (version) => consumerSchema(version, false)),
        putHandler('1.28', undefined, (version) => consumerSchema(version, true)),
      ],
      DELETE: [{ range: { min: v('1.0') }, policy: { rule: 'placement:allocations:delete' }, handle: deleteAllocations }],
    },
  },
];
