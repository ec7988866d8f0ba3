import { describe, expect, it } from 'vitest';
import { DOCUMENTED, undocumented } from '../../scripts/check-doc-comments.mjs';

// Issue 12, "API reference": every public symbol of the packages whose TypeDoc reference
// `npm run docs` builds has a doc comment (each export of the package's src/index.ts, and
// each member of an exported interface or class). Seen failing once: with a temporary
// `export const probe = 1;` added to packages/plugin-testkit/src/index.ts this test failed listing
// `packages/plugin-testkit: probe`; the line was removed again.
describe('API reference', () => {
  it('every public symbol of @ert/plugin-api, @ert/store and @ert/plugin-testkit has a doc comment', () => {
    expect(DOCUMENTED).toEqual(['packages/plugin-api', 'packages/store', 'packages/plugin-testkit']);
    const missing = undocumented();
    expect(missing, `public symbols without a doc comment (write one, then run npm run docs):\n${missing.join('\n')}`).toEqual([]);
  }, 120_000);
});
