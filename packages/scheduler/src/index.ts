/**
 * @ert/scheduler — the scheduler side: host manager (host states from the store, refreshed
 * incrementally, enriched by consumer plugins), filters, weighers and durable claims.
 * See README.md.
 */
export { createScheduler } from './scheduler.js';
export type { InstanceToSchedule, KeptInstance, RankingStrategy, ScheduleRequest, Scheduler, SchedulerOptions, Selection } from './scheduler.js';
export type { Refusal, SelectOptions } from './confirmation.js';
export { NoValidHostError, SchedulerError, SchedulerErrorCode } from './errors.js';
export { BUILTIN_FILTERS, builtinFilters } from './builtins.js';
/** The one rule of host liveness (`stale` past tracker.staleAfter), re-exported from @ert/plugin-api, where it sits beside HostStatus. */
export { effectiveStatus } from '@ert/plugin-api';
export type { InstanceLocator } from './builtins.js';
export { HOST_MANAGER, WEIGHERS } from './explain.js';
export type { Explanation, ExplanationSummary, FilterCount, WeigherScore } from './explain.js';
