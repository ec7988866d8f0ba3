import { ErtError } from '@ert/plugin-api';
import type { ExplanationSummary } from './explain.js';

/** Stable error codes of @ert/scheduler. */
export const SchedulerErrorCode = {
  /** No host passed the filters (or every candidate's claim failed): details hold the explanation summary. */
  NO_VALID_HOST: 'ERT_SCHEDULER_NO_VALID_HOST',
  /** The request itself is malformed (no instances, duplicate uuids, bad flavor numbers). */
  INVALID_REQUEST: 'ERT_SCHEDULER_INVALID_REQUEST',
  /** The instance already has allocations in the store (its uuid is not new). */
  INSTANCE_EXISTS: 'ERT_SCHEDULER_INSTANCE_EXISTS',
  /** The scheduler was closed; no further calls are accepted. */
  CLOSED: 'ERT_SCHEDULER_CLOSED',
} as const;

export type SchedulerErrorCode = (typeof SchedulerErrorCode)[keyof typeof SchedulerErrorCode];

/** Base class of the scheduler's own errors. */
export class SchedulerError extends ErtError<SchedulerErrorCode> {}

/**
 * No host can take an instance. `details` is `{ instanceUuid, flavor, attempts, summary }` where
 * `summary` says how many hosts each filter removed, with example reasons, so a caller can show
 * why without re-running `explain`.
 */
export class NoValidHostError extends SchedulerError {
  constructor(instanceUuid: string, flavor: string, summary: ExplanationSummary, attempts: Array<{ host: string; error: string }> = []) {
    const counts = summary.filters
      .filter((f) => f.removed > 0)
      .map((f) => `${f.filter}: ${f.removed}`)
      .join(', ');
    const claimNote = attempts.length > 0 ? `; ${attempts.length} claim attempt(s) failed (${attempts.map((a) => `${a.host}: ${a.error}`).join('; ')})` : '';
    super(
      SchedulerErrorCode.NO_VALID_HOST,
      `no valid host for instance ${instanceUuid} (flavor "${flavor}"): ${summary.hosts} host(s), ${summary.passed} passed` +
        (counts ? `; removed by ${counts}` : '') +
        claimNote,
      { instanceUuid, flavor, attempts, summary },
    );
  }
}
