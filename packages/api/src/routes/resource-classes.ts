import { isStoreError } from '@ert/store';
import { ApiError, badRequest } from '../errors.js';
import { v } from '../microversion.js';
import type { ApiRequest, RouteDef } from '../route.js';
import { STANDARD_CLASS_SET } from '../standards.js';

/** placement/schemas/resource_class.py POST_RC_SCHEMA_V1_2 (also PUT's before 1.7). */
const CUSTOM_RC_PATTERN = '^CUSTOM_[A-Z0-9_]+$';
const RC_BODY_SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string', pattern: CUSTOM_RC_PATTERN, maxLength: 255 } },
  required: ['name'],
  additionalProperties: false,
};

/** Placement lets the class lookup's NotFound reach its dispatcher: no `vary`. */
async function classOr404(req: ApiRequest, name: string): Promise<void> {
  if (!(await req.reads.resourceClasses()).includes(name)) throw new ApiError(404, `No such resource class ${name}.`, undefined, {}, { vary: false });
}

const storeCode = (err: unknown): string | undefined => (isStoreError(err) ? err.code : undefined);

function classBody(prefix: string, name: string): Record<string, unknown> {
  return { name, links: [{ rel: 'self', href: `${prefix}/resource_classes/${name}` }] };
}

/** `/resource_classes` (1.2): the 21 standard classes and the store's custom ones; custom ones created, renamed (1.2–1.6) and deleted. */
export const resourceClassRoutes: RouteDef[] = [
  {
    path: '/resource_classes',
    placementMethods: ['GET', 'POST'],
    handlers: {
      POST: [
        {
          range: { min: v('1.2') },
          policy: { rule: 'placement:resource_classes:create' },
          body: () => RC_BODY_SCHEMA,
          async handle(req) {
            const { name } = req.body as { name: string };
            if (!(await req.store.createResourceClass(name))) throw new ApiError(409, `Conflicting resource class already exists: ${name}`);
            return { status: 201, location: `/resource_classes/${name}`, cacheHeaders: false };
          },
        },
      ],
      GET: [
        {
          range: { min: v('1.2') },
          policy: { rule: 'placement:resource_classes:list' },
          accept: true,
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
      PUT: [
        {
          // Before 1.7: rename a custom class.
          range: { min: v('1.2'), max: v('1.6') },
          policy: { rule: 'placement:resource_classes:update' },
          body: () => RC_BODY_SCHEMA,
          async handle(req) {
            const name = req.params.name!;
            const { name: to } = req.body as { name: string };
            await classOr404(req, name);
            if (STANDARD_CLASS_SET.has(name)) throw badRequest(`Cannot update standard resource class ${name}`);
            try {
              await req.store.renameResourceClass(name, to);
            } catch (err) {
              if (storeCode(err) === 'ERT_STORE_CONFLICT') throw new ApiError(409, `Resource class already exists: ${to}`);
              throw err;
            }
            return { status: 200, body: classBody(req.prefix, to), cacheHeaders: false };
          },
        },
        {
          // From 1.7: bodiless create-or-confirm.
          range: { min: v('1.7') },
          policy: { rule: 'placement:resource_classes:update' },
          async handle(req) {
            const name = req.params.name!;
            // Placement validates `{"name": name}` against the POST schema.
            if (!new RegExp(CUSTOM_RC_PATTERN).test(name)) throw badRequest(`JSON does not validate: '${name}' does not match '${CUSTOM_RC_PATTERN}'`);
            if (name.length > 255) throw badRequest(`JSON does not validate: '${name}' is too long`);
            const created = await req.store.createResourceClass(name);
            return { status: created ? 201 : 204, location: `/resource_classes/${name}`, cacheHeaders: false };
          },
        },
      ],
      DELETE: [
        {
          range: { min: v('1.2') },
          policy: { rule: 'placement:resource_classes:delete' },
          async handle(req) {
            const name = req.params.name!;
            await classOr404(req, name);
            if (STANDARD_CLASS_SET.has(name)) throw badRequest(`Error in delete resource class: Cannot delete standard resource class ${name}.`);
            try {
              await req.store.deleteResourceClass(name);
            } catch (err) {
              if (storeCode(err) === 'ERT_STORE_IN_USE') throw new ApiError(409, `Error in delete resource class: Cannot delete resource class ${name}. Class is in use in inventory.`);
              if (storeCode(err) === 'ERT_STORE_NOT_FOUND') throw new ApiError(404, `No such resource class ${name}.`, undefined, {}, { vary: false });
              throw err;
            }
            return { status: 204, cacheHeaders: false };
          },
        },
      ],
      GET: [
        {
          range: { min: v('1.2') },
          policy: { rule: 'placement:resource_classes:show' },
          accept: true,
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
