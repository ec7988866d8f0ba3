/**
 * The messages between the tracker's thread and a resource plugin isolated in a worker
 * thread (`isolation: worker`, docs/plugins.md "Isolation"). Everything here crosses a
 * `postMessage`, so it is structured-cloneable data only.
 */
import { messageOf } from '@ert/plugin-api';

/** The resource hooks a worker can run (`close` too: the parent calls it before terminating). */
export const RESOURCE_HOOKS = ['discover', 'reset', 'test', 'addInstance', 'removeInstance', 'stats', 'enforce', 'close'] as const;
export type ResourceHookName = (typeof RESOURCE_HOOKS)[number];

/** What the worker needs to load the plugin and build its `ResourceContext` (`workerData`). */
export interface WorkerInit {
  /** The name the plugin is called by (its options key, its logger binding). */
  name: string;
  /** The config's ref, without a plugin object (those cannot be isolated). */
  ref: { name: string; use?: string };
  /** Directory names and paths resolve from (the config file's directory). */
  fromDir: string;
  /** Export conditions for the plugin's entry; absent: the loader's defaults in the worker. */
  conditions?: string[];
  /** `plugins.<name>` validated by the parent, defaults applied. */
  options: unknown;
  hostName: string;
  root: string;
  enforce: boolean;
}

/** An error as data: what a thrown value becomes when it crosses the thread boundary. */
export interface WireError {
  name: string;
  message: string;
  stack?: string;
  code?: string;
  details?: Record<string, unknown>;
}

export type ToWorker =
  /** Run the plugin's `resource(ctx)` factory (sent once the worker said `loaded`). */
  | { t: 'start' }
  | { t: 'call'; id: number; hook: ResourceHookName; args: unknown[] };

export type LogLevelName = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export type FromWorker =
  /** The plugin's module is imported; the factory waits for `start`. */
  | { t: 'loaded' }
  /** The factory ran; `hooks` are the functions its hooks object has. */
  | { t: 'ready'; hooks: ResourceHookName[] }
  /** Loading the plugin or running its factory failed. `invalid`: the factory's result is not a hooks object. */
  | { t: 'failed'; error: WireError; invalid?: string }
  | { t: 'result'; id: number; value: unknown }
  | { t: 'error'; id: number; error: WireError }
  /** The hook returned a value structured clone refuses (a function, a Promise in a field, ...). */
  | { t: 'unclonable'; id: number; problem: string }
  | { t: 'log'; level: LogLevelName; bindings: Record<string, unknown>; obj: unknown; msg?: string };

/**
 * A thrown value as a `WireError` (details kept only when they can be cloned). Never throws:
 * a value whose fields cannot be read crosses as its message alone (`messageOf`'s fallback),
 * rather than crashing the worker's hook call.
 */
export function toWire(err: unknown): WireError {
  try {
    if (!(err instanceof Error)) return { name: 'Error', message: messageOf(err) };
    const wire: WireError = { name: String(err.name), message: messageOf(err) };
    if (typeof err.stack === 'string') wire.stack = err.stack;
    const { code, details } = err as { code?: unknown; details?: unknown };
    if (typeof code === 'string') wire.code = code;
    if (typeof details === 'object' && details !== null) {
      try {
        wire.details = structuredClone(details) as Record<string, unknown>;
      } catch {
        // details that cannot cross the boundary are left behind; the message names the problem
      }
    }
    return wire;
  } catch {
    return { name: 'Error', message: messageOf(err) };
  }
}
