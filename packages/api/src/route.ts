import type { Store } from '@ert/store';
import type { Credentials } from './auth.js';
import type { Reads } from './reads.js';
import type { Version, VersionRange } from './microversion.js';

/**
 * A route of the Placement API as data: its path, the methods Placement has on it, and for
 * each method ert implements, handlers by microversion range. A request whose version is in
 * no range of its method is a 404 (Placement's `version_handler`); a method Placement does
 * not have on the path is a 405 with `allow`. Handlers are thin: the framework has already
 * negotiated the version, authenticated, checked `Accept` (handlers with `accept`), checked
 * the policy and validated the query string against the handler's schema for that version,
 * and for a handler with a `body` schema: the content type (415), then the JSON (400
 * `Malformed JSON`) and its schema (400 `JSON does not validate`), in Placement's order
 * (version, then `Accept` and content type, then policy, body last).
 * A handler reads the store (through `Reads`) or writes it (`store`, the store contract) and
 * returns the body shaped for the version.
 */

export type Method = 'GET' | 'PUT' | 'POST' | 'DELETE' | 'PATCH' | 'HEAD' | 'OPTIONS';

/** A JSON schema for the query string (an object of strings: each key's last value, as Placement's `dict(req.GET)`). */
export type QuerySchema = Record<string, unknown>;

export interface ApiRequest {
  version: Version;
  params: Record<string, string>;
  /** The raw query, every value in order (for repeated keys). */
  query: URLSearchParams;
  credentials: Credentials;
  reads: Reads;
  /** The store, for writes (handlers of PUT/POST/DELETE); reads go through `reads`. */
  store: Store;
  /** The request body parsed as JSON and valid against the handler's `body` schema (undefined without one). */
  body: unknown;
  /** The mount point (`/placement`, or '' at the root), for links in bodies. */
  prefix: string;
}

/**
 * A reply body already serialised as JSON, sent as is: for answers large enough that building
 * them as objects and serialising those costs more than the work behind them (candidates).
 */
export class JsonBytes {
  constructor(readonly bytes: Buffer) {}
}

export interface ApiReply {
  status: number;
  /** The JSON body (serialised by the app), or `JsonBytes`. */
  body?: unknown;
  /**
   * For `last-modified` (1.15+): the newest timestamp of the objects in the body. The store
   * keeps no timestamps for Placement's objects, so every reply is "now", as Placement does
   * where it has none (usages, aggregates, candidates, empty lists).
   */
  lastModified?: Date;
  /**
   * Whether `last-modified` and `cache-control` go out (from 1.15): true unless false.
   * Placement sends them with GETs and with the writes that answer a body (and `PUT /traits/{n}`).
   */
  cacheHeaders?: boolean;
  /** A path below the mount point for `location`, sent as an absolute URL as Placement's (webob's). */
  location?: string;
}

export interface Policy {
  rule: string;
  /** The policy target (`GET /usages`: the `project_id` asked for). */
  target?: (req: Pick<ApiRequest, 'query' | 'params'>) => { projectId?: string };
}

export interface VersionedHandler {
  range: VersionRange;
  policy: Policy;
  /**
   * Placement's handler checks `Accept` (`util.check_accept('application/json')`, 406 unless
   * it admits JSON: accept.ts). 14 of its GETs do: all but `GET /traits/{n}` and the root
   * document; no write does (any `Accept` is served).
   */
  accept?: boolean;
  /**
   * Placement's decorators check `Accept` and the content type before the microversion
   * (`.../aggregates`, where they sit outside `version_handler`): below the range a bad
   * `Accept` is 406 and a bad content type 415, not 404. Elsewhere the version comes first.
   */
  checksBeforeVersion?: boolean;
  /** The query-string schema at a version (undefined: no query parameters allowed... except as Placement: not validated). */
  query?: (version: Version) => QuerySchema;
  /**
   * The JSON schema of the body at a version (Placement's `schemas/*.py` for that version).
   * Present on handlers that take a body: the request must be `application/json` (else 415).
   */
  body?: (version: Version) => Record<string, unknown>;
  handle(req: ApiRequest): Promise<ApiReply>;
}

export interface RouteDef {
  /** Fastify path below the mount point, e.g. `/resource_providers/:uuid`. */
  path: string;
  /** Every method Placement 8.0.0 has on this path, in its order (handler.py's ROUTE_DECLARATIONS): the 405's `allow`. */
  placementMethods: readonly Method[];
  /** The methods ert implements, each with its handlers by version range. */
  handlers: Partial<Record<Method, readonly VersionedHandler[]>>;
}
