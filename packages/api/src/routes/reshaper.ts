import { isStoreError, type ReshapeInventory } from '@ert/store';
import { ApiError, CODES } from '../errors.js';
import { v, type Version } from '../microversion.js';
import type { ApiReply, ApiRequest, RouteDef } from '../route.js';
import { PUT_INVENTORIES_SCHEMA, inUseMessage, inventoryOf, type InventoryBody } from './provider-writes.js';
import { allocationError, consumerWrite, manyConsumersSchema, precheck, storeWrites, UUID_PATTERN, withRetries, type WriteMessages } from './allocation-writes.js';

/** `POST_RESHAPER_SCHEMA` (1.30), `_V1_34` (mappings), `_V1_38` (consumer_type): allocations may be empty. */
function reshaperSchema(version: Version): Record<string, unknown> {
  return {
    type: 'object',
    properties: {
      inventories: { type: 'object', patternProperties: { [UUID_PATTERN]: PUT_INVENTORIES_SCHEMA }, minProperties: 1, additionalProperties: false },
      allocations: manyConsumersSchema(version, 0),
    },
    required: ['inventories', 'allocations'],
    additionalProperties: false,
  };
}

const MESSAGES: WriteMessages = {
  unknownClass: (_consumer, rc) => `malformed reshaper data: No such resource class ${rc}.`,
  concurrent: 'update conflict: ',
};

interface ReshaperBody {
  inventories: Record<string, { resource_provider_generation: number; inventories: Record<string, InventoryBody> }>;
  allocations: Record<string, Parameters<typeof consumerWrite>[1]>;
}

/**
 * `POST /reshaper` (1.30): several providers' inventories and several consumers' allocations
 * changed in one store transaction (`Store.reshape`). Placement's order: each provider named
 * in `inventories` exists (400 `placement.resource_provider.not_found`) and has the generation
 * given (409), then the consumers' generations, providers and classes of `allocations`.
 */
async function reshape(req: ApiRequest): Promise<ApiReply> {
  const body = req.body as ReshaperBody;
  const inventories: ReshapeInventory[] = [];
  for (const [uuid, data] of Object.entries(body.inventories)) {
    const provider = await req.reads.provider(uuid);
    if (!provider) {
      throw new ApiError(400, `Resource provider ${uuid} in inventories not found: No resource provider with uuid ${uuid} found`, 'placement.resource_provider.not_found');
    }
    if (data.resource_provider_generation !== provider.generation) {
      throw new ApiError(
        409,
        `resource provider generation conflict for provider ${uuid}: actual: ${provider.generation}, given: ${data.resource_provider_generation}`,
        CODES.concurrentUpdate,
      );
    }
    inventories.push({
      providerUuid: uuid,
      generation: data.resource_provider_generation,
      inventories: Object.fromEntries(Object.entries(data.inventories).map(([rc, raw]) => [rc, inventoryOf(raw)])),
    });
  }
  const writes = Object.entries(body.allocations).map(([uuid, consumer]) => consumerWrite(uuid, consumer, req.version));
  await precheck(req, writes, MESSAGES);
  // Classes named only in inventories must exist too (Placement: "malformed reshaper data").
  const classes = new Set(await req.reads.resourceClasses());
  for (const inv of inventories) {
    for (const rc of Object.keys(inv.inventories)) if (!classes.has(rc)) throw new ApiError(400, `malformed reshaper data: No such resource class ${rc}.`);
  }
  try {
    await withRetries(() => req.store.reshape(inventories, storeWrites(writes)));
  } catch (err) {
    if (isStoreError(err) && err.code === 'ERT_STORE_INVENTORY_IN_USE') {
      const uuid = String((err.details as { provider?: string }).provider);
      throw new ApiError(409, `update conflict: ${await inUseMessage(req, uuid, err)}`, CODES.inventoryInUse);
    }
    throw allocationError(err, MESSAGES) ?? err;
  }
  return { status: 204, cacheHeaders: false };
}

/** `POST /reshaper` (1.30; mappings 1.34, consumer_type 1.38). */
export const reshaperRoutes: RouteDef[] = [
  {
    path: '/reshaper',
    placementMethods: ['POST'],
    handlers: {
      POST: [{ range: { min: v('1.30') }, policy: { rule: 'placement:reshaper:reshape' }, body: reshaperSchema, handle: reshape }],
    },
  },
];
