import { describe, expect, it } from 'vitest';
import { definePlugin } from '@ert/plugin-api';
import { PluginStatsError, validateStats } from '../src/index.js';

const llc = definePlugin({
  name: 'llc',
  stats: {
    version: 2,
    schema: {
      type: 'object',
      required: ['domains'],
      properties: {
        domains: {
          type: 'array',
          items: { type: 'object', required: ['id', 'freeMask'], properties: { id: { type: 'integer' }, freeMask: { type: 'string', pattern: '^[0-9a-f]+$' } } },
        },
      },
    },
  },
});

function statsError(fn: () => void): PluginStatsError {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(PluginStatsError);
  return err as PluginStatsError;
}

describe('validateStats', () => {
  it('accepts conforming data without changing it', () => {
    const data = { domains: [{ id: 0, freeMask: 'ff0' }] };
    expect(() => validateStats(llc, data)).not.toThrow();
    expect(data).toEqual({ domains: [{ id: 0, freeMask: 'ff0' }] });
  });

  it('names the plugin and the JSON path of each fault', () => {
    const err = statsError(() => validateStats(llc, { domains: [{ id: 0, freeMask: 'ff0' }, { id: 'one', freeMask: 'XYZ' }] }));
    expect(err.code).toBe('ERT_PLUGIN_STATS_INVALID');
    expect(err.details.plugin).toBe('llc');
    expect(err.details.path).toBe('stats.domains[1].id');
    expect(err.message).toBe(
      'Plugin "llc" stats (schema version 2) are invalid: stats.domains[1].id: got "one", expected an integer; stats.domains[1].freeMask: got "XYZ", expected a string matching ^[0-9a-f]+$',
    );
  });

  it('reports missing data at the top level', () => {
    const err = statsError(() => validateStats(llc, {}));
    expect(err.message).toContain('stats.domains: missing, expected a value (the key is required)');
  });

  it('refuses stats from a plugin that declares no schema', () => {
    const bare = definePlugin({ name: 'bare' });
    const err = statsError(() => validateStats(bare, { x: 1 }));
    expect(err.message).toBe('Plugin "bare" reported stats but declares no stats schema');
  });
});
