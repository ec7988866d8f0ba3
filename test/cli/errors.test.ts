import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { HUGE, Project, REPO, SMALL, json, runErt } from './helpers.js';

const COMMANDS = [
  [],
  ['init'],
  ['db'],
  ['db', 'migrate'],
  ['plugins'],
  ['host'],
  ['host', 'discover'],
  ['host', 'sync'],
  ['host', 'run'],
  ['claim'],
  ['release'],
  ['schedule'],
  ['hosts'],
  ['usage'],
  ['flavors'],
  ['simulate'],
  ['demo'],
];

describe('ert --help and --version', () => {
  it.each(COMMANDS.map((c) => [c.join(' ') || '(root)', c]))('ert %s --help prints usage and exits 0', async (_label, command) => {
    const result = await runErt([...command, '--help'], { cwd: REPO });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`Usage: ert${command.length > 0 ? ' ' + command.join(' ') : ''}`);
    expect(result.stderr).toBe('');
  });

  it('global options are listed on the root help', async () => {
    const result = await runErt(['--help'], { cwd: REPO });
    for (const option of ['--config <file>', '--json', '--log-level <level>', '--version']) expect(result.stdout).toContain(option);
  });

  it('--version prints the package version', async () => {
    const pkg = JSON.parse(await readFile(join(REPO, 'packages/cli/package.json'), 'utf8'));
    const result = await runErt(['--version'], { cwd: REPO });
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe(pkg.version);
  });
});

describe('ert error paths', () => {
  let empty: string;
  let project: Project;
  beforeAll(async () => {
    empty = await mkdtemp(join(tmpdir(), 'ert-cli-empty-'));
    project = await Project.create('cloud-vm');
  });
  afterAll(async () => {
    await rm(empty, { recursive: true, force: true });
    await project?.remove();
  });

  it('an unknown command or option is a usage error (exit 2)', async () => {
    const unknown = await runErt(['frobnicate'], { cwd: empty });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe("ert: unknown command 'frobnicate' (run with --help for usage)\n");
    // With --help too: a typo of a command is not answered with the general usage and exit 0
    // (seen red without withoutHelpForUnknownCommand: exit 0, the usage on stdout).
    const typoArgs = [['server', '--help'], ['-c', 'x.yaml', 'server', '-h']];
    for (const [i, typo] of (await Promise.all(typoArgs.map((args) => runErt(args, { cwd: empty })))).entries()) {
      expect([typoArgs[i], typo.code, typo.stdout]).toEqual([typoArgs[i], 2, '']);
      expect(typo.stderr).toBe("ert: unknown command 'server' (did you mean serve?) (run with --help for usage)\n");
    }
    expect((await runErt(['serve', '--help'], { cwd: empty })).code).toBe(0);
    const option = await runErt(['hosts', '--bogus'], { cwd: empty });
    expect(option.code).toBe(2);
    expect(option.stderr).toMatch(/^ert: unknown option '--bogus'/);
    const asJson = await runErt(['hosts', '--bogus', '--json'], { cwd: empty });
    expect(asJson.code).toBe(2);
    expect(json(asJson).error).toEqual({ code: 'ERT_CLI_USAGE', message: "unknown option '--bogus'", details: { commander: 'commander.unknownOption' } });
    const missing = await runErt(['schedule'], { cwd: empty });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^ert: required option '--flavor <name>' not specified/);
  });

  it('an unreachable or unopenable store exits 1 naming the store, with the password masked', async () => {
    const pg = await project.run(['hosts', '--json'], { ERT_STORE_CONNECTION: 'postgres://ert:secret@127.0.0.1:1/nowhere' });
    expect(pg.code).toBe(1);
    // One line: the driver pool's own "Acquire connection error" and stack stay off both streams.
    expect(pg.stderr).toMatch(/^ert: cannot open the pg store postgres:\/\/ert:\*\*\*@127\.0\.0\.1:1\/nowhere: .*ECONNREFUSED[^\n]*\n$/);
    expect(pg.stderr + pg.stdout).not.toContain('secret');
    expect(json(pg).error).toMatchObject({ code: 'ERT_CLI_STORE_UNAVAILABLE', details: { client: 'pg' } });
    const file = join(empty, 'no/such/dir/ert.db');
    const sqlite = await project.run(['db', 'migrate'], { ERT_STORE_CONNECTION: file });
    expect(sqlite.code).toBe(1);
    expect(sqlite.stderr).toMatch(new RegExp(`^ert: cannot open the sqlite3 store ${file}: SQLITE_CANTOPEN[^\\n]*\\n$`));
    // A read-only command does not try to create it (issue 11, point 13; test/cli/protect.test.ts).
    const usage = await project.run(['usage'], { ERT_STORE_CONNECTION: file });
    expect(usage.code).toBe(1);
    expect(usage.stderr).toBe(`ert: SQLite store ${file} does not exist; check store.connection, or create it with \`ert db migrate\`\n`);
  });

  it('no config found: exit 2, one line, no stack trace', async () => {
    const result = await runErt(['flavors'], { cwd: empty });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^ert: .+\n$/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('a missing --config file names the file', async () => {
    const result = await runErt(['--config', join(empty, 'nope.yaml'), 'flavors'], { cwd: empty });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(join(empty, 'nope.yaml'));
  });

  it('ERT_CONFIG selects the config file', async () => {
    const result = await runErt(['flavors', '--json'], { cwd: empty, env: { ERT_CONFIG: project.configFile } });
    expect(result.code, result.stderr).toBe(0);
    expect(json(result).flavors.map((f: any) => f.name)).toContain('small');
  });

  it('--log-level debug adds the stack trace', async () => {
    const result = await runErt(['--log-level', 'debug', 'flavors'], { cwd: empty });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^ert: .+\n/);
    expect(result.stderr).toMatch(/\n\s+at /);
  });

  it('an invalid config key names the file and the key path', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ert-cli-bad-'));
    try {
      await writeFile(join(dir, 'ert.config.yaml'), 'tracker:\n  intervall: 5s\nflavors: []\n');
      const result = await runErt(['flavors', '--json'], { cwd: dir });
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/^ert: .*ert\.config\.yaml/);
      expect(result.stderr).toContain('tracker.intervall');
      expect(json(result).error.code).toBe('ERT_CONFIG_INVALID');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an unknown plugin lists every candidate tried', async () => {
    const other = await Project.create('cloud-vm');
    try {
      await other.writeConfig({ tracker: { resources: ['nosuchplugin'] } });
      const result = await other.run(['plugins']);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/^ert: Plugin "nosuchplugin" not found/);
      expect(result.stderr).toContain('@ert/plugin-nosuchplugin');
      expect(result.stderr).toContain('ert-plugin-nosuchplugin');
    } finally {
      await other.remove();
    }
  });

  it('an unknown flavor lists the known ones', async () => {
    const result = await project.run(['schedule', '--flavor', 'tiny']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`ert: unknown flavor "tiny" in ${project.configFile}; known flavors: small, huge, gpu2, gpu4\n`);
    const claim = await project.run(['claim', '--flavor', 'tiny', '--json']);
    expect(claim.code).toBe(2);
    expect(json(claim).error).toMatchObject({ code: 'ERT_CLI_UNKNOWN_FLAVOR', details: { flavor: 'tiny' } });
  });

  it('a bad extra spec names the key before any host is touched', async () => {
    const other = await Project.create('cloud-vm');
    try {
      await other.writeConfig({ flavors: [SMALL, { ...SMALL, name: 'bad', extra_specs: { 'frob:nicate': '1' } }, { ...SMALL, name: 'badvalue', extra_specs: { 'gpu:count': 'many' } }] });
      await other.run(['host', 'sync']);
      const unknownKey = await other.run(['schedule', '--flavor', 'bad', '--json']);
      expect(unknownKey.code).toBe(2);
      expect(unknownKey.stderr).toContain('frob:nicate');
      expect(json(unknownKey).error.code).toBe('ERT_SPEC_UNKNOWN_KEY');
      const badValue = await other.run(['schedule', '--flavor', 'badvalue']);
      expect(badValue.code).toBe(2);
      expect(badValue.stderr).toContain('gpu:count');
      expect(badValue.stderr).toContain('many');
      expect(json(await other.run(['hosts', '--json'])).hosts[0].instances).toBe(0);
    } finally {
      await other.remove();
    }
  });

  it('a plugin hook that throws: discovery reports it, a claim fails closed; one line, no log records, no stack', async () => {
    const other = await Project.create('cloud-vm');
    try {
      await writeFile(
        join(other.dir, 'faulty.js'),
        `import { definePlugin } from '@ert/plugin-api';
export default definePlugin({
  name: 'faulty',
  resource: () => ({
    discover() { if (process.env.FAULTY_DISCOVER) throw new Error('sensor bus unreadable'); return { available: true }; },
    test() { throw new Error('exploded in test'); },
  }),
});
`,
      );
      await other.writeConfig({ tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory', './faulty.js'] } });
      const discovered = await other.run(['host', 'discover', '--json'], { FAULTY_DISCOVER: '1' });
      expect(discovered.code, discovered.stderr).toBe(0);
      expect(discovered.stderr).toBe('');
      expect(json(discovered).problems).toContainEqual(
        expect.objectContaining({ plugin: 'faulty', message: 'Plugin "faulty" hook "discover" failed: sensor bus unreadable' }),
      );
      expect((await other.run(['db', 'migrate'])).code).toBe(0);
      const claim = await other.run(['claim', '--flavor', 'small']);
      expect(claim.code).toBe(3);
      expect(claim.stderr).toBe('ert: claim of flavor small on host node1 rejected: faulty: Plugin "faulty" hook "test" failed: exploded in test\n');
      expect(json(await other.run(['hosts', '--json'])).hosts[0].instances).toBe(0);
    } finally {
      await other.remove();
    }
  });

  it('a bad --root is refused naming the directory', async () => {
    const result = await project.run(['host', 'discover', '--root', join(empty, 'missing')]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`ert: --root ${join(empty, 'missing')}: no such directory (${join(empty, 'missing')})\n`);
    const file = await project.run(['host', 'sync', '--root', project.configFile]);
    expect(file.code).toBe(2);
    expect(file.stderr).toContain('not a directory');
  });

  it('a non-numeric --count is a usage error', async () => {
    const result = await project.run(['schedule', '--flavor', 'small', '--count', 'lots']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('ert: --count must be a positive integer, got "lots"\n');
  });
});

// Issue 12, "The README, literally": exit statuses and messages as docs/cli.md has them.
describe('ert exit statuses and messages match docs/cli.md (issue 12)', () => {
  let project: Project;
  beforeAll(async () => {
    project = await Project.create('cloud-vm');
  });
  afterAll(async () => {
    await project?.remove();
  });

  // Caught: the suggestion commander prints on a line of its own (two lines on stderr).
  it('a mistyped command or option is one line, with the suggestion on it', async () => {
    const command = await runErt(['hots'], { cwd: project.dir });
    expect(command.code).toBe(2);
    expect(command.stderr).toBe("ert: unknown command 'hots' (did you mean one of host, hosts?) (run with --help for usage)\n");
    const sub = await runErt(['host', 'discovr'], { cwd: project.dir });
    expect(sub.stderr).toBe("ert: unknown command 'discovr' (did you mean discover?) (run with --help for usage)\n");
    const asJson = await runErt(['hots', '--json'], { cwd: project.dir });
    expect(json(asJson).error).toEqual({ code: 'ERT_CLI_USAGE', message: "unknown command 'hots' (did you mean one of host, hosts?)", details: { commander: 'commander.unknownCommand' } });
  });

  // Caught: commander checking required options first ("required option '--flavor <name>'
  // not specified" for `claim --flavour x`).
  it('--flavour is reported as the unknown option it is, not as a missing --flavor', async () => {
    for (const command of ['claim', 'schedule']) {
      const result = await project.run([command, '--flavour', 'small']);
      expect(result.code).toBe(2);
      expect(result.stderr).toBe("ert: unknown option '--flavour' (did you mean --flavor?) (run with --help for usage)\n");
    }
    // With no option typed at all, the missing one is the mistake.
    const missing = await project.run(['claim']);
    expect(missing.stderr).toBe("ert: required option '--flavor <name>' not specified (run with --help for usage)\n");
  });

  // Caught: the claim's tracker turning the parse error into a refusal (exit 3,
  // ERT_CLI_CLAIM_REJECTED); the scheduler's message naming neither flavor nor file.
  it('a bad extra spec is exit 2 from claim and schedule alike, naming the flavor and its file; nothing is written', async () => {
    const other = await Project.create('cloud-vm');
    try {
      const flavorsFile = join(other.dir, 'flavors.yaml');
      await writeFile(flavorsFile, stringify([SMALL, { ...SMALL, name: 'bad', extra_specs: { 'llc:wayz': '4' } }]));
      await other.writeConfig({ flavors: './flavors.yaml' });
      expect((await other.run(['host', 'sync'])).code).toBe(0);
      const message = `ert: flavor "bad" in ${flavorsFile}: extra spec "llc:wayz=4": no built-in form and no loaded plugin owns this key\n`;
      const refusing = [['claim'], ['schedule'], ['schedule', '--explain']];
      const results = await Promise.all(refusing.map((args) => other.run([...args, '--flavor', 'bad', '--json'])));
      for (const [i, result] of results.entries()) {
        const args = refusing[i];
        expect([args, result.code]).toEqual([args, 2]);
        expect(result.stderr).toBe(message);
        expect(json(result).error).toMatchObject({ code: 'ERT_SPEC_UNKNOWN_KEY', details: { flavor: 'bad', file: flavorsFile } });
      }
      expect(json(await other.run(['instances', '--json'])).instances).toEqual([]);
      // An unknown flavor names the file the flavors are in too.
      expect((await other.run(['claim', '--flavor', 'tiny'])).stderr).toBe(`ert: unknown flavor "tiny" in ${flavorsFile}; known flavors: small, bad\n`);
    } finally {
      await other.remove();
    }
  });

  // Caught: the duplicate reported against the config file, which holds no flavor.
  it('a duplicate flavor name cites the flavors file and both entries', async () => {
    const other = await Project.create('cloud-vm');
    try {
      const flavorsFile = join(other.dir, 'flavors.yaml');
      await writeFile(flavorsFile, stringify([SMALL, HUGE, SMALL]));
      await other.writeConfig({ flavors: './flavors.yaml' });
      const fromFile = await other.run(['flavors']);
      expect(fromFile.code).toBe(2);
      expect(fromFile.stderr).toBe(
        `ert: Invalid config ${flavorsFile} (1 problem): ${flavorsFile}: flavors[2].name: got "small", expected a flavor name not used by an earlier flavor (flavors[0] is "small")\n`,
      );
      // Inline flavors are the config file's.
      await other.writeConfig({ flavors: [SMALL, SMALL] });
      expect((await other.run(['flavors'])).stderr).toContain(`ert: Invalid config ${other.configFile} (1 problem): ${other.configFile}: flavors[1].name`);
    } finally {
      await other.remove();
    }
  });

  // Caught: `plugins` accepting any key (options under a typo silently ignored).
  it('plugins.<typo> is a config error naming the key and the file', async () => {
    const other = await Project.create('cloud-vm');
    try {
      await other.writeConfig({ plugins: { memory: { reservedMb: 256 }, memroy: { reservedMb: 1024 } } });
      const result = await other.run(['flavors', '--json']);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(new RegExp(`^ert: Invalid config ${other.configFile} \\(1 problem\\): ${other.configFile}: plugins\\.memroy: got \\{"reservedMb":1024\\}, expected options of a configured plugin; no plugin named "memroy"`));
      expect(result.stderr).toContain('(configured: vcpu, memory, gpu, status, traits, resources)');
      expect(json(result).error.code).toBe('ERT_CONFIG_INVALID');
      // A plugin's options are fine under its name, whatever list it is in.
      await other.writeConfig({ plugins: { memory: { reservedMb: 256 }, gpu: {} } });
      expect((await other.run(['flavors'])).code).toBe(0);
    } finally {
      await other.remove();
    }
  });

  it('an invalid providers.d file is exit 2 (configuration) from discover, sync and claim, naming the file', async () => {
    const other = await Project.create('cloud-vm');
    try {
      await mkdir(join(other.dir, 'providers.d'));
      const file = join(other.dir, 'providers.d/bad.yaml');
      await writeFile(file, 'schema_version: "1.0"\nproviders:\n  - identification:\n      name: $HOST\n    inventories:\n      additional:\n        - VCPU: { total: 3 }\n');
      await other.writeConfig({ tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'], providerConfigs: './providers.d' } });
      for (const args of [['host', 'discover'], ['host', 'sync'], ['claim', '--flavor', 'small']]) {
        const result = await other.run(args);
        expect([args, result.code]).toEqual([args, 2]);
        // (after the note that sync created the store)
        expect(result.stderr.split('\n').at(-2)).toBe(`ert: provider config ${file} providers[0] (name=$HOST): resource class VCPU is not CUSTOM_[A-Z0-9_]+; only custom classes may be added`);
      }
    } finally {
      await other.remove();
    }
  });
});
