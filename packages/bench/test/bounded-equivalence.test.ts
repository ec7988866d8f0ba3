import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, seededRandom } from '@ert/core';
import type { ErtConfig } from '@ert/core';
import { createScheduler, NoValidHostError } from '@ert/scheduler';
import type { RankingStrategy, Scheduler } from '@ert/scheduler';
import { createStore, dropPostgresSchema } from '@ert/store';
import type { Store } from '@ert/store';
import { buildFleet } from '@ert/tracker';
import { Workload } from '../src/workload.js';

/*
 * The benchmark's mixed workload (first-seen shapes, server groups, host hints, huge pages,
 * dedicated CPUs, LLC ways, P-states, traits, requests built to fail) through the default
 * config's five first-party plugins and every built-in filter, on a fleet of the host
 * profiles: the indexed strategy — whose first rankings of a request are bounded rankings
 * read from the host summaries the plugins publish, pruned by the filters' summary bounds
 * and the affinity filter's candidate hosts — must choose exactly what a full scan (every
 * filter and weigher on every host, every decision) chooses, request after request, and fail
 * exactly where it fails.
 * Mutations seen caught: the bounded ranking's best list taking potential candidates as they
 * are after the first one, without evaluating them (alternates a filter rejects); the bounded
 * ranking never answering (the filter-call count: 52,094 against the full scan's 90,818); a
 * memo taking an evicted memo's arrays without resetting its stamps, or its prune stamps
 * (the workload's shapes outnumber the scheduler's 16 memos, so memos are reused here); a
 * failed request's summary counting a host under the filter after the one whose summary bound
 * rejected it, or without asking that filter for the reason it shows (the indexed strategy's
 * complete rankings call no hook of a filter whose bound rejects the host).
 * Seen not to matter (so not a test of them): the llc `after.<n>` summaries replaced by the
 * largest run before placing, with the summary/score mismatch check off: on these profiles
 * the two differ by the same amount on every host, which min-max normalisation cancels.
 */

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const HOSTS = 120;
const DECISIONS = 250;

/** SQLite always; PostgreSQL too when ERT_TEST_PG_URL is set (CI sets it). */
const PG_URL = process.env.ERT_TEST_PG_URL;
const BACKENDS: Array<'sqlite3' | 'pg'> = PG_URL ? ['sqlite3', 'pg'] : ['sqlite3'];

describe.each(BACKENDS)('bounded rankings on the mixed workload, on %s', (client) => {
  const work = mkdtempSync(path.join(tmpdir(), 'ert-bounded-eq-'));
  const open: Array<Store | Scheduler> = [];
  const schemas: string[] = [];
  afterAll(async () => {
    for (const x of open.reverse()) await x.close();
    for (const schema of schemas) await dropPostgresSchema(PG_URL!, schema);
    rmSync(work, { recursive: true, force: true });
  });

  it('choose what a full scan chooses, decision after decision', async () => {
    const base = await loadConfig({ path: path.join(repoRoot, 'config', 'ert.config.yaml'), env: {} });
    const fleet = await buildFleet({ config: base, profilesDir: path.join(repoRoot, 'config', 'hosts'), hosts: HOSTS, seed: 7 });
    const setups = await Promise.all(
      (['indexed', 'full-scan'] as RankingStrategy[]).map(async (strategy) => {
        const config: ErtConfig = {
          ...base,
          store:
            client === 'pg'
              ? { client: 'pg', connection: PG_URL!, schema: `bounded_eq_${strategy.replace('-', '_')}_${process.pid}` }
              : { client: 'sqlite3', connection: path.join(work, `${strategy}.db`) },
          log: { level: 'silent' },
          reservations: { ...base.reservations, timeout: 2_147_483_647 },
        };
        const store = await createStore(config.store);
        open.push(store);
        if (config.store.schema !== undefined) schemas.push(config.store.schema);
        await store.migrate();
        await store.importHosts(fleet);
        const scheduler = await createScheduler({ config, store, strategy, random: seededRandom(11) });
        open.push(scheduler);
        return { scheduler, workload: new Workload({ random: seededRandom(5), plugins: ['vcpu', 'memory', 'compute-units', 'llc', 'pstate'] }) };
      }),
    );
    const outcomes: string[][] = [[], []];
    for (let i = 0; i < DECISIONS; i++) {
      const uuid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      for (const [s, { scheduler, workload }] of setups.entries()) {
        const request = workload.next(uuid);
        try {
          const [selection] = await scheduler.select({ flavor: request.flavor, ...(request.hints ? { hints: request.hints } : {}), instances: [{ uuid, projectId: 'p', userId: 'u' }] });
          outcomes[s]!.push(`${i} ${request.flavor.name}: ${selection!.host} [${selection!.alternates.join(',')}]`);
          workload.placed(uuid);
        } catch (error) {
          if (!(error instanceof NoValidHostError)) throw error;
          // The whole summary: each step's count and its first hosts with their reasons.
          outcomes[s]!.push(`${i} ${request.flavor.name}: none ${JSON.stringify((error.details as { summary: unknown }).summary)}`);
        }
      }
    }
    expect(outcomes[0]).toEqual(outcomes[1]);
    // The indexed scheduler must have answered from the summaries, calling filters on far fewer hosts.
    const filterCalls = (scheduler: Scheduler): number => scheduler.timings().filter((t) => t.hook === 'filter').reduce((n, t) => n + t.calls, 0);
    expect(filterCalls(setups[0]!.scheduler)).toBeLessThan(filterCalls(setups[1]!.scheduler) / 5);
  }, 120_000);
});
