import { formatVersion, MAX_VERSION, MIN_VERSION, v } from '../microversion.js';
import type { RouteDef } from '../route.js';

/** `GET /`: the version document (no auth; PLACEMENT-API.md §1.6). */
export const rootRoutes: RouteDef[] = [
  {
    path: '/',
    placementMethods: ['GET'],
    handlers: {
      GET: [
        {
          range: { min: v('1.0') },
          policy: { rule: 'none' },
          async handle() {
            const version = { id: 'v1.0', max_version: formatVersion(MAX_VERSION), min_version: formatVersion(MIN_VERSION), status: 'CURRENT', links: [{ rel: 'self', href: '' }] };
            return { status: 200, body: { versions: [version] } };
          },
        },
      ],
    },
  },
];
