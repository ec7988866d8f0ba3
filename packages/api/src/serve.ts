import { ErtError } from '@ert/plugin-api';
import type { FastifyInstance } from 'fastify';
import { createApi, normalizePrefix, type ApiOptions } from './app.js';
import { AUTH_MODES, isLoopback, type AuthMode } from './auth.js';

export const ServeErrorCodes = {
  AUTH_REQUIRED: 'ERT_API_AUTH_REQUIRED',
  BAD_AUTH: 'ERT_API_BAD_AUTH',
  TOKEN_FILE_REQUIRED: 'ERT_API_TOKEN_FILE_REQUIRED',
} as const;

/** `ert serve` refused to start (an auth mode missing or unknown). */
export class ServeError extends ErtError<(typeof ServeErrorCodes)[keyof typeof ServeErrorCodes]> {}

/** `createApi`'s options, and where to listen; `auth` is a mode asked for (`--auth`, `ERT_API_AUTH`), required unless `host` is a loopback address. */
export interface ServeOptions extends Omit<ApiOptions, 'auth'> {
  host: string;
  port: number;
  auth?: string;
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
  const { host: _host, port: _port, auth: _auth, ...api } = options;
  const app = await createApi({ ...api, prefix, auth });
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return { app, url: `http://${host}:${port}`, prefix, auth, close: () => app.close() };
}
