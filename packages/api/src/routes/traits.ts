import { badRequest, notFound } from '../errors.js';
import { v } from '../microversion.js';
import type { RouteDef } from '../route.js';

/** SQL `LIKE 'prefix%'` as Placement's `startswith:` runs it: `_` and `%` are wildcards, ASCII case-insensitive (SQLite, MySQL). */
function likePrefix(prefix: string): RegExp {
  const body = [...prefix].map((ch) => (ch === '_' ? '.' : ch === '%' ? '.*' : ch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('');
  return new RegExp(`^${body}`, 'is');
}

/** `/traits` and `/traits/{name}` (1.6): the 345 standard traits and the custom traits providers carry. */
export const traitRoutes: RouteDef[] = [
  {
    path: '/traits',
    placementMethods: ['GET'],
    handlers: {
      GET: [
        {
          range: { min: v('1.6') },
          policy: { rule: 'placement:traits:list' },
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
