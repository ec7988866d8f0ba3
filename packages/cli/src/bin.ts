#!/usr/bin/env node
import { runCli } from './program.js';

// Libraries print diagnostics with console.* (knex's pool logs "Acquire connection error"
// and a stack with console.log). stdout carries only the result, so --json stays
// parseable, and a failure is one line: such output goes to stderr at --log-level debug or
// trace, and nowhere otherwise. ert itself writes through its streams and its logger.
const debug = /(^|\s)--log-level(=|\s+)(debug|trace)(\s|$)/.test(process.argv.slice(2).join(' '));
for (const method of ['log', 'info', 'warn', 'debug'] as const) console[method] = debug ? console.error : () => undefined;

// A reader that goes away (`ert ... | head`) is not a failure: stop quietly, as a process
// killed by SIGPIPE would, instead of an unhandled 'error' event and its stack.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

process.exitCode = await runCli(process.argv.slice(2));
