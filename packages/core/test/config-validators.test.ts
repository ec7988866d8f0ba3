import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { OUT, generate } from '../../../scripts/gen-config-validators.mjs';
import * as schemas from '../src/config-schema.js';
import { createAjv } from '../src/schema.js';
import { configFromObject } from '../src/config.js';

/**
 * The config's validators are generated code (config-validators.generated.ts), so a change
 * to config-schema.ts that is not regenerated would validate configs against the old schema.
 */
describe('the generated config validators', () => {
  // Caught: a `tracker.example` property added to config-schema.ts without running the
  // script (the committed file differed; red).
  it('are what scripts/gen-config-validators.mjs generates from config-schema.ts', () => {
    const expected = generate(schemas, createAjv);
    const committed = readFileSync(OUT, 'utf8');
    expect(committed === expected, 'config-validators.generated.ts is stale: run `node scripts/gen-config-validators.mjs`').toBe(true);
  });

  it('apply the schema\'s defaults and name the key at fault with the schema\'s wording', () => {
    const config = configFromObject({ tracker: { hostName: 'n1' } }, { configDir: '/etc/ert' });
    expect(config.tracker.interval).toBe(60_000);
    expect(config.store.client).toBe('sqlite3');
    expect(() => configFromObject({ tracker: { interval: 'soon' } }, { configDir: '/etc/ert', configFile: '/etc/ert/ert.config.yaml' })).toThrow(
      /tracker\.interval: got "soon", expected a duration such as "500ms"/,
    );
  });
});
