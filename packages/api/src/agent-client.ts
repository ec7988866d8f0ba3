/**
 * The host agent's side of the agent API (agent-api.ts): a `HostStore` whose every call is a
 * request to `ert serve`, so that `ert host run --server URL` tracks its host with no database
 * credentials. Errors come back as they were raised on the server (a StoreError keeps its code
 * and details, so the tracker's conflict and retry handling is unchanged); a server that cannot
 * be reached, answers 502/503/504 without an ert error, or does not answer within `timeoutMs`
 * is ERT_STORE_UNAVAILABLE, which the tracker retries with backoff.
 */
import { ErtError } from '@ert/plugin-api';
import { HOST_STORE_KINDS, HOST_STORE_METHODS, StoreError, type HostStore, type HostStoreMethod, type StoreErrorCode } from '@ert/store';
import { AGENT_PREFIX } from './agent-api.js';

export interface RemoteStoreOptions {
  /** The server's base URL (`http://controller:8778`); the agent API is at `<url>/agent/v1`. */
  url: string;
  /** Sent as `X-Auth-Token` (`ert host run --token-file`). */
  token?: string;
  /** How long one call may take before it counts as unavailable, ms (default 30 s). */
  timeoutMs?: number;
  /** Told after every call (as the store's `onTransaction`): feeds `ert_store_transaction_duration_seconds`. */
  onCall?: (call: { kind: 'read' | 'write'; operation: string; seconds: number; ok: boolean }) => void;
}

/** Errors of the agent client that are not the server's: ERT_AGENT_BAD_RESPONSE (a server that is not an ert agent API). */
export const AgentClientErrorCodes = { BAD_RESPONSE: 'ERT_AGENT_BAD_RESPONSE' } as const;

/** A `HostStore` over HTTP: `createTracker({ store: remoteStore({ url, token }) })`. `close` ends nothing on the server. */
export function remoteStore(options: RemoteStoreOptions): HostStore {
  const base = `${options.url.replace(/\/+$/, '')}${AGENT_PREFIX}/store/`;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json', ...(options.token !== undefined ? { 'x-auth-token': options.token } : {}) };

  async function call(method: HostStoreMethod, args: unknown[]): Promise<unknown> {
    // Trailing omitted arguments are left out; an omitted one in the middle travels as null.
    let n = args.length;
    while (n > 0 && args[n - 1] === undefined) n -= 1;
    const body = JSON.stringify({ args: args.slice(0, n).map((a) => (a === undefined ? null : a)) });
    const started = performance.now();
    let ok = false;
    try {
      const result = await request(method, body);
      ok = true;
      return result;
    } finally {
      options.onCall?.({ kind: HOST_STORE_KINDS[method], operation: `agent:${method}`, seconds: (performance.now() - started) / 1000, ok });
    }
  }

  async function request(method: HostStoreMethod, body: string): Promise<unknown> {
    const url = base + method;
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs) });
      text = await response.text();
    } catch (err) {
      const reason = err instanceof Error && err.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : causeOf(err);
      throw new StoreError('ERT_STORE_UNAVAILABLE', `the ert server ${options.url} cannot be reached (${method}): ${reason}`, { url: options.url, method });
    }
    let parsed: { result?: unknown; error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined;
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch {
      parsed = undefined;
    }
    if (response.ok && parsed !== undefined && typeof parsed === 'object' && parsed !== null) return parsed.result;
    const error = parsed?.error;
    if (error && typeof error.code === 'string' && typeof error.message === 'string') {
      const details = typeof error.details === 'object' && error.details !== null ? (error.details as Record<string, unknown>) : {};
      if (error.code.startsWith('ERT_STORE_')) throw new StoreError(error.code as StoreErrorCode, error.message, details);
      throw new ErtError(error.code, `the ert server ${options.url} refused ${method}: ${error.message}`, { ...details, status: response.status, url: options.url });
    }
    if (response.status === 502 || response.status === 503 || response.status === 504) {
      throw new StoreError('ERT_STORE_UNAVAILABLE', `the ert server ${options.url} is unavailable (${method}: HTTP ${response.status})`, { url: options.url, method, status: response.status });
    }
    throw new ErtError(AgentClientErrorCodes.BAD_RESPONSE, `${url} answered HTTP ${response.status} without an ert agent API answer (is ${options.url} an ert serve?): ${text.slice(0, 200)}`, { url, status: response.status });
  }

  const store: Record<string, unknown> = { close: async () => undefined };
  for (const method of HOST_STORE_METHODS) store[method] = (...args: unknown[]) => call(method, args);
  return store as unknown as HostStore;
}

/** The root cause of a failed fetch ("connect ECONNREFUSED 127.0.0.1:8778"), not undici's "fetch failed". */
function causeOf(err: unknown): string {
  let cause: unknown = err;
  while (cause instanceof Error && cause.cause !== undefined) cause = cause.cause;
  return cause instanceof Error ? cause.message : String(cause);
}
