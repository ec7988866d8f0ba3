import { notFound } from '../errors.js';
import { atLeast, v } from '../microversion.js';
import type { RouteDef } from '../route.js';
import { sortedObject } from './common.js';

/** `GET /allocations/{consumer}` (1.0; project and user 1.12, consumer generation 1.28, type 1.38). */
export const allocationRoutes: RouteDef[] = [
  {
    // POST /allocations (1.13) is a write: not implemented yet; any other method is Placement's 405.
    path: '/allocations',
    placementMethods: ['POST'],
    handlers: {},
  },
  {
    path: '/allocations/:consumer',
    placementMethods: ['GET', 'PUT', 'DELETE'],
    handlers: {
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'placement:allocations:list' },
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
    },
  },
];
