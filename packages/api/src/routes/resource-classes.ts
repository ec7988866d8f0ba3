import { ApiError } from '../errors.js';
import { v } from '../microversion.js';
import type { RouteDef } from '../route.js';

function classBody(prefix: string, name: string): Record<string, unknown> {
  return { name, links: [{ rel: 'self', href: `${prefix}/resource_classes/${name}` }] };
}

/** `/resource_classes` (1.2): the 21 standard classes and the store's custom ones. */
export const resourceClassRoutes: RouteDef[] = [
  {
    path: '/resource_classes',
    placementMethods: ['GET', 'POST'],
    handlers: {
      GET: [
        {
          range: { min: v('1.2') },
          policy: { rule: 'placement:resource_classes:list' },
          async handle(req) {
            const names = await req.reads.resourceClasses();
            return { status: 200, body: { resource_classes: names.map((n) => classBody(req.prefix, n)) } };
          },
        },
      ],
    },
  },
  {
    path: '/resource_classes/:name',
    placementMethods: ['GET', 'PUT', 'DELETE'],
    handlers: {
      GET: [
        {
          range: { min: v('1.2') },
          policy: { rule: 'placement:resource_classes:show' },
          async handle(req) {
            const name = req.params.name!;
            const names = await req.reads.resourceClasses();
            // Placement lets the lookup's NotFound reach its dispatcher: no `vary`.
            if (!names.includes(name)) throw new ApiError(404, `No such resource class ${name}.`, undefined, {}, { vary: false });
            return { status: 200, body: classBody(req.prefix, name) };
          },
        },
      ],
    },
  },
];
