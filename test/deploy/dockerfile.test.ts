import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, REPO, ensureCliBuilt, runErt, scratchDir, startErt } from '../cli/helpers.js';

/**
 * deploy/Dockerfile, checked without a Docker daemon (none here: the image itself is not built
 * by the tests). What can be checked for real is: every file the build stage COPYs from the
 * context exists in the repository and is not left out by .dockerignore; the npm scripts it runs
 * exist; the runtime stage runs as a user other than root; the ENTRYPOINT's file exists once the
 * repository is built as the build stage builds it (the build stage's WORKDIR is this
 * repository's root); and the default CMD is an `ert` command that `ert <cmd> --help` accepts and
 * that, run with the image's ENV in a directory standing for its WORKDIR, does what the
 * Dockerfile's comment says (refused without an auth mode on 0.0.0.0, serving with one).
 *
 * Mutations seen caught: a COPY of `tsconfig.build.json` (no such file): red; `CMD ["server"]`:
 * red, also without the check that it is `serve` (`ert server --help` exits 0 with the program's
 * usage, not `Usage: ert server`); `USER root`: red; `packages` added to .dockerignore: red;
 * the ENV `ERT_CONFIG` removed: red (the image would find no config: `No ert config in ...`).
 */

interface Instruction {
  keyword: string;
  args: string;
}

interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** The Dockerfile's stages and instructions (continuation lines joined, comments dropped). */
function parseDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (current === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // a comment inside a continued instruction
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push(current + line);
    current = '';
  }
  if (current !== '') throw new Error(`the Dockerfile ends in a continuation: ${current}`);
  const stages: Stage[] = [];
  for (const line of logical) {
    const m = /^(\S+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`not an instruction: ${line}`);
    const keyword = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (keyword === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!from) throw new Error(`bad FROM: ${args}`);
      stages.push({ from: from[1]!, name: from[2], instructions: [] });
      continue;
    }
    if (stages.length === 0) throw new Error(`${keyword} before any FROM`);
    stages.at(-1)!.instructions.push({ keyword, args });
  }
  return stages;
}

/** An instruction's exec form (`["a", "b"]`) as a list; refuses the shell form. */
function execForm(instruction: Instruction): string[] {
  const parsed = JSON.parse(instruction.args) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) throw new Error(`${instruction.keyword} is not in exec form: ${instruction.args}`);
  return parsed as string[];
}

/** COPY's flags, sources and destination. */
function copyArgs(args: string): { from: string | undefined; sources: string[]; dest: string } {
  const words = args.split(/\s+/);
  let from: string | undefined;
  while (words[0]?.startsWith('--')) {
    const flag = words.shift()!;
    if (flag.startsWith('--from=')) from = flag.slice('--from='.length);
  }
  if (words.length < 2) throw new Error(`COPY needs a source and a destination: ${args}`);
  return { from, sources: words.slice(0, -1), dest: words.at(-1)! };
}

/** .dockerignore's patterns as regular expressions (`**`, `*`, a directory excluding what is below it). */
function ignorePatterns(text: string): RegExp[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((pattern) => {
      if (pattern.startsWith('!')) throw new Error(`exceptions in .dockerignore are not handled by this test: ${pattern}`);
      const body = pattern
        .replace(/^\/+|\/+$/g, '')
        .split(/(\*\*\/|\*\*|\*|\?)/)
        .map((part) => (part === '**/' ? '(?:.*/)?' : part === '**' ? '.*' : part === '*' ? '[^/]*' : part === '?' ? '[^/]' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
        .join('');
      return new RegExp(`^${body}(?:/.*)?$`);
    });
}

const DOCKERFILE = join(REPO, 'deploy/Dockerfile');
const stages = parseDockerfile(readFileSync(DOCKERFILE, 'utf8'));
const ignored = ignorePatterns(readFileSync(join(REPO, '.dockerignore'), 'utf8'));
const build = stages.find((s) => s.name === 'build')!;
const runtime = stages.at(-1)!;
const one = (stage: Stage, keyword: string): Instruction => {
  const found = stage.instructions.filter((i) => i.keyword === keyword);
  expect(found, `${keyword} in the stage FROM ${stage.from}`).toHaveLength(1);
  return found[0]!;
};
const workdirOf = (stage: Stage): string => one(stage, 'WORKDIR').args;
/** A path of the build stage's tree, in this repository (the build stage's WORKDIR is its root). */
const inRepo = (imagePath: string): string => {
  const root = workdirOf(build);
  expect(imagePath === root || imagePath.startsWith(`${root}/`), `${imagePath} is under the build stage's ${root}`).toBe(true);
  return join(REPO, posix.relative(root, imagePath));
};

describe('deploy/Dockerfile (checked without a Docker daemon: the image is not built here)', () => {
  it('is two stages on Node 20, the build stage with the toolchain sqlite3 compiles with', () => {
    expect(stages.length).toBe(2);
    expect(build).toBeDefined();
    for (const stage of stages) expect(stage.from).toMatch(/^node:20(?:\.\d+)*-bookworm-slim$/);
    const runs = build.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args).join('\n');
    for (const tool of ['python3', 'make', 'g++']) expect(runs).toMatch(new RegExp(`apt-get install[^\\n]*\\s${tool.replace('+', '\\+')}(\\s|$)`));
    expect(runs).toContain('npm ci');
    expect(runs).toMatch(/npm rebuild sqlite3/);
    // Every `npm run <script>` is a script of the root package.json.
    const scripts = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    const ran = [...runs.matchAll(/npm run (\S+)/g)].map((m) => m[1]!);
    expect(ran).toContain('build');
    for (const script of ran) expect(Object.keys(scripts), `npm run ${script}`).toContain(script);
  });

  it('COPYs from the context only files that exist and that .dockerignore lets through', () => {
    let copies = 0;
    for (const stage of stages) {
      for (const instruction of stage.instructions.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD')) {
        expect(instruction.keyword, 'COPY, not ADD').toBe('COPY');
        const { from, sources } = copyArgs(instruction.args);
        if (from !== undefined) continue;
        for (const source of sources) {
          copies++;
          expect(source, 'no globs in COPY sources').not.toMatch(/[*?[]/);
          expect(existsSync(join(REPO, source)), `COPY ${source}: exists in the repository`).toBe(true);
          const rel = posix.normalize(source).replace(/\/+$/, '');
          for (const pattern of ignored) expect(pattern.test(rel), `COPY ${source} is left out by .dockerignore (${pattern})`).toBe(false);
          // Every workspace's manifest reaches the build (npm ci needs them all).
        }
      }
    }
    expect(copies).toBeGreaterThan(0);
    for (const workspace of ['packages/cli/package.json', 'packages/api/data/placement-standards.json', 'plugins/vcpu/package.json', 'package-lock.json']) {
      for (const pattern of ignored) expect(pattern.test(workspace), `${workspace} left out by .dockerignore (${pattern})`).toBe(false);
    }
    // What must stay out: local installs and builds, stores.
    for (const path of ['node_modules', 'packages/api/node_modules', 'packages/api/dist', 'ert.db', 'config/ert.db']) {
      expect(ignored.some((p) => p.test(path)), `${path} is left out`).toBe(true);
    }
  });

  it('runs as a user other than root, its ENTRYPOINT the built ert, which exists after `npm run build`', () => {
    const user = one(runtime, 'USER').args.split(':')[0]!;
    expect(['root', '0']).not.toContain(user);
    const runtimeRuns = runtime.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args).join('\n');
    expect(runtimeRuns).toMatch(new RegExp(`useradd\\b[^\\n]*\\s${user}(\\s|$)`));
    // The runtime stage takes the build stage's tree.
    const fromBuild = runtime.instructions.filter((i) => i.keyword === 'COPY').map((i) => copyArgs(i.args)).filter((c) => c.from === 'build');
    expect(fromBuild.length).toBeGreaterThan(0);
    for (const copy of fromBuild) for (const source of copy.sources) inRepo(source);

    const entrypoint = execForm(one(runtime, 'ENTRYPOINT'));
    expect(entrypoint[0]).toBe('node');
    ensureCliBuilt(); // tsc -b, as `npm run build` does
    const entry = inRepo(entrypoint[1]!);
    expect(entry).toBe(BIN);
    expect(existsSync(entry), entry).toBe(true);
  });

  it('has a default CMD that ert accepts (`ert <cmd> --help`) and that serves, given an auth mode', { timeout: 60_000 }, async () => {
    const cmd = execForm(one(runtime, 'CMD'));
    expect(cmd[0]).toBe('serve');
    const dir = await scratchDir('ert-docker-cmd-');
    try {
      const help = await runErt([...cmd, '--help'], { cwd: dir });
      expect(help.code, help.stderr).toBe(0);
      expect(help.stdout).toMatch(new RegExp(`^Usage: ert ${cmd[0]} `));

      // The image's ENV: its WORKDIR standing for the scratch directory, the build stage's tree
      // for this repository (the files named must exist).
      const workdir = workdirOf(runtime);
      const root = workdirOf(build);
      const env: Record<string, string> = {};
      for (const instruction of runtime.instructions.filter((i) => i.keyword === 'ENV')) {
        for (const m of instruction.args.matchAll(/(\w+)=(\S+)/g)) {
          const value = m[2]!;
          if (value.startsWith(`${workdir}/`)) env[m[1]!] = join(dir, value.slice(workdir.length + 1));
          else if (value.startsWith(`${root}/`)) {
            env[m[1]!] = inRepo(value);
            expect(existsSync(env[m[1]!]!), `${m[1]}=${value}`).toBe(true);
          } else env[m[1]!] = value;
        }
      }
      expect(env.ERT_STORE_CONNECTION).toBe(join(dir, 'ert.db'));
      const migrated = await runErt(['db', 'migrate'], { cwd: dir, env });
      expect(migrated.code, migrated.stderr).toBe(0);
      // On 0.0.0.0 without an auth mode: refused, as the Dockerfile's comment says.
      const refused = await runErt([...cmd, '--port', '0'], { cwd: dir, env });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('without an explicit auth mode');
      // With one (-e ERT_API_AUTH=...): it serves and its health endpoint answers.
      const child = startErt([...cmd, '--port', '0'], { cwd: dir, env: { ...env, ERT_API_AUTH: 'noauth2' } });
      try {
        const origin = await new Promise<string>((resolve, reject) => {
          let stderr = '';
          child.stderr!.on('data', (d) => {
            stderr += d;
            const m = /Placement API on http:\/\/0\.0\.0\.0:(\d+)/.exec(stderr);
            if (m) resolve(`http://127.0.0.1:${m[1]}`);
          });
          child.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
        });
        expect((await fetch(`${origin}/healthz`)).status).toBe(200);
        // Ready once it has read every host's snapshot (the check host-snapshots, a few ms here).
        await expect.poll(async () => (await fetch(`${origin}/readyz`)).status, { timeout: 10_000, interval: 20 }).toBe(200);
      } finally {
        child.kill('SIGTERM');
        await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
