import { amountProblem, type ResourceClass } from '@ert/plugin-api';
import { placementQueryValues, PlacementQueryError } from '@ert/placement';
import { ApiError, badRequest, notFound } from '../errors.js';
import { atLeast, v, type Version } from '../microversion.js';
import type { ApiRequest, QuerySchema, RouteDef } from '../route.js';
import type { ProviderView } from '../reads.js';
import { inventoryRecord, providerBody, providerOr404, sortedObject } from './common.js';
import * as writes from './provider-writes.js';

const uuidString = { type: 'string', format: 'uuid' };

/** Placement's GET_RPS_SCHEMA_1_0 ... 1_18: each version adds parameters. */
function listSchema(version: Version): QuerySchema {
  const properties: Record<string, unknown> = { name: { type: 'string' }, uuid: uuidString };
  if (atLeast(version, v('1.3'))) properties.member_of = { type: 'string' };
  if (atLeast(version, v('1.4'))) properties.resources = { type: 'string' };
  if (atLeast(version, v('1.14'))) properties.in_tree = uuidString;
  if (atLeast(version, v('1.18'))) properties.required = { type: 'string' };
  return { type: 'object', properties, additionalProperties: false };
}

/** A parser's PlacementQueryError as the API's 400. */
function asApiError<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof PlacementQueryError) throw new ApiError(err.status, err.message, err.code);
    throw err;
  }
}

/** What `GET /resource_providers` filters on, parsed and checked against the known names. */
interface ListFilters {
  name?: string;
  uuid?: string;
  memberOf: Array<Set<string>>;
  forbiddenAggregates: Set<string>;
  resources: Array<[ResourceClass, number]>;
  inTree?: string;
  required: Array<Set<string>>;
  forbiddenTraits: Set<string>;
}

async function parseListFilters(req: ApiRequest): Promise<ListFilters> {
  const q = req.query;
  const last = (key: string): string | undefined => q.getAll(key).at(-1);
  const filters: ListFilters = { memberOf: [], forbiddenAggregates: new Set(), resources: [], required: [], forbiddenTraits: new Set() };
  if (q.has('member_of')) {
    const parsed = asApiError(() => placementQueryValues.memberOf(q, req.version));
    filters.memberOf = parsed.required;
    filters.forbiddenAggregates = parsed.forbidden;
  }
  if (q.has('required')) {
    const parsed = asApiError(() => placementQueryValues.required(q, req.version));
    filters.required = parsed.required;
    filters.forbiddenTraits = parsed.forbidden;
    const known = (await req.reads.traits()).all;
    const knownSet = new Set(known);
    const named = [...parsed.required.flatMap((s) => [...s]), ...parsed.forbidden];
    const missing = named.find((t) => !knownSet.has(t));
    if (missing !== undefined) throw badRequest(`Invalid trait(s) in "required" parameter: No such trait(s): ${missing}.`);
  }
  const name = last('name');
  if (name !== undefined) filters.name = name;
  const uuid = last('uuid');
  if (uuid !== undefined) filters.uuid = uuid;
  const inTree = last('in_tree');
  if (inTree !== undefined) filters.inTree = inTree;
  const resources = last('resources');
  if (resources !== undefined) {
    filters.resources = Object.entries(asApiError(() => placementQueryValues.resources('resources', resources)));
    const known = new Set(await req.reads.resourceClasses());
    const missing = filters.resources.find(([rc]) => !known.has(rc));
    if (missing) throw badRequest(`Invalid resource class in resources parameter: No such resource class ${missing[0]}.`);
  }
  return filters;
}

/** Placement's per-provider filters (§3.1): each provider is judged alone, aggregates never inherited from the root. */
function matches(p: ProviderView, f: ListFilters, rootOfTree: string | null | undefined): boolean {
  if (f.name !== undefined && p.name !== f.name) return false;
  if (f.uuid !== undefined && p.uuid !== f.uuid) return false;
  if (f.inTree !== undefined && p.rootUuid !== rootOfTree) return false;
  const aggregates = new Set(p.aggregates);
  if (!f.memberOf.every((any) => [...any].some((a) => aggregates.has(a)))) return false;
  if ([...f.forbiddenAggregates].some((a) => aggregates.has(a))) return false;
  const traits = new Set(p.traits);
  if (!f.required.every((any) => [...any].some((t) => traits.has(t)))) return false;
  if ([...f.forbiddenTraits].some((t) => traits.has(t))) return false;
  for (const [rc, amount] of f.resources) {
    const inv = p.inventories[rc];
    if (!inv || amountProblem(inv, p.usages[rc] ?? 0, amount) !== undefined) return false;
  }
  return true;
}

/** `/resource_providers` and what hangs below one provider (GETs here; writes in provider-writes.ts). */
export const resourceProviderRoutes: RouteDef[] = [
  {
    path: '/resource_providers',
    placementMethods: ['GET', 'POST'],
    handlers: {
      POST: [writes.createProvider],
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'placement:resource_providers:list' },
          accept: true,
          query: listSchema,
          async handle(req) {
            const providers = await req.reads.providers();
            const filters = await parseListFilters(req);
            // in_tree: the root of the named provider's tree; an unknown uuid matches nothing.
            const rootOfTree = filters.inTree === undefined ? undefined : (providers.find((p) => p.uuid === filters.inTree)?.rootUuid ?? null);
            const out = providers.filter((p) => matches(p, filters, rootOfTree)).map((p) => providerBody(p, req.version, req.prefix));
            return { status: 200, body: { resource_providers: out } };
          },
        },
      ],
    },
  },
  {
    path: '/resource_providers/:uuid',
    placementMethods: ['GET', 'DELETE', 'PUT'],
    handlers: {
      PUT: [writes.updateProvider],
      DELETE: [writes.deleteProvider],
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'placement:resource_providers:show' },
          accept: true,
          async handle(req) {
            const provider = await providerOr404(req, 'uncaught');
            return { status: 200, body: providerBody(provider, req.version, req.prefix) };
          },
        },
      ],
    },
  },
  {
    path: '/resource_providers/:uuid/inventories',
    placementMethods: ['GET', 'POST', 'PUT', 'DELETE'],
    handlers: {
      PUT: [writes.setInventoriesHandler],
      POST: [writes.addInventory],
      DELETE: writes.deleteInventories,
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'placement:resource_providers:inventories:list' },
          accept: true,
          async handle(req) {
            await providerOr404(req, 'spaced-colon');
            const { generation, inventories } = await req.reads.store.getInventories(req.params.uuid!);
            const body = { inventories: sortedObject(Object.entries(inventories).map(([rc, inv]) => [rc, inventoryRecord(inv)])), resource_provider_generation: generation };
            return { status: 200, body };
          },
        },
      ],
    },
  },
  {
    path: '/resource_providers/:uuid/inventories/:resourceClass',
    placementMethods: ['GET', 'PUT', 'DELETE'],
    handlers: {
      PUT: [writes.updateInventory],
      DELETE: [writes.deleteInventory],
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'placement:resource_providers:inventories:show' },
          accept: true,
          async handle(req) {
            await providerOr404(req, 'spaced-colon');
            const rc = req.params.resourceClass!;
            const { generation, inventories } = await req.reads.store.getInventories(req.params.uuid!);
            const inv = inventories[rc];
            if (!inv) throw notFound(`No inventory of class ${rc} for ${req.params.uuid!}`);
            return { status: 200, body: { ...inventoryRecord(inv), resource_provider_generation: generation } };
          },
        },
      ],
    },
  },
  {
    path: '/resource_providers/:uuid/usages',
    placementMethods: ['GET'],
    handlers: {
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'placement:resource_providers:usages' },
          accept: true,
          async handle(req) {
            await providerOr404(req, 'colon');
            const uuid = req.params.uuid!;
            const [{ generation, inventories }, usages] = await Promise.all([req.reads.store.getInventories(uuid), req.reads.store.getUsages(uuid)]);
            // One key per inventory class, 0 when unused.
            const out = sortedObject(Object.keys(inventories).map((rc) => [rc, usages[rc] ?? 0]));
            return { status: 200, body: { resource_provider_generation: generation, usages: out } };
          },
        },
      ],
    },
  },
  {
    path: '/resource_providers/:uuid/aggregates',
    placementMethods: ['GET', 'PUT'],
    handlers: {
      PUT: [writes.setAggregatesHandler],
      GET: [
        {
          range: { min: v('1.1') },
          policy: { rule: 'placement:resource_providers:aggregates:list' },
          accept: true,
          // Placement's check_accept sits outside version_handler here: 406 before 404.
          checksBeforeVersion: true,
          async handle(req) {
            const provider = await providerOr404(req, 'uncaught');
            const aggregates = await req.reads.store.getAggregates(provider.uuid);
            const body: Record<string, unknown> = { aggregates: [...aggregates].sort() };
            if (atLeast(req.version, v('1.19'))) body.resource_provider_generation = provider.generation;
            return { status: 200, body };
          },
        },
      ],
    },
  },
  {
    path: '/resource_providers/:uuid/traits',
    placementMethods: ['GET', 'PUT', 'DELETE'],
    handlers: {
      PUT: [writes.setTraitsHandler],
      DELETE: [writes.deleteTraitsHandler],
      GET: [
        {
          range: { min: v('1.6') },
          policy: { rule: 'placement:resource_providers:traits:list' },
          accept: true,
          async handle(req) {
            const provider = await providerOr404(req, 'colon');
            const traits = await req.reads.store.getTraits(provider.uuid);
            return { status: 200, body: { traits: [...traits].sort(), resource_provider_generation: provider.generation } };
          },
        },
      ],
    },
  },
  {
    path: '/resource_providers/:uuid/allocations',
    placementMethods: ['GET'],
    handlers: {
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'placement:resource_providers:allocations:list' },
          accept: true,
          async handle(req) {
            const provider = await providerOr404(req, 'allocations');
            const [consumers, usages] = await Promise.all([req.reads.consumers(), req.reads.store.getUsages(provider.uuid)]);
            const allocations: Record<string, Record<string, unknown>> = {};
            const seen: Record<string, number> = {};
            for (const consumer of consumers) {
              const here = consumer.allocations.filter((a) => a.providerUuid === provider.uuid);
              if (here.length === 0) continue;
              const entry: Record<string, unknown> = { resources: sortedObject(here.map((a) => [a.resourceClass, a.amount])) };
              if (atLeast(req.version, v('1.28'))) entry.consumer_generation = consumer.generation;
              allocations[consumer.uuid] = entry;
              for (const a of here) seen[a.resourceClass] = (seen[a.resourceClass] ?? 0) + a.amount;
            }
            // The store contract lists consumers only through instance records: refuse to
            // answer with a partial list when the provider's usage says there is more.
            const unexplained = Object.entries(usages).filter(([rc, used]) => used !== (seen[rc] ?? 0));
            if (unexplained.length > 0) {
              throw new ApiError(
                500,
                `Resource provider ${provider.uuid} holds allocations of consumers that no instance record names (${unexplained.map(([rc, used]) => `${rc} used ${used}, listed ${seen[rc] ?? 0}`).join('; ')}); ert cannot list them yet (see docs/api.md)`,
              );
            }
            return { status: 200, body: { allocations, resource_provider_generation: provider.generation } };
          },
        },
      ],
    },
  },
];
