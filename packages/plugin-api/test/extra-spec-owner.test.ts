import { describe, expect, it } from 'vitest';
import { definePlugin, extraSpecKeyOwner, type ExtraSpecKey } from '../src/index.js';

// Audit #8: the parser names the plugin whose key an extra spec is; it learns the name from
// definePlugin. Catches a key whose owner is lost (never recorded, or recorded under the
// wrong plugin) and a key two differently named plugins were made with being credited to one.
describe('extraSpecKeyOwner', () => {
  it('is the name of the plugin made with the key; the plugin keeps the very key objects', () => {
    const ways: ExtraSpecKey<number> = { key: 'cache:ways', description: '', schema: { type: 'integer' } };
    const plugin = definePlugin({ name: 'cache', extraSpecs: [ways] });
    expect(plugin.extraSpecs![0]).toBe(ways);
    expect(extraSpecKeyOwner(ways)).toBe('cache');
    // Both entries of a package are made with the same keys and name.
    definePlugin({ name: 'cache', extraSpecs: [ways] });
    expect(extraSpecKeyOwner(ways)).toBe('cache');
  });

  it('is undefined for a key no plugin was made with, or that plugins of two names were made with', () => {
    expect(extraSpecKeyOwner({ key: 'loose:key', description: '', schema: {} })).toBeUndefined();
    const shared: ExtraSpecKey = { key: 'shared:key', description: '', schema: {} };
    definePlugin({ name: 'one', extraSpecs: [shared] });
    definePlugin({ name: 'two', extraSpecs: [shared] });
    expect(extraSpecKeyOwner(shared)).toBeUndefined();
  });
});
