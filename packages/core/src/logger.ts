import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import type { LogLevel } from './config-schema.js';

/** Options of `createLogger`. */
export interface LoggerOptions {
  level: LogLevel;
  /** Where JSON lines go: a stream, or a file descriptor / file path; default stderr (fd 2). */
  destination?: DestinationStream | number | string;
}

/**
 * A pino logger writing JSON lines (synchronously, so nothing is lost when the process
 * exits). Stdout stays free for command output. Plugins get `child({ plugin: name })` of it.
 */
export function createLogger(options: LoggerOptions): PinoLogger {
  const destination =
    options.destination === undefined || typeof options.destination === 'number' || typeof options.destination === 'string'
      ? pino.destination({ dest: options.destination ?? 2, sync: true })
      : options.destination;
  return pino({ level: options.level }, destination);
}
