/**
 * @ert/cli — the `ert` command. The binary is `dist/bin.js`; this entry exposes the
 * program for embedding and tests.
 */
export { createProgram, runCli, cliVersion } from './program.js';
export { CliError, CliErrorCode, ExitCode, exitCodeFor } from './errors.js';
export { formatTable, formatCell, type Column } from './table.js';
export { seededRandom, randomUuid, randomInt } from './random.js';
export { runSimulation, type SimulationOptions, type SimulationReport } from './simulation.js';
export type { CliIo, GlobalOptions } from './io.js';
