import { createHash } from 'node:crypto';
import { ErtError } from '@ert/plugin-api';

/**
 * Who is asking (docs/api.md, Auth modes). No credentials: 401 (except the root document).
 *
 * - `noauth2` is Placement's development mode (PLACEMENT-API.md §1.7): the `X-Auth-Token` is
 *   `<user>[:<project>]`; the user `admin` has the role `admin`; `X-Roles` replaces the
 *   roles; `X-Project-Id` takes precedence over the token's project;
 *   `OpenStack-System-Scope: all` makes the request system-scoped.
 * - `token-file`: the `X-Auth-Token` is looked up in a file of tokens (token -> user,
 *   project, roles, system_scope); an unknown token is 401; the identity headers are ignored.
 * - `trusted-headers`: the identity is what an auth proxy in front set, as keystonemiddleware
 *   does: `X-User-Id` (none: 401), `X-Project-Id`, `X-Roles`, `OpenStack-System-Scope`.
 */

export const AUTH_MODES = ['noauth2', 'token-file', 'trusted-headers'] as const;
export type AuthMode = (typeof AUTH_MODES)[number];

export interface Credentials {
  userId: string;
  /** Undefined for a system-scoped request. */
  projectId: string | undefined;
  roles: string[];
  /** `all` when `OpenStack-System-Scope: all` was sent. */
  systemScope: string | undefined;
}

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** Credentials of a request in noauth2 mode, or undefined when it carries no token (401). */
export function noauth2Credentials(headers: Headers): Credentials | undefined {
  const token = header(headers, 'x-auth-token');
  if (token === undefined) return undefined;
  const sep = token.indexOf(':');
  const userId = sep < 0 ? token : token.slice(0, sep);
  const tokenProject = (sep < 0 ? '' : token.slice(sep + 1)) || userId;
  const rolesHeader = header(headers, 'x-roles');
  const roles = rolesHeader !== undefined ? rolesHeader.split(',') : userId === 'admin' ? ['admin'] : [];
  const systemScope = header(headers, 'openstack-system-scope') || undefined;
  const projectId = header(headers, 'x-project-id') ?? (systemScope ? undefined : tokenProject);
  return { userId, projectId, roles: roles.map((r) => r.trim()).filter((r) => r !== ''), systemScope };
}

/** `X-Roles: a, b` as a list (trimmed, empty ones dropped). */
function roleList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((r) => r.trim())
    .filter((r) => r !== '');
}

/**
 * Credentials set by a trusted auth proxy (keystonemiddleware's headers), or undefined when
 * there is no `X-User-Id` (401). Only safe when the proxy is the sole way to reach ert and
 * replaces these headers on every request.
 */
export function trustedHeaderCredentials(headers: Headers): Credentials | undefined {
  const userId = header(headers, 'x-user-id')?.trim();
  if (!userId) return undefined;
  const systemScope = header(headers, 'openstack-system-scope')?.trim() || undefined;
  const projectId = header(headers, 'x-project-id')?.trim() || undefined;
  return { userId, projectId, roles: roleList(header(headers, 'x-roles')), systemScope };
}

export const AuthErrorCodes = {
  BAD_TOKEN_FILE: 'ERT_API_BAD_TOKEN_FILE',
} as const;

/** A token file that cannot be used (missing, unparseable, an entry without a user, ...). */
export class AuthConfigError extends ErtError<(typeof AuthErrorCodes)[keyof typeof AuthErrorCodes]> {}

/** One entry of a token file. */
export interface TokenEntry {
  user: string;
  project?: string;
  roles?: string[];
  /** `all` for a system-scoped token. */
  system_scope?: string;
}

const sha256 = (token: string): string => createHash('sha256').update(token).digest('hex');

/** A token as messages show it: its first characters only (tokens are secrets). */
const redact = (token: string): string => `${token.slice(0, 4)}…`;

/**
 * The tokens of a token file's parsed content (YAML or JSON: a mapping of token to
 * `{ user, project?, roles?, system_scope? }`), checked: `source` (the file's path) and the
 * entry are named in every refusal. Kept by their SHA-256 only.
 */
export function tokensFromFile(content: unknown, source: string): Map<string, Credentials> {
  const bad = (message: string, details: Record<string, unknown> = {}): AuthConfigError =>
    new AuthConfigError(AuthErrorCodes.BAD_TOKEN_FILE, `token file ${source}: ${message}`, { file: source, ...details });
  if (content === null || typeof content !== 'object' || Array.isArray(content)) throw bad('expected a mapping of tokens to { user, project, roles, system_scope }');
  const tokens = new Map<string, Credentials>();
  for (const [token, raw] of Object.entries(content as Record<string, unknown>)) {
    const where = `token "${redact(token)}"`;
    if (token.trim() === '' || token !== token.trim()) throw bad(`${where}: a token must be non-empty, without surrounding blanks`);
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw bad(`${where}: expected { user, project, roles, system_scope }`, { key: 'token' });
    const entry = raw as Record<string, unknown>;
    const unknown = Object.keys(entry).filter((k) => !['user', 'project', 'roles', 'system_scope'].includes(k));
    if (unknown.length > 0) throw bad(`${where}: unknown key "${unknown[0]}" (known: user, project, roles, system_scope)`, { key: unknown[0] });
    if (typeof entry.user !== 'string' || entry.user.trim() === '') throw bad(`${where}: "user" must be a non-empty string`, { key: 'user' });
    if (entry.project !== undefined && (typeof entry.project !== 'string' || entry.project.trim() === '')) throw bad(`${where}: "project" must be a non-empty string`, { key: 'project' });
    if (entry.roles !== undefined && (!Array.isArray(entry.roles) || !entry.roles.every((r) => typeof r === 'string' && r.trim() !== ''))) {
      throw bad(`${where}: "roles" must be a list of role names`, { key: 'roles' });
    }
    if (entry.system_scope !== undefined && entry.system_scope !== 'all') throw bad(`${where}: "system_scope" must be "all" when given`, { key: 'system_scope' });
    if (entry.project === undefined && entry.system_scope === undefined) throw bad(`${where}: give "project" (a project-scoped token) or "system_scope: all"`, { key: 'project' });
    tokens.set(sha256(token), {
      userId: entry.user,
      projectId: entry.system_scope === 'all' ? undefined : (entry.project as string),
      roles: ((entry.roles as string[] | undefined) ?? []).map((r) => r.trim()),
      systemScope: entry.system_scope as string | undefined,
    });
  }
  return tokens;
}

/** The authenticator of a token file's tokens: the `X-Auth-Token`'s entry, or undefined (401). */
export function tokenFileAuthenticator(tokens: ReadonlyMap<string, Credentials>): Authenticator {
  return (headers) => {
    const token = header(headers, 'x-auth-token');
    if (token === undefined || token === '') return undefined;
    const found = tokens.get(sha256(token));
    return found && { ...found, roles: [...found.roles] };
  };
}

/** Credentials of a request, or undefined for 401. */
export type Authenticator = (headers: Headers) => Credentials | undefined;

/** The authenticator of a mode that needs nothing else (token-file needs its tokens: `tokenFileAuthenticator`). */
export function authenticator(mode: AuthMode): Authenticator {
  switch (mode) {
    case 'noauth2':
      return noauth2Credentials;
    case 'trusted-headers':
      return trustedHeaderCredentials;
    case 'token-file':
      throw new Error('the token-file mode needs its tokens: tokenFileAuthenticator(tokensFromFile(...))');
  }
}

/** Whether `host` is a loopback address (where noauth2 may be the default). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === '::ffff:127.0.0.1';
}
