import type { ChildProcess } from 'node:child_process';
import { stopDaemon } from '../cli/helpers.js';

/** What each child `servedAt` watched wrote on stderr so far (its logs): shown when its stop hangs. */
const stderrOf = new WeakMap<ChildProcess, () => string>();

/**
 * Where a started `ert serve` listens, read from the line it prints on stderr: `origin`
 * (`http://127.0.0.1:<port>`, where /metrics and /scheduler/v1 are) and `url` (the origin and
 * the Placement API's prefix; the origin itself when it is mounted at the root).
 */
export function servedAt(child: ChildProcess, timeoutMs = 30_000): Promise<{ origin: string; url: string }> {
  return new Promise((resolve, reject) => {
    let stderr = '';
    stderrOf.set(child, () => stderr);
    const timer = setTimeout(() => reject(new Error(`ert serve did not start:\n${stderr}`)), timeoutMs);
    child.stderr!.on('data', (d) => {
      stderr += d;
      const m = /Placement API on (http:\/\/127\.0\.0\.1:\d+)(\S*) /.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve({ origin: m[1]!, url: `${m[1]}${m[2] === '/' ? '' : m[2]}` });
      }
    });
    child.on('exit', (code) => reject(new Error(`ert serve exited ${code}:\n${stderr}`)));
  });
}

/**
 * SIGTERM every child still running, and wait until each has exited (stopDaemon: a hang fails
 * naming it, with the end of what it logged when `servedAt` watched it; `withinMs` each, 20 s
 * unless given). A stop that reported waiting ("still stopping", every 5 s, naming the open
 * connections) has those lines printed, so that a slow stop that passed is still on record.
 */
export async function stopAll(children: readonly ChildProcess[], opts: { withinMs?: number } = {}): Promise<void> {
  for (const child of children) {
    const what = `ert ${child.spawnargs.slice(2).join(' ')}`;
    const output = stderrOf.get(child);
    await stopDaemon(child, what, { output, ...opts });
    const waited = (output?.() ?? '').split('\n').filter((line) => line.includes('still stopping'));
    if (waited.length > 0) console.log(`${what} took more than 5 s to stop:\n${waited.join('\n')}`);
  }
}
