/**
 * docs/plugins.md's tutorial ("A plugin and its tests with the kit, in 15 minutes") shows
 * test/tutorial/gpu.ts and gpu.test.ts: its code blocks must be these files exactly, and
 * vitest runs gpu.test.ts itself, so the code in the doc is the code that passes. (The blocks
 * are tagged `name=`, not `file=`: test/cli/plugin-doc.test.ts writes out section 10's `file=` blocks.)
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = path.dirname(fileURLToPath(import.meta.url));
const doc = path.resolve(here, '../../../docs/plugins.md');

function blocks(markdown: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of markdown.matchAll(/^```ts name=(\S+)\n([\s\S]*?)^```$/gm)) out.set(m[1]!, m[2]!);
  return out;
}

describe('the tutorial in docs/plugins.md', () => {
  it('shows gpu.ts and gpu.test.ts exactly as they are in test/tutorial/', async () => {
    const found = blocks(await readFile(doc, 'utf8'));
    expect([...found.keys()].sort()).toEqual(['gpu.test.ts', 'gpu.ts']);
    for (const [name, code] of found) expect(code, name).toBe(await readFile(path.join(here, 'tutorial', name), 'utf8'));
  });
});
