/**
 * @ert/api — the Placement-compatible HTTP API of `ert serve` (docs/api.md): a thin Fastify
 * layer over the store. Routes are data (`PLACEMENT_ROUTES`: path, Placement's methods,
 * handlers by microversion range); each handler validates, checks policy, reads the store
 * and serialises by microversion.
 */
export { createApi, normalizePrefix, PLACEMENT_ROUTES, type ApiOptions } from './app.js';
export { acceptsJson } from './accept.js';
export { canonicalUuid } from './routes/allocation-writes.js';
export { serve, resolveAuth, type ServeOptions, type RunningServer, ServeError, ServeErrorCodes } from './serve.js';
export {
  AUTH_MODES,
  isLoopback,
  noauth2Credentials,
  trustedHeaderCredentials,
  tokensFromFile,
  tokenFileAuthenticator,
  AuthConfigError,
  AuthErrorCodes,
  type Authenticator,
  type AuthMode,
  type Credentials,
  type TokenEntry,
} from './auth.js';
export { negotiate, MIN_VERSION, MAX_VERSION, type Version } from './microversion.js';
export { createMetrics, ErtMetrics, UNMATCHED_ROUTE, type MetricsOptions, type HookCallEvent, type TransactionEvent, type ClaimEvent, type ConfirmEvent, type DecisionEvent, type SchedulerHookCount } from './metrics.js';
export { EventLog, registerEventRoutes, resumePoint, serveEventSocket, type EventRouteOptions, type EventSocket, type Logged } from './event-stream.js';
export { instrumentRequests, registerOpsRoutes, startOpsServer, storeCheck, type CheckResult, type ReadinessChecks, type OpsOptions, type OpsServerOptions, type RunningOpsServer } from './ops.js';
export type { SchedulerApiOptions, SchedulerBackend } from './scheduler-api.js';
export { SCHEDULER_PREFIX, SCHEDULER_ROUTES, schedulerOpenApi } from './scheduler-routes.js';
export { SchedulerApiError, SchedulerApiErrorCodes, statusOfCode } from './ert-errors.js';
export { UI_PREFIX, uiRoutes, type UiOptions } from './ui.js';
export { AGENT_PREFIX, AGENT_RULE, agentApi, type AgentApiOptions } from './agent-api.js';
export { remoteStore, AgentClientErrorCodes, type RemoteStoreOptions } from './agent-client.js';
export { STANDARD_CLASSES, STANDARD_TRAITS, STANDARDS_SOURCE } from './standards.js';
export { Reads, type ProviderView, type ConsumerView } from './reads.js';
export {
  POLICIES,
  RULE_DEFAULTS,
  POLICY_DEFAULTS,
  LEGACY_POLICY,
  Policy,
  PolicyError,
  PolicyErrorCodes,
  parseCheck,
  policyFromFile,
  allowed,
  type PolicyDefaults,
  type PolicyOptions,
} from './policy.js';
