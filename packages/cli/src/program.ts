import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { isErtError, messageOf } from '@ert/plugin-api';
import type { CommandContext } from './context.js';
import { CliErrorCode, ExitCode, exitCodeFor } from './errors.js';
import { processIo, type CliIo, type GlobalOptions } from './io.js';

/*
 * Each command's implementation is imported when the command runs (`action(commands.x, ...)`):
 * `ert --help` and `ert --version` load commander and nothing else, and a command loads only
 * what it uses (`ert hosts` neither fastify nor the tracker). The commander definitions below
 * (names, options, help texts) stay here, eager, so that the help needs no command's module.
 * A new command: its module in `commands/`, a loader here, its definition with `action`.
 */
const commands = {
  init: () => import('./commands/init.js'),
  db: () => import('./commands/db.js'),
  plugins: () => import('./commands/plugins.js'),
  host: () => import('./commands/host.js'),
  hostRun: () => import('./commands/host-run.js'),
  hostEvents: () => import('./commands/host-events.js'),
  claim: () => import('./commands/claim.js'),
  schedule: () => import('./commands/schedule.js'),
  instances: () => import('./commands/instances.js'),
  inventory: () => import('./commands/inventory.js'),
  simulate: () => import('./commands/simulate.js'),
  demo: () => import('./commands/demo.js'),
  serve: () => import('./commands/serve.js'),
  fleet: () => import('./commands/fleet.js'),
};

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** The CLI package's version (shown by --version). */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

type Handler = (ctx: CommandContext, ...args: any[]) => Promise<void>;

/**
 * Commander's message of a command-line mistake as one line: its suggestion, which it puts on
 * a line of its own (`unknown option '--flavour'\n(Did you mean --flavor?)`), joins the line
 * as `(did you mean --flavor?)`.
 */
export function usageMessage(message: string): string {
  return message
    .replace(/^error: /, '')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .join(' ')
    .replace('(Did you mean', '(did you mean');
}

/**
 * Commander checks required options before unknown ones, so `ert claim --flavour x` said
 * "required option '--flavor <name>' not specified": the option typed is the mistake to
 * report, with its suggestion. An unknown option found here (commander has parsed the
 * options: unknown ones stay in `args`, from the first) is reported first.
 */
interface CommanderInternals {
  unknownOption(flag: string): never;
  missingMandatoryOptionValue(option: Option): never;
}

class ErtCommand extends Command {
  override createCommand(name?: string): Command {
    return new ErtCommand(name);
  }

  // Commander's own methods (command.js), not in its type declarations.
  missingMandatoryOptionValue(option: Option): never {
    const unknown = this.args.find((arg) => arg.length > 1 && arg.startsWith('-'));
    const internals = Command.prototype as unknown as CommanderInternals;
    if (unknown !== undefined) internals.unknownOption.call(this, unknown);
    return internals.missingMandatoryOptionValue.call(this, option);
  }
}

/**
 * Build the `ert` program. Each action creates a `CommandContext` from the global options,
 * runs the handler and closes what it opened; errors propagate to `runCli`.
 */
export function createProgram(io: CliIo = processIo()): Command {
  const program = new ErtCommand('ert');
  program
    .description('ert: extensible resource tracker and scheduler for compute fleets')
    .version(cliVersion(), '-V, --version', 'print the version')
    .option('-c, --config <file>', 'config file (default: $ERT_CONFIG, else searched from the working directory)')
    .option('--json', 'print results as JSON (shapes in docs/cli.md)')
    .addOption(new Option('--log-level <level>', 'log level on stderr (default: silent; host run: the config\'s)').choices(LOG_LEVELS))
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
      // One line, like every other failure, with the way to the usage on it.
      outputError: (s, write) => write(`ert: ${usageMessage(s)} (run with --help for usage)\n`),
    });

  /**
   * A command's action: `load` imports the command's module, `handler` picks its handler;
   * the handler runs with a `CommandContext` from the global options, which is then closed.
   */
  const action =
    <Module>(load: () => Promise<Module>, handler: (module: Module) => Handler, opts: { daemon?: boolean } = {}) =>
    async (...args: unknown[]) => {
      const command = args[args.length - 1] as Command;
      const [{ CommandContext }, module] = await Promise.all([import('./context.js'), load()]);
      const ctx = new CommandContext(io, command.optsWithGlobals<GlobalOptions>(), opts.daemon);
      try {
        await handler(module)(ctx, ...args.slice(0, -1));
      } finally {
        await ctx.close();
      }
    };

  program
    .command('init')
    .description('write a starter ert.config.yaml, flavors.yaml and providers.d/ into DIR')
    .argument('[dir]', 'target directory', '.')
    .option('-f, --force', 'overwrite existing files')
    .action(action(commands.init, (m) => m.initCommand));

  const db = program.command('db').description('database commands');
  db.command('migrate').description('apply pending store migrations (idempotent)').action(action(commands.db, (m) => m.migrateCommand));
  db.command('status').description('the store: kind, schema version, pending migrations, how many hosts, providers, instances').action(action(commands.fleet, (m) => m.dbStatusCommand));

  program
    .command('plugins')
    .description('list the resolved plugins of both sides: package, version, kinds, options')
    .action(action(commands.plugins, (m) => m.pluginsCommand));

  const host = program.command('host').description('the compute-host tracker on this machine');
  host
    .command('discover')
    .description('run the resource plugins and show what they find (writes nothing)')
    .option('--root <dir>', 'directory standing for / (default: tracker.root)')
    .option('--name <host>', 'host name (default: tracker.hostName, else the machine\'s)')
    .action(action(commands.host, (m) => m.hostDiscoverCommand));
  host
    .command('sync')
    .description('discover and write this host into the store once')
    .option('--root <dir>', 'directory standing for / (default: tracker.root)')
    .option('--name <host>', 'host name (default: tracker.hostName, else the machine\'s)')
    .action(action(commands.host, (m) => m.hostSyncCommand));
  host
    .command('disable')
    .description('the scheduler skips HOST (its instances stay; its tracker keeps reporting)')
    .argument('<host>', 'host name')
    .option('--reason <text>', 'why (shown by ert hosts)')
    .action(action(commands.fleet, (m) => m.hostDisableCommand));
  host.command('enable').description('HOST is up again for the scheduler').argument('<host>', 'host name').action(action(commands.fleet, (m) => m.hostEnableCommand));
  host
    .command('delete')
    .description('remove HOST, its provider tree, stats and records (refused while it has instances, unless --force)')
    .argument('<host>', 'host name')
    .option('--force', 'also end its instances and the allocations on its providers')
    .action(action(commands.fleet, (m) => m.hostDeleteCommand));
  host
    .command('run')
    .description('run the tracker: sync now, then every tracker.interval, until SIGINT/SIGTERM')
    .option('--root <dir>', 'directory standing for / (default: tracker.root)')
    .option('--name <host>', 'host name (default: tracker.hostName, else the machine\'s)')
    .option('--metrics-port <n>', 'serve /metrics, /healthz and /readyz on this TCP port (0: any free port; docs/operations.md)')
    .option('--metrics-host <address>', 'address of the metrics port', '127.0.0.1')
    .option('--server <url>', 'report through this ert serve (its agent API) instead of opening the store: no database credentials on the host (docs/operations.md)')
    .option('--token-file <file>', 'with --server: a file holding the X-Auth-Token to send (first line)')
    .option('--events-buffer <n>', 'how many instance events /events of the metrics port keeps for resuming clients', '1000')
    .option('--events-socket <path>', 'also publish the instance events as JSON lines on this Unix socket (docs/operations.md)')
    .action(action(commands.hostRun, (m) => m.hostRunCommand, { daemon: true }));
  host
    .command('events')
    .description("the instance events of a running ert host run (claimed, released, resized, updated), for outside agents")
    .option('--url <url>', 'the metrics server of ert host run (http://127.0.0.1:PORT)')
    .option('--metrics-port <n>', 'ert host run --metrics-port on 127.0.0.1')
    .option('--follow', 'keep printing new events until SIGINT, reconnecting and resuming after the last one')
    .action(action(commands.hostEvents, (m) => m.hostEventsCommand));

  program
    .command('claim')
    .description('claim resources for one instance on this compute host (through its plugins)')
    .requiredOption('--flavor <name>', 'flavor from the config')
    .option('--uuid <uuid>', 'instance uuid (default: a new one)')
    .option('--host <name>', 'host to claim on (default: tracker.hostName, else the machine\'s)')
    .option('--root <dir>', 'directory standing for / (default: tracker.root)')
    .option('--project <id>', 'project id', 'ert-cli')
    .option('--user <id>', 'user id', 'ert-cli')
    .option('--image-property <key=value...>', "the image's properties, merged with the flavor's extra specs by Nova's rules (trait:NAME=required, hw_cpu_policy=dedicated; docs/images.md)")
    .option('--request-group <group...>', "a port's or device's request group, claimed with the flavor: REQUESTER:CLASS=N[,CLASS=N][;required=TRAIT,...][;forbidden=TRAIT,...] (docs/request-groups.md)")
    .action(action(commands.claim, (m) => m.claimCommand));
  program
    .command('release')
    .description('release an instance\'s resources on the host it is on')
    .argument('<uuid>', 'instance uuid')
    .option('--root <dir>', 'directory standing for / (default: tracker.root)')
    .action(action(commands.claim, (m) => m.releaseCommand));

  program
    .command('schedule')
    .description('place instances of a flavor on the fleet (filters, weighers, claim)')
    .requiredOption('--flavor <name>', 'flavor from the config')
    .option('-n, --count <n>', 'number of instances (placed all or none)', '1')
    .option('--explain', 'explain which filter removed each host instead of placing')
    .option('--wait', 'wait until each host\'s tracker confirms its reservation (active); place a refused one elsewhere')
    .option('--confirm-timeout <duration>', 'with --wait: how long to wait for a confirmation (default: reservations.timeout)')
    .option('--availability-zone <zone>', 'place only on the hosts of this availability zone (request filter availability-zone)')
    .option('--forbid-aggregate <aggregate...>', 'stay out of these aggregates, by name or uuid (request filter forbidden-aggregates)')
    .option('--project <id>', "the instances' project (request filter tenant-isolation)", 'ert-cli')
    .option('--image-property <key=value...>', "the image's properties, merged with the flavor's extra specs by Nova's rules (trait:NAME=required, hw_cpu_policy=dedicated; docs/images.md)")
    .option('--request-group <group...>', "a port's or device's request group for each instance: REQUESTER:CLASS=N[,CLASS=N][;required=TRAIT,...][;forbidden=TRAIT,...] (docs/request-groups.md)")
    .action(action(commands.schedule, (m) => m.scheduleCommand));

  program
    .command('instances')
    .description('list the instances in the store: host, state (scheduled, active, refused, expired, ...), reason')
    .option('--host <name>', 'only this host')
    .option('--state <state>', 'only this state')
    .action(action(commands.instances, (m) => m.instancesCommand));

  const instance = program.command('instance').description('one instance record');
  instance.command('show').description('an instance with its allocations and assignments').argument('<uuid>', 'instance uuid').action(action(commands.instances, (m) => m.instanceShowCommand));
  instance
    .command('attach')
    .description("extend a live instance's allocation in place with a port's or device's request group (checked by its host's plugins and the store)")
    .argument('<uuid>', 'instance uuid')
    .requiredOption('--request-group <group>', 'REQUESTER:CLASS=N[,CLASS=N][;required=TRAIT,...][;forbidden=TRAIT,...] (docs/request-groups.md)')
    .option('--root <dir>', 'directory standing for / (default: tracker.root)')
    .action(action(commands.claim, (m) => (ctx: CommandContext, uuid: string, opts: { requestGroup: string; root?: string }) => m.changeGroupsCommand(ctx, uuid, { attach: opts.requestGroup }, opts)));
  instance
    .command('detach')
    .description("shrink a live instance's allocation in place: its request group of REQUESTER goes")
    .argument('<uuid>', 'instance uuid')
    .requiredOption('--requester <id>', 'the requester (port or device id) whose group goes')
    .option('--root <dir>', 'directory standing for / (default: tracker.root)')
    .action(action(commands.claim, (m) => (ctx: CommandContext, uuid: string, opts: { requester: string; root?: string }) => m.changeGroupsCommand(ctx, uuid, { detach: opts.requester }, opts)));
  instance
    .command('delete')
    .description('remove a reservation or a refused/expired record (an active instance: ert release)')
    .argument('<uuid>', 'instance uuid')
    .action(action(commands.instances, (m) => m.instanceDeleteCommand));

  program.command('hosts').description('list the hosts in the store').action(action(commands.inventory, (m) => m.hostsCommand));

  const trait = program.command('trait').description("an operator's traits on a host or provider (kept across the host's syncs)");
  for (const change of ['add', 'remove'] as const) {
    trait
      .command(change)
      .description(`${change} TRAIT ${change === 'add' ? 'to' : 'from'} a host's root provider (--host) or a provider (--provider)`)
      .argument('<trait>', 'trait name (CUSTOM_... or a standard trait)')
      .option('--host <name>', "the host (its root provider)")
      .option('--provider <name>', 'a provider by name')
      .action(action(commands.fleet, (m) => (ctx: CommandContext, name: string, opts: { host?: string; provider?: string }) => m.traitCommand(ctx, change, name, opts)));
  }

  const aggregate = program.command('aggregate').description('aggregates of hosts and their metadata (aggregate_instance_extra_specs)');
  aggregate
    .command('create')
    .description('create an aggregate')
    .argument('<name>', 'aggregate name')
    .option('--uuid <uuid>', 'its uuid (default: a new one)')
    .option('--metadata <key=value...>', 'metadata, e.g. ssd=true')
    .action(action(commands.fleet, (m) => m.aggregateCreateCommand));
  aggregate.command('list').description('aggregates with their metadata and hosts').action(action(commands.fleet, (m) => m.aggregateListCommand));
  aggregate
    .command('add-host')
    .description('put HOST (its root provider) in the aggregate')
    .argument('<aggregate>', 'aggregate name or uuid')
    .argument('<host>', 'host name')
    .action(action(commands.fleet, (m) => (ctx: CommandContext, agg: string, h: string) => m.aggregateMembershipCommand(ctx, 'add', agg, h)));
  aggregate
    .command('remove-host')
    .description('take HOST out of the aggregate')
    .argument('<aggregate>', 'aggregate name or uuid')
    .argument('<host>', 'host name')
    .action(action(commands.fleet, (m) => (ctx: CommandContext, agg: string, h: string) => m.aggregateMembershipCommand(ctx, 'remove', agg, h)));
  aggregate
    .command('set-metadata')
    .description('set metadata keys of the aggregate (key=value ...), --unset to remove keys')
    .argument('<aggregate>', 'aggregate name or uuid')
    .argument('[pairs...]', 'key=value pairs')
    .option('--unset <key...>', 'keys to remove')
    .action(action(commands.fleet, (m) => m.aggregateSetMetadataCommand));
  aggregate
    .command('set-traits')
    .description("add traits to the root provider of every host of the aggregate (--remove: take them off); they survive the hosts' syncs")
    .argument('<aggregate>', 'aggregate name or uuid')
    .argument('<traits...>', 'trait names (CUSTOM_... or standard traits)')
    .option('--remove', 'remove the traits instead')
    .action(action(commands.fleet, (m) => m.aggregateSetTraitsCommand));
  aggregate
    .command('set-ratio')
    .description("set the allocation ratio of a class on every provider of the aggregate's hosts that has it; survives syncs unless a host's config sets it")
    .argument('<aggregate>', 'aggregate name or uuid')
    .argument('<class>', 'resource class (VCPU, MEMORY_MB, CUSTOM_...)')
    .argument('<ratio>', 'allocation ratio, a number >= 0 (0: capacity 0, nothing new of the class placed there)')
    .action(action(commands.fleet, (m) => m.aggregateSetRatioCommand));
  const az = program.command('az').description('availability zones: aggregates with availability_zone metadata (docs/request-filters.md)');
  az.command('list').description('zones with their aggregates and hosts, and the hosts in no zone').action(action(commands.fleet, (m) => m.azListCommand));
  program
    .command('usage')
    .description('capacity, used and free per host and resource class')
    .option('--host <name>', 'only this host')
    .action(action(commands.inventory, (m) => m.usageCommand));
  program.command('flavors').description('list the configured flavors').action(action(commands.inventory, (m) => m.flavorsCommand));
  program
    .command('serve')
    .description('serve the Placement-compatible API and the scheduler API (docs/api.md) on the store until SIGINT/SIGTERM')
    .option('--host <address>', 'address to bind', '127.0.0.1')
    .option('--port <n>', 'TCP port (0: any free port)', '8778')
    .option('--prefix <path>', "mount point of the Placement API ('' for the root)", '/placement')
    .option('--auth <mode>', 'noauth2, token-file or trusted-headers (noauth2 is the default on loopback only; also $ERT_API_AUTH)')
    .option('--token-file <file>', 'YAML/JSON file of tokens for --auth token-file (token: {user, project, roles, system_scope})')
    .option('--policy-defaults <set>', "Placement's policy defaults: legacy (8.0.0's) or secure (new defaults, scope enforced)")
    .option('--policy-file <file>', 'YAML/JSON policy file overriding rules by name (oslo.policy syntax)')
    .option('--workers <n>', 'worker processes sharing the port (node:cluster); PostgreSQL recommended for more than 1')
    .action(action(commands.serve, (m) => m.serveCommand, { daemon: true }));

  program
    .command('simulate')
    .description('schedule a seeded workload on a simulated fleet built from the host profiles')
    .requiredOption('--hosts <n>', 'number of hosts')
    .requiredOption('--requests <m>', 'number of requests')
    .option('--seed <s>', 'seed of the workload and fleet (same seed, same placements)', '1')
    .option('--db <file>', 'SQLite file to use (default: a fresh file in a temp directory)')
    .option('--profiles <dir>', 'host profiles directory (default: hosts/ next to the config, else the repo\'s config/hosts)')
    .option('--lifetime <n>', 'mean instance lifetime, in arrivals (default: requests/2)')
    .action(action(commands.simulate, (m) => m.simulateCommand));

  program
    .command('demo')
    .description('what npm start runs: migrate a demo database, register this machine, schedule a sample workload')
    .option('--hosts <n>', 'simulated fleet size', '12')
    .option('--requests <m>', 'sample workload size', '300')
    .action(action(commands.demo, (m) => m.demoCommand));

  return program;
}

/**
 * Run `ert` with `argv` (without the node and script paths) and return the exit status.
 * Failures print one line `ert: <message>` on stderr (the stack only at --log-level
 * debug or trace) and, with --json, `{ "error": { code, message, details } }` on stdout.
 */
export async function runCli(argv: string[], io: CliIo = processIo()): Promise<number> {
  const program = createProgram(io);
  try {
    await program.parseAsync(withoutHelpForUnknownCommand(program, argv), { from: 'user' });
    return ExitCode.OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander already printed its message (through outputError) or the help/version.
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return ExitCode.OK;
      // The options may not have been parsed: --json is looked for in argv itself.
      if (argv.includes('--json')) {
        const error = { code: CliErrorCode.USAGE, message: usageMessage(err.message), details: { commander: err.code } };
        io.stdout.write(JSON.stringify({ error }, null, 2) + '\n');
      }
      return ExitCode.USAGE;
    }
    const globals = program.opts<GlobalOptions>();
    await reportError(io, err, globals);
    return exitCodeFor(err);
  }
}

/**
 * `ert server --help` (a typo of a command) would print the general usage and exit 0, as if the
 * command existed: with `--help`/`-h` dropped, commander reports the unknown command (with its
 * suggestion) and the exit status is 2. The first operand is the command name; the global
 * options that take a value (`-c`/`--config`, `--log-level`) are skipped with it.
 */
function withoutHelpForUnknownCommand(program: Command, argv: string[]): string[] {
  const known = new Set(program.commands.flatMap((c) => [c.name(), ...c.aliases()]));
  known.add('help');
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '-c' || arg === '--config' || arg === '--log-level') {
      i++;
      continue;
    }
    if (arg.startsWith('-')) continue;
    return known.has(arg) ? argv : argv.filter((a) => a !== '--help' && a !== '-h');
  }
  return argv;
}

async function reportError(io: CliIo, err: unknown, globals: GlobalOptions): Promise<void> {
  // No password is printed, whatever library wrote the message (a URL taken as a file path).
  // (@ert/core is imported here, not at the top: `ert --help` does not load it; a failed
  // command has loaded it already.)
  const { maskPasswords } = await import('@ert/core');
  const message = maskPasswords(messageOf(err));
  // One line: a multi-line message (one line per config problem) is joined, not cut.
  const oneLine = message
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .join(' ');
  io.stderr.write(`ert: ${oneLine}\n`);
  if (globals.logLevel === 'debug' || globals.logLevel === 'trace') {
    io.stderr.write(`${maskPasswords(err instanceof Error ? (err.stack ?? message) : message)}\n`);
    let cause = err instanceof Error ? err.cause : undefined;
    while (cause) {
      io.stderr.write(`caused by: ${maskPasswords(cause instanceof Error ? (cause.stack ?? cause.message) : String(cause))}\n`);
      cause = cause instanceof Error ? cause.cause : undefined;
    }
  }
  if (globals.json) {
    const error = isErtError(err)
      ? { code: err.code, message: maskPasswords(err.message), details: err.details }
      : { code: 'ERT_INTERNAL', message, details: {} };
    io.stdout.write(JSON.stringify({ error }, (_key, value: unknown) => (typeof value === 'string' ? maskPasswords(value) : value), 2) + '\n');
  }
}
