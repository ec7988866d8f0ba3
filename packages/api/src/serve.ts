import { ErtError } from '@ert/plugin-api';
import type { Store } from '@ert/store';
import type { FastifyInstance } from 'fastify';
import { createApi, normalizePrefix } from './app.js';
import { AUTH_MODES, isLoopback, type Authenticator, type AuthMode } from './auth.js';
import type { Policy } from './policy.js';
import type { SchedulerApiOptions } from './scheduler-api.js';

export const ServeErrorCodes = {
  AUTH_REQUIRED: 'ERT_API_AUTH_REQUIRED',
  BAD_AUTH: 'ERT_API_BAD_AUTH',
  TOKEN_FILE_REQUIRED: 'ERT_API_TOKEN_FILE_REQUIRED',
} as const;

/** `ert serve` refused to start (an auth mode missing or unknown). */
export class ServeError extends ErtError<(typeof ServeErrorCodes)[keyof typeof ServeErrorCodes]> {}

export interface ServeOptions {
  store: Store;
  host: string;
  port: number;
  prefix?: string;
  /** The auth mode asked for explicitly (`--auth`, `ERT_API_AUTH`); required unless `host` is a loopback address. */
  auth?: string;
  /** The token-file mode's authenticator (`tokenFileAuthenticator(tokensFromFile(...))`): required in that mode. */
  authenticate?: Authenticator;
  /** The policy; default: Placement 8.0.0's legacy defaults. */
  policy?: Policy;
  /** `x-ert-worker: <pid>` on every response (one of several `--workers`). */
  workerHeader?: boolean;
  logger?: boolean | Record<string, unknown>;
  /** Called with the Fastify instance before the Placement routes (`ApiOptions.setup`): the operator's endpoints, ops.ts. */
  setup?: (app: FastifyInstance) => void;
  /** Serve the scheduler API at `/scheduler/v1` too (`ApiOptions.scheduler`). */
  scheduler?: SchedulerApiOptions;
}

export interface RunningServer {
  app: FastifyInstance;
  /** `http://host:port` as bound (the port the OS chose when 0 was asked). */
  url: string;
  prefix: string;
  auth: AuthMode;
  close(): Promise<void>;
}

/**
 * The auth mode to run with: the explicit one, else `noauth2` on a loopback address; bound
 * anywhere else without an explicit mode, refused (noauth2 would give anyone admin).
 */
export function resolveAuth(host: string, auth: string | undefined): AuthMode {
  if (auth !== undefined) {
    if (!(AUTH_MODES as readonly string[]).includes(auth)) {
      throw new ServeError(ServeErrorCodes.BAD_AUTH, `unknown auth mode "${auth}"; known: ${AUTH_MODES.join(', ')}`, { auth, known: [...AUTH_MODES] });
    }
    return auth as AuthMode;
  }
  if (isLoopback(host)) return 'noauth2';
  throw new ServeError(
    ServeErrorCodes.AUTH_REQUIRED,
    `refusing to serve on ${host} without an explicit auth mode: noauth2 (the default on loopback addresses) lets any caller be admin; ` +
      `pass --auth noauth2 (or set ERT_API_AUTH) to accept that, or bind to 127.0.0.1`,
    { host },
  );
}

/** Start the Placement API on `host:port`. */
export async function serve(options: ServeOptions): Promise<RunningServer> {
  const auth = resolveAuth(options.host, options.auth);
  if (auth === 'token-file' && options.authenticate === undefined) {
    throw new ServeError(ServeErrorCodes.TOKEN_FILE_REQUIRED, 'the token-file auth mode needs a token file (--token-file, or api.tokenFile in the config)', {});
  }
  const prefix = normalizePrefix(options.prefix);
  const app = await createApi({
    store: options.store,
    prefix,
    auth,
    ...(options.authenticate === undefined ? {} : { authenticate: options.authenticate }),
    ...(options.policy === undefined ? {} : { policy: options.policy }),
    ...(options.workerHeader ? { workerHeader: true } : {}),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(options.setup === undefined ? {} : { setup: options.setup }),
    ...(options.scheduler === undefined ? {} : { scheduler: options.scheduler }),
  });
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return { app, url: `http://${host}:${port}`, prefix, auth, close: () => app.close() };
}
