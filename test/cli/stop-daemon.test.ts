import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { stopDaemon } from './helpers.js';

// The helper every daemon test stops its `ert host run` / `ert serve` with: a daemon that does not
// exit after SIGTERM fails the test naming it and showing its last output, instead of the
// after-hook's 60 s timeout (how a hung shutdown looked in CI). Mutation seen caught: the SIGKILL
// and the throw removed (the stubborn child was waited for until the test's timeout).
describe('stopDaemon', () => {
  const start = (script: string) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stderr.on('data', (d) => (output += d));
    const ready = new Promise<void>((resolve) => child.stderr.once('data', () => resolve()));
    return { child, output: () => output, ready };
  };

  it('returns the exit code of a daemon that stops on SIGTERM', async () => {
    const { child, ready } = start("process.on('SIGTERM', () => process.exit(0)); console.error('up'); setInterval(() => {}, 1000);");
    await ready;
    expect(await stopDaemon(child, 'cooperative')).toBe(0);
  });

  it('kills a daemon that ignores SIGTERM and fails naming it, with its last output', async () => {
    const { child, output, ready } = start("process.on('SIGTERM', () => console.error('ignoring SIGTERM')); console.error('up'); setInterval(() => {}, 1000);");
    await ready;
    await expect(stopDaemon(child, 'ert stubborn', { output, withinMs: 500 })).rejects.toThrow(/ert stubborn did not exit within 0.5 s of SIGTERM \(killed\); its output ended:\nup\nignoring SIGTERM/);
    expect(child.signalCode).toBe('SIGKILL');
  }, 10_000);
});
