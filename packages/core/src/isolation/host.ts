/**
 * `isolation: worker` for resource plugins, the tracker's side: the plugin runs in a worker
 * thread of its own (worker.ts) and this module hands the tracker a `ResourceHooks` object
 * whose every hook is a message round trip to it. A hook that busy-loops or hangs past its
 * timeout gets the worker terminated — the tracker's thread never ran the plugin's code,
 * so it stays responsive — and the next call starts a fresh worker whose view is rebuilt
 * from what the tracker told the old one (discover, then every instance added and not
 * removed since the last reset). See docs/plugins.md, "Isolation".
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { ClaimedInstance, Logger, ResourceHooks } from '@ert/plugin-api';
import { currentHookCall, type HookCall } from '../dispatcher.js';
import { CoreErrorCodes, PluginHookError, PluginLoadError } from '../errors.js';
import { RESOURCE_HOOKS, type FromWorker, type ResourceHookName, type ToWorker, type WireError, type WorkerInit } from './protocol.js';

/** Options of `startWorkerResource`. */
export interface WorkerResourceOptions {
  /** The name the plugin is called by. */
  name: string;
  /** How the config names it (a path or a package; not a plugin object). */
  ref: { name: string; use?: string };
  /** Directory the ref resolves from (the config file's directory). */
  fromDir: string;
  /** Export conditions the parent loaded plugins with; `ert-source` is dropped (the worker runs built code). */
  conditions?: readonly string[];
  /** `plugins.<name>` validated, defaults applied (must be structured-cloneable). */
  options: unknown;
  hostName: string;
  root: string;
  enforce: boolean;
  /** The plugin's logger: the worker's log calls arrive here. */
  logger: Logger;
  /**
   * Limit of a call made outside a dispatcher call (which brings its own timeout), ms;
   * 0 = none. The tracker's `hookTimeout`.
   */
  hookTimeoutMs: number;
}

/**
 * The worker entry, always the built one: from `dist/isolation/host.js` it is beside this
 * file; from the TypeScript sources (vitest) it is the same package's `dist`, so tests of
 * `isolation: worker` need `npm run build` first, as the tests that spawn `ert` do.
 */
export function workerEntry(): string {
  const here = fileURLToPath(import.meta.url);
  return here.endsWith('.ts') ? fileURLToPath(new URL('../../dist/isolation/worker.js', import.meta.url)) : fileURLToPath(new URL('./worker.js', import.meta.url));
}

/**
 * The worker's `execArgv`: inherited (undefined) unless the parent runs with the `ert-source`
 * export condition (vitest), which is then dropped since the worker runs built code. Only
 * then is a list given: an explicit list must not hold per-process flags (`--expose-gc`),
 * which Node refuses for workers, while inheriting them is fine.
 */
function workerExecArgv(): string[] | undefined {
  const argv = process.execArgv;
  if (!argv.some((arg) => arg.includes('ert-source'))) return undefined;
  const out: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--conditions' || arg === '-C') {
      if (argv[i + 1] !== 'ert-source') out.push(arg, argv[i + 1]!);
      i += 1;
    } else if (arg !== '--conditions=ert-source' && arg !== '-C=ert-source') {
      out.push(arg);
    }
  }
  return out;
}

interface Pending {
  hook: string;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** One worker thread and what waits on it. */
interface Thread {
  worker: Worker;
  /** Calls sent and not answered; id 0 is the wait for `ready`. */
  pending: Map<number, Pending>;
  ready: Promise<ResourceHookName[]>;
  /** Ready, and (a worker after the first) the view replayed: what every call waits for. */
  prepared: Promise<void>;
  /** Set once it was terminated or died: why. */
  ended?: string;
}

function fromWire(wire: WireError): Error {
  const err = new Error(wire.message);
  err.name = wire.name;
  if (wire.stack !== undefined) err.stack = wire.stack;
  if (wire.code !== undefined) Object.assign(err, { code: wire.code });
  return err;
}

class WorkerResource {
  private thread: Thread | undefined;
  /** Whether a worker ever became ready: a later one replays the view. */
  private started = false;
  private closed = false;
  private nextId = 1;
  /** What the tracker told the plugin that a fresh worker must be told again. */
  private discovered = false;
  private readonly instances = new Map<string, ClaimedInstance>();

  constructor(private readonly o: WorkerResourceOptions) {}

  /** Spawn the first worker (load + factory) and build the hooks object the tracker uses. */
  async start(): Promise<ResourceHooks> {
    const call = currentHookCall();
    const present = await this.guarded('resource', call, () => this.live().ready);
    const hooks: Partial<Record<ResourceHookName, (...args: unknown[]) => Promise<unknown>>> = {};
    for (const hook of present) {
      if (hook !== 'close') hooks[hook] = (...args: unknown[]) => this.invoke(hook, args);
    }
    // Always there: closing terminates the worker, whether or not the plugin has a close hook.
    hooks.close = () => this.close(present.includes('close'));
    return hooks as unknown as ResourceHooks;
  }

  /**
   * One hook call: the dispatcher call it runs under is read synchronously (before any
   * await), so its timeout terminates the worker.
   */
  private invoke(hook: ResourceHookName, args: unknown[]): Promise<unknown> {
    const call = currentHookCall();
    if (this.closed) return Promise.reject(new Error(`the plugin's worker thread was closed`));
    return this.guarded(hook, call, async () => {
      const thread = await this.ready();
      const value = await this.send(thread, hook, args);
      this.record(hook, args);
      return value;
    });
  }

  /**
   * Run `op` so that the call's timeout terminates the worker: the dispatcher's timeout
   * when there is one (its error is what the caller sees), else the tracker's hookTimeout.
   */
  private async guarded<T>(hook: string, call: HookCall | undefined, op: () => Promise<T>): Promise<T> {
    const timeoutMs = call !== undefined ? call.timeoutMs : this.o.hookTimeoutMs;
    const expired = () => this.kill(`hook "${hook}" did not finish within ${timeoutMs} ms`);
    if (call !== undefined) {
      if (timeoutMs > 0) call.onTimeout(expired);
      return op();
    }
    if (timeoutMs <= 0) return op();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(
          new PluginHookError(CoreErrorCodes.PLUGIN_HOOK_TIMEOUT, `Plugin "${this.o.name}" hook "${hook}" did not finish within ${timeoutMs} ms`, {
            plugin: this.o.name,
            hook,
            timeoutMs,
          }),
        );
        expired();
      }, timeoutMs);
    });
    const running = op();
    running.catch(() => undefined);
    try {
      return await Promise.race([running, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The current worker, spawned if there is none. */
  private live(): Thread {
    if (this.thread !== undefined && this.thread.ended === undefined) return this.thread;
    const replays = this.started;
    const thread = this.spawn((t) => (replays ? t.ready.then(() => this.replay(t)) : t.ready.then(() => undefined)));
    this.thread = thread;
    return thread;
  }

  /** A ready worker; a fresh one (after a timeout or a crash) first gets the view replayed. */
  private async ready(): Promise<Thread> {
    const thread = this.live();
    await thread.prepared;
    return thread;
  }

  /** Tell a fresh worker what its predecessor was told: discover, then the instances in its view. */
  private async replay(thread: Thread): Promise<void> {
    this.o.logger.warn(
      { plugin: this.o.name, instances: this.instances.size },
      `Plugin "${this.o.name}": a fresh worker thread replays discover and ${this.instances.size} instance(s)`,
    );
    if (this.discovered) await this.send(thread, 'discover', []);
    for (const instance of this.instances.values()) await this.send(thread, 'addInstance', [instance]);
  }

  private spawn(prepare: (thread: Thread) => Promise<void>): Thread {
    const entry = workerEntry();
    if (!existsSync(entry)) {
      throw new PluginLoadError(
        CoreErrorCodes.PLUGIN_IMPORT_FAILED,
        `Plugin "${this.o.name}": isolation: worker needs ${entry}, which does not exist (build @ert/core: npm run build)`,
        { plugin: this.o.name, file: entry },
      );
    }
    const conditions = this.o.conditions?.filter((c) => c !== 'ert-source');
    const init: WorkerInit = {
      name: this.o.name,
      ref: { name: this.o.ref.name, ...(this.o.ref.use === undefined ? {} : { use: this.o.ref.use }) },
      fromDir: this.o.fromDir,
      ...(conditions === undefined ? {} : { conditions }),
      options: this.o.options,
      hostName: this.o.hostName,
      root: this.o.root,
      enforce: this.o.enforce,
    };
    const execArgv = workerExecArgv();
    const worker = new Worker(entry, { workerData: init, name: `ert-plugin-${this.o.name}`, ...(execArgv === undefined ? {} : { execArgv }) });
    worker.unref();
    const pending = new Map<number, Pending>();
    let readyPending: Pending | undefined;
    const ready = new Promise<ResourceHookName[]>((resolve, reject) => {
      readyPending = { hook: 'resource', resolve: resolve as (v: unknown) => void, reject };
    });
    ready.catch(() => undefined);
    const thread = { worker, pending, ready } as Thread;
    thread.prepared = prepare(thread);
    // A worker that could not be prepared (its replay failed) is not used again: the next call starts another.
    thread.prepared.catch((err: unknown) => {
      if (thread.ended !== undefined) return;
      this.end(thread, `its view could not be replayed: ${err instanceof Error ? err.message : String(err)}`);
      void thread.worker.terminate();
    });
    this.track(thread, 0, readyPending!);

    worker.on('message', (message: FromWorker) => this.receive(thread, message));
    worker.on('error', (err) => {
      this.o.logger.error({ plugin: this.o.name, err }, `Plugin "${this.o.name}": its worker thread crashed: ${err.message}`);
      this.end(thread, `its worker thread crashed: ${err.message}`);
    });
    worker.on('messageerror', (err) => this.end(thread, `a message from its worker thread could not be read: ${err.message}`));
    worker.on('exit', (code) => this.end(thread, `its worker thread exited (code ${code})`));
    return thread;
  }

  private receive(thread: Thread, message: FromWorker): void {
    switch (message.t) {
      case 'log': {
        const target = Object.keys(message.bindings).length > 0 ? this.o.logger.child(message.bindings) : this.o.logger;
        if (message.msg === undefined) target[message.level](message.obj as object);
        else target[message.level](message.obj as object, message.msg);
        return;
      }
      case 'ready':
        this.started = true;
        this.settle(thread, 0)?.resolve(message.hooks);
        return;
      case 'failed': {
        const waiting = this.settle(thread, 0);
        const { error, invalid } = message;
        let err: Error;
        if (invalid !== undefined) {
          err = new PluginHookError(CoreErrorCodes.PLUGIN_HOOK_INVALID_RESULT, `Plugin "${this.o.name}" hook "resource" returned an invalid result: ${invalid}`, {
            plugin: this.o.name,
            hook: 'resource',
            problem: invalid,
          });
        } else if (error.code?.startsWith('ERT_PLUGIN_') === true) {
          err = new PluginLoadError(error.code, `${error.message} (in its worker thread)`, { ...(error.details ?? {}), plugin: this.o.name });
        } else {
          err = fromWire(error);
        }
        waiting?.reject(err);
        this.end(thread, `it failed to start: ${error.message}`);
        void thread.worker.terminate();
        return;
      }
      case 'result':
        this.settle(thread, message.id)?.resolve(message.value);
        return;
      case 'error':
        this.settle(thread, message.id)?.reject(fromWire(message.error));
        return;
      case 'unclonable': {
        const waiting = this.settle(thread, message.id);
        if (waiting === undefined) return;
        const problem = `it cannot be passed out of the plugin's worker thread (hook results must be structured-cloneable data: no functions, no Promises inside): ${message.problem}`;
        waiting.reject(
          new PluginHookError(CoreErrorCodes.PLUGIN_HOOK_INVALID_RESULT, `Plugin "${this.o.name}" hook "${waiting.hook}" returned an invalid result: ${problem}`, {
            plugin: this.o.name,
            hook: waiting.hook,
            problem,
          }),
        );
        return;
      }
    }
  }

  private send(thread: Thread, hook: ResourceHookName, args: unknown[]): Promise<unknown> {
    if (thread.ended !== undefined) return Promise.reject(new Error(`the plugin's worker thread is gone: ${thread.ended}`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const message: ToWorker = { t: 'call', id, hook, args };
      try {
        thread.worker.postMessage(message);
      } catch (err) {
        reject(new Error(`the arguments of "${hook}" cannot be passed to the plugin's worker thread: ${err instanceof Error ? err.message : String(err)}`));
        return;
      }
      this.track(thread, id, { hook, resolve, reject });
    });
  }

  /** Wait for `id`; the worker keeps the process alive only while something waits on it. */
  private track(thread: Thread, id: number, pending: Pending): void {
    if (thread.pending.size === 0) thread.worker.ref();
    thread.pending.set(id, pending);
  }

  private settle(thread: Thread, id: number): Pending | undefined {
    const pending = thread.pending.get(id);
    thread.pending.delete(id);
    if (thread.pending.size === 0 && thread.ended === undefined) thread.worker.unref();
    return pending;
  }

  /** The worker ended (terminated, crashed, exited): whatever waits on it fails. */
  private end(thread: Thread, why: string): void {
    if (thread.ended !== undefined) return;
    thread.ended = why;
    for (const pending of thread.pending.values()) pending.reject(new Error(`the plugin's worker thread ended: ${why}`));
    thread.pending.clear();
    thread.worker.unref();
  }

  /** Terminate the current worker (a call timed out); the next call starts a fresh one. */
  private kill(why: string): void {
    const thread = this.thread;
    if (thread === undefined || thread.ended !== undefined) return;
    this.o.logger.warn({ plugin: this.o.name }, `Plugin "${this.o.name}": ${why}; its worker thread is terminated, a fresh one starts at the next call`);
    this.end(thread, `terminated: ${why}`);
    void thread.worker.terminate();
  }

  /** Keep what a fresh worker must be told again, once the call succeeded. */
  private record(hook: ResourceHookName, args: unknown[]): void {
    if (hook === 'discover') this.discovered = true;
    else if (hook === 'reset') this.instances.clear();
    else if (hook === 'addInstance') {
      const instance = args[0] as ClaimedInstance;
      this.instances.set(instance.uuid, instance);
    } else if (hook === 'removeInstance') this.instances.delete(args[0] as string);
  }

  /** The plugin's `close` (if it has one and its worker is alive), then the worker terminated. */
  private async close(hasClose: boolean): Promise<void> {
    const call = currentHookCall();
    if (this.closed) return;
    this.closed = true;
    const thread = this.thread;
    if (thread === undefined || thread.ended !== undefined) return;
    try {
      if (hasClose) await this.guarded('close', call, () => this.send(thread, 'close', []));
    } finally {
      this.end(thread, 'closed');
      await thread.worker.terminate();
    }
  }
}

/**
 * Start a resource plugin in a worker thread of its own and return hooks that call it
 * there. Called through the dispatcher (hook `resource`): loading the plugin and its
 * factory run under that call's timeout, like an in-process factory.
 * Throws PluginLoadError (the worker entry is missing; loading failed in the worker),
 * PluginHookError ERT_PLUGIN_HOOK_INVALID_RESULT (the factory returned no hooks), or the
 * factory's error.
 */
export function startWorkerResource(options: WorkerResourceOptions): Promise<ResourceHooks> {
  return new WorkerResource(options).start();
}

export { RESOURCE_HOOKS };
