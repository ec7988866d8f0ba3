import { servedAt } from './served.js';
import type { ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { buildPackage } from '../build.js';
import { REPO, runErt, scratchDir, startErt } from '../cli/helpers.js';

/**
 * `ert serve`'s auth, policy and worker options through the real CLI (packages/cli/dist/bin.js):
 * startup refusals naming the file and the key or rule, the token-file mode and a policy
 * file on a running server, and `--workers 2` answering from two processes and stopping both
 * at SIGTERM (docs/api.md, "Auth modes and policy" and "Workers").
 */

interface Answer {
  status: number;
  worker: string | undefined;
}

/** One request on a connection of its own (keep-alive would pin every request to one worker). */
function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { 'openstack-api-version': 'placement 1.39', connection: 'close', ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, worker: res.headers['x-ert-worker'] as string | undefined }));
    });
    req.on('error', reject);
    req.end();
  });
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('ert serve: auth, policy and workers options', () => {
  let dir: string;
  let server: ChildProcess | undefined;
  const config = () => join(dir, 'ert.config.yaml');

  beforeAll(async () => {
    buildPackage(join(REPO, 'packages/api'));
    dir = await scratchDir('ert-serve-cli-');
    await writeFile(config(), stringify({ store: { client: 'sqlite3', connection: './ert.db' } }));
    const migrated = await runErt(['--config', config(), 'db', 'migrate'], { cwd: dir });
    expect(migrated.code, migrated.stderr).toBe(0);
    await writeFile(
      join(dir, 'tokens.yaml'),
      stringify({
        'ops-token-0123456789': { user: 'ops', system_scope: 'all', roles: ['admin', 'member', 'reader'] },
        'alice-token-0123456789': { user: 'alice', project: 'p1', roles: ['reader'] },
      }),
    );
    await writeFile(join(dir, 'policy.yaml'), stringify({ 'placement:traits:list': 'role:reader and project_id:p1' }));
  });
  afterAll(async () => {
    if (server && server.exitCode === null && server.signalCode === null) {
      server.kill('SIGTERM');
      await new Promise((resolve) => server!.once('exit', resolve));
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('refuses a missing or invalid token file and a bad policy file, naming the file and the key or rule', async () => {
    const serveWith = (args: string[]) => runErt(['--config', config(), 'serve', '--port', '0', ...args], { cwd: dir });
    const missing = await serveWith(['--auth', 'token-file', '--token-file', 'nope.yaml']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^ert: token file nope\.yaml: cannot read it: ENOENT/);
    const noFile = await serveWith(['--auth', 'token-file']);
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toContain('the token-file auth mode needs --token-file <file>');
    await writeFile(join(dir, 'bad-tokens.yaml'), stringify({ 'abcdefgh-secret': { user: 'u', project: 'p', roles: 'admin' } }));
    const bad = await serveWith(['--auth', 'token-file', '--token-file', 'bad-tokens.yaml']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^ert: token file bad-tokens\.yaml: token "abcd…": "roles" must be a list of role names/);
    expect(bad.stderr).not.toContain('abcdefgh-secret');
    await writeFile(join(dir, 'bad-policy.yaml'), stringify({ 'placement:trait:list': '@' }));
    const unknown = await serveWith(['--policy-file', 'bad-policy.yaml']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^ert: policy file bad-policy\.yaml: unknown policy rule "placement:trait:list"/);
    await writeFile(join(dir, 'bad-policy.yaml'), stringify({ 'placement:traits:list': 'role:admin or (role:reader' }));
    const syntax = await serveWith(['--policy-file', 'bad-policy.yaml']);
    expect(syntax.stderr).toMatch(/^ert: policy file bad-policy\.yaml: rule "placement:traits:list": missing "\)"/);
    const defaults = await serveWith(['--policy-defaults', 'strict']);
    expect(defaults.code).toBe(2);
    expect(defaults.stderr).toContain('--policy-defaults must be one of legacy, secure');
  });

  it('--workers 2 with token-file auth and a policy file: two pids answer; SIGTERM stops both', { timeout: 90_000 }, async () => {
    server = startErt(
      ['--config', config(), 'serve', '--port', '0', '--log-level', 'warn', '--workers', '2', '--auth', 'token-file', '--token-file', 'tokens.yaml', '--policy-defaults', 'secure', '--policy-file', 'policy.yaml'],
      { cwd: dir },
    );
    let stdout = '';
    server.stdout!.on('data', (d) => (stdout += d));
    const base = (await servedAt(server)).url;
    const ops = { 'x-auth-token': 'ops-token-0123456789' };
    const workers = new Set<string>();
    for (let i = 0; i < 40 && workers.size < 2; i++) {
      const r = await get(`${base}/resource_providers`, ops);
      expect(r.status).toBe(200);
      workers.add(r.worker!);
    }
    expect(workers.size).toBe(2);
    const pids = [...workers].map(Number);
    expect(pids).not.toContain(server.pid);
    // token-file: unknown tokens and noauth2's are no one; the file's identity, not the headers, counts.
    expect((await get(`${base}/resource_providers`, { 'x-auth-token': 'admin' })).status).toBe(401);
    expect((await get(`${base}/resource_providers`)).status).toBe(401);
    const alice = { 'x-auth-token': 'alice-token-0123456789' };
    expect((await get(`${base}/resource_providers`, { ...alice, 'x-roles': 'admin', 'openstack-system-scope': 'all' })).status).toBe(403);
    // The policy file's rule (secure defaults: placement:traits:list keeps scope_types [system], so a project token is still refused).
    expect((await get(`${base}/traits`, alice)).status).toBe(403);
    expect((await get(`${base}/usages?project_id=p1`, alice)).status).toBe(200);
    expect((await get(`${base}/usages?project_id=p2`, alice)).status).toBe(403);

    // Graceful: the workers close and exit at once (a worker that hung would be killed only after 30 s).
    const stopping = Date.now();
    server.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => server!.once('exit', (c) => resolve(c)));
    expect(code).toBe(0);
    expect(Date.now() - stopping).toBeLessThan(15_000);
    expect(stdout).toContain('stopped serving');
    for (const pid of pids) expect(alive(pid), `worker ${pid}`).toBe(false);
  });
});
