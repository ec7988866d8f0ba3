#!/usr/bin/env node
// The `ert` command as npm links it (node_modules/.bin/ert). This file is checked in so that
// the link exists right after `npm ci` on a fresh clone, before anything is built; it only
// loads the compiled CLI (dist/bin.js, from packages/cli/src/bin.ts).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const built = new URL('../dist/bin.js', import.meta.url);
if (!existsSync(built)) {
  process.stderr.write(`ert: ${fileURLToPath(built)} is not built yet; run \`npm run build\` first (at the repository's root)\n`);
  process.exit(1);
}
await import(built.href);
