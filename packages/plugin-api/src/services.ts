/**
 * Dependency injection without decorators: a plugin gets a container scoped to it and
 * resolves typed tokens. The host backs it with a tsyringe child container; plugin
 * authors only see this interface.
 */
export interface ServiceToken<T> {
  readonly id: symbol;
  readonly description: string;
  /** Phantom field that carries T; never set. */
  readonly __type?: T;
}

/** Make a token. The same description yields the same token across copies of this package. */
export function createServiceToken<T>(description: string): ServiceToken<T> {
  return Object.freeze({ id: Symbol.for(`ert.service:${description}`), description });
}

export interface ServiceContainer {
  /** The value registered for `token` here or in a parent; throws when there is none. */
  resolve<T>(token: ServiceToken<T>): T;
  isRegistered<T>(token: ServiceToken<T>): boolean;
  /** Register a value in this (the plugin's own) container; parents are unaffected. */
  register<T>(token: ServiceToken<T>, value: T): void;
}

/** Minimal structured logger (a pino child logger satisfies it). */
export interface Logger {
  trace(obj: object | string, msg?: string): void;
  debug(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  error(obj: object | string, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

/** Wall clock, injectable so tests can move time. */
export interface Clock {
  now(): number;
}

/** Services the host registers for every plugin. */
export const CoreServices = {
  clock: createServiceToken<Clock>('ert.clock'),
} as const;
