/**
 * The web view's calls to `ert serve`: the scheduler API (/scheduler/v1) and the Placement
 * API (at its prefix), with the same credentials as any client (`X-Auth-Token`). The server
 * says in a `<meta name="ert-ui">` of the page where Placement is mounted and, only when it
 * serves noauth2 on a loopback address, the token to open with (`admin`): then the view
 * opens directly; otherwise the user's token is asked for and kept in sessionStorage.
 */

/** What `ert serve` writes into the page (packages/api/src/ui.ts). */
export interface ServerConfig {
  placementPrefix: string;
  /** Set only for noauth2 on loopback: the token the view uses without asking. */
  openToken?: string;
  /** `proxy` with `--auth trusted-headers`: the proxy in front says who the user is; no token is asked for. */
  identity?: 'proxy';
}

export function serverConfig(): ServerConfig {
  const meta = document.querySelector('meta[name="ert-ui"]');
  try {
    const parsed = JSON.parse(meta?.getAttribute('content') ?? '{}') as Partial<ServerConfig>;
    return {
      placementPrefix: parsed.placementPrefix ?? '/placement',
      ...(parsed.openToken ? { openToken: parsed.openToken } : {}),
      ...(parsed.identity === 'proxy' ? { identity: 'proxy' as const } : {}),
    };
  } catch {
    return { placementPrefix: '/placement' };
  }
}

const TOKEN_KEY = 'ert-token';

export function storedToken(): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY) ?? serverConfig().openToken;
}

export function storeToken(token: string | undefined): void {
  if (token === undefined) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** The server refused the credentials (401): the view shows the login prompt. */
export class AuthRequired extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AuthRequired';
  }
}

/** Any other refusal, with the API's error code and details when it sent them. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'ApiFailure';
  }
}

/** Listeners told when a call is refused with 401 (the App shows the login prompt). */
export const authListeners = new Set<(message: string) => void>();
export function onAuthRequired(listener: (message: string) => void): () => void {
  authListeners.add(listener);
  return () => authListeners.delete(listener);
}

/** Why a 401 came: no token, a token refused, or (trusted headers) no identity from the proxy. */
export function refusedMessage(token: string | undefined): string {
  if (serverConfig().identity === 'proxy') return 'the server takes who you are from the proxy in front of it (trusted headers), and this request reached it without an identity';
  return token === undefined ? 'this server needs a token' : 'the server refused the token (wrong or expired)';
}

async function call<T>(path: string, init: { method?: string; body?: unknown; placementVersion?: string } = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const token = storedToken();
  if (token !== undefined) headers['x-auth-token'] = token;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  if (init.placementVersion) headers['openstack-api-version'] = `placement ${init.placementVersion}`;
  const res = await fetch(path, { method: init.method ?? 'GET', headers, ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}) });
  const text = await res.text();
  let body: any;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (res.status === 401) {
    const message = refusedMessage(token);
    for (const l of authListeners) l(message);
    throw new AuthRequired(message);
  }
  if (!res.ok) {
    // The scheduler API's {"error": {code, message, details}}, or Placement's {"errors": [{title, detail, code}]}.
    const e = body?.error;
    const p = body?.errors?.[0];
    throw new ApiFailure(res.status, e?.code ?? p?.code, e?.message ?? p?.detail ?? `${res.status} ${res.statusText}`, e?.details ?? {});
  }
  return body as T;
}

export interface HostResources {
  capacity: number;
  used: number;
  free: number;
}

export interface HostView {
  name: string;
  generation: number;
  status: 'up' | 'stale' | 'disabled';
  status_reason?: string;
  last_update: string;
  providers: number;
  instances: number;
  resources: Record<string, HostResources>;
}

export interface Zone {
  name: string;
  aggregates: string[];
  hosts: string[];
}

export interface FlavorView {
  name: string;
  vcpus: number;
  memory_mb: number;
  disk_gb: number;
  extra_specs: Record<string, string>;
}

export interface InstanceView {
  uuid: string;
  host: string;
  state: string;
  flavor: string;
  reason?: string;
  project_id: string;
  created_at: string;
}

export interface Explanation {
  flavor: string;
  hosts: number;
  passed: number;
  filters: Array<{ filter: string; stage?: string; query?: string; removed: number }>;
  rejected: Array<{ host: string; filter: string; reason: string }>;
  weighed: Array<{ host: string; weight: number }>;
}

export interface ProviderView {
  uuid: string;
  name: string;
  generation: number;
  parent_provider_uuid: string | null;
  root_provider_uuid: string;
}

export interface InventoryView {
  total: number;
  reserved: number;
  min_unit: number;
  max_unit: number;
  step_size: number;
  allocation_ratio: number;
}

/** Placement-style allocations: provider uuid -> {"resources": {class: amount}}. */
export type Allocations = Record<string, { resources: Record<string, number> }>;

/** An instance record with what it holds (GET /instances/{uuid}, GET /hosts/{name}). */
export interface InstanceDetail extends InstanceView {
  user_id: string;
  updated_at: string;
  allocations: Allocations;
  assignments: Record<string, unknown>;
  cpus?: number[];
  units?: string[];
  pools?: Record<string, { amount: number; capacity: number }>;
}

/** A provider of a host's tree as GET /hosts/{name} gives it. */
export interface ProviderDetail extends ProviderView {
  inventories: Record<string, InventoryView & { capacity: number; used: number }>;
  traits: string[];
  aggregates: string[];
}

/** GET /scheduler/v1/hosts/{name}. */
export interface HostDetail {
  host: HostView & { machine?: string; stats: Array<{ plugin: string; schema_version: number; updated_at: string; age_ms: number; stale: boolean }> };
  providers: ProviderDetail[];
  sharing_providers: ProviderDetail[];
  aggregate_metadata: Record<string, string>;
  stats: Array<{ plugin: string; schema_version: number; updated_at: string; age_ms: number; stale: boolean; data: unknown }>;
  instances: InstanceDetail[];
}

/** The request `POST /explain` takes: a configured flavor by name, or one given inline. */
export type FlavorRequest = string | { name: string; vcpus: number; memory_mb: number; disk_gb: number };

/** GET /scheduler/v1/host-facets: the hosts' traits (any provider of the tree) and aggregates (the root's), grouped. */
export interface HostFacets {
  traits: string[];
  aggregates: Array<{ uuid: string; name?: string; metadata: Record<string, string>; hosts: number }>;
  groups: Array<{ traits: number[]; aggregates: number[]; hosts: string[] }>;
}

/** One decision of GET /scheduler/v1/decisions. */
export interface Decision {
  id: number;
  at: string;
  outcome: 'placed' | 'no_valid_host' | 'error';
  request: { flavor?: string | { name: string; vcpus: number; memory_mb: number; disk_gb?: number }; placement?: unknown; count?: number; availability_zone?: string } & Record<string, unknown>;
  user_id: string;
  project_id?: string;
  duration_ms: number;
  hosts_considered?: number;
  hosts_passed?: number;
  instances?: Array<{ uuid: string; host: string; alternates: number; state: string }>;
  error?: { code: string; message: string; filters?: Array<{ filter: string; removed: number }>; attempts?: Array<{ host: string; error: string }> };
}

const S = '/scheduler/v1';
/** Placement microversion the view asks for (in_tree, parent_provider_uuid: 1.14). */
const PV = '1.14';

export const api = {
  /** Without the stats (the fleet and the table do not show them: 60% of the answer). */
  hosts: () => call<{ hosts: HostView[] }>(`${S}/hosts?stats=false`).then((r) => r.hosts),
  facets: () => call<HostFacets>(`${S}/host-facets`),
  decisions: () => call<{ process: number; kept: number; recorded: number; decisions: Decision[] }>(`${S}/decisions`),
  zones: () => call<{ zones: Zone[]; hosts_without_zone: string[] }>(`${S}/availability-zones`),
  flavors: () => call<{ flavors: FlavorView[] }>(`${S}/flavors`).then((r) => r.flavors),
  host: (name: string) => call<HostDetail>(`${S}/hosts/${encodeURIComponent(name)}`),
  instance: (uuid: string) => call<{ instance: InstanceDetail }>(`${S}/instances/${encodeURIComponent(uuid)}`).then((r) => r.instance),
  instances: (host: string) => call<{ instances: InstanceView[] }>(`${S}/instances?host=${encodeURIComponent(host)}`).then((r) => r.instances),
  explain: (flavor: FlavorRequest, availabilityZone?: string) =>
    call<Explanation>(`${S}/explain`, { method: 'POST', body: { flavor, ...(availabilityZone ? { availability_zone: availabilityZone } : {}) } }),
  providersNamed: (name: string) =>
    call<{ resource_providers: ProviderView[] }>(`${serverConfig().placementPrefix}/resource_providers?name=${encodeURIComponent(name)}`, { placementVersion: PV }).then((r) => r.resource_providers),
  tree: (root: string) =>
    call<{ resource_providers: ProviderView[] }>(`${serverConfig().placementPrefix}/resource_providers?in_tree=${encodeURIComponent(root)}`, { placementVersion: PV }).then((r) => r.resource_providers),
  inventories: (uuid: string) =>
    call<{ inventories: Record<string, InventoryView> }>(`${serverConfig().placementPrefix}/resource_providers/${uuid}/inventories`, { placementVersion: PV }).then((r) => r.inventories),
  usages: (uuid: string) =>
    call<{ usages: Record<string, number> }>(`${serverConfig().placementPrefix}/resource_providers/${uuid}/usages`, { placementVersion: PV }).then((r) => r.usages),
};
