import { atLeast, v, type Version } from '../microversion.js';
import type { QuerySchema, RouteDef } from '../route.js';
import { sortedObject } from './common.js';

const id = { type: 'string', minLength: 1, maxLength: 255 };

function usagesSchema(version: Version): QuerySchema {
  const properties: Record<string, unknown> = { project_id: id, user_id: id };
  if (atLeast(version, v('1.38'))) properties.consumer_type = { type: 'string', minLength: 1, maxLength: 255, pattern: '^[A-Z0-9_]+$|^all|^unknown$' };
  return { type: 'object', properties, required: ['project_id'], additionalProperties: false };
}

/**
 * `GET /usages?project_id=[&user_id=][&consumer_type=]` (1.9; grouped by consumer type from
 * 1.38). Consumers are those the store's instance records name: type INSTANCE, or MIGRATION
 * for the allocations a resize or migration holds.
 */
export const usageRoutes: RouteDef[] = [
  {
    path: '/usages',
    placementMethods: ['GET'],
    handlers: {
      GET: [
        {
          range: { min: v('1.9') },
          // The target project is the project_id asked for, read before the query is validated.
          policy: { rule: 'placement:usages', target: (req) => ({ projectId: req.query.getAll('project_id').at(-1) }) },
          accept: true,
          query: usagesSchema,
          async handle(req) {
            const projectId = req.query.getAll('project_id').at(-1)!;
            const userId = req.query.getAll('user_id').at(-1);
            const consumerType = atLeast(req.version, v('1.38')) ? req.query.getAll('consumer_type').at(-1) : undefined;
            const consumers = (await req.reads.consumers()).filter(
              (c) =>
                c.projectId === projectId &&
                (userId === undefined || c.userId === userId) &&
                (consumerType === undefined || consumerType === 'all' || c.consumerType === consumerType),
            );
            const sum = (list: typeof consumers): Map<string, number> => {
              const out = new Map<string, number>();
              for (const c of list) for (const a of c.allocations) out.set(a.resourceClass, (out.get(a.resourceClass) ?? 0) + a.amount);
              return out;
            };
            if (!atLeast(req.version, v('1.38'))) return { status: 200, body: { usages: sortedObject(sum(consumers)) } };
            const groups = new Map<string, typeof consumers>();
            for (const c of consumers) {
              const key = consumerType === 'all' ? 'all' : c.consumerType;
              (groups.get(key) ?? groups.set(key, []).get(key)!).push(c);
            }
            const usages: Record<string, Record<string, number>> = {};
            for (const [type, list] of [...groups].sort(([a], [b]) => (a < b ? -1 : 1))) {
              usages[type] = { consumer_count: list.length, ...sortedObject(sum(list)) };
            }
            return { status: 200, body: { usages } };
          },
        },
      ],
    },
  },
];
