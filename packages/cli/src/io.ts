import { maskPasswords } from '@ert/core';
import { formatTable, type Column } from './table.js';

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
 * Prints a command's result: with `--json` one JSON document (the documented shape,
 * docs/cli.md) on stdout; otherwise the human rendering.
 */
export class Output {
  constructor(
    readonly io: CliIo,
    readonly json: boolean,
  ) {}

  /** Print `data` as JSON, or `human()` as text. */
  result(data: unknown, human: () => string): void {
    this.io.stdout.write(this.json ? JSON.stringify(data, null, 2) + '\n' : human());
  }

  /** A line for humans only (suppressed by --json). */
  note(text: string): void {
    if (!this.json) this.io.stdout.write(text.endsWith('\n') ? text : text + '\n');
  }

  /** Status on stderr (progress, daemons); kept off stdout so --json stays parseable. No password is printed (`maskPasswords`). */
  status(text: string): void {
    const masked = maskPasswords(text);
    this.io.stderr.write(masked.endsWith('\n') ? masked : masked + '\n');
  }

  table<Row>(rows: readonly Row[], columns: readonly Column<Row>[]): string {
    return formatTable(rows, columns);
  }
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
