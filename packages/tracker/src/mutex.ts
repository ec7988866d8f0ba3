/**
 * A promise-chain mutex: `run` calls start in the order they were made, each after the
 * previous one settled (whether it resolved or rejected).
 */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn, fn);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Resolves once every call made so far has settled. */
  idle(): Promise<void> {
    return this.tail.then(() => undefined);
  }
}
