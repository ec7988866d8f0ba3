/**
 * The two entries of every first-party plugin (vcpu, memory, compute-units, llc, pstate)
 * load disjoint code: the compute entry never reaches the scheduler entry, and the scheduler
 * entry never reaches the compute entry, sysfs readers or the file system. Checked on the
 * import graph of the built modules (`dist`, what the loader imports) and of the sources
 * (what the tests run), by following every relative import from each entry.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const PLUGINS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PLUGINS = ['vcpu', 'memory', 'compute-units', 'llc', 'pstate'] as const;

/** Packages each side may import; anything else (another ert package, a node: module on the scheduler side) is a leak. */
const ALLOWED = {
  compute: (specifier: string) => specifier === '@ert/plugin-api' || specifier === '@ert/sysfs' || specifier.startsWith('node:'),
  scheduler: (specifier: string) => specifier === '@ert/plugin-api',
};

interface Graph {
  /** Modules reached, relative to the entry's directory (`compute.js`, `shared.js`). */
  modules: Set<string>;
  /** Non-relative specifiers imported by any reached module. */
  packages: Set<string>;
}

/** Follow every import (static, re-export, dynamic) from `entry`; relative ones within `dir`. */
function importGraph(dir: string, entry: string, sourceExt: '.js' | '.ts'): Graph {
  const graph: Graph = { modules: new Set(), packages: new Set() };
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (graph.modules.has(file)) continue;
    graph.modules.add(file);
    const text = readFileSync(path.join(dir, file), 'utf8');
    for (const { fileName: specifier } of ts.preProcessFile(text, true, true).importedFiles) {
      if (!specifier.startsWith('.')) {
        graph.packages.add(specifier);
        continue;
      }
      // Sources import './x.js' too (NodeNext); the file is './x.ts' there.
      const target = path.normalize(path.join(path.dirname(file), specifier)).replace(/\.js$/, sourceExt);
      if (!existsSync(path.join(dir, target))) throw new Error(`${path.join(dir, file)} imports ${specifier}, which does not exist`);
      pending.push(target);
    }
  }
  return graph;
}

describe.each(PLUGINS)('plugin %s: entry separation', (plugin) => {
  const pkgDir = path.join(PLUGINS_DIR, plugin);
  const pkg = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as {
    exports: Record<string, { 'ert-source': string; default: string }>;
    ert: { compute: string; scheduler: string; provides: string[] };
  };

  it('the manifest names ./compute and ./scheduler, exported from src/ and dist/', () => {
    expect(pkg.ert).toMatchObject({ compute: './compute', scheduler: './scheduler' });
    expect(pkg.ert.provides).toEqual(expect.arrayContaining(['resource', 'consumer', 'filter', 'weigher']));
    expect(pkg.exports['./compute']).toMatchObject({ 'ert-source': './src/compute.ts', default: './dist/compute.js' });
    expect(pkg.exports['./scheduler']).toMatchObject({ 'ert-source': './src/scheduler.ts', default: './dist/scheduler.js' });
  });

  for (const [tree, ext] of [['dist', '.js'], ['src', '.ts']] as const) {
    it(`${tree}: compute reads hardware and never reaches the scheduler entry; scheduler reaches neither compute nor sysfs nor the file system`, () => {
      const dir = path.join(pkgDir, tree);
      if (!existsSync(path.join(dir, `compute${ext}`))) throw new Error(`${dir}/compute${ext} is missing: build first (npx tsc -b)`);
      const compute = importGraph(dir, `compute${ext}`, ext);
      const scheduler = importGraph(dir, `scheduler${ext}`, ext);

      // The walk sees imports at all: the compute entry reads hardware through @ert/sysfs.
      expect(compute.packages).toContain('@ert/sysfs');
      expect(compute.modules).not.toContain(`scheduler${ext}`);
      expect([...compute.packages].filter((p) => !ALLOWED.compute(p))).toEqual([]);

      expect(scheduler.modules).not.toContain(`compute${ext}`);
      // Packages gathered over every module reached: no module the scheduler loads imports
      // @ert/sysfs or node:fs, so hardware readers (hardware.js, traits.js) stay out too.
      expect([...scheduler.packages].filter((p) => !ALLOWED.scheduler(p))).toEqual([]);
    });
  }
});
