import { spawn, type ChildProcess } from 'node:child_process';

/** A worker process started by `startWorker`. */
export interface Worker<T> {
  child: ChildProcess;
  /** Resolves once the worker has printed `ready` (or has ended). */
  ready: Promise<void>;
  /** Its report: the last line it printed, as JSON; rejects when it exits other than 0, with its stderr. */
  done: Promise<T>;
}

/**
 * Starts `node script ...args` for a many-process test, with a clean environment (no
 * NODE_OPTIONS: vitest's loader flags would reach the child). The script prints `ready` once
 * set up and its result as JSON on its last line. `label` names it in a failure.
 */
export function startWorker<T>(script: string, args: string[], label: string): Worker<T> {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const child = spawn(process.execPath, [script, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let markReady: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.startsWith('ready\n')) markReady();
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const done = new Promise<T>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(JSON.parse(out.trim().split('\n').pop()!) as T);
      else reject(new Error(`${label} exited with ${String(code)}: ${err}`));
    });
  });
  return { child, ready: Promise.race([ready, done.then(() => undefined)]), done };
}
