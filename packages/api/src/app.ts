import { randomUUID } from 'node:crypto';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Store } from '@ert/store';
import { authenticator, type Authenticator, type AuthMode, type Credentials } from './auth.js';
import { acceptsJson, placementAccept } from './accept.js';
import { queryDecodeError } from './query-utf8.js';
import { ApiError, apiErrorOfStore, errorBody, unauthorizedBody } from './errors.js';
import { formatVersion, inRange, negotiate, VERSION_HEADER, atLeast, v, type Version } from './microversion.js';
import { LEGACY_POLICY, type Policy } from './policy.js';
import { Reads } from './reads.js';
import { AGENT_PREFIX, agentApi } from './agent-api.js';
import { schedulerApi, type SchedulerApiOptions } from './scheduler-api.js';
import { SCHEDULER_PREFIX } from './scheduler-routes.js';
import { SchedulerApiError, SchedulerApiErrorCodes, sendErtError } from './ert-errors.js';
import { uiRoutes, type UiOptions } from './ui.js';
import { JsonBytes, type ApiReply, type ApiRequest, type Method, type QuerySchema, type RouteDef, type VersionedHandler } from './route.js';
import { allocationCandidateRoutes, buildCandidateIndex } from './routes/allocation-candidates.js';
import { warmOnListen } from './warm-up.js';
import { allocationRoutes } from './routes/allocations.js';
import { resourceClassRoutes } from './routes/resource-classes.js';
import { resourceProviderRoutes } from './routes/resource-providers.js';
import { reshaperRoutes } from './routes/reshaper.js';
import { rootRoutes } from './routes/root.js';
import { traitRoutes } from './routes/traits.js';
import { usageRoutes } from './routes/usages.js';

/** Every route of the Placement API that ert serves, as data. */
export const PLACEMENT_ROUTES: readonly RouteDef[] = [
  ...rootRoutes,
  ...resourceProviderRoutes,
  ...resourceClassRoutes,
  ...traitRoutes,
  ...allocationRoutes,
  ...reshaperRoutes,
  ...usageRoutes,
  ...allocationCandidateRoutes,
];

const ALL_METHODS: readonly Method[] = ['GET', 'PUT', 'POST', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'];

/**
 * The largest body of a Placement request (413 above it). Placement has none of its own; the
 * largest bodies real clients send are Nova's reshapes, every consumer of a compute node's
 * tree in one request, about 370 bytes each (a VGPU on a child provider): 1 MiB, Fastify's
 * default and still the limit of ert's own APIs, held about 2,800 consumers, 8 MiB holds about
 * 22,000. Placement's bodies are read after authentication (its onRequest hook).
 */
const PLACEMENT_BODY_LIMIT = 8 * 1024 * 1024;

export interface ApiOptions {
  store: Store;
  /** Mount point of the Placement API: `/placement` (default) or '' for the root. */
  prefix?: string;
  auth: AuthMode;
  /** The authenticator (the token-file mode's, with its tokens); default: the mode's own. */
  authenticate?: Authenticator;
  /** The policy (defaults and policy file); default: Placement 8.0.0's legacy defaults. */
  policy?: Policy;
  /** Send `x-ert-worker: <pid>` on every response (`ert serve --workers N`, N > 1). */
  workerHeader?: boolean;
  /** Fastify's logger option (pino): false, true, or pino options. */
  logger?: boolean | Record<string, unknown>;
  /**
   * Called with the Fastify instance before the Placement routes are registered (so its
   * hooks reach them): `serve` adds the request metrics and `/metrics`, `/healthz`, `/readyz`
   * at the root (ops.ts).
   */
  setup?: (app: FastifyInstance) => void;
  /** Serve the scheduler API at `/scheduler/v1` (scheduler-api.ts), with this authenticator and policy. */
  scheduler?: SchedulerApiOptions;
  /** Serve the web view at `/ui` (ui.ts) from these built assets. */
  ui?: UiOptions;
  /**
   * Once listening, read every provider and build the allocation candidates' search index
   * (`ert serve`), so that the process's first `GET /allocation_candidates` answers from it
   * instead of building it (at 5,000 providers, 266 ms against 13–16 ms).
   */
  warmCandidateIndex?: boolean;
  /** Told once the index of `warmCandidateIndex` is built (providers indexed, ms taken), or why it failed (the first request then builds it). */
  onCandidateIndexBuilt?: (outcome: { providers: number; ms: number } | { error: unknown }) => void;
}

declare module 'fastify' {
  interface FastifyRequest {
    placementVersion?: Version;
    credentials?: Credentials;
  }
}

/** `/placement/`, `placement`, `/` and '' normalised: '' or `/x`. */
export function normalizePrefix(prefix: string | undefined): string {
  const p = (prefix ?? '/placement').trim().replace(/\/+$/, '');
  if (p === '') return '';
  return p.startsWith('/') ? p : `/${p}`;
}

/** Ajv's first error in the words of Python's jsonschema, which Placement's clients see. */
function schemaMessage(error: ErrorObject | undefined, instance: Record<string, string>, schema: QuerySchema): string {
  if (!error) return 'invalid';
  const pyRepr = (s: string): string => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
  const property = error.instancePath.replace(/^\//, '');
  const value = instance[property];
  switch (error.keyword) {
    case 'additionalProperties': {
      const extra = Object.keys(instance).filter((k) => !(k in ((schema.properties as object | undefined) ?? {}))).sort();
      return `Additional properties are not allowed (${extra.map(pyRepr).join(', ')} ${extra.length === 1 ? 'was' : 'were'} unexpected)`;
    }
    case 'required':
      return `${pyRepr((error.params as { missingProperty: string }).missingProperty)} is a required property`;
    case 'format':
      return `${pyRepr(value ?? '')} is not a ${pyRepr((error.params as { format: string }).format)}`;
    case 'pattern':
      return `${pyRepr(value ?? '')} does not match ${pyRepr((error.params as { pattern: string }).pattern)}`;
    case 'minLength':
      return `${pyRepr(value ?? '')} is too short`;
    case 'maxLength':
      return `${pyRepr(value ?? '')} is too long`;
    default:
      return `${property} ${error.message ?? 'is invalid'}`;
  }
}

/** A JSON value as Python's `repr` writes it (jsonschema's messages quote instances so). */
function pyRepr(value: unknown): string {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'string') return value.includes("'") && !value.includes('"') ? `"${value}"` : `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(', ')}]`;
  if (typeof value === 'object') return `{${Object.entries(value).map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`).join(', ')}}`;
  return String(value);
}

/** The value at a JSON pointer of the body. */
function at(body: unknown, pointer: string): unknown {
  let value = body;
  for (const part of pointer.split('/').slice(1)) {
    const key = part.replaceAll('~1', '/').replaceAll('~0', '~');
    value = value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
  }
  return value;
}

/** Ajv's body error in the words of Python's jsonschema (`'x' is a required property`, ...): clients and the comparison read its start. */
function bodyMessage(errors: ErrorObject[] | null | undefined, body: unknown): string {
  const error = errors?.find((e) => e.keyword === 'anyOf') ?? errors?.[0];
  if (!error) return 'invalid';
  const value = pyRepr(at(body, error.instancePath));
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${pyRepr(params.missingProperty)} is a required property`;
    case 'additionalProperties': {
      // jsonschema names the patterns when the object has patternProperties (Ajv's `verbose` gives the schema).
      const patterns = Object.keys((error.parentSchema as { patternProperties?: object } | undefined)?.patternProperties ?? {}).sort();
      if (patterns.length > 0) return `${pyRepr(params.additionalProperty)} does not match any of the regexes: ${patterns.map(pyRepr).join(', ')}`;
      return `Additional properties are not allowed (${pyRepr(params.additionalProperty)} was unexpected)`;
    }
    case 'type':
      return `${value} is not of type ${String(params.type).split(',').map(pyRepr).join(', ')}`;
    case 'pattern':
      return `${value} does not match ${pyRepr(params.pattern)}`;
    case 'maxLength':
      return `${value} is too long`;
    case 'minLength':
      return `${value} is too short`;
    case 'minimum':
      return `${value} is less than the minimum of ${String(params.limit)}`;
    case 'maximum':
      return `${value} is greater than the maximum of ${String(params.limit)}`;
    case 'minProperties':
      return `${value} does not have enough properties`;
    case 'minItems':
      return `${value} is too short`;
    case 'format':
      return `${value} is not a ${pyRepr(params.format)}`;
    case 'uniqueItems':
      return `${value} has non-unique elements`;
    case 'anyOf':
      return `${value} is not valid under any of the given schemas`;
    default:
      return `${error.instancePath || 'body'} ${error.message ?? 'is invalid'}`;
  }
}

/**
 * The Placement API as a Fastify instance (not listening yet). Per request: a request id,
 * authentication (401), microversion negotiation (400/406), a body without a content type
 * (400), then the route: the handler for the version (404 below its range), `Accept` (406)
 * and content type (415) where the handler checks them, policy (403), the query schema of
 * that version (400), the handler, and the reply's headers by version.
 */
export async function createApi(options: ApiOptions): Promise<FastifyInstance> {
  const prefix = normalizePrefix(options.prefix);
  const reads = new Reads(options.store);
  const authenticate = options.authenticate ?? authenticator(options.auth);
  const policy = options.policy ?? LEGACY_POLICY;
  const ajv = new Ajv({ allErrors: false, strict: false, verbose: true });
  // oslo's is_uuid_like, as Placement's "uuid" format checker.
  ajv.addFormat('uuid', (s: string) => /^[0-9a-fA-F]{32}$/.test(s.replaceAll('urn:', '').replaceAll('uuid:', '').replace(/^[{}]+|[{}]+$/g, '').replaceAll('-', '')));
  const validators = new Map<string, ValidateFunction>();

  const app = Fastify({
    logger: options.logger ?? false,
    genReqId: () => `req-${randomUUID()}`,
    exposeHeadRoutes: false,
    bodyLimit: 1024 * 1024,
    // A `%` that starts no escape is a literal `%`, as Python's unquote reads the path for
    // Placement (`/resource_providers/%zz` is an unknown provider, not a bad URL).
    rewriteUrl: (req) => (req.url ?? '/').replace(/%(?![0-9A-Fa-f]{2})/g, '%25'),
    // Path parameters as long as a request line can be (Node's 16 KiB of headers): trait and
    // class names reach 255 characters, which Fastify's default of 100 answered with its own 414.
    routerOptions: { maxParamLength: 16 * 1024 },
    // What the router still cannot decode (an escape that is not UTF-8, `%ff`): 400 in the
    // shape of the API the path is under, Placement's unless it is ert's own.
    frameworkErrors: (err, request, reply) => {
      everyResponse(request, reply);
      if (underErtApi(request.url)) return sendErtError(reply, new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, err.message));
      const negotiated = negotiate(request.headers[VERSION_HEADER]);
      if (negotiated.ok) request.placementVersion = negotiated.version;
      return sendError(request, reply, new ApiError(400, err.message, undefined, {}, { vary: false }));
    },
  });
  /** Whether `url` is one of ert's own APIs' (their errors have their own shape), not Placement's or the root's. */
  const underErtApi = (url: string): boolean => [SCHEDULER_PREFIX, AGENT_PREFIX].some((p) => url === p || url.startsWith(`${p}/`) || url.startsWith(`${p}?`));
  // Bodies are kept as text and parsed by `dispatch`, in Placement's order: its content-type
  // check comes before the policy, the JSON parse after (Fastify's own parsers would answer
  // 415 and 400 before either, in their own words).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  const send = (reply: FastifyReply, status: number, body: unknown, headers: Record<string, string> = {}): FastifyReply => {
    reply.code(status);
    for (const [k, value] of Object.entries(headers)) reply.header(k, value);
    if (body === undefined) return reply.send();
    // A Buffer, so that Fastify does not append `; charset=utf-8` (Placement sends `application/json`).
    return reply.header('content-type', 'application/json').send(body instanceof JsonBytes ? body.bytes : Buffer.from(JSON.stringify(body)));
  };

  /** Headers of a response that reached the application: the version in effect, and `vary` when a handler built it. */
  const versionHeaders = (request: FastifyRequest, vary: boolean): Record<string, string> => {
    const version = request.placementVersion;
    if (version === undefined) return {};
    const headers: Record<string, string> = { [VERSION_HEADER]: `placement ${formatVersion(version)}` };
    if (vary) headers.vary = VERSION_HEADER;
    return headers;
  };

  const sendError = (request: FastifyRequest, reply: FastifyReply, err: ApiError): FastifyReply => {
    const body = errorBody({
      status: err.status,
      message: err.message,
      requestId: request.id,
      ...(request.placementVersion === undefined ? {} : { version: request.placementVersion }),
      code: err.code,
      method: request.method,
      accept: placementAccept(request.headers.accept),
    });
    return send(reply, err.status, body, { ...versionHeaders(request, err.options.vary !== false), ...err.headers });
  };

  /** Headers of every response, whatever the path: the local request id (and the worker). */
  function everyResponse(request: FastifyRequest, reply: FastifyReply): void {
    reply.header('x-openstack-request-id', request.id);
    if (options.workerHeader) reply.header('x-ert-worker', String(process.pid));
  }
  app.addHook('onRequest', async (request, reply) => {
    everyResponse(request, reply);
    const global = request.headers['x-openstack-request-id'];
    if (typeof global === 'string' && /^req-[0-9a-f-]{36}$/i.test(global)) request.log.info({ global_request_id: global }, 'global request id');
  });

  // Before the Placement plugin is registered, so that its context inherits them.
  // Outside the mount point (the Placement plugin has its own, which is this one at the root).
  if (prefix !== '') app.setNotFoundHandler(async (request, reply) => send(reply, 404, errorBody({ status: 404, message: '', requestId: request.id })));
  app.setErrorHandler(async (err, request, reply) => {
    if (err instanceof ApiError) return sendError(request, reply, err);
    const fromStore = apiErrorOfStore(err);
    if (fromStore) return sendError(request, reply, fromStore);
    const error = err instanceof Error ? err : new Error(String(err));
    const status = (err as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) return sendError(request, reply, new ApiError(status, error.message));
    request.log.error({ err }, 'unexpected error');
    return sendError(request, reply, new ApiError(500, `${error.name}: ${error.message}`));
  });
  options.setup?.(app);
  if (options.scheduler) await app.register(schedulerApi({ ...options.scheduler, store: options.store, authenticate, policy }), { prefix: SCHEDULER_PREFIX });
  await app.register(agentApi({ store: options.store, authenticate, policy }), { prefix: AGENT_PREFIX });
  const ui = options.ui;
  if (ui) await app.register(async (scope) => uiRoutes(scope, { ...ui, placementPrefix: prefix }));

  await app.register(
    async (api) => {
      // Placement's middleware order: auth (not for the root document), then the microversion.
      api.addHook('onRequest', async (request, reply) => {
        const path = request.url.split('?')[0]!.slice(prefix.length);
        if (path !== '' && path !== '/') {
          const credentials = authenticate(request.headers);
          if (!credentials) return send(reply, 401, unauthorizedBody());
          request.credentials = credentials;
        }
        const negotiated = negotiate(request.headers[VERSION_HEADER]);
        if (!negotiated.ok) {
          const body = errorBody({ status: negotiated.status, message: negotiated.message, requestId: request.id, accept: placementAccept(request.headers.accept) });
          if (negotiated.status === 406) Object.assign(body.errors[0]!, { max_version: '1.39', min_version: '1.0' });
          return send(reply, negotiated.status, body);
        }
        request.placementVersion = negotiated.version;
        // PlacementHandler, before routing: every path and method, even those that take no body.
        if (Number(request.headers['content-length'] ?? 0) > 0 && !request.headers['content-type']) {
          return sendError(request, reply, new ApiError(400, 'content-type header required when content-length > 0', undefined, {}, { vary: false }));
        }
        return undefined;
      });

      for (const route of PLACEMENT_ROUTES) {
        for (const [method, handlers] of Object.entries(route.handlers) as Array<[Method, readonly VersionedHandler[]]>) {
          api.route({ method, url: route.path, bodyLimit: PLACEMENT_BODY_LIMIT, handler: (request, reply) => dispatch(request, reply, handlers) });
        }
        // Methods Placement does not have on this path: 405 with its `allow`. Methods it has
        // that ert does not implement yet stay unregistered (404; docs/api.md lists them).
        const notAllowed = ALL_METHODS.filter((m) => !route.placementMethods.includes(m));
        if (notAllowed.length > 0) {
          api.route({
            method: [...notAllowed],
            url: route.path,
            bodyLimit: PLACEMENT_BODY_LIMIT,
            handler: async (request, reply) => sendError(request, reply, new ApiError(405, '', undefined, { allow: route.placementMethods.join(', ') })),
          });
        }
      }

      api.setNotFoundHandler(async (request, reply) => sendError(request, reply, new ApiError(404, '', undefined, {}, { vary: false })));
    },
    { prefix },
  );

  /** 406 for a handler that checks `Accept` and gets one without JSON; 415 for a handler that takes a body not sent as application/json. */
  function checkMediaTypes(request: FastifyRequest, handler: VersionedHandler): void {
    if (handler.accept && !acceptsJson(request.headers.accept)) throw new ApiError(406, 'Only application/json is provided');
    if (handler.body) {
      // webob's `content_type`: the media type without parameters.
      const contentType = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (contentType !== 'application/json') throw new ApiError(415, `The media type ${contentType || 'None'} is not supported, use application/json`);
    }
  }

  async function dispatch(request: FastifyRequest, reply: FastifyReply, handlers: readonly VersionedHandler[]): Promise<FastifyReply> {
    const version = request.placementVersion!;
    const params = request.params as Record<string, string>;
    // `/resource_providers/` is no route of Placement's (Fastify would match it with an empty uuid).
    if (Object.values(params).some((p) => p === '')) throw new ApiError(404, '', undefined, {}, { vary: false });
    const handler = handlers.find((h) => inRange(version, h.range));
    // Placement's `check_accept` and `require_content` decorators, inside `version_handler`
    // except on `.../aggregates` (route.ts `checksBeforeVersion`).
    const beforeVersion = handlers.find((h) => h.checksBeforeVersion);
    if (beforeVersion) checkMediaTypes(request, beforeVersion);
    if (!handler) throw new ApiError(404, '');
    if (!beforeVersion) checkMediaTypes(request, handler);
    const query = new URLSearchParams(request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '');
    if (handler.policy.rule !== 'none') {
      // No target: Placement's default, the caller's own project and user.
      const target = handler.policy.target?.({ query, params });
      // Placement's dispatcher turns the policy exception into the 403: no `vary`.
      if (!policy.allowed(handler.policy.rule, request.credentials!, target)) {
        throw new ApiError(403, `Policy does not allow ${handler.policy.rule} to be performed.`, undefined, {}, { vary: false });
      }
    }
    if (handler.query) {
      // Placement's validate_query_params reads `dict(req.GET)`, which webob decodes as strict
      // UTF-8 before jsonschema sees it: a key or value that is not UTF-8 is this 400, in
      // Python's words (query-utf8.ts). From the query as received (not rewritten for `%`).
      const originalUrl = request.originalUrl;
      const decodeError = queryDecodeError(originalUrl.includes('?') ? originalUrl.slice(originalUrl.indexOf('?') + 1) : '');
      if (decodeError !== undefined) throw new ApiError(400, `Invalid query string parameters: ${decodeError}`);
      const schema = handler.query(version);
      const key = `${request.routeOptions.url} ${formatVersion(version)}`;
      let validate = validators.get(key);
      if (validate === undefined) {
        validate = ajv.compile(schema);
        validators.set(key, validate);
      }
      // Placement validates dict(req.GET): each key's last value.
      const instance = Object.fromEntries(query);
      if (!validate(instance)) throw new ApiError(400, `Invalid query string parameters: ${schemaMessage(validate.errors?.[0], instance, schema)}`);
    }
    let body: unknown;
    if (handler.body) {
      try {
        body = JSON.parse(typeof request.body === 'string' ? request.body : '');
      } catch (err) {
        throw new ApiError(400, `Malformed JSON: ${(err as Error).message}`);
      }
      const schema = handler.body(version);
      const key = `body ${request.method} ${request.routeOptions.url} ${formatVersion(version)}`;
      let validate = validators.get(key);
      if (validate === undefined) {
        validate = ajv.compile(schema);
        validators.set(key, validate);
      }
      if (!validate(body)) throw new ApiError(400, `JSON does not validate: ${bodyMessage(validate.errors, body)}`);
    }
    const apiRequest: ApiRequest = { version, params, query, credentials: request.credentials!, reads, store: options.store, body, prefix };
    const result: ApiReply = await handler.handle(apiRequest);
    const headers = versionHeaders(request, true);
    if (result.location !== undefined) headers.location = `${request.protocol}://${request.headers.host ?? 'localhost'}${prefix}${result.location}`;
    if (atLeast(version, v('1.15')) && result.cacheHeaders !== false) {
      headers['last-modified'] = (result.lastModified ?? new Date()).toUTCString();
      headers['cache-control'] = 'no-cache';
    }
    return send(reply, result.status, result.body, headers);
  }

  if (options.warmCandidateIndex) {
    warmOnListen(
      app,
      async () => {
        const started = performance.now();
        const providers = await buildCandidateIndex(reads);
        return { providers, ms: Math.round(performance.now() - started) };
      },
      { done: 'allocation candidates index built', failed: 'allocation candidates index not built at start (the first GET /allocation_candidates builds it)', tell: options.onCandidateIndexBuilt },
    );
  }

  return app;
}
