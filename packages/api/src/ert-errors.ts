/**
 * The errors of ert's own APIs (the scheduler API and the agent API; Placement's are
 * errors.ts): `{"error": {"code", "message", "details"}}` with a stable `ERT_*` code and the
 * HTTP status of that code.
 */
import type { ErrorObject } from 'ajv';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { isErtError, messageOf } from '@ert/plugin-api';

/** Stable codes of the scheduler API's own errors (the scheduler's and the store's keep theirs). */
export const SchedulerApiErrorCodes = {
  UNAUTHORIZED: 'ERT_API_UNAUTHORIZED',
  FORBIDDEN: 'ERT_API_FORBIDDEN',
  NOT_FOUND: 'ERT_API_NOT_FOUND',
  BAD_REQUEST: 'ERT_API_BAD_REQUEST',
  /** A body over the server's limit (413), refused as it is read, before authentication. */
  BODY_TOO_LARGE: 'ERT_API_BODY_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'ERT_API_UNSUPPORTED_MEDIA_TYPE',
  UNKNOWN_FLAVOR: 'ERT_API_UNKNOWN_FLAVOR',
  UNKNOWN_INSTANCE: 'ERT_API_UNKNOWN_INSTANCE',
  UNKNOWN_HOST: 'ERT_API_UNKNOWN_HOST',
  INSTANCE_NOT_RELEASABLE: 'ERT_API_INSTANCE_NOT_RELEASABLE',
  INTERNAL: 'ERT_API_INTERNAL',
  /** The agent API did not start a write whose client had already closed the connection (499; nobody reads the answer). */
  CLIENT_GONE: 'ERT_API_CLIENT_GONE',
} as const;

/**
 * The scheduler's code for an instance uuid already in use (`@ert/scheduler`'s
 * SchedulerErrorCode.INSTANCE_EXISTS), which the scheduler API also answers itself when the
 * store holds a record of the uuid (409).
 */
export const INSTANCE_EXISTS = 'ERT_SCHEDULER_INSTANCE_EXISTS';

/** An error answered as `{"error": {"code", "message", "details"}}`. */
export class SchedulerApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'SchedulerApiError';
  }
}

/** Answers `err` as `{"error": {"code", "message", "details"}}` with its status. */
export function sendErtError(reply: FastifyReply, err: SchedulerApiError): FastifyReply {
  return reply
    .code(err.status)
    .header('content-type', 'application/json')
    .send(JSON.stringify({ error: { code: err.code, message: err.message, details: err.details } }));
}

/**
 * The error answers of ert's own APIs (the scheduler API, the agent API), on `app`'s context:
 * an unknown route is 404 `ERT_API_NOT_FOUND`; an ErtError answers with the status of its
 * code (`statusOfCode`) and its code and details; a body over the limit is 413
 * `ERT_API_BODY_TOO_LARGE` and Fastify's other 4xx (bad JSON) are `ERT_API_BAD_REQUEST` with
 * their status; anything else is logged and 500 `ERT_API_INTERNAL`. `what` names the API in
 * the logs.
 */
export function useErtErrors(app: FastifyInstance, what: string): void {
  app.setNotFoundHandler(async (request, reply) =>
    sendErtError(reply, new SchedulerApiError(404, SchedulerApiErrorCodes.NOT_FOUND, `no route ${request.method} ${request.url.split('?')[0]}`, { method: request.method })),
  );
  app.setErrorHandler(async (err, request, reply) => {
    if (err instanceof SchedulerApiError) return sendErtError(reply, err);
    if (isErtError(err)) {
      const status = statusOfCode(err.code);
      if (status === 500) request.log.error({ err }, `${what} error`);
      return sendErtError(reply, new SchedulerApiError(status, err.code, err.message, { ...err.details }));
    }
    const status = (err as { statusCode?: number }).statusCode;
    if (status === 413) {
      const limit = request.routeOptions.bodyLimit;
      return sendErtError(reply, new SchedulerApiError(413, SchedulerApiErrorCodes.BODY_TOO_LARGE, `request body is too large: over ${limit} bytes, the limit of the ${what}`, { limit }));
    }
    if (status !== undefined && status >= 400 && status < 500) return sendErtError(reply, new SchedulerApiError(status, SchedulerApiErrorCodes.BAD_REQUEST, messageOf(err)));
    request.log.error({ err }, 'unexpected error');
    return sendErtError(reply, new SchedulerApiError(500, SchedulerApiErrorCodes.INTERNAL, messageOf(err)));
  });
}

/** The HTTP status of an ErtError's code (docs/api.md, "Scheduler API", Errors). */
export function statusOfCode(code: string): number {
  if (code === 'ERT_SCHEDULER_NO_VALID_HOST' || code === INSTANCE_EXISTS || /^ERT_STORE_.*(CONFLICT|CAPACITY_EXCEEDED|ASSIGNMENT_TAKEN|IN_USE)$/.test(code)) return 409;
  if (code === 'ERT_SCHEDULER_INVALID_REQUEST' || code === 'ERT_STORE_INVALID' || code.startsWith('ERT_SPEC_') || code.startsWith('ERT_PLACEMENT_')) return 400;
  if (code === 'ERT_SCHEDULER_CLOSED' || code === 'ERT_STORE_UNAVAILABLE' || code === 'ERT_STORE_LOCKED' || code.startsWith('ERT_STORE_SCHEMA_')) return 503;
  if (code === 'ERT_STORE_NOT_FOUND') return 404;
  return 500;
}

/**
 * Ajv's error as one line naming the field (`/count must be >= 1`), of a body or of a query
 * (`what`: its parameters are named without the slash, `limit must ...`; an unknown one is
 * `unknown parameter "foo"`). Ajv stops at the first error, except in a `oneOf`: there it
 * gives each branch's errors, then the `oneOf`'s own, which names nothing. The deepest field
 * is the one at fault (`/flavor/memory_mb must be <= 2147483647`, not `/flavor must be
 * string`); at one depth an error of a branch the value's type matched wins over the other
 * branches' type errors, and when all are type errors they are said together (`/placement
 * must be string or object`).
 */
export function schemaProblem(errors: ErrorObject[] | null | undefined, what: 'body' | 'query' = 'body'): string {
  const all = errors ?? [];
  const own = all.filter((e) => e.keyword !== 'oneOf' && e.keyword !== 'anyOf');
  const depth = (e: ErrorObject) => (e.instancePath === '' ? 0 : e.instancePath.split('/').length);
  const deepest = Math.max(...own.map(depth));
  const candidates = own.filter((e) => depth(e) === deepest);
  const e = candidates.find((c) => c.keyword !== 'type') ?? candidates[0] ?? all[0];
  if (!e) return 'invalid';
  const where = e.instancePath === '' ? what : what === 'query' ? `parameter ${e.instancePath.slice(1)}` : e.instancePath;
  if (e.keyword === 'additionalProperties') {
    const name = (e.params as { additionalProperty: string }).additionalProperty;
    return e.instancePath === '' && what === 'query' ? `unknown parameter "${name}"` : `${where}: unknown property "${name}"`;
  }
  if (e.keyword === 'type' && candidates.length > 1) return `${where} must be ${candidates.map((c) => (c.params as { type: string }).type).join(' or ')}`;
  return `${where} ${e.message ?? 'is invalid'}`;
}
