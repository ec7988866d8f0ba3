import { isStoreError } from '@ert/store';
import { atLeast, v, type Version } from './microversion.js';

/**
 * Errors in Placement's shape (PLACEMENT-API.md §1.4): `{"errors":[{status, title, detail,
 * code (from 1.23), request_id}]}`, where `detail` is webob's generic text for the status, a
 * blank line, then the specific message.
 */

export const UNDEFINED_CODE = 'placement.undefined_code';

/** HTTP reason phrases (webob's titles). */
export const TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  409: 'Conflict',
  413: 'Request Entity Too Large',
  415: 'Unsupported Media Type',
  500: 'Internal Server Error',
};

/** webob's explanation per status (the first part of `detail`). */
const EXPLANATIONS: Readonly<Record<number, string>> = {
  400: 'The server could not comply with the request since it is either malformed or otherwise incorrect.',
  403: 'Access was denied to this resource.',
  404: 'The resource could not be found.',
  409: 'There was a conflict when trying to complete your request.',
  413: 'The body of your request was too large for this server.',
  415: 'The request media type is not supported by this server.',
  500: 'The server has either erred or is incapable of performing the requested operation.',
};

/**
 * An error the API answers with. `message` is the specific part (what clients match on);
 * `code` a Placement error code (default `placement.undefined_code`, shown from 1.23).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string = UNDEFINED_CODE,
    /** Extra headers (405's `allow`). */
    readonly headers: Record<string, string> = {},
    /**
     * `vary: false` for the errors Placement lets escape its handlers (to its dispatcher or
     * microversion middleware), whose responses lack `vary`.
     */
    readonly options: { vary?: boolean } = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const badRequest = (message: string, code?: string): ApiError => new ApiError(400, message, code);
export const notFound = (message = ''): ApiError => new ApiError(404, message);

/** webob's `detail`: explanation, blank line, message, as Placement's formatter joins them. */
export function detailOf(status: number, message: string, method?: string, accept?: string): string {
  // A bare 405 (message ' ': a version_handler's `status_code=405`) has no explanation after the blank line.
  if (status === 405) return `The method ${method ?? ''} is not allowed for this resource. \n\n ${message === ' ' ? '' : 'The method specified is not allowed for this resource.'}`;
  if (status === 415) {
    const type = /^The media type (.*) is not supported/.exec(message)?.[1] ?? '';
    return `The request media type ${type} is not supported by this server. \n\n ${message}`;
  }
  if (status === 406) return `The resource could not be generated that was acceptable to your browser (content of type ${accept ?? 'application/json'}. \n\n ${message}`;
  const explanation = EXPLANATIONS[status] ?? TITLES[status] ?? 'Error';
  return `${explanation}\n\n ${message}  `;
}

export interface ErrorBodyOptions {
  status: number;
  message: string;
  requestId: string;
  /** The version in effect; undefined when negotiation failed (no `code` then). */
  version?: Version;
  code?: string;
  method?: string;
  accept?: string;
  extra?: Record<string, string>;
}

export function errorBody(o: ErrorBodyOptions): { errors: Array<Record<string, unknown>> } {
  const error: Record<string, unknown> = {
    status: o.status,
    title: TITLES[o.status] ?? 'Error',
    detail: detailOf(o.status, o.message, o.method, o.accept),
  };
  if (o.version !== undefined && atLeast(o.version, v('1.23'))) error.code = o.code ?? UNDEFINED_CODE;
  error.request_id = o.requestId;
  Object.assign(error, o.extra ?? {});
  return { errors: [error] };
}

/** webob's own 401 body (the noauth2 middleware answers before Placement's formatter). */
export function unauthorizedBody(): Record<string, string> {
  return {
    message:
      'This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.<br /><br />\n\n\n',
    code: '401 Unauthorized',
    title: 'Unauthorized',
  };
}

/** Placement's error codes that clients match on. */
export const CODES = {
  concurrentUpdate: 'placement.concurrent_update',
  duplicateName: 'placement.duplicate_name',
  inventoryInUse: 'placement.inventory.inuse',
  providerInUse: 'placement.resource_provider.inuse',
  cannotDeleteParent: 'placement.resource_provider.cannot_delete_parent',
} as const;

/**
 * A store error a handler did not turn into its own message, as Placement answers the same
 * condition: generation conflicts and lost races 409 `placement.concurrent_update`, capacity
 * 409, an inventory in use 409 `placement.inventory.inuse`, a provider in use 409, not found
 * 404, invalid input 400. Anything else is not the store's: undefined.
 */
export function apiErrorOfStore(err: unknown): ApiError | undefined {
  if (!isStoreError(err)) return undefined;
  switch (err.code) {
    case 'ERT_STORE_PROVIDER_GENERATION_CONFLICT':
    case 'ERT_STORE_CONSUMER_GENERATION_CONFLICT':
    case 'ERT_STORE_CONFLICT':
      return new ApiError(409, err.message, CODES.concurrentUpdate);
    case 'ERT_STORE_CAPACITY_EXCEEDED':
    case 'ERT_STORE_ASSIGNMENT_TAKEN':
      return new ApiError(409, err.message);
    case 'ERT_STORE_INVENTORY_IN_USE':
      return new ApiError(409, err.message, CODES.inventoryInUse);
    case 'ERT_STORE_PROVIDER_IN_USE':
      return new ApiError(409, err.message, CODES.providerInUse);
    case 'ERT_STORE_NOT_FOUND':
      return new ApiError(404, err.message);
    case 'ERT_STORE_INVALID':
      return new ApiError(400, err.message);
    default:
      return undefined;
  }
}
