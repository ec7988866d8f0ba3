import type { Inventory } from '@ert/plugin-api';
import { isStoreError, type ReshapeInventory } from '@ert/store';
import { ApiError, CODES } from '../errors.js';
import { v, type Version } from '../microversion.js';
import type { ApiReply, ApiRequest, RouteDef } from '../route.js';
import { allocationError, consumerWrite, manyConsumersSchema, precheck, storeWrites, UUID_PATTERN, withRetries, type WriteMessages } from './allocation-writes.js';

/** Placement's `db_const.MAX_INT` and `SQL_SP_FLOAT_MAX`, the inventory schema's bounds. */
const MAX_INT = 2147483647;
const SQL_SP_FLOAT_MAX = 3.40282e38;

const int = (minimum: number) => ({ type: 'integer', maximum: MAX_INT, minimum });

/** `PUT_INVENTORY_SCHEMA` (schemas/inventory.py): a provider's generation and its whole inventory set. */
const PUT_INVENTORY_SCHEMA = {
  type: 'object',
  properties: {
    resource_provider_generation: { type: 'integer' },
    inventories: {
      type: 'object',
      patternProperties: {
        '^[A-Z0-9_]+$': {
          type: 'object',
          properties: {
            resource_provider_generation: { type: 'integer' },
            total: int(1),
            reserved: int(0),
            min_unit: int(1),
            max_unit: int(1),
            step_size: int(1),
            allocation_ratio: { type: 'number', maximum: SQL_SP_FLOAT_MAX },
          },
          required: ['total'],
          additionalProperties: false,
        },
      },
    },
  },
  required: ['resource_provider_generation', 'inventories'],
  additionalProperties: false,
};

/** `POST_RESHAPER_SCHEMA` (1.30), `_V1_34` (mappings), `_V1_38` (consumer_type): allocations may be empty. */
function reshaperSchema(version: Version): Record<string, unknown> {
  return {
    type: 'object',
    properties: {
      inventories: { type: 'object', patternProperties: { [UUID_PATTERN]: PUT_INVENTORY_SCHEMA }, minProperties: 1, additionalProperties: false },
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
  inventories: Record<string, { resource_provider_generation: number; inventories: Record<string, Record<string, number>> }>;
  allocations: Record<string, Parameters<typeof consumerWrite>[1]>;
}

/** An inventory of the body with Placement's defaults (handlers/inventory.py `INVENTORY_DEFAULTS`). */
function inventoryOf(raw: Record<string, number>): Inventory {
  return {
    total: raw.total!,
    reserved: raw.reserved ?? 0,
    minUnit: raw.min_unit ?? 1,
    maxUnit: raw.max_unit ?? MAX_INT,
    stepSize: raw.step_size ?? 1,
    allocationRatio: raw.allocation_ratio ?? 1,
  };
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
      const d = err.details as Record<string, unknown>;
      throw new ApiError(409, `update conflict: Inventory for '${String(d.resourceClass)}' on resource provider '${String(d.provider)}' in use.`, CODES.inventoryInUse);
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
