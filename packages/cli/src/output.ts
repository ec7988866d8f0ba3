import { maskPasswords } from '@ert/core';
import type { CliIo } from './io.js';
import { formatTable, type Column } from './table.js';

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
