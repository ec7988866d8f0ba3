/**
 * Builders for what a plugin's factories receive: a logger that keeps what it was told,
 * a service container, a clock tests move by hand, options validated with their defaults
 * applied (as the host does), and the `ResourceContext` / `PluginContext` themselves.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import {
  CoreServices,
  type Clock,
  type Logger,
  type PluginContext,
  type PluginDefinition,
  type ResourceContext,
  type ServiceContainer,
  type ServiceToken,
} from '@ert/plugin-api';
import { TestkitError, TestkitErrorCodes } from './errors.js';

/** The levels of a `Logger`, lowest first. */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

/** One call of a captured logger. */
export interface LogRecord {
  /** The method called (`warn` for `logger.warn(...)`). */
  level: LogLevel;
  /** The first argument: an object of fields, or the message itself. */
  obj: object | string;
  /** The second argument, the message when `obj` is fields; absent when not given. */
  msg?: string;
  /** Bindings of the (child) logger the call was made on. */
  bindings: Readonly<Record<string, unknown>>;
}

/** A `Logger` that keeps every call, shared by its children. */
export interface CapturedLogger extends Logger {
  /** Every call, in order, children's included. */
  readonly records: LogRecord[];
  /**
   * The calls as one line each, `<level> <message> <fields as JSON>` (`warn vcpu unavailable
   * {"reason":"/proc/cpuinfo: missing or unreadable"}`), optionally of one level only.
   */
  lines(level?: LogLevel): string[];
  /** Forget the records. */
  clear(): void;
}

const LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error'];

function lineOf(record: LogRecord): string {
  const message = typeof record.obj === 'string' ? record.obj : record.msg;
  const fields = typeof record.obj === 'string' ? undefined : JSON.stringify(record.obj);
  return [record.level, message, fields !== undefined && fields !== '{}' ? fields : undefined].filter((part) => part !== undefined).join(' ');
}

/** A logger that records every call (`records`, `lines()`); `child` shares the records and adds bindings. */
export function captureLogger(bindings: Record<string, unknown> = {}, records: LogRecord[] = []): CapturedLogger {
  const at = (level: LogLevel) => (obj: object | string, msg?: string) => {
    records.push(msg === undefined ? { level, obj, bindings } : { level, obj, msg, bindings });
  };
  const logger = {
    records,
    lines: (level?: LogLevel) => records.filter((r) => level === undefined || r.level === level).map(lineOf),
    clear: () => void records.splice(0, records.length),
    child: (more: Record<string, unknown>) => captureLogger({ ...bindings, ...more }, records),
  } as Partial<CapturedLogger> & Pick<CapturedLogger, 'records' | 'lines' | 'clear' | 'child'>;
  for (const level of LEVELS) (logger as Record<LogLevel, unknown>)[level] = at(level);
  return logger as CapturedLogger;
}

/** A `ServiceContainer` backed by a map; `parent` is consulted for tokens not registered here. */
export function serviceContainer(parent?: ServiceContainer): ServiceContainer {
  const values = new Map<symbol, unknown>();
  return {
    resolve<T>(token: ServiceToken<T>): T {
      if (values.has(token.id)) return values.get(token.id) as T;
      if (parent?.isRegistered(token)) return parent.resolve(token);
      throw new TestkitError(TestkitErrorCodes.INVALID_INPUT, `no service registered for ${token.description}`, { what: token.description });
    },
    isRegistered: (token) => values.has(token.id) || (parent?.isRegistered(token) ?? false),
    register: (token, value) => void values.set(token.id, value),
  };
}

/** A `Clock` that stands still until told: `advance(ms)` and `set(ms)`. */
export interface ManualClock extends Clock {
  /** Move the clock forward by `ms` milliseconds (negative moves it back); returns the new time, epoch ms. */
  advance(ms: number): number;
  /** Set the time to `ms`, epoch milliseconds. */
  set(ms: number): void;
}

/** A clock starting at `start` ms (default 2024-01-01T00:00:00Z) that moves only when told. */
export function manualClock(start = Date.UTC(2024, 0, 1)): ManualClock {
  let now = start;
  return {
    now: () => now,
    advance: (ms) => (now += ms),
    set: (ms) => void (now = ms),
  };
}

// The host validates `plugins.<name>` with Ajv (JSON Schema 2020-12, every error, defaults
// applied, lenient about unknown keywords in plugin schemas): the same settings here.
const optionsAjv = new Ajv2020({ allErrors: true, strict: false, allowUnionTypes: true, strictRequired: false, useDefaults: true });
optionsAjv.addKeyword({ keyword: 'expected', schemaType: 'string' });
const compiledOptions = new WeakMap<object, ReturnType<Ajv2020['compile']>>();

/**
 * `options` as the host hands them to the plugin: validated against `plugin.optionsSchema`
 * with its defaults filled in (a copy; the argument is not modified). Throws TestkitError
 * ERT_TESTKIT_OPTIONS_INVALID listing the problems when they fail the schema.
 */
export function optionsWithDefaults<O>(plugin: Pick<PluginDefinition<O, any, any>, 'name' | 'optionsSchema'>, options: Partial<O> = {}): O {
  const data = structuredClone(options) as O;
  const schema = plugin.optionsSchema ?? {};
  let validate = compiledOptions.get(schema);
  if (validate === undefined) {
    validate = optionsAjv.compile(schema);
    compiledOptions.set(schema, validate);
  }
  if (!validate(data)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '(top level)'} ${e.message ?? e.keyword}`);
    throw new TestkitError(TestkitErrorCodes.OPTIONS_INVALID, `invalid options for plugin ${plugin.name}: ${problems.join('; ')}`, { plugin: plugin.name, problems });
  }
  return data;
}

/** What `pluginContext` and `resourceContext` accept; everything has a default. */
export interface ContextInit<O> {
  /** Options before defaults (validated against the plugin's schema). */
  options?: Partial<O>;
  /** The name it is configured under; the plugin's own name by default. */
  name?: string;
  /** The logger to hand out (default: a new captured logger bound to `{ plugin: name }`). */
  logger?: CapturedLogger;
  /** The plugin's container (default: an empty one); the clock is registered in it when missing. */
  services?: ServiceContainer;
  /** Registered as `CoreServices.clock` unless `services` already has one. */
  clock?: Clock;
}

/** The context a scheduler-side factory (`consumer`, `filter`, `weigher`) receives. */
export type TestPluginContext<O> = PluginContext<O> & { readonly logger: CapturedLogger; readonly clock: Clock };
/** The context `resource(ctx)` receives on a compute host. */
export type TestResourceContext<O> = ResourceContext<O> & { readonly logger: CapturedLogger; readonly clock: Clock };

/** A `PluginContext` as the scheduler builds it: validated options, a captured logger bound to the plugin, a container holding the clock. */
export function pluginContext<O>(plugin: Pick<PluginDefinition<O, any, any>, 'name' | 'optionsSchema'>, init: ContextInit<O> = {}): TestPluginContext<O> {
  const name = init.name ?? plugin.name;
  const clock = init.clock ?? manualClock();
  const services = init.services ?? serviceContainer();
  if (!services.isRegistered(CoreServices.clock)) services.register(CoreServices.clock, clock);
  return {
    name,
    options: optionsWithDefaults(plugin, init.options),
    logger: init.logger ?? captureLogger({ plugin: name }),
    services,
    clock,
  };
}

/** What `resourceContext` accepts besides the common parts. */
export interface ResourceContextInit<O> extends ContextInit<O> {
  /** The host's name (`compute-1` by default); the root provider is named after it. */
  hostName?: string;
  /** Whether enforcement is on (false by default). */
  enforce?: boolean;
}

/** A `ResourceContext` as a tracker builds it, reading below `root` (a fixture tree or a host profile). */
export function resourceContext<O>(
  plugin: Pick<PluginDefinition<O, any, any>, 'name' | 'optionsSchema'>,
  root: string,
  init: ResourceContextInit<O> = {},
): TestResourceContext<O> {
  return { ...pluginContext(plugin, init), hostName: init.hostName ?? 'compute-1', root, enforce: init.enforce ?? false };
}
