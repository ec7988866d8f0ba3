/**
 * `isolation: worker` for resource plugins, the tracker's side: the plugin runs in a worker
 * thread of its own (worker.ts) and this module hands the tracker a `ResourceHooks` object
 * whose every hook is a message round trip to it. A hook that busy-loops or hangs past its
 * timeout gets the worker terminated — the tracker's thread never ran the plugin's code,
 * so it stays responsive — and a fresh worker starts at once and imports the plugin; the
 * next call runs its factory and rebuilds its view from what the tracker told the old one
 * (discover, then every instance added and not removed since the last reset). A thread's
 * start and the import are bounded by `loadTimeoutMs`, not by a hook's timeout: they are
 * the machine's work, not the plugin's hooks. See docs/plugins.md, "Isolation".
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { ClaimedInstance, Logger, ResourceHooks } from '@ert/plugin-api';
import { currentHookCall, type HookCall } from '../dispatcher.js';
import { CoreErrorCodes, PluginHookError, PluginLoadError } from '../errors.js';
import { RESOURCE_HOOKS, type FromWorker, type ResourceHookName, type ToWorker, type WireError, type WorkerInit } from './protocol.js';

/** How long a worker thread may take to start and import its plugin (`WorkerResourceOptions.loadTimeoutMs`'s default). */
export const WORKER_LOAD_TIMEOUT_MS = 30_000;

/** Options of `loadWorkerResource`. */
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
  /**
   * Limit of a worker thread's start and import of the plugin (before its factory), ms;
   * default WORKER_LOAD_TIMEOUT_MS. Not part of any hook's time.
   */
  loadTimeoutMs?: number;
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

/** `Thread.pending` ids of the waits for `loaded` and for `ready` (calls count from 1). */
const LOADED_ID = -1;
const READY_ID = 0;

/** One worker thread and what waits on it. */
interface Thread {
  worker: Worker;
  /** Calls sent and not answered, and the waits for `loaded` and `ready`. */
  pending: Map<number, Pending>;
  /** The plugin's module imported in the worker; its factory has not run. */
  loaded: Promise<void>;
  /** performance.now() at the spawn. */
  spawnedAt: number;
  /**
   * Set at the thread's first use: its factory run and (a worker after the first) the view
   * replayed, what every call waits for. Resolves to the hooks the plugin has.
   */
  prepared?: Promise<ResourceHookName[]>;
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

  /** Spawn the first worker and wait until it imported the plugin (bounded by `loadTimeoutMs`). */
  async load(): Promise<void> {
    await this.live().loaded;
  }

  /** Run the factory in the loaded worker and build the hooks object the tracker uses. */
  async start(): Promise<ResourceHooks> {
    const call = currentHookCall();
    const present = await this.guarded('resource', call, () => this.prepared(this.live()));
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
    const thread = this.spawn();
    this.thread = thread;
    return thread;
  }

  /** A prepared worker; a fresh one (after a timeout or a crash) first gets the view replayed. */
  private async ready(): Promise<Thread> {
    const thread = this.live();
    await this.prepared(thread);
    return thread;
  }

  /**
   * `thread.prepared`, begun at the first use: once loaded, the factory, then (a worker after
   * the first) the replay. A worker that could not be prepared is not used again: the next
   * call starts another.
   */
  private prepared(thread: Thread): Promise<ResourceHookName[]> {
    if (thread.prepared !== undefined) return thread.prepared;
    const replays = this.started;
    const prepared = thread.loaded.then(async () => {
      const hooks = await this.runFactory(thread);
      if (replays) await this.replay(thread);
      return hooks;
    });
    prepared.catch((err: unknown) => {
      if (thread.ended !== undefined) return;
      this.end(thread, `its factory or the replay of its view failed: ${err instanceof Error ? err.message : String(err)}`);
      void thread.worker.terminate();
    });
    thread.prepared = prepared;
    return prepared;
  }

  /** Ask the loaded worker to run the plugin's factory; resolves to the hooks it has. */
  private runFactory(thread: Thread): Promise<ResourceHookName[]> {
    if (thread.ended !== undefined) return Promise.reject(new Error(`the plugin's worker thread is gone: ${thread.ended}`));
    return new Promise((resolve, reject) => {
      this.track(thread, READY_ID, { hook: 'resource', resolve: resolve as (v: unknown) => void, reject });
      const message: ToWorker = { t: 'start' };
      thread.worker.postMessage(message);
    });
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

  /** A new worker thread importing the plugin; its factory waits for `runFactory`. */
  private spawn(): Thread {
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
    let loadedPending: Pending | undefined;
    const loaded = new Promise<void>((resolve, reject) => {
      loadedPending = { hook: 'resource', resolve: resolve as (v: unknown) => void, reject };
    });
    loaded.catch(() => undefined);
    const thread: Thread = { worker, pending, loaded, spawnedAt: performance.now() };
    this.track(thread, LOADED_ID, loadedPending!);
    const loadTimeoutMs = this.o.loadTimeoutMs ?? WORKER_LOAD_TIMEOUT_MS;
    const loadTimer = setTimeout(() => {
      if (!thread.pending.has(LOADED_ID)) return;
      this.settle(thread, LOADED_ID)?.reject(
        new PluginLoadError(CoreErrorCodes.PLUGIN_IMPORT_FAILED, `Plugin "${this.o.name}": its worker thread did not import the plugin within ${loadTimeoutMs} ms`, {
          plugin: this.o.name,
          timeoutMs: loadTimeoutMs,
        }),
      );
      this.end(thread, `it did not import the plugin within ${loadTimeoutMs} ms`);
      void thread.worker.terminate();
    }, loadTimeoutMs);
    loadTimer.unref();
    void loaded.then(
      () => clearTimeout(loadTimer),
      () => clearTimeout(loadTimer),
    );

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
      case 'loaded': {
        const ms = Math.round(performance.now() - thread.spawnedAt);
        this.o.logger.debug({ plugin: this.o.name, ms }, `Plugin "${this.o.name}": a worker thread started and imported the plugin in ${ms} ms`);
        this.settle(thread, LOADED_ID)?.resolve(undefined);
        return;
      }
      case 'ready':
        this.started = true;
        this.settle(thread, READY_ID)?.resolve(message.hooks);
        return;
      case 'failed': {
        // Importing (nothing asked for the factory yet) or the factory failed.
        const waiting = this.settle(thread, LOADED_ID) ?? this.settle(thread, READY_ID);
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

  /**
   * The worker ended (terminated, crashed, exited): whatever waits on it fails. When it was
   * the current one and had been put to use, a fresh worker starts at once and imports the
   * plugin, so that the next call does not wait for a thread's start; one that never got
   * that far (its import failed) is not replaced until a call asks, so a plugin that cannot
   * load does not restart in a loop.
   */
  private end(thread: Thread, why: string): void {
    if (thread.ended !== undefined) return;
    thread.ended = why;
    for (const pending of thread.pending.values()) pending.reject(new Error(`the plugin's worker thread ended: ${why}`));
    thread.pending.clear();
    thread.worker.unref();
    if (thread === this.thread && thread.prepared !== undefined && this.started && !this.closed) this.startSpare();
  }

  /**
   * The fresh worker `end` starts. Called from worker events and timeout listeners, so it never
   * throws: a worker that cannot be spawned now (its entry gone, Node refusing another thread)
   * is logged, and the next call tries again, failing with the reason.
   */
  private startSpare(): void {
    try {
      this.live();
    } catch (err) {
      this.o.logger.warn({ plugin: this.o.name, err }, `Plugin "${this.o.name}": a fresh worker thread could not be started: ${err instanceof Error ? err.message : String(err)}; the next call tries again`);
    }
  }

  /** Terminate the current worker (a call timed out); a fresh one starts at once. */
  private kill(why: string): void {
    const thread = this.thread;
    if (thread === undefined || thread.ended !== undefined) return;
    this.o.logger.warn({ plugin: this.o.name }, `Plugin "${this.o.name}": ${why}; its worker thread is terminated and a fresh one started`);
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

/** A resource plugin imported in a worker thread of its own, its factory not yet run. */
export interface LoadedWorkerResource {
  /**
   * Run the plugin's factory in the worker and return hooks that call it there. Call it
   * through the dispatcher (hook `resource`), synchronously inside the call's `fn`: the
   * factory runs under that call's timeout, like an in-process factory, and a timeout
   * terminates the worker. Rejects with PluginHookError ERT_PLUGIN_HOOK_INVALID_RESULT (the
   * factory returned no hooks) or the factory's error.
   */
  start(): Promise<ResourceHooks>;
}

/**
 * Start a worker thread for a resource plugin and wait until it imported the plugin: the
 * thread's start and the import (about 0.2 s, more on a loaded machine) are bounded by
 * `loadTimeoutMs`, not by `hookTimeout`. Rejects with PluginLoadError (the worker entry is
 * missing; importing failed in the worker; ERT_PLUGIN_IMPORT_FAILED when the import did not
 * finish in time, the worker terminated).
 */
export async function loadWorkerResource(options: WorkerResourceOptions): Promise<LoadedWorkerResource> {
  const resource = new WorkerResource(options);
  await resource.load();
  return { start: () => resource.start() };
}

export { RESOURCE_HOOKS };
