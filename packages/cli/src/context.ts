import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { ExtraSpecKey, Flavor, Logger, ResourceRequestGroup } from '@ert/plugin-api';
import { createLogger, loadConfig, maskPasswords, resolvePlugin, type ErtConfig } from '@ert/core';
import { ErtError, isCustomName, isErtError, isValidTraitName, messageOf } from '@ert/plugin-api';
import { parseFlavor } from '@ert/placement';
import { createStore, isStoreUnavailable, type Store, type StoreOptions } from '@ert/store';
import { CliError, CliErrorCode } from './errors.js';
import type { CliIo, GlobalOptions } from './io.js';
import { Output } from './output.js';

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
   * The configured store, opened once per invocation (`openStore`). With `create` (`db migrate`
   * and the tracker's own commands: `host sync`, `host run`, `claim`) a missing store is created
   * and pending migrations are applied; with `anySchema` (`db status`) it is only reached;
   * otherwise nothing is created or migrated: a missing store, a schema older or newer than
   * this program's is an error saying which (ERT_STORE_MISSING, ERT_STORE_SCHEMA_OUTDATED,
   * ERT_STORE_SCHEMA_NEWER) and what to do.
   */
  async store(config?: ErtConfig, opts: { create?: boolean; anySchema?: boolean } = {}): Promise<Store> {
    if (!this.storeInstance) {
      const options = (config ?? (await this.config())).store;
      this.storeInstance = await this.openStore(options, { mode: opts.create ? 'create' : opts.anySchema ? 'reach' : 'current' });
    }
    return this.storeInstance;
  }

  /**
   * Open a store (the caller closes it; `store()` is the configured one, closed by `close()`):
   * `create` creates a missing store and applies pending migrations, saying so on stderr when
   * it was created (unless `quiet`); `current` refuses a missing store or a schema that is not
   * this program's; `reach` only reads the schema's state. A store that cannot be opened
   * (server unreachable, file not creatable) is ERT_CLI_STORE_UNAVAILABLE naming the client and
   * the connection (password masked) and, when given, the `option` it came from.
   */
  async openStore(options: StoreOptions, opts: { mode: 'create' | 'current' | 'reach'; quiet?: boolean; option?: string }): Promise<Store> {
    // knex's pool diagnostics (a connection lost, an acquire failed) at debug, as bin.ts
    // treats libraries' console output: a one-shot command's failure stays one line.
    const logger = await this.logger();
    const where = describeConnection(options);
    const unavailable = (err: unknown): CliError => {
      const reason = messageOf(isStoreUnavailable(err) && err.cause !== undefined ? err.cause : err);
      return new CliError(
        CliErrorCode.STORE_UNAVAILABLE,
        `cannot open the ${options.client} store ${where}${opts.option !== undefined ? ` (${opts.option})` : ''}: ${maskPasswords(reason)}`,
        { client: options.client, connection: where, ...(opts.option !== undefined ? { option: opts.option } : {}) },
        { cause: err },
      );
    };
    let store: Store;
    try {
      store = await createStore({ ...options, logger: { warn: (fields, message) => logger.debug(fields, message) } });
    } catch (err) {
      if (isErtError(err) && !isStoreUnavailable(err)) throw err;
      throw unavailable(err);
    }
    try {
      if (opts.mode === 'create') {
        const before = await store.schemaStatus();
        await store.migrate();
        // A mistyped path must not become a new, empty store silently.
        if (!opts.quiet && (!before.exists || before.applied.length === 0)) {
          this.out.status(`ert: note: created a new ${options.client === 'pg' ? 'PostgreSQL' : 'SQLite'} store at ${where}${options.client === 'pg' ? ` (schema ${options.schema ?? 'public'})` : ''}; if that is not the store you meant, check store.connection`);
        }
      } else if (opts.mode === 'reach') {
        await store.schemaStatus();
      } else {
        await store.checkSchema();
      }
    } catch (err) {
      await store.close().catch(() => undefined);
      // A driver error (ECONNREFUSED, SQLITE_CANTOPEN) does not say which store it was; nor
      // does ERT_STORE_UNAVAILABLE (it stays the cause: `host run` waits for such a store).
      if (isErtError(err) && !isStoreUnavailable(err)) throw err;
      throw unavailable(err);
    }
    return store;
  }

  /** Close what the command opened. Safe to call more than once. */
  async close(): Promise<void> {
    const store = this.storeInstance;
    this.storeInstance = undefined;
    if (store) await store.close();
  }
}

/** The store's connection as it may be shown: any password in it is masked (`maskPasswords`). */
export function describeConnection(options: StoreOptions): string {
  return maskPasswords(options.connection);
}

/** The flavor of the config named `name`; an unknown name lists the known ones. */
export function findFlavor(config: ErtConfig, name: string): Flavor {
  const flavor = config.flavors.find((f: Flavor) => f.name === name);
  if (!flavor) {
    const known = config.flavors.map((f: Flavor) => f.name);
    const file = flavorsFileOf(config);
    throw new CliError(
      CliErrorCode.UNKNOWN_FLAVOR,
      `unknown flavor "${name}"${file ? ` in ${file}` : ''}; known flavors: ${known.length > 0 ? known.join(', ') : '(none)'}`,
      { flavor: name, known },
    );
  }
  return flavor;
}

/** The file the flavors are defined in: the flavors file (`flavors: <path>`), else the config file. */
export function flavorsFileOf(config: ErtConfig): string | undefined {
  return config.flavorsFile ?? config.configFile;
}

/**
 * An extra-spec error (`ERT_SPEC_*`) of `flavor`, its message prefixed with the flavor and
 * the file it is defined in (`flavor "bad" in /etc/ert/flavors.yaml: extra spec ...`), same
 * code; any other error is returned as it is.
 */
export function inFlavor(err: unknown, config: ErtConfig, flavor: Flavor): unknown {
  if (!isErtError(err) || !err.code.startsWith('ERT_SPEC_')) return err;
  const file = flavorsFileOf(config);
  return new ErtError(err.code, `flavor ${JSON.stringify(flavor.name)}${file ? ` in ${file}` : ''}: ${err.message}`, { ...err.details, flavor: flavor.name, ...(file ? { file } : {}) }, { cause: err });
}

/**
 * Parse `flavor` as the compute host's tracker will (placement's rules, the extra-spec keys
 * of the configured resource plugins), so that a bad extra spec is the configuration error it
 * is (`ERT_SPEC_*`, exit 2, naming the flavor and its file) and not a refusal of the host.
 * The plugins are resolved as the tracker resolves them (Node caches the modules).
 */
export async function checkComputeFlavor(config: ErtConfig, flavor: Flavor): Promise<void> {
  const keys: ExtraSpecKey[] = [];
  for (const ref of config.tracker.resources) {
    const resolved = await resolvePlugin({ ref, side: 'compute', kinds: ['resource'], fromDir: config.configDir });
    keys.push(...(resolved.plugin.extraSpecs ?? []));
  }
  try {
    parseFlavor(flavor, { keys });
  } catch (err) {
    throw inFlavor(err, config, flavor);
  }
}

/**
 * `flavor` with the image properties of `--image-property KEY=VALUE` (repeatable) on it
 * (`flavor.image`, merged with the extra specs by Nova's rules when parsed, docs/images.md);
 * the flavor unchanged when none is given. A pair without `=` is a usage error naming it.
 */
export function withImageProperties(flavor: Flavor, pairs: readonly string[] | undefined): Flavor {
  if (pairs === undefined || pairs.length === 0) return flavor;
  const properties: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) throw new CliError(CliErrorCode.USAGE, `--image-property must be KEY=VALUE (trait:NAME=required, hw_cpu_policy=dedicated), got ${JSON.stringify(pair)}`, { option: '--image-property', value: pair });
    properties[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return { ...flavor, image: { properties } };
}

/**
 * One `--request-group` value: `REQUESTER:CLASS=N[,CLASS=N...][;required=T1,T2][;forbidden=T3]`
 * (e.g. `port1:NET_BW_EGR_KILOBIT_PER_SEC=1000;required=CUSTOM_PHYSNET_PUBLIC`), a port's or
 * device's resource request (docs/request-groups.md). The shape is checked here, naming the
 * option; names and amounts are checked when the flavor is parsed (ERT_SPEC_*, exit 2).
 */
export function parseRequestGroupOption(text: string): ResourceRequestGroup {
  const usage = () =>
    new CliError(CliErrorCode.USAGE, `--request-group must be REQUESTER:CLASS=N[,CLASS=N...][;required=TRAIT,...][;forbidden=TRAIT,...], got ${JSON.stringify(text)}`, { option: '--request-group', value: text });
  const [head, ...clauses] = text.split(';');
  const colon = head!.indexOf(':');
  if (colon < 1) throw usage();
  const resources: Record<string, number> = {};
  for (const pair of head!.slice(colon + 1).split(',')) {
    const [resourceClass, amount, extra] = pair.split('=');
    if (!resourceClass || amount === undefined || extra !== undefined || !/^\d+$/.test(amount.trim())) throw usage();
    resources[resourceClass.trim()] = Number(amount.trim());
  }
  const group: ResourceRequestGroup = { requester: head!.slice(0, colon).trim(), resources };
  for (const clause of clauses) {
    const [key, list] = clause.split('=');
    if ((key !== 'required' && key !== 'forbidden') || !list) throw usage();
    group[key] = list.split(',').map((t) => t.trim());
  }
  return group;
}

/** `flavor` with the `--request-group` values as its request groups; the flavor itself when none is given. */
export function withRequestGroups(flavor: Flavor, values: readonly string[] | undefined): Flavor {
  if (values === undefined || values.length === 0) return flavor;
  return { ...flavor, requestGroups: values.map(parseRequestGroupOption) };
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

/** Edit distance (insertions, deletions, substitutions) between two names. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length]!;
}

/** Up to three known names closest to `name` (edit distance at most max(2, a third of its length)), closest first. */
export function closestNames(name: string, known: readonly string[]): string[] {
  const limit = Math.max(2, Math.floor(name.length / 3));
  return known
    .map((k) => ({ k, d: editDistance(name.toLowerCase(), k.toLowerCase()) }))
    .filter((c) => c.d <= limit)
    .sort((x, y) => x.d - y.d || x.k.localeCompare(y.k))
    .slice(0, 3)
    .map((c) => c.k);
}

/** ERT_CLI_UNKNOWN_HOST for `--host name`, with the closest names the store holds. */
export function unknownHost(name: string, known: readonly string[], hint = ''): CliError {
  const close = closestNames(name, known);
  const suggestion = close.length > 0 ? `; did you mean ${close.join(', ')}?` : known.length > 0 ? `; known hosts: ${known.slice(0, 10).join(', ')}${known.length > 10 ? ', ...' : ''}` : '; the store has no hosts';
  return new CliError(CliErrorCode.UNKNOWN_HOST, `no host ${JSON.stringify(name)} in the store${suggestion}${hint}`, { host: name, didYouMean: close });
}

/** A positive integer option value; anything else is a usage error naming the option. */
export function positiveInt(option: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new CliError(CliErrorCode.USAGE, `${option} must be a positive integer, got "${value}"`, { option, value });
  }
  return Number(value);
}

/**
 * A uuid option's value (`--uuid`) in its canonical form (`canonicalUuid`); anything else is a
 * usage error naming the option. (@ert/api, which holds the rule, is imported here, when a
 * uuid is given: it loads the API server's code, which no other command of the caller needs.)
 */
export async function uuidOption(option: string, value: string): Promise<string> {
  const { canonicalUuid } = await import('@ert/api');
  const uuid = canonicalUuid(value);
  if (uuid === undefined) {
    throw new CliError(CliErrorCode.USAGE, `${option} must be a uuid (32 hex digits, any case, dashes optional: 4f1c9c1e-0b7a-4e4b-9d55-1c2f3a4b5c6d), got ${JSON.stringify(value)}`, { option, value });
  }
  return uuid;
}

/**
 * Refuse a trait an operator may not set (`ert trait`, `ert aggregate set-traits`), as
 * Placement does: it must be a standard trait (os-traits, the list Placement knows) or
 * `CUSTOM_` followed by A-Z, 0-9 and _. A usage error naming it, with the closest standard
 * traits (`details.didYouMean`). (@ert/api, which holds the standard traits, is imported
 * here, as in `uuidOption`.)
 */
export async function checkTraitName(trait: string): Promise<void> {
  const { STANDARD_TRAITS, STANDARDS_SOURCE } = await import('@ert/api');
  if (STANDARD_TRAITS.includes(trait) || (isCustomName(trait) && isValidTraitName(trait))) return;
  const close = closestNames(trait, STANDARD_TRAITS);
  throw new CliError(
    CliErrorCode.USAGE,
    `${JSON.stringify(trait)} is not a trait name: CUSTOM_ followed by A-Z, 0-9 and _, or a standard trait (os-traits ${STANDARDS_SOURCE['os-traits'] ?? ''})${close.length > 0 ? `; did you mean ${close.join(', ')}?` : ''}`,
    { trait, didYouMean: close },
  );
}
