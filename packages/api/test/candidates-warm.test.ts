import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { normalizeInventory } from '@ert/plugin-api';
import { createStore } from '@ert/store';

/**
 * `warmCandidateIndex` (`ert serve`): once listening, the API reads every provider and builds
 * the allocation candidates' search index, so the process's first GET /allocation_candidates
 * answers from it (at 5,000 providers a first request took 266 ms, the next 13–16 ms). Counted
 * on @ert/placement's `indexWorld`: built once, at start, and not again by the first request,
 * whose answer holds every provider.
 *
 * Mutation seen red: the warm-up building an index without keeping it for the route (the first
 * request built it again).
 */

const indexWorld = vi.hoisted(() => ({ calls: 0 }));
vi.mock('@ert/placement', async (importOriginal) => {
  const original = await importOriginal<typeof import('@ert/placement')>();
  return {
    ...original,
    indexWorld: (...args: Parameters<typeof original.indexWorld>) => {
      indexWorld.calls++;
      return original.indexWorld(...args);
    },
  };
});

const { createApi } = await import('@ert/api');

describe('the candidates index built at start', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ert-candidates-warm-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is built once listening, and the first request answers from it', async () => {
    const store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'ert.db') });
    await store.migrate();
    const providers = Array.from({ length: 40 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    await store.importHosts(
      providers.map((uuid, i) => ({
        host: { name: `h-${i}` },
        providers: [{ uuid, name: `h-${i}`, inventories: { VCPU: normalizeInventory({ total: 8 }), MEMORY_MB: normalizeInventory({ total: 4096 }) }, traits: [], aggregates: [] }],
      })),
    );
    let built!: (outcome: unknown) => void;
    const outcome = new Promise<unknown>((resolve) => (built = resolve));
    const app = await createApi({ store, auth: 'noauth2', prefix: '', warmCandidateIndex: true, onCandidateIndexBuilt: built });
    try {
      expect(indexWorld.calls).toBe(0);
      await app.listen({ host: '127.0.0.1', port: 0 });
      expect(await outcome).toMatchObject({ providers: 40 });
      expect(indexWorld.calls).toBe(1);
      const res = await app.inject({ method: 'GET', url: '/allocation_candidates?resources=VCPU:1,MEMORY_MB:512&limit=1000', headers: { 'x-auth-token': 'admin', 'openstack-api-version': 'placement 1.39' } });
      expect(res.statusCode).toBe(200);
      expect(Object.keys((res.json() as { provider_summaries: object }).provider_summaries).sort()).toEqual(providers);
      expect(indexWorld.calls).toBe(1);
    } finally {
      await app.close();
      await store.close();
    }
  });
});
