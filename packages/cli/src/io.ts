/** Where a command writes: stdout for results, stderr for progress and errors. */
export interface CliIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  cwd: string;
}

/** The process's own streams, environment and working directory. */
export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() };
}

/** Options every command accepts (declared on the root program). */
export interface GlobalOptions {
  config?: string;
  json?: boolean;
  logLevel?: string;
}

/**
 * Resolves with the signal's name at the first SIGINT or SIGTERM (the listeners are then
 * removed): how the long-running commands (`host run`, `serve`) wait to shut down gracefully.
 */
export function untilStopSignal(): Promise<string> {
  return new Promise<string>((resolve) => {
    const onSignal = (signal: string) => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      resolve(signal);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
