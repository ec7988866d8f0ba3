#!/usr/bin/env node
// `npm run bench -- <name> [options]`: runs one benchmark from the built packages.
// Each benchmark is a script in a package's dist/bench/ that prints its own figures
// (JSON with --json). Results are written down in docs/benchmarks.md.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const benchmarks = {
  store: 'packages/bench/dist/store-bench.js',
  scheduler: 'packages/bench/dist/scheduler-bench.js',
  placement: 'packages/bench/dist/placement-bench.js',
  isolation: 'packages/bench/dist/isolation-bench.js',
  api: 'packages/bench/dist/api-bench.js',
  drivers: 'packages/bench/dist/driver-bench.js',
  schedulers: 'packages/bench/dist/schedulers-bench.js',
};

const [name, ...args] = process.argv.slice(2);
if (!name || name === '--help' || name === '-h' || !(name in benchmarks)) {
  const list = Object.keys(benchmarks).join(', ');
  const out = name && name !== '--help' && name !== '-h' ? console.error : console.log;
  out(`usage: npm run bench -- <${list}> [--json] [options]\n${name && !(name in benchmarks) && name !== '--help' && name !== '-h' ? `unknown benchmark "${name}"` : ''}`.trim());
  process.exit(name && name !== '--help' && name !== '-h' ? 2 : 0);
}
const script = path.join(root, benchmarks[name]);
if (!existsSync(script)) {
  console.error(`bench: ${benchmarks[name]} is missing; build first (npm run build)`);
  process.exit(1);
}
const result = spawnSync(process.execPath, [script, ...args], { stdio: 'inherit' });
process.exit(result.status ?? 1);
