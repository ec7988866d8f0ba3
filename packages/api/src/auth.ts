/**
 * Who is asking. `noauth2` is Placement's development mode (PLACEMENT-API.md §1.7): the
 * `X-Auth-Token` is `<user>[:<project>]`; the user `admin` has the role `admin`;
 * `X-Roles` replaces the roles; `X-Project-Id` takes precedence over the token's project;
 * `OpenStack-System-Scope: all` makes the request system-scoped. No token: 401 (except the
 * root document).
 */

export const AUTH_MODES = ['noauth2'] as const;
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

/** The authenticator of a mode: credentials, or undefined for 401. */
export function authenticator(mode: AuthMode): (headers: Headers) => Credentials | undefined {
  switch (mode) {
    case 'noauth2':
      return noauth2Credentials;
  }
}

/** Whether `host` is a loopback address (where noauth2 may be the default). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === '::ffff:127.0.0.1';
}
