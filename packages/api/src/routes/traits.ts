import { isStoreError } from '@ert/store';
import { ApiError, badRequest, notFound } from '../errors.js';
import { v } from '../microversion.js';
import type { RouteDef } from '../route.js';

/** placement/schemas/trait.py CUSTOM_TRAIT. */
const CUSTOM_TRAIT = /^CUSTOM_[A-Z0-9_]+$/;

/** SQL `LIKE 'prefix%'` as Placement's `startswith:` runs it: `_` and `%` are wildcards, ASCII case-insensitive (SQLite, MySQL). */
function likePrefix(prefix: string): RegExp {
  const body = [...prefix].map((ch) => (ch === '_' ? '.' : ch === '%' ? '.*' : ch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('');
  return new RegExp(`^${body}`, 'is');
}

/** `/traits` and `/traits/{name}` (1.6): the 345 standard traits and those the store records; custom ones created and deleted. */
export const traitRoutes: RouteDef[] = [
  {
    path: '/traits',
    placementMethods: ['GET'],
    handlers: {
      GET: [
        {
          range: { min: v('1.6') },
          policy: { rule: 'placement:traits:list' },
          accept: true,
          query: () => ({
            type: 'object',
            properties: { name: { type: 'string' }, associated: { type: 'string' } },
            additionalProperties: false,
          }),
          async handle(req) {
            const name = req.query.getAll('name').at(-1);
            const associatedParam = req.query.getAll('associated').at(-1);
            let filter: (trait: string) => boolean = () => true;
            if (name !== undefined) {
              const colon = name.indexOf(':');
              if (colon < 0) {
                throw badRequest(
                  `Badly formatted name parameter. Expected name query string parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: "${name}"`,
                );
              }
              const operator = name.slice(0, colon);
              const value = name.slice(colon + 1);
              if (operator === 'startswith') {
                const re = likePrefix(value);
                filter = (t) => re.test(t);
              } else if (operator === 'in') {
                const wanted = new Set(value.split(','));
                filter = (t) => wanted.has(t);
              }
              // Any other operator is ignored, as Placement does: every trait.
            }
            let associated: boolean | undefined;
            if (associatedParam !== undefined) {
              const lower = associatedParam.toLowerCase();
              if (lower !== 'true' && lower !== 'false') throw badRequest('The query parameter "associated" only accepts "true" or "false"');
              associated = lower === 'true';
            }
            const traits = await req.reads.traits();
            const out = traits.all.filter((t) => filter(t) && (associated === undefined || traits.associated.has(t) === associated));
            return { status: 200, body: { traits: out } };
          },
        },
      ],
    },
  },
  {
    path: '/traits/:name',
    placementMethods: ['GET', 'PUT', 'DELETE'],
    handlers: {
      PUT: [
        {
          range: { min: v('1.6') },
          policy: { rule: 'placement:traits:update' },
          async handle(req) {
            const name = req.params.name!;
            if (!CUSTOM_TRAIT.test(name) || name.length > 255) {
              throw badRequest(
                'The trait is invalid. A valid trait must be no longer than 255 characters, start with the prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"',
              );
            }
            const created = await req.store.createTrait(name);
            return { status: created ? 201 : 204, location: `/traits/${name}` };
          },
        },
      ],
      DELETE: [
        {
          range: { min: v('1.6') },
          policy: { rule: 'placement:traits:delete' },
          async handle(req) {
            const name = req.params.name!;
            if (!(await req.reads.traits()).all.includes(name)) throw notFound(`No such trait(s): ${name}.`);
            if (!name.startsWith('CUSTOM_')) throw badRequest(`Cannot delete standard trait ${name}.`);
            try {
              await req.store.deleteTrait(name);
            } catch (err) {
              const code = isStoreError(err) ? err.code : undefined;
              if (code === 'ERT_STORE_IN_USE') throw new ApiError(409, `The trait ${name} is in use by a resource provider.`);
              if (code === 'ERT_STORE_NOT_FOUND') throw notFound(`No such trait(s): ${name}.`);
              throw err;
            }
            return { status: 204, cacheHeaders: false };
          },
        },
      ],
      GET: [
        {
          range: { min: v('1.6') },
          policy: { rule: 'placement:traits:show' },
          async handle(req) {
            const name = req.params.name!;
            const traits = await req.reads.traits();
            if (!traits.all.includes(name)) throw notFound(`No such trait(s): ${name}.`);
            return { status: 204 };
          },
        },
      ],
    },
  },
];
