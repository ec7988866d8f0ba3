/**
 * Dependency injection without decorators: a plugin gets a container scoped to it and
 * resolves typed tokens. The host backs it with a tsyringe child container; plugin
 * authors only see this interface.
 */
export interface ServiceToken<T> {
  /** `Symbol.for('ert.service:<description>')`: equal for equal descriptions. */
  readonly id: symbol;
  /** What the token stands for (`ert.clock`); names it in errors. */
  readonly description: string;
  /** Phantom field that carries T; never set. */
  readonly __type?: T;
}

/** Make a token. The same description yields the same token across copies of this package. */
export function createServiceToken<T>(description: string): ServiceToken<T> {
  return Object.freeze({ id: Symbol.for(`ert.service:${description}`), description });
}

/**
 * A plugin's own container (`PluginContext.services`), a child of the host's: it sees what
 * the host registered (`CoreServices`) and what the plugin registers itself.
 */
export interface ServiceContainer {
  /** The value registered for `token` here or in a parent; throws when there is none. */
  resolve<T>(token: ServiceToken<T>): T;
  /** Whether `resolve(token)` would find a value (here or in a parent); never throws. */
  isRegistered<T>(token: ServiceToken<T>): boolean;
  /** Register a value in this (the plugin's own) container; parents are unaffected. */
  register<T>(token: ServiceToken<T>, value: T): void;
}

/** Minimal structured logger (a pino child logger satisfies it). */
export interface Logger {
  /** Log at level trace: `obj` is the message, or fields to record with `msg` (pino's call shape). */
  trace(obj: object | string, msg?: string): void;
  /** Log at level debug (as `trace`). */
  debug(obj: object | string, msg?: string): void;
  /** Log at level info (as `trace`). */
  info(obj: object | string, msg?: string): void;
  /** Log at level warn (as `trace`): something went wrong and was handled. */
  warn(obj: object | string, msg?: string): void;
  /** Log at level error (as `trace`). */
  error(obj: object | string, msg?: string): void;
  /** A logger that adds `bindings` to every record it writes; this one is unchanged. */
  child(bindings: Record<string, unknown>): Logger;
}

/** Wall clock, injectable so tests can move time. */
export interface Clock {
  /** The current time, epoch milliseconds (as `Date.now()`). */
  now(): number;
}

/** Services the host registers for every plugin. */
export const CoreServices = {
  clock: createServiceToken<Clock>('ert.clock'),
} as const;
