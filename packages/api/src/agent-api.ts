/**
 * The agent API of `ert serve` (docs/api.md, "Agent API"): what a host's tracker started with
 * `ert host run --server URL` calls instead of opening the store, so that compute hosts hold
 * no database credentials (as nova-compute reports to Placement).
 *
 * `POST /agent/v1/store/{method}` with `{"args": [...]}` runs one of the store's
 * `HOST_STORE_METHODS` on the server's store, with those arguments, and answers
 * `200 {"result": ...}` (no `result` when the method returns nothing). Each call is the store
 * call: one transaction, the same checks (generations, capacity, exclusive units), the same
 * typed errors, answered as `{"error": {"code", "message", "details"}}` with the status of the
 * code (409 for conflicts and refusals, 404 not found, 400 invalid, 503 unavailable), which the
 * client (agent-client.ts) turns back into the StoreError the tracker expects. `GET
 * /agent/v1/` lists the methods.
 *
 * Same authentication as the Placement API; the policy's `system_admin_api` rule decides (the
 * role nova-compute's service user has in Placement). A JSON `null` argument stands for an
 * omitted (undefined) one.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { messageOf } from '@ert/plugin-api';
import { HOST_STORE_KINDS, HOST_STORE_METHODS, type HostStoreMethod, type Store } from '@ert/store';
import type { Authenticator } from './auth.js';
import type { Policy } from './policy.js';
import { SchedulerApiError, SchedulerApiErrorCodes, schemaProblem, useErtErrors } from './ert-errors.js';

/** Where `ert serve` mounts the agent API. */
export const AGENT_PREFIX = '/agent/v1';

/** The policy rule an agent's credentials must pass. */
export const AGENT_RULE = 'system_admin_api';

const STRING = { type: 'string' } as const;
const OBJECT = { type: 'object' } as const;
const OPTIONAL_OBJECT = { type: ['object', 'null'] } as const;
const GENERATION = { type: ['integer', 'null'], minimum: 0 } as const;
const STRINGS = { type: 'array', items: STRING } as const;

/** The arguments each method takes, positionally (the store validates their contents). */
const ARGUMENTS: Record<HostStoreMethod, readonly object[]> = {
  checkSchema: [],
  ensureResourceClasses: [STRINGS],
  createProvider: [OBJECT],
  getProvider: [STRING],
  getProviderByName: [STRING],
  listProviders: [OPTIONAL_OBJECT],
  deleteProvider: [STRING],
  getInventories: [STRING, OPTIONAL_OBJECT],
  setInventories: [STRING, GENERATION, OBJECT, OPTIONAL_OBJECT],
  getUsages: [STRING],
  getTraits: [STRING, OPTIONAL_OBJECT],
  setTraits: [STRING, GENERATION, STRINGS, OPTIONAL_OBJECT],
  getAggregates: [STRING, OPTIONAL_OBJECT],
  setAggregates: [STRING, GENERATION, STRINGS, OPTIONAL_OBJECT],
  writeAllocations: [{ type: 'array', items: OBJECT }],
  getAllocations: [STRING],
  upsertHost: [OBJECT],
  getHost: [STRING],
  markStaleHosts: [{ type: 'number' }],
  writeStats: [STRING, STRING, { type: 'integer' }, {}],
  readStats: [STRING],
  deleteStats: [STRING, STRING],
  getInstance: [STRING],
  listInstances: [OPTIONAL_OBJECT],
  loadHosts: [{ type: ['array', 'null'], items: STRING }],
};

/** How many of a method's arguments may be left out (the trailing optional ones). */
function required(schemas: readonly object[]): number {
  let n = schemas.length;
  while (n > 0 && Array.isArray((schemas[n - 1] as { type?: unknown }).type) && ((schemas[n - 1] as { type: string[] }).type.includes('null'))) n -= 1;
  return n;
}

export interface AgentApiOptions {
  store: Pick<Store, HostStoreMethod>;
  authenticate: Authenticator;
  policy: Policy;
}

/** The agent API as a Fastify plugin, to register with `{ prefix: AGENT_PREFIX }`. */
export function agentApi(options: AgentApiOptions): (app: FastifyInstance) => Promise<void> {
  const ajv = new Ajv({ strict: false, allErrors: false });
  const validators = new Map<string, ValidateFunction>(
    HOST_STORE_METHODS.map((method) => {
      const items = ARGUMENTS[method];
      const args = items.length === 0 ? { type: 'array', maxItems: 0 } : { type: 'array', items, minItems: required(items), maxItems: items.length };
      return [method, ajv.compile({ type: 'object', additionalProperties: false, required: ['args'], properties: { args } })];
    }),
  );
  return async (app) => {
    useErtErrors(app, 'agent API');
    app.addHook('onRequest', async (request) => {
      const credentials = options.authenticate(request.headers);
      if (!credentials) throw new SchedulerApiError(401, SchedulerApiErrorCodes.UNAUTHORIZED, 'authentication required: send X-Auth-Token (the same credentials as the Placement API)');
      request.credentials = credentials;
      if (!options.policy.allowed(AGENT_RULE, credentials)) {
        throw new SchedulerApiError(403, SchedulerApiErrorCodes.FORBIDDEN, `policy does not allow ${AGENT_RULE} (${request.method} ${request.url.split('?')[0]})`, { rule: AGENT_RULE });
      }
    });

    app.get('/', async (_request, reply) => reply.header('content-type', 'application/json').send(JSON.stringify({ methods: HOST_STORE_METHODS })));

    app.post('/store/:method', async (request, reply) => {
      const { method } = request.params as { method: string };
      const validate = validators.get(method);
      if (!validate) throw new SchedulerApiError(404, SchedulerApiErrorCodes.NOT_FOUND, `no store method ${method} in the agent API (it has ${HOST_STORE_METHODS.join(', ')})`, { method });
      const contentType = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (contentType !== 'application/json') throw new SchedulerApiError(415, SchedulerApiErrorCodes.UNSUPPORTED_MEDIA_TYPE, `send application/json, not ${contentType || 'no content type'}`);
      let body: unknown;
      try {
        body = JSON.parse(typeof request.body === 'string' ? request.body : '');
      } catch (err) {
        throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `malformed JSON: ${messageOf(err)}`);
      }
      if (!validate(body)) throw new SchedulerApiError(400, SchedulerApiErrorCodes.BAD_REQUEST, `invalid arguments of ${method}: ${schemaProblem(validate.errors)}`, { method });
      const args = (body as { args: unknown[] }).args.map((arg) => (arg === null ? undefined : arg));
      // A write whose client has gone (its answer came too late for it) is not started: the
      // client reads the store back to learn whether it was made (the tracker's
      // `refusalUnlessWritten`), and a write started after that read would land unseen.
      if (HOST_STORE_KINDS[method as HostStoreMethod] === 'write' && request.raw.socket.destroyed) {
        // Logged here: the answer reaches nobody, so Fastify's "request completed" never comes.
        request.log.warn({ method, code: SchedulerApiErrorCodes.CLIENT_GONE }, `agent API: ${method} not started: the client closed the connection first (its tracker reads the store back)`);
        throw new SchedulerApiError(499, SchedulerApiErrorCodes.CLIENT_GONE, `${method} not started: the client closed the connection first`, { method });
      }
      const call = options.store[method as HostStoreMethod] as (...args: unknown[]) => Promise<unknown>;
      const result = await call.apply(options.store, args);
      return reply.header('content-type', 'application/json').send(JSON.stringify(result === undefined ? {} : { result }));
    });
  };
}
