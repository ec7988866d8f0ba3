/**
 * statsProblems / assertValidStats agree with the host's stats writer (@ert/core's
 * validateStats) on every first-party plugin's stats, valid and broken, and on the schema
 * features Ajv's settings decide (union types, unknown keywords, ert's `expected`).
 */
import { describe, expect, it } from 'vitest';
import { validateStats } from '@ert/core';
import { definePlugin, statsCopy, MAX_STATS_BYTES, type Plugin } from '@ert/plugin-api';
import vcpu from '@ert/plugin-vcpu/compute';
import memory from '@ert/plugin-memory/compute';
import llc from '@ert/plugin-llc/compute';
import pstate from '@ert/plugin-pstate/compute';
import computeUnits from '@ert/plugin-compute-units/compute';
import disk from '@ert/plugin-disk/compute';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertValidStats, resourceContext, statsProblems } from '../src/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../config/hosts/xeon-2s-cat');

/** The host writer's verdict: the JSON copy the tracker takes of a `stats()` result, then validateStats on it. */
function coreVerdict(plugin: Plugin<any, any, any>, data: unknown): boolean {
  const copy = statsCopy(data);
  if ('problem' in copy) return false;
  try {
    validateStats(plugin, copy.data);
    return true;
  } catch {
    return false;
  }
}

/** Ways of breaking valid stats: a field removed, retyped, an unknown field, a nested value retyped. */
function mutations(stats: Record<string, unknown>): unknown[] {
  const out: unknown[] = [null, [], 'stats', {}];
  for (const key of Object.keys(stats)) {
    const { [key]: _gone, ...without } = stats;
    out.push(without, { ...stats, [key]: { nested: true } }, { ...stats, [key]: -1 }, { ...stats, [key]: '' });
  }
  out.push({ ...stats, unknownField: 1 });
  return out;
}

describe('statsProblems agrees with @ert/core validateStats', () => {
  for (const plugin of [vcpu, memory, llc, pstate, computeUnits, disk] as Array<Plugin<any, any, any>>) {
    it(`${plugin.name}: its stats on xeon-2s-cat and ${'~'}40 broken variants`, async () => {
      const hooks = await plugin.resource!(resourceContext(plugin, root));
      await hooks.discover();
      const stats = (await hooks.stats!()) as Record<string, unknown>;
      expect(statsProblems(plugin, stats)).toEqual([]);
      expect(coreVerdict(plugin, stats)).toBe(true);
      let refused = 0;
      for (const data of mutations(stats)) {
        const ok = statsProblems(plugin, data).length === 0;
        expect({ data, ok }).toEqual({ data, ok: coreVerdict(plugin, data) });
        if (!ok) refused++;
      }
      expect(refused).toBeGreaterThan(5);
    });
  }

  it('union types, unknown keywords and the `expected` annotation as the host compiles them', () => {
    const plugin = definePlugin({
      name: 'odd',
      stats: { version: 3, schema: { type: 'object', properties: { a: { type: ['integer', 'null'], expected: 'a count', 'x-unit': 'widgets' } }, required: ['a'] } },
    });
    for (const data of [{ a: 1 }, { a: null }, { a: 'x' }, {}, { a: 1.5 }]) expect(statsProblems(plugin, data).length === 0).toBe(coreVerdict(plugin, data));
  });

  it('assertValidStats throws with the host writer code, naming plugin, version and the path', () => {
    expect(() => assertValidStats(computeUnits, { model: null })).toThrow(expect.objectContaining({ code: 'ERT_PLUGIN_STATS_INVALID', details: expect.objectContaining({ plugin: 'compute-units' }) }));
    expect(() => assertValidStats(computeUnits, { model: null })).toThrow(/Plugin "compute-units" stats \(schema version 1\) are invalid: stats\.perCore: must have required property/);
    expect(statsProblems(definePlugin({ name: 'none' }), {})).toEqual(['plugin "none" reported stats but declares no stats schema']);
    expect(coreVerdict(definePlugin({ name: 'none' }), {})).toBe(false);
  });
});

// The host checks and writes a JSON copy of the stats, refusing what JSON cannot hold as it is
// and stats over MAX_STATS_BYTES; the kit must refuse the same. Seen red with statsProblems
// validating `data` itself again (NaN, Infinity and `toJSON`'s answer passed; the BigInt, the
// cycle and the 300 KiB stats passed too).
describe('statsProblems refuses what the host cannot write as checked', () => {
  const plugin = definePlugin({ name: 'gauge', stats: { version: 1, schema: { type: 'object', required: ['load'], properties: { load: { type: 'number' }, note: {} } } } });
  const cycle: Record<string, unknown> = { load: 1 };
  cycle['note'] = cycle;
  it.each([
    ['NaN', { load: Number.NaN }, 'stats.load is NaN, which JSON cannot hold'],
    ['Infinity', { load: 1, note: [Number.NEGATIVE_INFINITY] }, 'stats.note[0] is -Infinity, which JSON cannot hold'],
    ['a BigInt', { load: 1, note: { n: 1n } }, 'stats.note.n is a BigInt, which JSON cannot hold'],
    ['a cycle', cycle, expect.stringMatching(/^stats cannot be written as JSON: Converting circular structure/)],
    ['toJSON', { load: 1, toJSON: () => ({ load: 'lots' }) }, expect.stringMatching(/^stats\.load: /)],
    ['too much', { load: 1, note: 'x'.repeat(300 * 1024) }, expect.stringMatching(new RegExp(`^stats take \\d+ bytes as JSON, more than the ${MAX_STATS_BYTES} allowed$`))],
    // One problem, not a throw out of statsCopy: red when statsCopy told its own refusals apart
    // with an unguarded `instanceof` (the Proxy's trap threw).
    [
      'a toJSON that throws a Proxy',
      {
        load: 1,
        toJSON() {
          throw new Proxy(
            {},
            {
              getPrototypeOf() {
                throw new Error('trap');
              },
            },
          );
        },
      },
      'stats cannot be written as JSON: <unprintable thrown value>',
    ],
  ])('%s: one problem, as the host refuses it', (_what, data, problem) => {
    expect(statsProblems(plugin, data)).toEqual([problem]);
    expect(coreVerdict(plugin, data)).toBe(false);
  });
});
