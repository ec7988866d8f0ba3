import type { ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Project, startErt } from '../cli/helpers.js';
import { parseExposition, valueOf, type Exposition } from './exposition.js';
import { servedAt, stopAll } from './served.js';

/**
 * `ert serve --workers 2` (the built CLI, two node:cluster workers sharing the port): a scrape
 * of `/metrics`, whichever worker answers it, gives the sum over both workers
 * (docs/operations.md, "--workers"). The requests are spread over the workers (round robin:
 * every request on a connection of its own), so a scrape that counted only the worker it
 * reached would see about half of them.
 *
 * Mutation seen caught: `shareWithCluster` in packages/api/src/metrics.ts made to leave
 * `expose()` on the worker's own registry (each worker answering alone, as before the
 * aggregation): red, the counter read 30 of the 60 requests sent. With `ert_hosts`'
 * `aggregator: 'max'` removed, red: 2 hosts up for the 1 in the store.
 */

interface Answer {
  status: number;
  worker: string;
  body: string;
}

/** One GET on a connection of its own (keep-alive would pin every request to one worker). */
function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { connection: 'close', ...headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, worker: String(res.headers['x-ert-worker']), body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const SENT = 60;
const ROUTE = { route: '/placement/resource_providers', method: 'GET', status: '200' };

describe('ert serve --workers 2: /metrics sums the workers', () => {
  let project: Project;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    project = await Project.create();
    // One host in the store: ert_hosts must say 1 however many workers read it.
    const synced = await project.run(['host', 'sync', '--json']);
    expect(synced.code, synced.stderr).toBe(0);
  });
  afterAll(async () => {
    await stopAll(children);
    await project?.remove();
  });

  it('every scrape, from either worker, counts all the requests sent', { timeout: 90_000 }, async () => {
    const server = startErt(['--config', project.configFile, '--log-level', 'warn', 'serve', '--port', '0', '--workers', '2'], { cwd: project.dir });
    children.push(server);
    const { origin, url } = await servedAt(server);

    const answeredBy = new Map<string, number>();
    for (let i = 0; i < SENT; i++) {
      const r = await get(`${url}/resource_providers`, { 'x-auth-token': 'admin', 'openstack-api-version': 'placement 1.39' });
      expect(r.status).toBe(200);
      answeredBy.set(r.worker, (answeredBy.get(r.worker) ?? 0) + 1);
    }
    // Both workers served requests, none all of them: one worker's counter alone is not the total.
    expect(answeredBy.size, JSON.stringify([...answeredBy])).toBe(2);
    for (const n of answeredBy.values()) expect(n).toBeLessThan(SENT);

    const scrapedBy = new Set<string>();
    let scrapes = 0;
    while (scrapes < 6 || (scrapedBy.size < 2 && scrapes < 30)) {
      const r = await get(`${origin}/metrics`);
      expect(r.status, r.body).toBe(200);
      scrapedBy.add(r.worker);
      const exposition: Exposition = parseExposition(r.body);
      const at = `scrape ${scrapes + 1}, answered by worker ${r.worker}`;
      expect(valueOf(exposition, 'ert_http_requests_total', ROUTE), at).toBe(SENT);
      expect(valueOf(exposition, 'ert_http_request_duration_seconds_count', ROUTE), at).toBe(SENT);
      expect(valueOf(exposition, 'ert_http_request_duration_seconds_bucket', { ...ROUTE, le: '+Inf' }), at).toBe(SENT);
      // The scrapes before this one, on whichever worker they landed (counted once answered).
      expect(valueOf(exposition, 'ert_http_requests_total', { route: '/metrics', method: 'GET', status: '200' }) ?? 0, at).toBe(scrapes);
      // Read from the one store by both workers: the max, not the sum.
      expect(valueOf(exposition, 'ert_hosts', { status: 'up' }), at).toBe(1);
      // Process metrics stay present (aggregated as prom-client does).
      expect(exposition.types.get('process_resident_memory_bytes')).toBe('gauge');
      scrapes++;
    }
    expect(scrapedBy.size, 'scrapes answered by both workers').toBe(2);
    for (const worker of scrapedBy) expect(answeredBy.has(worker)).toBe(true);
  });
});
