import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Flavor, Logger } from '@ert/plugin-api';
import { createLogger, loadConfig, type ErtConfig } from '@ert/core';
import { isErtError, messageOf } from '@ert/plugin-api';
import { createStore, type Store, type StoreOptions } from '@ert/store';
import { CliError, CliErrorCode } from './errors.js';
import { Output, type CliIo, type GlobalOptions } from './io.js';

/** Log level of one-shot commands when --log-level is not given: none. Their result already
 *  reports every problem (unavailable plugins, refused stats, claim reasons) and a failure
 *  is one line, so log records (with stacks) would only repeat them. Daemons (`host run`)
 *  use the config's level. */
export const DEFAULT_COMMAND_LOG_LEVEL = 'silent';

/**
 * What one command invocation works with: the global options, the output, and the config,
 * logger and store opened lazily (once) and closed by `close()`.
 */
export class CommandContext {
  readonly out: Output;
  private configPromise: Promise<ErtConfig> | undefined;
  private loggerInstance: Logger | undefined;
  private storeInstance: Store | undefined;

  constructor(
    readonly io: CliIo,
    readonly globals: GlobalOptions,
    /** Whether the command is a daemon whose default log level is the config's. */
    private readonly daemon = false,
  ) {
    this.out = new Output(io, globals.json === true);
  }

  /** The log level in force: --log-level, else the config's for daemons, else `silent`. */
  logLevel(config: ErtConfig): string {
    return this.globals.logLevel ?? (this.daemon ? config.log.level : DEFAULT_COMMAND_LOG_LEVEL);
  }

  /**
   * The config from --config, else ERT_CONFIG, else `fallbackPath` when given, else the
   * search from the working directory. Loaded once per invocation.
   */
  config(fallbackPath?: string): Promise<ErtConfig> {
    const path = this.globals.config ?? (this.io.env.ERT_CONFIG ? undefined : fallbackPath);
    if (!this.configPromise) {
      this.configPromise = loadConfig({ path, cwd: this.io.cwd, env: this.io.env }).then((config: ErtConfig) => ({
        ...config,
        log: { ...config.log, level: this.logLevel(config) as ErtConfig['log']['level'] },
      }));
    }
    return this.configPromise;
  }

  async logger(): Promise<Logger> {
    const config = await this.config();
    if (!this.loggerInstance) this.loggerInstance = createLogger({ level: config.log.level });
    return this.loggerInstance;
  }

  /**
   * The configured store, with pending migrations applied (idempotent), so every command
   * works on a fresh database. Opened once per invocation.
   */
  async store(config?: ErtConfig): Promise<Store> {
    if (!this.storeInstance) {
      const options = (config ?? (await this.config())).store;
      const store = await createStore(options);
      try {
        await store.migrate();
      } catch (err) {
        await store.close().catch(() => undefined);
        // A driver error (ECONNREFUSED, SQLITE_CANTOPEN) does not say which store it was.
        if (isErtError(err)) throw err;
        const reason = messageOf(err);
        throw new CliError(CliErrorCode.STORE_UNAVAILABLE, `cannot open the ${options.client} store ${describeConnection(options)}: ${reason}`, {
          client: options.client,
          connection: describeConnection(options),
        }, { cause: err });
      }
      this.storeInstance = store;
    }
    return this.storeInstance;
  }

  /** Close what the command opened. Safe to call more than once. */
  async close(): Promise<void> {
    const store = this.storeInstance;
    this.storeInstance = undefined;
    if (store) await store.close();
  }
}

/** The store's connection as it may be shown: a PostgreSQL password is masked. */
export function describeConnection(options: StoreOptions): string {
  return options.connection.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
}

/** The flavor of the config named `name`; an unknown name lists the known ones. */
export function findFlavor(config: ErtConfig, name: string): Flavor {
  const flavor = config.flavors.find((f: Flavor) => f.name === name);
  if (!flavor) {
    const known = config.flavors.map((f: Flavor) => f.name);
    throw new CliError(
      CliErrorCode.UNKNOWN_FLAVOR,
      `unknown flavor "${name}"${config.configFile ? ` in ${config.configFile}` : ''}; known flavors: ${known.length > 0 ? known.join(', ') : '(none)'}`,
      { flavor: name, known },
    );
  }
  return flavor;
}

/** `--root DIR` resolved from the working directory; refused unless it is a directory. */
export async function checkRoot(io: CliIo, root: string): Promise<string> {
  const absolute = resolve(io.cwd, root);
  const info = await stat(absolute).catch(() => undefined);
  if (!info?.isDirectory()) {
    throw new CliError(CliErrorCode.BAD_ROOT, `--root ${root}: ${info ? 'not a directory' : 'no such directory'} (${absolute})`, {
      root: absolute,
    });
  }
  return absolute;
}

/** A positive integer option value; anything else is a usage error naming the option. */
export function positiveInt(option: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new CliError(CliErrorCode.USAGE, `${option} must be a positive integer, got "${value}"`, { option, value });
  }
  return Number(value);
}
