import { ErtError, isErtError } from '@ert/plugin-api';

/**
 * Error codes the CLI raises itself. Errors from the other packages (ERT_CONFIG_*,
 * ERT_PLUGIN_*, ERT_STORE_*, ERT_SPEC_*, ERT_SCHEDULER_*, ERT_TRACKER_*) pass through
 * unchanged; `exitCodeFor` maps every code to the documented exit status.
 */
export const CliErrorCode = {
  /** Bad command line: a missing or malformed argument or option. */
  USAGE: 'ERT_CLI_USAGE',
  /** `ert init` would overwrite a file and --force was not given. */
  INIT_EXISTS: 'ERT_CLI_INIT_EXISTS',
  /** `--flavor NAME` names no flavor of the config. */
  UNKNOWN_FLAVOR: 'ERT_CLI_UNKNOWN_FLAVOR',
  /** `--root DIR` is not a readable directory. */
  BAD_ROOT: 'ERT_CLI_BAD_ROOT',
  /** `ert release UUID`: the store has no such instance. */
  UNKNOWN_INSTANCE: 'ERT_CLI_UNKNOWN_INSTANCE',
  /** `--host NAME` names no host in the store. */
  UNKNOWN_HOST: 'ERT_CLI_UNKNOWN_HOST',
  /** A claim on the compute host was refused by its plugins or by placement. */
  CLAIM_REJECTED: 'ERT_CLI_CLAIM_REJECTED',
  /**
   * The claim was written (the instance holds its allocations) but a plugin hook failed
   * afterwards: enforcement under `enforcementFailure: report`, addInstance, stats
   * (details: instance, host, allocations, problems).
   */
  CLAIMED_WITH_PROBLEMS: 'ERT_CLI_CLAIMED_WITH_PROBLEMS',
  /** The instance was released (its allocations are gone) but a plugin hook failed doing it: removeInstance, stats, enforcement (details: instance, host, problems). */
  RELEASED_WITH_PROBLEMS: 'ERT_CLI_RELEASED_WITH_PROBLEMS',
  /** `ert release UUID`: the host's tracker released nothing; the instance is no longer recorded on that host (details: instance, host). */
  NOT_RELEASED: 'ERT_CLI_NOT_RELEASED',
  /** The configured store cannot be opened or migrated (unreachable server, unwritable file). */
  STORE_UNAVAILABLE: 'ERT_CLI_STORE_UNAVAILABLE',
  /** A file the command needs (host profiles) is missing. */
  MISSING_FILE: 'ERT_CLI_MISSING_FILE',
  /** A directory or file the command must write cannot be created (`init` into /proc, a read-only place). Exit 1. */
  CANNOT_WRITE: 'ERT_CLI_CANNOT_WRITE',
  /** `ert host events`: the metrics server of `ert host run` did not answer, or has no event stream. Exit 1. */
  EVENTS_UNAVAILABLE: 'ERT_CLI_EVENTS_UNAVAILABLE',
} as const;

export type CliErrorCode = (typeof CliErrorCode)[keyof typeof CliErrorCode];

/** An error raised by the CLI itself; `details` name the value at fault. */
export class CliError extends ErtError<CliErrorCode> {}

/** Exit statuses of `ert` (documented in docs/cli.md). */
export const ExitCode = {
  OK: 0,
  /** Something failed while doing the work: store, plugin hook, file system. */
  OPERATIONAL: 1,
  /** The command line or the configuration is wrong (including flavors and plugin names). */
  USAGE: 2,
  /** No valid host for a request, or a claim rejected by the host. */
  REJECTED: 3,
  /** Done, with problems: a claim or release was written, but a plugin hook failed afterwards (enforcement, addInstance, removeInstance, stats). */
  DONE_WITH_PROBLEMS: 4,
} as const;

const USAGE_CODES: ReadonlySet<string> = new Set([
  CliErrorCode.USAGE,
  CliErrorCode.INIT_EXISTS,
  CliErrorCode.UNKNOWN_FLAVOR,
  CliErrorCode.BAD_ROOT,
  CliErrorCode.UNKNOWN_INSTANCE,
  CliErrorCode.NOT_RELEASED,
  CliErrorCode.UNKNOWN_HOST,
  CliErrorCode.MISSING_FILE,
  // `ert serve --auth` / ERT_API_AUTH naming no auth mode.
  'ERT_API_BAD_AUTH',
  // `ert simulate`'s host profiles directory unreadable or without profiles.
  'ERT_TRACKER_FLEET',
]);
const REJECTED_CODES: ReadonlySet<string> = new Set(['ERT_SCHEDULER_NO_VALID_HOST', CliErrorCode.CLAIM_REJECTED]);
const PROBLEM_CODES: ReadonlySet<string> = new Set([CliErrorCode.CLAIMED_WITH_PROBLEMS, CliErrorCode.RELEASED_WITH_PROBLEMS]);

/**
 * The exit status for an error: 2 for usage, configuration, plugin loading and extra-spec
 * errors (the operator must change something), 3 for "no valid host" and rejected claims,
 * 4 for a claim or release that was written but followed by plugin hook failures, 1 for
 * everything else (including plugin hook failures and store errors).
 */
export function exitCodeFor(err: unknown): number {
  if (!isErtError(err)) return ExitCode.OPERATIONAL;
  const code = err.code;
  if (REJECTED_CODES.has(code)) return ExitCode.REJECTED;
  if (PROBLEM_CODES.has(code)) return ExitCode.DONE_WITH_PROBLEMS;
  // An operator's provider config file that is invalid, duplicated or conflicting is configuration too.
  // A host registered from another machine or --root is the operator's mistake, like a typo in --host.
  if (USAGE_CODES.has(code) || code.startsWith('ERT_CONFIG_') || code.startsWith('ERT_SPEC_') || code.startsWith('ERT_TRACKER_PROVIDER_CONFIG_') || code === 'ERT_TRACKER_HOST_MACHINE_MISMATCH') return ExitCode.USAGE;
  // Loading a plugin fails because of the config (name, manifest, options, API range);
  // a hook that fails or returns bad stats at run time is operational.
  if (code.startsWith('ERT_PLUGIN_') && !code.startsWith('ERT_PLUGIN_HOOK_') && !code.startsWith('ERT_PLUGIN_STATS_')) {
    return ExitCode.USAGE;
  }
  return ExitCode.OPERATIONAL;
}
