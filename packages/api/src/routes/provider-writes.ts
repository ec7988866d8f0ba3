import { randomUUID } from 'node:crypto';
import { capacityOf, type Inventory, type ResourceClass } from '@ert/plugin-api';
import { isStoreError, type ProviderRecord } from '@ert/store';
import { ApiError, CODES, badRequest } from '../errors.js';
import { atLeast, v, type Version } from '../microversion.js';
import type { ApiRequest, VersionedHandler } from '../route.js';
import { inventoryRecord, providerBody, providerOr404, sortedObject } from './common.js';
import { canonicalUuid } from './allocation-writes.js';

/**
 * The writes of `/resource_providers` and what hangs below one provider (PUT, POST, DELETE),
 * as Placement 8.0.0's handlers (placement/handlers/{resource_provider,inventory,aggregate,
 * trait}.py): their schemas by version, their checks in their order, their messages.
 * Generations: the client's is compared with the provider's first (409 as Placement words
 * it), then passed to the store, whose compare-and-set catches a writer in between.
 */

const MAX_INT = 2147483647;
/** SQL_SP_FLOAT_MAX of placement/db/constants.py. */
const SQL_SP_FLOAT_MAX = 3.40282e38;
const RC_PATTERN = '^[A-Z0-9_]+$';
const uuidSchema = { type: 'string', format: 'uuid' };

/** placement/schemas/resource_provider.py: POST (uuid) and PUT, parent from 1.14. */
function providerSchema(version: Version, post: boolean): Record<string, unknown> {
  const properties: Record<string, unknown> = { name: { type: 'string', maxLength: 200 } };
  if (post) properties.uuid = uuidSchema;
  if (atLeast(version, v('1.14'))) properties.parent_provider_uuid = { anyOf: [uuidSchema, { type: 'null' }] };
  return { type: 'object', properties, required: ['name'], additionalProperties: false };
}

/** placement/schemas/inventory.py: BASE_INVENTORY_SCHEMA (generation and total required). */
function inventorySchema(required: string[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  const int = (minimum: number) => ({ type: 'integer', maximum: MAX_INT, minimum });
  return {
    type: 'object',
    properties: {
      resource_provider_generation: { type: 'integer' },
      total: int(1),
      reserved: int(0),
      min_unit: int(1),
      max_unit: int(1),
      step_size: int(1),
      allocation_ratio: { type: 'number', maximum: SQL_SP_FLOAT_MAX },
      ...extra,
    },
    required,
    additionalProperties: false,
  };
}

/** `PUT_INVENTORY_SCHEMA` (schemas/inventory.py): a provider's generation and its whole inventory set (also the reshaper's, per provider). */
export const PUT_INVENTORIES_SCHEMA = {
  type: 'object',
  properties: {
    resource_provider_generation: { type: 'integer' },
    inventories: { type: 'object', patternProperties: { [RC_PATTERN]: inventorySchema(['total']) } },
  },
  required: ['resource_provider_generation', 'inventories'],
  additionalProperties: false,
};

const aggregateList = { type: 'array', items: uuidSchema, uniqueItems: true };

export interface InventoryBody {
  total: number;
  reserved?: number;
  min_unit?: number;
  max_unit?: number;
  step_size?: number;
  allocation_ratio?: number;
}

/** A body's inventory record with Placement's defaults (handlers/inventory.py INVENTORY_DEFAULTS); also the reshaper's. */
export function inventoryOf(body: InventoryBody): Inventory {
  return {
    total: body.total,
    reserved: body.reserved ?? 0,
    minUnit: body.min_unit ?? 1,
    maxUnit: body.max_unit ?? MAX_INT,
    stepSize: body.step_size ?? 1,
    allocationRatio: body.allocation_ratio ?? 1.0,
  };
}

/**
 * `_validate_inventory_capacity`: capacity must be > 0 before 1.26, >= 0 from 1.26
 * (reserved may equal total). `what` is the handler's lead ("Unable to update inventory ...").
 */
function checkCapacity(version: Version, uuid: string, what: string, inventories: Record<ResourceClass, Inventory>): void {
  const canBeTotal = atLeast(version, v('1.26'));
  for (const [rc, inv] of Object.entries(inventories)) {
    const capacity = capacityOf(inv);
    if (canBeTotal ? capacity < 0 : capacity <= 0) {
      const rule = canBeTotal ? 'The reserved value is greater than total.' : 'The reserved value is greater than or equal to total.';
      throw badRequest(`${what} for resource provider ${uuid}: Invalid inventory for '${rc}' on resource provider '${uuid}'. ${rule}`);
    }
  }
}

/** Classes the API knows: the standard ones and the store's. */
async function knownClasses(req: ApiRequest): Promise<Set<string>> {
  return new Set(await req.reads.resourceClasses());
}

/** The store's code when `err` is a store error, else undefined. */
function storeCode(err: unknown): string | undefined {
  return isStoreError(err) ? err.code : undefined;
}

/** A generation race lost inside the store (another writer between our read and the write). */
function raceConflict(err: unknown, lead: string): ApiError | undefined {
  const code = storeCode(err);
  if (code === 'ERT_STORE_PROVIDER_GENERATION_CONFLICT' || code === 'ERT_STORE_CONFLICT') {
    return new ApiError(409, `${lead}: Another thread concurrently updated the data. Please retry your update`, CODES.concurrentUpdate);
  }
  return undefined;
}

/** Placement's `InventoryInUse` text (exception.py), `classes` joined by ", ". */
function inUseText(classes: readonly string[], uuid: string): string {
  return `Inventory for '${classes.join(', ')}' on resource provider '${uuid}' in use.`;
}

/**
 * Placement's `InventoryInUse` text for a write the store refused because it removes classes
 * still allocated (`err`, ERT_STORE_INVENTORY_IN_USE): every such class, as the store found
 * them in the write's transaction (`resourceClasses`), named as `_delete_inventory_from_provider`
 * names them: in class id order (the standard classes in os-resource-classes' order, then the
 * custom ones, Placement's by creation, ert's by name). Nova parses it (`_RE_INV_IN_USE`).
 */
export async function inUseMessage(req: ApiRequest, uuid: string, err: unknown): Promise<string> {
  const details = (isStoreError(err) ? err.details : {}) as { resourceClasses?: string[]; resourceClass?: string };
  const named = new Set(details.resourceClasses ?? [details.resourceClass ?? '?']);
  const classes = (await req.reads.resourceClasses()).filter((rc) => named.has(rc));
  return inUseText(classes.length > 0 ? classes : [...named], uuid);
}

/** The store's write of a whole inventory set, with Placement's answers to what it refuses. */
async function writeInventories(req: ApiRequest, uuid: string, generation: number, inventories: Record<ResourceClass, Inventory>, lead: string): Promise<ProviderRecord> {
  try {
    return await req.store.setInventories(uuid, generation, inventories, { allowOverCapacity: true });
  } catch (err) {
    if (storeCode(err) === 'ERT_STORE_INVENTORY_IN_USE') throw new ApiError(409, `${lead}${await inUseMessage(req, uuid, err)}`, CODES.inventoryInUse);
    throw raceConflict(err, 'update conflict') ?? err;
  }
}

function inventoriesBody(generation: number, inventories: Record<ResourceClass, Inventory>): Record<string, unknown> {
  return { inventories: sortedObject(Object.entries(inventories).map(([rc, inv]) => [rc, inventoryRecord(inv)])), resource_provider_generation: generation };
}

/** Placement's caught-nowhere provider lookup (404 without `vary`). */
const provider404 = (req: ApiRequest) => providerOr404(req, 'uncaught');

export const createProvider: VersionedHandler = {
  range: { min: v('1.0') },
  policy: { rule: 'placement:resource_providers:create' },
  body: (version) => providerSchema(version, true),
  async handle(req) {
    const body = req.body as { name: string; uuid?: string; parent_provider_uuid?: string | null };
    // str(uuid.UUID(...)): the canonical lower-case form.
    // The schema checked the form: `canonicalUuid` always has an answer.
    const uuid = body.uuid ? (canonicalUuid(body.uuid) ?? body.uuid) : randomUUID();
    const parent = body.parent_provider_uuid ?? undefined;
    const unable = (reason: string) => badRequest(`Unable to create resource provider "${body.name}", ${uuid}: Object action create failed because: ${reason}`);
    if (parent !== undefined && parent === uuid) throw unable('parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if there is no parent.');
    let created: ProviderRecord;
    try {
      created = await req.store.createProvider({ uuid, name: body.name, ...(parent !== undefined ? { parentUuid: parent } : {}) });
    } catch (err) {
      if (storeCode(err) === 'ERT_STORE_NOT_FOUND') throw unable('parent provider UUID does not exist.');
      const duplicate = isStoreError(err) ? (err.details as { duplicate?: string }).duplicate : undefined;
      if (duplicate !== undefined) {
        throw new ApiError(409, `Conflicting resource provider ${duplicate === 'uuid' ? `uuid: ${uuid}` : `name: ${body.name}`} already exists.`, CODES.duplicateName);
      }
      throw err;
    }
    const location = `/resource_providers/${uuid}`;
    if (atLeast(req.version, v('1.20'))) return { status: 200, body: providerBody(created, req.version, req.prefix), location };
    return { status: 201, location, cacheHeaders: false };
  },
};

export const updateProvider: VersionedHandler = {
  range: { min: v('1.0') },
  policy: { rule: 'placement:resource_providers:update' },
  body: (version) => providerSchema(version, false),
  async handle(req) {
    const current = await provider404(req);
    const uuid = current.uuid;
    const body = req.body as { name: string; parent_provider_uuid?: string | null };
    const unable = (action: string, reason: string) => badRequest(`Unable to save resource provider ${uuid}: Object action ${action} failed because: ${reason}`);
    const reparenting = atLeast(req.version, v('1.37'));
    const changes: { name: string; parentUuid?: string | null } = { name: body.name };
    if ('parent_provider_uuid' in body) {
      const parent = body.parent_provider_uuid ?? null;
      if (parent !== null) {
        if (!(await req.reads.provider(parent))) throw unable('create', 'parent provider UUID does not exist.');
        if (current.parentUuid !== undefined && current.parentUuid !== parent && !reparenting) throw unable('update', 're-parenting a provider is not currently allowed.');
      } else if (current.parentUuid !== undefined && !reparenting) {
        throw unable('update', 'un-parenting a provider is not currently allowed.');
      }
      changes.parentUuid = parent;
    }
    let updated: ProviderRecord;
    try {
      updated = await req.store.updateProvider(uuid, changes);
    } catch (err) {
      const code = storeCode(err);
      const details = isStoreError(err) ? (err.details as { duplicate?: string; host?: string; parent?: string }) : {};
      if (code === 'ERT_STORE_CONFLICT' && details.duplicate === 'name') throw new ApiError(409, `Conflicting resource provider ${body.name} already exists.`, CODES.duplicateName);
      if (code === 'ERT_STORE_INVALID' && details.parent !== undefined) throw unable('update', 'creating loop in the provider tree is not allowed.');
      if (code === 'ERT_STORE_INVALID' && details.host !== undefined) throw unable('update', `it is the root provider of ert host ${details.host}, which ert host sync owns.`);
      if (code === 'ERT_STORE_NOT_FOUND' && changes.parentUuid) throw unable('create', 'parent provider UUID does not exist.');
      throw err;
    }
    return { status: 200, body: providerBody(updated, req.version, req.prefix) };
  },
};

export const deleteProvider: VersionedHandler = {
  range: { min: v('1.0') },
  policy: { rule: 'placement:resource_providers:delete' },
  async handle(req) {
    const uuid = req.params.uuid!;
    try {
      await req.store.deleteProvider(uuid);
    } catch (err) {
      const code = storeCode(err);
      if (code === 'ERT_STORE_NOT_FOUND') throw new ApiError(404, `No resource provider with uuid ${uuid} found for delete`);
      if (code === 'ERT_STORE_PROVIDER_IN_USE') {
        const { reason, providerName } = (isStoreError(err) ? err.details : {}) as { reason?: string; providerName?: string };
        if (reason === 'children') throw new ApiError(409, `Unable to delete parent resource provider ${uuid}: It has child resource providers.`, CODES.cannotDeleteParent);
        if (reason === 'allocations') throw new ApiError(409, `Unable to delete resource provider ${uuid}: Resource provider has allocations.`, CODES.providerInUse);
        throw new ApiError(409, `Unable to delete resource provider ${uuid}: it is the root provider of ert host ${providerName ?? ''}, which ert host sync owns.`, CODES.providerInUse);
      }
      throw err;
    }
    return { status: 204, cacheHeaders: false };
  },
};

export const setInventoriesHandler: VersionedHandler = {
  range: { min: v('1.0') },
  policy: { rule: 'placement:resource_providers:inventories:update' },
  body: () => PUT_INVENTORIES_SCHEMA,
  async handle(req) {
    const provider = await provider404(req);
    const uuid = provider.uuid;
    const body = req.body as { resource_provider_generation: number; inventories: Record<string, InventoryBody> };
    const { generation } = await req.store.getInventories(uuid);
    if (body.resource_provider_generation !== generation) throw new ApiError(409, 'resource provider generation conflict', CODES.concurrentUpdate);
    const inventories = Object.fromEntries(Object.entries(body.inventories).map(([rc, inv]) => [rc, inventoryOf(inv)]));
    checkCapacity(req.version, uuid, 'Unable to update inventory', inventories);
    const known = await knownClasses(req);
    const unknown = Object.keys(inventories).find((rc) => !known.has(rc));
    if (unknown !== undefined) throw badRequest(`Unknown resource class in inventory for resource provider ${uuid}: No such resource class ${unknown}.`);
    const written = await writeInventories(req, uuid, generation, inventories, 'update conflict: ');
    return { status: 200, body: inventoriesBody(written.generation, inventories) };
  },
};

export const addInventory: VersionedHandler = {
  range: { min: v('1.0') },
  policy: { rule: 'placement:resource_providers:inventories:create' },
  body: () => inventorySchema(['total', 'resource_class'], { resource_class: { type: 'string', pattern: RC_PATTERN } }),
  async handle(req) {
    const provider = await provider404(req);
    const uuid = provider.uuid;
    const { resource_class: rc, ...record } = req.body as InventoryBody & { resource_class: string };
    const inv = inventoryOf(record);
    checkCapacity(req.version, uuid, 'Unable to create inventory', { [rc]: inv });
    if (!(await knownClasses(req)).has(rc)) throw badRequest(`Unable to create inventory for resource provider ${uuid}: No such resource class ${rc}.`);
    const { generation, inventories } = await req.store.getInventories(uuid);
    if (rc in inventories) throw new ApiError(409, `Update conflict: Inventory of class ${rc} already exists on resource provider ${uuid}.`, CODES.concurrentUpdate);
    let written: ProviderRecord;
    try {
      written = await req.store.setInventories(uuid, generation, { ...inventories, [rc]: inv }, { allowOverCapacity: true });
    } catch (err) {
      throw raceConflict(err, 'Update conflict') ?? err;
    }
    return { status: 201, body: { ...inventoryRecord(inv), resource_provider_generation: written.generation }, location: `/resource_providers/${uuid}/inventories/${rc}` };
  },
};

export const deleteInventories: VersionedHandler[] = [
  {
    // Placement's version_handler('1.5', status_code=405).
    range: { min: v('1.0'), max: v('1.4') },
    policy: { rule: 'none' },
    async handle() {
      throw new ApiError(405, ' ');
    },
  },
  {
    range: { min: v('1.5') },
    policy: { rule: 'placement:resource_providers:inventories:delete' },
    async handle(req) {
      const provider = await provider404(req);
      const uuid = provider.uuid;
      const { generation } = await req.store.getInventories(uuid);
      try {
        await req.store.setInventories(uuid, generation, {}, { allowOverCapacity: true });
      } catch (err) {
        if (storeCode(err) === 'ERT_STORE_INVENTORY_IN_USE') throw new ApiError(409, await inUseMessage(req, uuid, err), CODES.inventoryInUse);
        if (raceConflict(err, '')) {
          throw new ApiError(
            409,
            `Unable to delete inventory for resource provider ${uuid} because the inventory was updated by another process. Please retry your request.`,
            CODES.concurrentUpdate,
          );
        }
        throw err;
      }
      return { status: 204, cacheHeaders: false };
    },
  },
];

export const updateInventory: VersionedHandler = {
  range: { min: v('1.0') },
  policy: { rule: 'placement:resource_providers:inventories:update' },
  body: () => inventorySchema(['total', 'resource_provider_generation']),
  async handle(req) {
    const provider = await provider404(req);
    const uuid = provider.uuid;
    const rc = req.params.resourceClass!;
    const { resource_provider_generation: clientGeneration, ...record } = req.body as InventoryBody & { resource_provider_generation: number };
    const { generation, inventories } = await req.store.getInventories(uuid);
    if (clientGeneration !== generation) throw new ApiError(409, 'resource provider generation conflict', CODES.concurrentUpdate);
    const inv = inventoryOf(record);
    checkCapacity(req.version, uuid, 'Unable to update inventory', { [rc]: inv });
    // An unknown class escapes Placement's handler: its dispatcher's 404, without `vary`.
    if (!(await knownClasses(req)).has(rc)) throw new ApiError(404, `No such resource class ${rc}.`, undefined, {}, { vary: false });
    if (!(rc in inventories)) throw badRequest(`No inventory record with resource class for resource provider ${uuid}: No inventory of class ${rc} found.`);
    let written: ProviderRecord;
    try {
      written = await req.store.setInventories(uuid, generation, { ...inventories, [rc]: inv }, { allowOverCapacity: true });
    } catch (err) {
      throw raceConflict(err, 'update conflict') ?? err;
    }
    return { status: 200, body: { ...inventoryRecord(inv), resource_provider_generation: written.generation } };
  },
};

export const deleteInventory: VersionedHandler = {
  range: { min: v('1.0') },
  policy: { rule: 'placement:resource_providers:inventories:delete' },
  async handle(req) {
    const provider = await provider404(req);
    const uuid = provider.uuid;
    const rc = req.params.resourceClass!;
    const notFound = (why: string) => new ApiError(404, `No inventory of class ${rc} found for delete: ${why}`);
    if (!(await knownClasses(req)).has(rc)) throw notFound(`No such resource class ${rc}.`);
    const { generation, inventories } = await req.store.getInventories(uuid);
    if (!(rc in inventories)) throw notFound(`No inventory of class ${rc} found for delete`);
    const rest = { ...inventories };
    delete rest[rc];
    try {
      await req.store.setInventories(uuid, generation, rest, { allowOverCapacity: true });
    } catch (err) {
      // Placement answers an in-use class with `concurrent_update` here (PLACEMENT-API.md §4.6 #8).
      if (storeCode(err) === 'ERT_STORE_INVENTORY_IN_USE') throw new ApiError(409, `Unable to delete inventory of class ${rc}: ${inUseText([rc], uuid)}`, CODES.concurrentUpdate);
      throw raceConflict(err, `Unable to delete inventory of class ${rc}`) ?? err;
    }
    return { status: 204, cacheHeaders: false };
  },
};

export const setAggregatesHandler: VersionedHandler = {
  range: { min: v('1.1') },
  policy: { rule: 'placement:resource_providers:aggregates:update' },
  // Placement's require_content sits outside version_handler here: 415 before 404.
  checksBeforeVersion: true,
  body: (version) =>
    atLeast(version, v('1.19'))
      ? {
          type: 'object',
          properties: { aggregates: aggregateList, resource_provider_generation: { type: 'integer' } },
          required: ['aggregates', 'resource_provider_generation'],
          additionalProperties: false,
        }
      : aggregateList,
  async handle(req) {
    const provider = await provider404(req);
    const withGeneration = atLeast(req.version, v('1.19'));
    let aggregates: string[];
    let generation: number | undefined;
    if (withGeneration) {
      const body = req.body as { aggregates: string[]; resource_provider_generation: number };
      if (body.resource_provider_generation !== provider.generation) {
        throw new ApiError(409, "Resource provider's generation already changed. Please update the generation and try again.", CODES.concurrentUpdate);
      }
      aggregates = body.aggregates;
      generation = body.resource_provider_generation;
    } else {
      aggregates = req.body as string[];
    }
    let written: ProviderRecord;
    try {
      written = await req.store.setAggregates(provider.uuid, generation, aggregates);
    } catch (err) {
      throw raceConflict(err, 'Update conflict') ?? err;
    }
    const body: Record<string, unknown> = { aggregates };
    if (withGeneration) body.resource_provider_generation = written.generation;
    return { status: 200, body };
  },
};

export const setTraitsHandler: VersionedHandler = {
  range: { min: v('1.6') },
  policy: { rule: 'placement:resource_providers:traits:update' },
  body: () => ({
    type: 'object',
    properties: { traits: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 255 } }, resource_provider_generation: { type: 'integer' } },
    required: ['traits', 'resource_provider_generation'],
    additionalProperties: false,
  }),
  async handle(req) {
    const body = req.body as { traits: string[]; resource_provider_generation: number };
    const provider = await provider404(req);
    if (body.resource_provider_generation !== provider.generation) {
      throw new ApiError(409, "Resource provider's generation already changed. Please update the generation and try again.", CODES.concurrentUpdate);
    }
    const known = new Set((await req.reads.traits()).all);
    const missing = [...new Set(body.traits)].filter((t) => !known.has(t));
    if (missing.length > 0) throw badRequest(`No such trait ${missing.join(', ')}`);
    let written: ProviderRecord;
    try {
      written = await req.store.setTraits(provider.uuid, provider.generation, [...new Set(body.traits)]);
    } catch (err) {
      throw raceConflict(err, 'Update conflict') ?? err;
    }
    return { status: 200, body: { traits: [...new Set(body.traits)].sort(), resource_provider_generation: written.generation } };
  },
};

export const deleteTraitsHandler: VersionedHandler = {
  range: { min: v('1.6') },
  policy: { rule: 'placement:resource_providers:traits:delete' },
  async handle(req) {
    const provider = await provider404(req);
    try {
      await req.store.setTraits(provider.uuid, undefined, []);
    } catch (err) {
      if (raceConflict(err, '')) throw new ApiError(409, 'Another thread concurrently updated the data. Please retry your update', CODES.concurrentUpdate);
      throw err;
    }
    return { status: 204, cacheHeaders: false };
  },
};
