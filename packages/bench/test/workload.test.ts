import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createPluginRuntime, loadConfig, seededRandom } from '@ert/core';
import { parseFlavor } from '@ert/placement';
import { builtinFilters } from '@ert/scheduler';
import { catalogue, Workload } from '../src/workload.js';

// The benchmark's workload must send what it says: requests that parse with the default
// config's plugins (a malformed extra spec would be counted as a scheduling failure), the
// asked share of first-seen shapes, and requests built to fail that are unplaceable by
// construction. Mutations seen caught: a catalogue flavor with a misspelt plugin key
// ('llc:way'), and firstSeen() reusing a catalogue flavor unchanged.

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const FIRST_PARTY = ['vcpu', 'memory', 'compute-units', 'llc', 'pstate'];
const FIRST_SEEN_KINDS = ['server-group-anti-affinity', 'server-group-affinity', 'different_host', 'same_host', 'custom-size', 'custom-combination'];

describe('the mixed scheduling workload', () => {
  it('has at least 30 flavors, every one of which (and every generated request) parses with the default config', async () => {
    const config = await loadConfig({ path: path.join(repoRoot, 'config', 'ert.config.yaml'), env: {} });
    const builtins = builtinFilters({ hostOf: () => undefined });
    const runtime = await createPluginRuntime({ config: { ...config, log: { level: 'silent' } }, side: 'scheduler', builtins });
    const keys = runtime.extraSpecKeys;
    expect(catalogue(FIRST_PARTY).length).toBeGreaterThanOrEqual(30);
    for (const entry of catalogue(FIRST_PARTY)) expect(() => parseFlavor(entry.flavor, { keys })).not.toThrow();
    const workload = new Workload({ random: seededRandom(3), plugins: FIRST_PARTY });
    for (let i = 0; i < 2000; i++) {
      const uuid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      const request = workload.next(uuid);
      expect(() => parseFlavor(request.flavor, { keys, ...(request.hints ? { hints: request.hints } : {}) })).not.toThrow();
      workload.placed(uuid);
    }
  });

  it('sends about the asked share of first-seen shapes, the same stream for the same seed', () => {
    const run = (share: number, seed: number) => {
      const workload = new Workload({ random: seededRandom(seed), plugins: FIRST_PARTY, newShapeShare: share });
      const seen = new Set<string>();
      let fresh = 0;
      const kinds: string[] = [];
      const repeatedFirstSeenKinds: string[] = [];
      for (let i = 0; i < 5000; i++) {
        const uuid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
        const request = workload.next(uuid);
        if (!seen.has(request.shape)) fresh++;
        else if (FIRST_SEEN_KINDS.includes(request.kind)) repeatedFirstSeenKinds.push(request.kind);
        seen.add(request.shape);
        kinds.push(request.kind);
        workload.placed(uuid);
      }
      return { share: fresh / 5000, kinds, repeatedFirstSeenKinds };
    };
    const twenty = run(0.2, 1);
    // Every request of a first-seen kind is a shape never sent before.
    expect(twenty.repeatedFirstSeenKinds).toEqual([]);
    // The catalogue's own first sightings add a little to the knob.
    expect(twenty.share).toBeGreaterThan(0.18);
    expect(twenty.share).toBeLessThan(0.25);
    expect(run(0.05, 1).share).toBeLessThan(0.08);
    expect(run(0.2, 1).kinds).toEqual(twenty.kinds);
    for (const kind of ['server-group-anti-affinity', 'server-group-affinity', 'different_host', 'same_host', 'custom-size', 'custom-combination', 'oversized', 'unsatisfiable', 'hugepages', 'llc', 'granular', 'pstate', 'cu', 'dedicated', 'traits']) {
      expect(twenty.kinds, kind).toContain(kind);
    }
  });
});
