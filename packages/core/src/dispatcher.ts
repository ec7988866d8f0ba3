import { UNPRINTABLE_THROWN, type Logger } from '@ert/plugin-api';
import { CoreErrorCodes, PluginHookError, messageOf } from './errors.js';

/**
 * Checks a hook's result: return nothing (or true) when it is acceptable, a string saying
 * what is wrong (or false) otherwise. A validator that throws counts as a refusal.
 */
export type ResultValidator<T> = (result: T) => string | boolean | undefined | void;

/** Options of one `Dispatcher.call`. */
export interface CallOptions<T> {
  /** Give up after this many ms (ERT_PLUGIN_HOOK_TIMEOUT); default the dispatcher's. 0 = no limit. */
  timeoutMs?: number;
  /**
   * Replaces the result with a copy of it before `validate` sees it, so that what is checked
   * and used is data read from the plugin's object once (a getter cannot answer the check one
   * thing and the caller another). A throw while copying (a getter that throws, a value the
   * copy cannot hold) is ERT_PLUGIN_HOOK_INVALID_RESULT naming plugin and hook.
   */
  copy?: (result: T) => T;
  validate?: ResultValidator<T>;
}

/** Counters of one hook of one plugin. `totalMs`/`maxMs` cover `call` only (`callSync` is not timed). */
export interface HookTiming {
  plugin: string;
  hook: string;
  calls: number;
  failures: number;
  totalMs: number;
  maxMs: number;
}

/** One finished `Dispatcher.call`, as its observer sees it. */
export interface HookCallObservation {
  plugin: string;
  hook: string;
  /** Wall time of the call, seconds (a timed-out call: the timeout). */
  seconds: number;
  /** `ok`, or how it failed: threw or rejected, timed out, result refused by its validator. */
  outcome: 'ok' | 'failed' | 'timeout' | 'invalid';
}

/** Options of `createDispatcher`. */
export interface DispatcherOptions {
  /** Timeout of `call` when the call gives none, ms; default 0 (no limit). */
  defaultTimeoutMs?: number;
  /** Receives a warning for every failed hook call. */
  logger?: Logger;
  /**
   * Called after every `call` settles (not `callSync`: the scheduler's hot path is only
   * counted, in `timings()`). How metrics see hook latency and failures without core
   * depending on a metrics library; a throw from it is logged and ignored.
   */
  onCall?: (call: HookCallObservation) => void;
}

/**
 * The dispatcher call a hook implementation is running under, as seen by code that runs
 * synchronously inside the `fn` given to `Dispatcher.call` (see `currentHookCall`). A proxy
 * that runs the hook elsewhere (a plugin isolated in a worker thread) uses it to learn the
 * call's timeout and to act when it expires: the dispatcher's timeout error is what the
 * caller sees, the listener only cleans up (terminates the worker).
 */
export interface HookCall {
  readonly plugin: string;
  readonly hook: string;
  /** The call's timeout, ms; 0 = no limit. */
  readonly timeoutMs: number;
  /** Run `listener` when the call times out (never after it settled). */
  onTimeout(listener: () => void): void;
}

class ActiveCall implements HookCall {
  listeners: Array<() => void> | undefined;
  /** Set when the timeout fired: a hook not started by then never starts. */
  timedOut = false;
  constructor(
    readonly plugin: string,
    readonly hook: string,
    readonly timeoutMs: number,
  ) {}

  onTimeout(listener: () => void): void {
    (this.listeners ??= []).push(listener);
  }
}

/** The call whose `fn` is running synchronously right now (a slot, not async context: no async_hooks cost). */
let runningCall: ActiveCall | undefined;

/**
 * The dispatcher call whose `fn` is being invoked, when called synchronously from inside it
 * (before its first `await`); undefined otherwise. `() => hooks.test(request)` calls the
 * hook synchronously, so the hook's implementation sees its call.
 */
export function currentHookCall(): HookCall | undefined {
  return runningCall;
}

/** A plugin's call that timed out and has not settled (`Dispatcher.unsettled`). */
interface Unsettled {
  /** The hook still running. */
  hook: string;
  /** Resolves when it settles, however. */
  settled: Promise<void>;
  /** A later call timed out waiting for it: the plugin's next calls reject at once until it settles. */
  hopeless: boolean;
}

/** What a call waiting for an unsettled one starts; `start` is dropped when it times out. */
interface Waiter<T> {
  start?: () => Promise<T>;
}

/** A reaction that keeps nothing alive (a closure made in `call` would keep its whole scope). */
function ignore(): undefined {
  return undefined;
}

/**
 * `waiter.start()` once `settled` resolves, unless it was dropped by then (the call timed out,
 * the result is ignored). Outside `call`, so that the reaction left on a hung promise holds
 * only `waiter`, not the call's `fn` and arguments.
 */
function startWhenSettled<T>(settled: Promise<void>, waiter: Waiter<T>): Promise<T> {
  return settled.then(() => {
    const start = waiter.start;
    waiter.start = undefined;
    return start === undefined ? (undefined as never) : start();
  });
}

function problemOf<T>(validate: ResultValidator<T>, result: T): string | undefined {
  try {
    const verdict = validate(result);
    if (verdict === false) return 'the result was refused by its validator';
    return typeof verdict === 'string' ? verdict : undefined;
  } catch (err) {
    return messageOf(err);
  }
}

/**
 * The one way the host calls plugin hooks. Errors are tagged with the plugin and hook
 * (PluginHookError, cause kept), hung promises are cut off by a timeout, results can be
 * validated, and every call is counted per plugin and hook.
 */
export class Dispatcher {
  /** Counters by plugin, then hook. */
  private readonly stats = new Map<string, Map<string, HookTiming>>();
  /** The same counters in the order of their first call (what `timings()` lists). */
  private readonly order: HookTiming[] = [];
  private readonly defaultTimeoutMs: number;
  private readonly logger: Logger | undefined;
  private readonly onCall: ((call: HookCallObservation) => void) | undefined;
  /**
   * Per plugin, its last call that timed out and has not settled: the plugin's next call starts
   * only once it has. A late hook would otherwise run beside the next one and undo it (a late
   * `reset` clearing the instances added after it).
   */
  private readonly unsettled = new Map<string, Unsettled>();

  constructor(options: DispatcherOptions = {}) {
    this.defaultTimeoutMs = options.defaultTimeoutMs ?? 0;
    this.logger = options.logger;
    this.onCall = options.onCall;
  }

  /**
   * Run `fn` (plugin `plugin`'s hook `hook`), sync or async, and return its result.
   * Rejects with PluginHookError: ERT_PLUGIN_HOOK_FAILED when it throws or rejects,
   * ERT_PLUGIN_HOOK_TIMEOUT when it has not settled after the timeout (its late outcome is
   * ignored), ERT_PLUGIN_HOOK_INVALID_RESULT when `validate` refuses the result.
   * Never rejects with anything else. While a call of the same plugin that timed out has not
   * settled, `fn` waits for it within this call's timeout, and is not called at all when
   * that runs out first: one plugin's hooks never run concurrently because of a timeout.
   * Once a call has timed out so, without starting, the hung call is taken as hopeless: the
   * plugin's later calls reject at once (ERT_PLUGIN_HOOK_TIMEOUT, "did not start", `fn` not
   * called, whatever their timeout) until it settles, so one hang costs its own timeout and
   * one waiter's, not one per later call.
   */
  async call<T>(plugin: string, hook: string, fn: () => T | Promise<T>, options: CallOptions<Awaited<T>> = {}): Promise<Awaited<T>> {
    const timing = this.timing(plugin, hook);
    const timeoutMs = options.timeoutMs ?? this.defaultTimeoutMs;
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    let outcome: HookCallObservation['outcome'] = 'ok';
    const active = new ActiveCall(plugin, hook, timeoutMs);
    const previous = this.unsettled.get(plugin);
    let running: Promise<T> | undefined;
    let begun = false;
    // What a call waiting for `previous` runs once it has settled; dropped at its timeout, so a
    // waiter that gave up keeps neither `fn` nor its arguments alive behind a hung promise.
    const waiter: Waiter<T> = {};
    try {
      if (previous?.hopeless === true) {
        throw new PluginHookError(
          CoreErrorCodes.PLUGIN_HOOK_TIMEOUT,
          `Plugin "${plugin}" hook "${hook}" did not start: hook "${previous.hook}" of plugin "${plugin}" timed out earlier and has not finished`,
          { plugin, hook, timeoutMs },
        );
      }
      // `fn` is called synchronously with the slot set, so a hook's implementation sees its call.
      const start = (): Promise<T> => {
        begun = true;
        const outer = runningCall;
        runningCall = active;
        try {
          return (async () => fn())();
        } finally {
          runningCall = outer;
        }
      };
      if (previous === undefined) {
        running = start();
      } else {
        waiter.start = start;
        running = startWhenSettled(previous.settled, waiter);
      }
      let result: Awaited<T>;
      if (timeoutMs > 0) {
        running.catch(ignore); // a late rejection after the timeout must not go unhandled
        const timedOut = new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            active.timedOut = true;
            waiter.start = undefined;
            // Not started: it waited its whole timeout for `previous`, which is now hopeless.
            if (!begun && previous !== undefined) previous.hopeless = true;
            const waited = !begun && previous !== undefined ? ` (it did not start: the plugin's call of hook "${previous.hook}" that timed out before had not finished)` : '';
            reject(
              new PluginHookError(CoreErrorCodes.PLUGIN_HOOK_TIMEOUT, `Plugin "${plugin}" hook "${hook}" did not finish within ${timeoutMs} ms${waited}`, {
                plugin,
                hook,
                timeoutMs,
              }),
            );
            // After the rejection, so the caller sees the timeout, not what a listener causes.
            for (const listener of active.listeners ?? []) {
              try {
                listener();
              } catch (err) {
                this.warn(plugin, hook, { plugin, hook, err }, `Plugin "${plugin}" hook "${hook}": a timeout listener failed: ${messageOf(err)}`);
              }
            }
          }, timeoutMs);
        });
        result = (await Promise.race([running, timedOut])) as Awaited<T>;
      } else {
        result = (await running) as Awaited<T>;
      }
      if (options.copy !== undefined) {
        try {
          result = options.copy(result);
        } catch (err) {
          throw invalidResult(plugin, hook, messageOf(err));
        }
      }
      if (options.validate !== undefined) {
        const problem = problemOf(options.validate, result);
        if (problem !== undefined) throw invalidResult(plugin, hook, problem);
      }
      return result;
    } catch (err) {
      // Failed whatever follows: the observer must never count this call as a success.
      outcome = 'failed';
      timing.failures += 1;
      // A call that began and timed out holds the plugin's next calls until it settles. One
      // that never began adds nothing: `previous` is still the entry, now hopeless.
      if (active.timedOut && begun && running !== undefined) this.holdUntilSettled(plugin, hook, running);
      const error = this.wrap(plugin, hook, err);
      outcome = error.code === CoreErrorCodes.PLUGIN_HOOK_TIMEOUT ? 'timeout' : error.code === CoreErrorCodes.PLUGIN_HOOK_INVALID_RESULT ? 'invalid' : 'failed';
      this.warn(plugin, hook, { plugin, hook, code: error.code, err: error }, error.message);
      throw error;
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      const elapsed = performance.now() - started;
      timing.calls += 1;
      timing.totalMs += elapsed;
      if (elapsed > timing.maxMs) timing.maxMs = elapsed;
      if (this.onCall !== undefined) this.observe({ plugin, hook, seconds: elapsed / 1000, outcome });
    }
  }

  /** `plugin`'s next calls wait for `running`, its call of `hook` that began and timed out. */
  private holdUntilSettled(plugin: string, hook: string, running: Promise<unknown>): void {
    const entry: Unsettled = { hook, settled: running.then(ignore, ignore), hopeless: false };
    this.unsettled.set(plugin, entry);
    void entry.settled.then(() => {
      if (this.unsettled.get(plugin) === entry) this.unsettled.delete(plugin);
    });
  }

  /**
   * The cheap path for hot synchronous hooks (filters, weighers, consumers): no timer, no
   * clock; a throw becomes PluginHookError ERT_PLUGIN_HOOK_FAILED, a result `validate`
   * refuses becomes ERT_PLUGIN_HOOK_INVALID_RESULT. A promise (any thenable) is not a result
   * of a synchronous hook: ERT_PLUGIN_HOOK_INVALID_RESULT naming plugin and hook, and its
   * eventual rejection is handled (logged), so an async hook can never crash the process
   * with an unhandled rejection. Counts calls and failures.
   */
  callSync<T>(plugin: string, hook: string, fn: () => T, validate?: ResultValidator<T>): T {
    const timing = this.timing(plugin, hook);
    timing.calls += 1;
    let result: T;
    try {
      result = fn();
    } catch (err) {
      timing.failures += 1;
      throw this.wrap(plugin, hook, err);
    }
    let thenable: boolean;
    try {
      thenable = typeof result === 'object' && result !== null && typeof (result as { then?: unknown }).then === 'function';
    } catch (err) {
      // A `then` getter that throws: the plugin's failure, not the caller's.
      timing.failures += 1;
      throw this.wrap(plugin, hook, err);
    }
    if (thenable) {
      timing.failures += 1;
      // Its rejection is logged; the handler cannot throw (`warn` never does), or the
      // rejection it handles would become an unhandled one and end the process.
      Promise.resolve(result as unknown as PromiseLike<unknown>).then(undefined, (err: unknown) =>
        this.warn(plugin, hook, { plugin, hook, err }, `Plugin "${plugin}" hook "${hook}" rejected after it was refused as a promise: ${messageOf(err)}`),
      );
      throw new PluginHookError(
        CoreErrorCodes.PLUGIN_HOOK_INVALID_RESULT,
        `Plugin "${plugin}" hook "${hook}" returned a promise; this hook must be synchronous`,
        { plugin, hook, problem: 'returned a promise' },
      );
    }
    if (validate !== undefined) {
      const problem = problemOf(validate, result);
      if (problem !== undefined) {
        timing.failures += 1;
        throw invalidResult(plugin, hook, problem);
      }
    }
    return result;
  }

  /**
   * Log a warning; never throws. A logger can throw on what it is given (pino reads an error's
   * cause's `message` and `stack`, which a plugin's getters may make throw): then the
   * warning goes without the objects, and if that fails too, it is dropped.
   */
  private warn(plugin: string, hook: string, fields: Record<string, unknown>, message: string): void {
    if (this.logger === undefined) return;
    try {
      this.logger.warn(fields, message);
    } catch {
      try {
        this.logger.warn({ plugin, hook }, message);
      } catch {
        // A logger that cannot log is not the hook's caller's failure.
      }
    }
  }

  private observe(call: HookCallObservation): void {
    try {
      this.onCall!(call);
    } catch (err) {
      this.warn(call.plugin, call.hook, { plugin: call.plugin, hook: call.hook, err }, `the dispatcher's call observer threw: ${messageOf(err)}`);
    }
  }

  /** A snapshot of the counters, one entry per plugin and hook called so far. */
  timings(): HookTiming[] {
    return this.order.map((t) => ({ ...t }));
  }

  /**
   * The counters of one plugin's hook, found by plugin then hook: no key is built per call
   * (`callSync` runs for every filter and weigher of every host evaluated).
   */
  private timing(plugin: string, hook: string): HookTiming {
    let hooks = this.stats.get(plugin);
    if (hooks === undefined) {
      hooks = new Map();
      this.stats.set(plugin, hooks);
    }
    let timing = hooks.get(hook);
    if (timing === undefined) {
      timing = { plugin, hook, calls: 0, failures: 0, totalMs: 0, maxMs: 0 };
      hooks.set(hook, timing);
      this.order.push(timing);
    }
    return timing;
  }

  /**
   * `err` as the PluginHookError of this plugin's hook; never throws, whatever was thrown.
   * A value whose message cannot be read is not kept as `cause`: loggers read a cause's
   * message, and would throw where the dispatcher did not.
   */
  private wrap(plugin: string, hook: string, err: unknown): PluginHookError {
    try {
      if (err instanceof PluginHookError && err.details.plugin === plugin && err.details.hook === hook) return err;
    } catch {
      // A Proxy whose getPrototypeOf trap throws: not ours, wrapped below.
    }
    const message = messageOf(err);
    return new PluginHookError(
      CoreErrorCodes.PLUGIN_HOOK_FAILED,
      `Plugin "${plugin}" hook "${hook}" failed: ${message}`,
      { plugin, hook },
      message === UNPRINTABLE_THROWN ? {} : { cause: err },
    );
  }
}

/** ERT_PLUGIN_HOOK_INVALID_RESULT of a result refused by its validator or its copy. */
function invalidResult(plugin: string, hook: string, problem: string): PluginHookError {
  return new PluginHookError(CoreErrorCodes.PLUGIN_HOOK_INVALID_RESULT, `Plugin "${plugin}" hook "${hook}" returned an invalid result: ${problem}`, { plugin, hook, problem });
}

/** A new dispatcher with its own counters. */
export function createDispatcher(options: DispatcherOptions = {}): Dispatcher {
  return new Dispatcher(options);
}
