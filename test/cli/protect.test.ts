/*
 * Issue 11, "the CLI protects the operator": each case spawns the built `ert` on real
 * SQLite files (and PostgreSQL when ERT_TEST_PG_URL is set). Every test names the mutation
 * of the guarded code it was seen to catch (made once, red, reverted).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropPostgresSchema, MIGRATIONS_TABLE } from '@ert/store';
import { BIN, Project, REPO, SMALL, bash, json, runErt } from './helpers.js';

const { MIGRATION_NAMES } = await import('../../packages/store/src/migrations.js');
/** This program's latest schema version. */
const LATEST = MIGRATION_NAMES[MIGRATION_NAMES.length - 1]!;

/** A user other than root to run `ert` as, so file permissions apply (the PostgreSQL test server's). */
const asOtherUser = process.getuid?.() === 0 && spawnSync('id', ['-u', 'postgres']).status === 0 ? 'postgres' : undefined;

/** A SQLite file migrated by the previous schema only (0001, 0002), as an older ert left it. */
async function oldStore(file: string): Promise<void> {
  const { migrationSource } = await import('../../packages/store/src/migrations.js');
  const knex = knexFactory({ client: 'sqlite3', connection: { filename: file }, useNullAsDefault: true });
  await knex.migrate.latest({ migrationSource: { ...migrationSource, getMigrations: async () => ['0001_initial', '0002_instance_cpus'] }, tableName: MIGRATIONS_TABLE });
  await knex.destroy();
}

async function migrationNames(file: string): Promise<string[]> {
  const knex = knexFactory({ client: 'sqlite3', connection: { filename: file }, useNullAsDefault: true });
  try {
    return (await knex(MIGRATIONS_TABLE).select('name').orderBy('id')).map((r: { name: string }) => r.name);
  } finally {
    await knex.destroy();
  }
}

async function addFutureMigration(file: string): Promise<void> {
  const knex = knexFactory({ client: 'sqlite3', connection: { filename: file }, useNullAsDefault: true });
  await knex(MIGRATIONS_TABLE).insert({ name: '0099_future', batch: 99, migration_time: new Date() });
  await knex.destroy();
}

describe('ert protects the operator (issue 11)', () => {
  let project: Project;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    project = await Project.create('cloud-vm');
    await project.writeConfig({
      store: { client: 'sqlite3', connection: './ert.db', busyTimeout: '500ms' },
      tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'] },
      scheduler: { consumers: ['vcpu', 'memory'], filters: ['status', 'resources'], weighers: [] },
      flavors: [SMALL],
    });
    const synced = await project.run(['host', 'sync']);
    expect(synced.code, synced.stderr).toBe(0);
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await project?.remove();
  });

  // Point 12. Caught: the store.getHost check removed from claimCommand (exit 0, and a
  // phantom host "nod1" with this machine's resources appeared in `ert hosts`).
  it('claim --host with a typo exits 2 with "did you mean", and creates no host', async () => {
    const result = await project.run(['claim', '--flavor', 'small', '--host', 'nod1', '--json']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('ert: no host "nod1" in the store; did you mean node1? (a host joins the store with `ert host sync` run on it)\n');
    expect(json(result).error).toMatchObject({ code: 'ERT_CLI_UNKNOWN_HOST', details: { host: 'nod1', didYouMean: ['node1'] } });
    expect(json(await project.run(['hosts', '--json'])).hosts.map((h: any) => h.name)).toEqual(['node1']);
    // usage --host says the same.
    const usage = await project.run(['usage', '--host', 'NODE1x']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toBe('ert: no host "NODE1x" in the store; did you mean node1?\n');
  });

  // Point 11. Caught: the machine check removed from the tracker's sync (the claim exited 0
  // and rewrote node1's inventory with this machine's VCPU and memory).
  it('claim against a host registered from another --root exits 2 naming both, and rewrites nothing', async () => {
    const before = json(await project.run(['usage', '--json']));
    const other = join(REPO, 'config/hosts/xeon-4s-numa');
    const result = await project.run(['claim', '--flavor', 'small', '--host', 'node1', '--root', other, '--json']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^ert: host "node1" was registered from root:.*\/root, but this tracker reads root:.*xeon-4s-numa: refusing to write its inventory/);
    expect(json(result).error).toMatchObject({ code: 'ERT_TRACKER_HOST_MACHINE_MISMATCH', details: { host: 'node1' } });
    expect(json(await project.run(['usage', '--json']))).toEqual(before);
    // From its own root (the config's), the same claim goes through.
    const uuid = '31111111-2222-4333-8444-555555555555';
    const claimed = await project.run(['claim', '--flavor', 'small', '--host', 'node1', '--uuid', uuid, '--json']);
    expect(claimed.code, claimed.stderr).toBe(0);
    expect(json(claimed)).toMatchObject({ instance: uuid, host: 'node1' });
    const released = await project.run(['release', uuid, '--json']);
    expect(json(released)).toEqual({ instance: uuid, host: 'node1', released: true });
  });

  // Point 13. Caught: hosts/usage opening the store with { create: true } again (the typo
  // file was created, exit 0 with an empty list); schemaStatus without its existsSync check.
  it('a mistyped store path: read-only commands say so, suggest ert db migrate, and create nothing', async () => {
    const typo = join(project.dir, 'ert-typo.db');
    for (const command of [['hosts'], ['usage'], ['schedule', '--flavor', 'small', '--explain']]) {
      const result = await project.run(command, { ERT_STORE_CONNECTION: typo });
      expect(result.code, command.join(' ')).toBe(1);
      expect(result.stderr).toBe(`ert: SQLite store ${typo} does not exist; check store.connection, or create it with \`ert db migrate\`\n`);
      expect(existsSync(typo)).toBe(false);
    }
  });

  // Point 13 (writers). Caught: the note removed from ctx.store (host sync created the
  // mistyped file with nothing said).
  it('a tracker command that creates the store says so, once', async () => {
    const file = join(project.dir, 'created-by-sync.db');
    const first = await project.run(['host', 'sync'], { ERT_STORE_CONNECTION: file });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toBe(`ert: note: created a new SQLite store at ${file}; if that is not the store you meant, check store.connection\n`);
    const second = await project.run(['host', 'sync'], { ERT_STORE_CONNECTION: file });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toBe('');
    const migrate = await runErt(['--config', project.configFile, 'db', 'migrate'], { cwd: project.dir, env: { ERT_STORE_CONNECTION: join(project.dir, 'created-by-migrate.db') } });
    expect(migrate.stderr).toContain('ert: note: created a new SQLite store at');
  });

  // Point 13. Caught: read-only commands migrating (`ctx.store` with create: usage exited 0
  // and the store gained 0003); migrate() without refuseNewer (knex's "The migration
  // directory is corrupt, the following files are missing: 0099_future").
  it('an older schema is not migrated by read-only commands; a newer one is named, even by db migrate', async () => {
    const file = join(project.dir, 'old.db');
    await oldStore(file);
    const usage = await project.run(['usage'], { ERT_STORE_CONNECTION: file });
    expect(usage.code).toBe(1);
    expect(usage.stderr).toBe(`ert: SQLite store ${file} is at schema version 0002_instance_cpus; this ert needs ${LATEST} (pending: ${MIGRATION_NAMES.slice(2).join(', ')}); run \`ert db migrate\`\n`);
    expect(await migrationNames(file)).toEqual(['0001_initial', '0002_instance_cpus']);
    const migrated = await project.run(['db', 'migrate'], { ERT_STORE_CONNECTION: file });
    expect(migrated.code, migrated.stderr).toBe(0);
    expect((await project.run(['usage'], { ERT_STORE_CONNECTION: file })).code).toBe(0);

    await addFutureMigration(file);
    for (const command of [['hosts', '--json'], ['db', 'migrate', '--json'], ['host', 'sync', '--json']]) {
      const result = await project.run(command, { ERT_STORE_CONNECTION: file });
      expect(result.code, command.join(' ')).toBe(1);
      expect(result.stderr).toBe(`ert: SQLite store ${file} was migrated by a newer ert: schema versions 0099_future are unknown to this one (it knows up to ${LATEST}); upgrade ert\n`);
      expect(json(result).error).toMatchObject({ code: 'ERT_STORE_SCHEMA_NEWER', details: { unknown: ['0099_future'] } });
    }
  });

  // Point 14. Caught: mapDriverError without the waited-the-whole-timeout case (host sync:
  // "ensureResourceClasses: the database is locked by another writer", no file, no holder,
  // as a retriable conflict); store.busyTimeout not passed to the store (each command
  // waited the 5 s default: the waitedMs bound, which the store measures around the wait
  // itself, so process start-up on a loaded machine does not count).
  it('a write lock held by another process: a bounded wait, then exit 1 naming the file and the holder; reads still work', async () => {
    const file = join(project.dir, 'ert.db');
    const holder = spawn(
      process.execPath,
      ['-e', `const s=require('sqlite3');const db=new s.Database(${JSON.stringify(file)});db.exec('BEGIN IMMEDIATE; UPDATE resource_classes SET name = name WHERE id = 0;',(e)=>{if(e)throw e;console.log('locked')});setInterval(()=>{},1000);`],
      { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(holder);
    await new Promise<void>((resolve) => holder.stdout!.once('data', () => resolve()));
    try {
      for (const command of [['host', 'sync'], ['schedule', '--flavor', 'small'], ['claim', '--flavor', 'small']]) {
        const result = await project.run([...command, '--json']);
        expect(result.code, `${command.join(' ')}: ${result.stderr}`).toBe(1);
        expect(result.stderr.split('\n')).toHaveLength(2);
        expect(result.stderr).toMatch(new RegExp(`the SQLite store ${file.replace(/[.]/g, '\\.')} is locked by another process \\(held by pid ${holder.pid} \\(.*node.*\\)\\); gave up after \\d+\\.\\d s \\(store\\.busyTimeout\\)\\n$`));
        expect(json(result).error).toMatchObject({ code: 'ERT_STORE_LOCKED', details: { file, holders: [{ pid: holder.pid }] } });
        const waited = json(result).error.details.waitedMs as number;
        expect(waited).toBeGreaterThanOrEqual(450);
        expect(waited).toBeLessThan(4500);
      }
      const hosts = await project.run(['hosts', '--json']);
      expect(hosts.code, hosts.stderr).toBe(0);
      expect(json(hosts).hosts[0].instances).toBe(0);
    } finally {
      holder.kill('SIGKILL');
      await new Promise((resolve) => holder.once('exit', resolve));
    }
  });

  // Point 14. Caught: sqliteFileError removed (host sync: exit 1 with the raw
  // "SQLITE_NOTADB: file is not a database" wrapped as ERT_CLI_STORE_UNAVAILABLE).
  it('a corrupt store file: one line naming it, exit 1, for writers and readers', async () => {
    const file = join(project.dir, 'corrupt.db');
    writeFileSync(file, 'not a database\n'.repeat(500));
    for (const command of [['host', 'sync'], ['hosts']]) {
      const result = await project.run([...command, '--json'], { ERT_STORE_CONNECTION: file });
      expect(result.code, command.join(' ')).toBe(1);
      expect(result.stderr).toMatch(new RegExp(`^ert: .*the SQLite store ${file.replace(/[.]/g, '\\.')} is not a database or is damaged \\([^\\n]*\\)\\n$`));
      expect(json(result).error.code).toBe('ERT_STORE_CORRUPT');
    }
  });

  // Point 13 ("fails on a read-only file"). Run as another user (root ignores permissions).
  // Caught: the code before the fix, every command migrating and migrate() always writing
  // its bootstrap (ctx.store with create for all, and migrate's early return removed: hosts
  // exit 1 "migrate: ... cannot be written"); the SQLITE_READONLY case removed from
  // sqliteFileError (schedule: the raw "UPDATE resource_classes SET name = name WHERE id = 0
  // - SQLITE_READONLY"). Each of the two halves alone is not caught here: a current schema is
  // only read by migrate(), and checkSchema() never writes.
  it.skipIf(!asOtherUser)('a read-only store file: read-only commands work; a write is one line naming the file, exit 1', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ert-cli-ro-'));
    try {
      const file = join(dir, 'ert.db');
      const migrated = await project.run(['db', 'migrate'], { ERT_STORE_CONNECTION: file });
      expect(migrated.code, migrated.stderr).toBe(0);
      expect((await project.run(['host', 'sync'], { ERT_STORE_CONNECTION: file })).code).toBe(0);
      chmodSync(project.dir, 0o755); // the other user reads the config and the plugins' root
      chmodSync(dir, 0o777); // SQLite keeps -wal and -shm next to the file
      chmodSync(file, 0o444);
      const run = (args: string[]) =>
        bash(`cd ${project.dir} && su ${asOtherUser} -s /bin/sh -c "ERT_STORE_CONNECTION=${file} node ${BIN} --config ${project.configFile} ${args.join(' ')}" || echo "exit $?" >&2`, {});
      const hosts = await run(['hosts', '--json']);
      expect(hosts.stderr).toBe('');
      expect(json(hosts).hosts.map((h: any) => h.name)).toEqual(['node1']);
      const schedule = await run(['schedule', '--flavor', 'small']);
      expect(schedule.stderr).toBe(
        `ert: writeAllocations: the SQLite store ${file} cannot be written by this process (permissions of the file, or of its directory, where SQLite keeps ${file}-wal and -shm)\nexit 1\n`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // Points 10 and 14 (config). Caught: durationAt without the MAX_DURATION_MS check (host
  // run started and synced in a 1 ms loop); refuseCycle removed (exit 1, "Maximum call stack
  // size exceeded").
  it('a 700h interval and a recursive YAML alias are one-line config errors naming the key, exit 2', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ert-cli-config-'));
    try {
      writeFileSync(join(dir, 'ert.config.yaml'), 'tracker:\n  interval: 700h\n');
      const interval = await runErt(['host', 'run'], { cwd: dir });
      expect(interval.code).toBe(2);
      expect(interval.stderr).toBe(
        `ert: Invalid config ${join(dir, 'ert.config.yaml')} (1 problem): ${join(dir, 'ert.config.yaml')}: tracker.interval: got "700h", expected a duration of at most 2147483647 ms (about 24.8 days; 2520000000 ms is longer)\n`,
      );
      writeFileSync(join(dir, 'ert.config.yaml'), 'plugins: &a\n  x: *a\n');
      const alias = await runErt(['flavors'], { cwd: dir });
      expect(alias.code).toBe(2);
      expect(alias.stderr).toBe(`ert: Config file ${join(dir, 'ert.config.yaml')} cannot be used: plugins.x contains itself (a recursive YAML alias or a circular object)\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // Point 7 through a provider config file. Caught: the MAX_ALLOCATION_RATIO check removed
  // from inventoryProblem (refused only by the capacity bound, "gives capacity Infinity",
  // not naming the ratio's limit); exitCodeFor without ERT_TRACKER_PROVIDER_CONFIG_ (exit 1).
  it('a provider config with allocation_ratio 1e308 is refused naming the file, class and field, exit 2', async () => {
    const other = await Project.create('cloud-vm');
    try {
      await mkdir(join(other.dir, 'providers.d'));
      writeFileSync(
        join(other.dir, 'providers.d', 'scratch.yaml'),
        'schema_version: "1.0"\nproviders:\n  - identification: { name: $HOST }\n    inventories:\n      additional:\n        - CUSTOM_SCRATCH_GB: { total: 400, allocation_ratio: 1e308 }\n',
      );
      await other.writeConfig({ tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'], providerConfigs: './providers.d' } });
      expect((await other.run(['db', 'migrate'])).code).toBe(0);
      const result = await other.run(['host', 'sync']);
      expect(result.code).toBe(2);
      expect(result.stderr).toBe(
        `ert: provider config ${join(other.dir, 'providers.d', 'scratch.yaml')} providers[0] (name=$HOST): CUSTOM_SCRATCH_GB: allocation_ratio must be at most 1000, got 1e+308\n`,
      );
      const usage = json(await other.run(['usage', '--json'])).usage as Array<{ resourceClass: string; capacity: number }>;
      expect(usage.filter((u) => u.resourceClass === 'CUSTOM_SCRATCH_GB')).toEqual([]);
    } finally {
      await other.remove();
    }
  });

  // Point 15. Caught: hostsCommand printing the stored status (s.host.status: "up" for a
  // host the scheduler's status filter treats as stale); stats never marked stale; stats
  // judged by their own updatedAt only (unchanged stats, which the tracker does not rewrite,
  // marked stale on a host synced a moment ago).
  it('hosts shows the status the scheduler uses (stale past staleAfter), and stale stats with their age', async () => {
    // Long enough that a sync and the next command fit in it on a loaded machine (3 s did not:
    // two CLI starts took longer once, with the suite three files at a time beside other work).
    const STALE_S = 8;
    const stale = await Project.create('cloud-vm');
    try {
      await stale.writeConfig({ tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'], staleAfter: `${STALE_S}s` } });
      expect((await stale.run(['host', 'sync'])).code).toBe(0);
      const fresh = json(await stale.run(['hosts', '--json'])).hosts[0];
      expect(fresh.status).toBe('up');
      await new Promise((resolve) => setTimeout(resolve, STALE_S * 1000 + 500));
      // A second update confirms the unchanged stats (not rewritten: their age keeps growing).
      expect((await stale.run(['host', 'sync'])).code).toBe(0);
      const confirmed = json(await stale.run(['hosts', '--json'])).hosts[0];
      expect(confirmed.status).toBe('up');
      expect(confirmed.stats.map((s: any) => [s.plugin, s.stale])).toEqual([['memory', false], ['vcpu', false]]);
      expect(confirmed.stats[0].ageMs).toBeGreaterThan(STALE_S * 1000);
      await new Promise((resolve) => setTimeout(resolve, STALE_S * 1000 + 500));
      const late = json(await stale.run(['hosts', '--json'])).hosts[0];
      expect(late.status).toBe('stale');
      expect(late.stats.map((s: any) => [s.plugin, s.stale])).toEqual([['memory', true], ['vcpu', true]]);
      expect(late.stats[0].ageMs).toBeGreaterThan(2 * STALE_S * 1000);
      // The scheduler agrees: the status filter removes it.
      const explained = json(await stale.run(['schedule', '--flavor', 'small', '--explain', '--json']));
      expect(explained.filters.find((f: any) => f.filter === 'status').removed).toBe(1);
      const human = await stale.run(['hosts']);
      expect(human.stdout).toMatch(/^node1\s+stale\s+.*memory \d+s STALE, vcpu \d+s STALE$/m);
    } finally {
      await stale.remove();
    }
  }, 90_000);
});

describe('ert and its surroundings (issue 11, point 16)', () => {
  // Caught: the EPIPE handler removed from bin.ts (stderr: "Error: write EPIPE" with a stack
  // from an unhandled 'error' event).
  it('ert piped into head stops quietly', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ert-cli-pipe-'));
    try {
      const result = await bash(`cd ${dir} && node ${BIN} demo --hosts 2 --requests 40 | head -c 20 >/dev/null; echo "ert exit \${PIPESTATUS[0]}" >&2`, {});
      expect(result.stderr).toMatch(/^ert exit 0\n$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  // Caught: init back on mkdir({ recursive: true }) (Node never settles: the run hit the 10 s
  // timeout, killed).
  it('ert init /proc/foo fails at once naming the directory', async () => {
    const result = await bash(`timeout 10 node ${BIN} init /proc/foo/site || echo "exit $?" >&2`, {});
    expect(result.stderr).toBe('ert: cannot create directory /proc/foo: ENOENT: no such file or directory\nexit 1\n');
  });

  // Caught: demo back on `base = REPO_ROOT` whenever the repository's config exists (the
  // database went to <repo>/.ert/demo.db from a directory outside the repository).
  it('demo outside the repository writes its database in the working directory, not in the repository', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ert-cli-demo-'));
    const repoDb = join(REPO, '.ert/demo.db');
    const before = existsSync(repoDb) ? statSync(repoDb).mtimeMs : undefined;
    try {
      const result = await runErt(['demo', '--hosts', '2', '--requests', '5', '--json'], { cwd: dir });
      expect(result.code, result.stderr).toBe(0);
      expect(json(result).database).toBe(join(dir, '.ert/demo.db'));
      expect(existsSync(join(dir, '.ert/demo.db'))).toBe(true);
      expect(existsSync(repoDb) ? statSync(repoDb).mtimeMs : undefined).toBe(before);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

const PG_URL = process.env.ERT_TEST_PG_URL;

describe.skipIf(!PG_URL)('ert store checks on PostgreSQL (issue 11, point 13)', () => {
  const schema = `ert_protect_${process.pid}`;
  let project: Project;
  beforeAll(async () => {
    project = await Project.create('cloud-vm');
    await project.writeConfig({ store: { client: 'sqlite3', connection: './ert.db', schema }, tracker: { hostName: 'node1', root: './root', resources: ['vcpu', 'memory'] }, flavors: [SMALL] });
  });
  afterAll(async () => {
    await dropPostgresSchema(PG_URL!, schema);
    await project?.remove();
  });

  // Caught: hosts opening the store with { create: true } (exit 0: the schema was created
  // and migrated by a read-only command); migrate() without refuseNewer (knex's "migration
  // directory is corrupt").
  it('a schema without ert tables is missing for read-only commands; a newer one is named', async () => {
    const env = { ERT_STORE_CONNECTION: PG_URL! };
    const missing = await project.run(['hosts'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`ert: PostgreSQL store ${PG_URL} (schema ${schema}) does not exist; check store.connection, or create it with \`ert db migrate\`\n`);
    const knex = knexFactory({ client: 'pg', connection: PG_URL! });
    try {
      const [{ present }] = (await knex.raw('select count(*)::int as present from information_schema.schemata where schema_name = ?', [schema])).rows;
      expect(present).toBe(0);
      expect((await project.run(['host', 'sync'], env)).code).toBe(0);
      const claimed = await project.run(['claim', '--flavor', 'small', '--host', 'node2'], env);
      expect(claimed.code).toBe(2);
      expect(claimed.stderr).toContain('did you mean node1?');
      await knex.withSchema(schema).from(MIGRATIONS_TABLE).insert({ name: '0099_future', batch: 99, migration_time: new Date() });
    } finally {
      await knex.destroy();
    }
    for (const command of [['usage'], ['db', 'migrate']]) {
      const result = await project.run(command, env);
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(
        `ert: PostgreSQL store ${PG_URL} (schema ${schema}) was migrated by a newer ert: schema versions 0099_future are unknown to this one (it knows up to ${LATEST}); upgrade ert\n`,
      );
    }
  });
});
