import type { PlacementRequest } from '@ert/plugin-api';
import { findCandidates, indexWorld, parseCandidatesQuery, type WorldIndex, PlacementQueryError, SearchBudgetError, type FoundCandidates, type FitProvider } from '@ert/placement';
import { ApiError, badRequest } from '../errors.js';
import { atLeast, v } from '../microversion.js';
import { JsonBytes, type ApiRequest, type RouteDef } from '../route.js';
import type { ProviderView, Reads } from '../reads.js';
import { candidatesJson } from './candidates-json.js';
import { STANDARD_CLASS_SET, STANDARD_TRAIT_SET } from '../standards.js';

function fitProvider(p: ProviderView): FitProvider {
  return {
    uuid: p.uuid,
    name: p.name,
    ...(p.parentUuid === undefined ? {} : { parentUuid: p.parentUuid }),
    inventories: p.inventories,
    usages: p.usages,
    traits: new Set(p.traits),
    aggregates: new Set(p.aggregates),
  };
}

/**
 * The search's index of the whole model, kept per store: the store returns the same array
 * while no provider changed (`Store.loadProviders`), and the same snapshot objects for the
 * providers that did not change, so the index is reused as is, or re-indexes only the trees of
 * the providers that changed (`WorldIndex.replaced`; a claim changes one), or is built again
 * when the structure changed.
 */
interface IndexedModel {
  providers: readonly ProviderView[];
  world: WorldIndex;
}
const models = new WeakMap<object, IndexedModel>();
function worldOf(store: object, providers: readonly ProviderView[]): WorldIndex {
  const last = models.get(store);
  if (last?.providers === providers) return last.world;
  let world: WorldIndex | undefined;
  if (last !== undefined && sameOrder(last.providers, providers)) {
    const changed = providers.filter((p, i) => p !== last.providers[i]);
    // More than a quarter changed: indexing everything again costs about the same.
    if (changed.length <= providers.length / 4) world = last.world.replaced(changed.map(fitProvider));
  }
  world ??= indexWorld(providers.map(fitProvider));
  models.set(store, { providers, world });
  return world;
}

/**
 * Reads every provider and builds the search index kept for this store, as the first
 * `GET /allocation_candidates` would (`ert serve` calls it once listening, so that a worker's
 * first request answers from a built index); returns how many providers it indexed.
 */
export async function buildCandidateIndex(reads: Reads): Promise<number> {
  const providers = await reads.providers();
  worldOf(reads.store, providers);
  return providers.length;
}

/** The same providers (by uuid) in the same order. */
function sameOrder(a: readonly ProviderView[], b: readonly ProviderView[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.uuid !== b[i]!.uuid) return false;
  return true;
}

/**
 * Placement's 400s for names its database does not hold: per group, classes then traits. The
 * standard classes and traits always exist: the store is asked only when the request names
 * another (most name none, and the trait list is the dearest read of a candidates request).
 */
async function checkNames(req: ApiRequest, request: PlacementRequest): Promise<void> {
  const rootTraits = [...(request.rootRequiredTraits ?? []), ...(request.rootForbiddenTraits ?? [])];
  const namedClasses = request.groups.flatMap((g) => Object.keys(g.resources));
  const namedTraits = [...request.groups.flatMap((g) => [...g.requiredTraits, ...(g.anyOfTraits ?? []).flat(), ...g.forbiddenTraits]), ...rootTraits];
  if (namedClasses.every((c) => STANDARD_CLASS_SET.has(c)) && namedTraits.every((t) => STANDARD_TRAIT_SET.has(t))) return;
  const classes = new Set(await req.reads.resourceClasses());
  const traits = new Set((await req.reads.traits()).all);
  for (const group of request.groups) {
    const missingClass = Object.keys(group.resources).find((rc) => !classes.has(rc));
    if (missingClass !== undefined) throw badRequest(`Invalid resource class in resources parameter: No such resource class ${missingClass}.`);
    const named = [...group.requiredTraits, ...(group.anyOfTraits ?? []).flat(), ...group.forbiddenTraits];
    const missing = [...new Set(named.filter((t) => !traits.has(t)))].sort();
    if (missing.length > 0) throw badRequest(`No such trait(s): ${missing.join(', ')}.`);
  }
  const missingRoot = [...new Set(rootTraits.filter((t) => !traits.has(t)))].sort();
  if (missingRoot.length > 0) throw badRequest(`No such trait(s): ${missingRoot.join(', ')}.`);
}

/** `GET /allocation_candidates` (1.10): @ert/placement's parser and search over a snapshot of the store's providers. */
export const allocationCandidateRoutes: RouteDef[] = [
  {
    path: '/allocation_candidates',
    placementMethods: ['GET'],
    handlers: {
      GET: [
        {
          range: { min: v('1.10') },
          policy: { rule: 'placement:allocation_candidates:list' },
          accept: true,
          // Placement validates this query against its schema for the version
          // (validate_query_params), which decodes it as strict UTF-8 first; ert's parser
          // validates its parameters, so the schema admits any: the app decodes it as
          // Placement does (400 on a key or value that is not UTF-8) and the parser does the rest.
          query: () => ({ type: 'object' }),
          async handle(req) {
            let parsed;
            try {
              parsed = parseCandidatesQuery(req.query, req.version);
            } catch (err) {
              if (err instanceof PlacementQueryError) throw new ApiError(err.status, err.message, err.code);
              throw err;
            }
            const providers = await req.reads.providers();
            await checkNames(req, parsed.request);
            const world = worldOf(req.reads.store, providers);
            let result: FoundCandidates;
            try {
              result = findCandidates(parsed.request, world, {
                nestedAware: atLeast(req.version, v('1.29')),
                ...(parsed.limit === undefined ? {} : { limit: parsed.limit }),
              });
            } catch (err) {
              if (err instanceof SearchBudgetError) throw new ApiError(500, err.message);
              throw err;
            }
            return { status: 200, body: new JsonBytes(candidatesJson(result.allocationRequests, world, parsed.request, req.version)) };
          },
        },
      ],
    },
  },
];
