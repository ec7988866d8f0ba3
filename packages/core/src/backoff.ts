/**
 * Capped exponential backoff with jitter, for retrying something that is down (a store, a
 * server). Attempt n (from 0) waits between half and all of min(capMs, baseMs·2^n), drawn at
 * random ("equal jitter"): the wait grows quickly, never exceeds the cap, and many agents
 * that lost the same server at the same moment do not come back in lockstep.
 */
export class Backoff {
  private failures = 0;

  constructor(private readonly options: { baseMs: number; capMs: number; random?: () => number }) {}

  /** The wait before the next attempt, in ms; counts one more failure. */
  next(): number {
    const ceiling = Math.min(this.options.capMs, this.options.baseMs * 2 ** Math.min(this.failures, 30));
    this.failures += 1;
    const random = this.options.random ?? Math.random;
    return Math.round(ceiling / 2 + (random() * ceiling) / 2);
  }

  /** Failures since the last `reset` (the attempts that `next` was asked about). */
  get attempts(): number {
    return this.failures;
  }

  /** After a success: the next failure waits `baseMs` again. */
  reset(): void {
    this.failures = 0;
  }
}
