/**
 * The entry of a worker thread running one resource plugin (`isolation: worker`). It loads
 * the plugin with the same loader as the tracker (`resolvePlugin`, from the config's
 * directory) and says `loaded`; when the parent says `start` (the parent times the factory,
 * not the thread's start and the import) it runs its `resource(ctx)` factory with a context made of the data the parent
 * sent (options, host name, root, enforce), a logger that forwards to the parent's logger
 * and a container holding the system clock, then runs each hook the parent asks for and
 * answers with its result. Always run from `dist/` (see host.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { CoreServices, messageOf, type Logger, type ResourceContext, type ResourceHooks, type ServiceContainer, type ServiceToken } from '@ert/plugin-api';
import { resolvePlugin } from '../loader.js';
import { RESOURCE_HOOKS, toWire, type FromWorker, type LogLevelName, type ResourceHookName, type ToWorker, type WorkerInit } from './protocol.js';

const port = parentPort;
if (port === null) throw new Error('@ert/core isolation/worker.js runs only as a worker thread');
const init = workerData as WorkerInit;

function post(message: FromWorker): void {
  port!.postMessage(message);
}

/** A logger whose every call is a message to the parent, logged there by the plugin's logger. */
function forwardingLogger(bindings: Record<string, unknown>): Logger {
  const emit = (level: LogLevelName) => (obj: object | string, msg?: string) => {
    const message: FromWorker = { t: 'log', level, bindings, obj, ...(msg === undefined ? {} : { msg }) };
    try {
      post(message);
    } catch (err) {
      // A log object structured clone refuses (a function in it): log what can be said.
      post({ t: 'log', level, bindings, obj: { unclonable: messageOf(err) }, msg: msg ?? (typeof obj === 'string' ? obj : '') });
    }
  };
  return {
    trace: emit('trace'),
    debug: emit('debug'),
    info: emit('info'),
    warn: emit('warn'),
    error: emit('error'),
    child: (more) => forwardingLogger({ ...bindings, ...more }),
  };
}

/** The plugin's `ServiceContainer` in the worker: its own registrations and the clock. */
class WorkerServices implements ServiceContainer {
  private readonly values = new Map<symbol, unknown>();

  resolve<T>(token: ServiceToken<T>): T {
    if (!this.values.has(token.id)) throw new Error(`No service registered for "${token.description}"`);
    return this.values.get(token.id) as T;
  }

  isRegistered<T>(token: ServiceToken<T>): boolean {
    return this.values.has(token.id);
  }

  register<T>(token: ServiceToken<T>, value: T): void {
    this.values.set(token.id, value);
  }
}

let startAsked!: () => void;
const startMessage = new Promise<void>((resolve) => (startAsked = resolve));

async function start(): Promise<ResourceHooks | undefined> {
  try {
    const resolved = await resolvePlugin({
      ref: init.ref,
      side: 'compute',
      kinds: ['resource'],
      fromDir: init.fromDir,
      ...(init.conditions === undefined ? {} : { conditions: init.conditions }),
    });
    if (resolved.name !== init.name) {
      throw new Error(`the worker loaded a plugin called "${resolved.name}" from ${resolved.file ?? resolved.specifier}, not "${init.name}"`);
    }
    post({ t: 'loaded' });
    await startMessage;
    const services = new WorkerServices();
    services.register(CoreServices.clock, { now: () => Date.now() });
    const ctx: ResourceContext<unknown> = {
      name: init.name,
      options: init.options,
      logger: forwardingLogger({}),
      services,
      hostName: init.hostName,
      root: init.root,
      enforce: init.enforce,
    };
    const hooks: unknown = await resolved.plugin.resource!(ctx);
    if (typeof hooks !== 'object' || hooks === null || typeof (hooks as ResourceHooks).discover !== 'function') {
      const invalid =
        typeof hooks !== 'object' || hooks === null ? `expected a hooks object, got ${typeof hooks}` : 'the resource hooks have no "discover" function';
      post({ t: 'failed', error: { name: 'Error', message: invalid }, invalid });
      return undefined;
    }
    const present = RESOURCE_HOOKS.filter((h) => typeof (hooks as Record<string, unknown>)[h] === 'function');
    post({ t: 'ready', hooks: present });
    return hooks as ResourceHooks;
  } catch (err) {
    post({ t: 'failed', error: toWire(err) });
    return undefined;
  }
}

const started = start();

async function run(message: Extract<ToWorker, { t: 'call' }>): Promise<void> {
  const { id, hook, args } = message;
  let value: unknown;
  try {
    const hooks = await started;
    const fn = hooks === undefined ? undefined : (hooks as Record<ResourceHookName, unknown>)[hook];
    if (typeof fn !== 'function') throw new Error(`the plugin has no "${hook}" hook`);
    value = await (fn as (...a: unknown[]) => unknown).apply(hooks, args);
  } catch (err) {
    post({ t: 'error', id, error: toWire(err) });
    return;
  }
  try {
    post({ t: 'result', id, value });
  } catch (err) {
    post({ t: 'unclonable', id, problem: messageOf(err) });
  }
}

port.on('message', (message: ToWorker) => {
  if (message.t === 'start') startAsked();
  else void run(message);
});
