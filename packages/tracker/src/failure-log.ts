import { isErtError, messageOf, type Logger } from '@ert/plugin-api';
import { isStoreUnavailable } from '@ert/store';

/**
 * Logs a recurring failure once when it starts (or turns into a different failure) and once
 * when it ends, instead of once per attempt: an agent whose server is down for an hour writes
 * two lines, not one per retry. Repeats go to `debug`. The tracker's periodic update, its
 * reservation watch and its start share one, since they fail together when the store is down.
 */
export class FailureLog {
  private current: { key: string; activity: string; since: number; failures: number } | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly now: () => number,
  ) {}

  /** True while the last attempt failed. */
  get failing(): boolean {
    return this.current !== undefined;
  }

  /** An attempt at `activity` failed with `err`; `retryInMs` is when the next one is due. */
  failed(activity: string, err: unknown, retryInMs: number): void {
    // The code, not the message: "connect ECONNREFUSED" and "socket hang up" are one outage.
    const key = isErtError(err) ? err.code : messageOf(err);
    if (this.current?.key === key) {
      this.current.failures += 1;
      this.logger.debug({ activity, err: messageOf(err), retryInMs, failures: this.current.failures }, 'still failing');
      return;
    }
    this.current = { key, activity, since: this.current?.since ?? this.now(), failures: (this.current?.failures ?? 0) + 1 };
    const what = isStoreUnavailable(err) ? 'store unreachable' : `${activity} failed`;
    this.logger.error({ err, activity, retryInMs }, `${what}: retrying with backoff (logged again when it changes or recovers)`);
  }

  /** An attempt succeeded: logs the recovery when something was failing. */
  succeeded(activity: string): void {
    const failure = this.current;
    if (failure === undefined) return;
    this.current = undefined;
    this.logger.info({ activity, failures: failure.failures, downMs: this.now() - failure.since }, `recovered: ${activity} succeeded after ${failure.failures} failed attempt(s)`);
  }
}
