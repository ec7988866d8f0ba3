import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { kindsOf } from '@ert/plugin-api';
import { createPluginRuntime, type ResolvedPlugin } from '@ert/core';
import { builtinFilters } from '@ert/scheduler';
import type { CommandContext } from '../context.js';

/** One configured use of a plugin, as `ert plugins` reports it. */
export interface PluginRow {
  side: 'compute' | 'scheduler';
  /** What the config uses it as: resource, consumer, filter or weigher. */
  use: string;
  name: string;
  package: string;
  version: string;
  /** Every kind the loaded entry provides. */
  kinds: string[];
  options: unknown;
  multiplier?: number;
}

interface RuntimeEntry {
  name: string;
  plugin: Parameters<typeof kindsOf>[0];
  resolved: ResolvedPlugin;
  options: unknown;
  multiplier?: number;
}

/** Package name and version from the loader's resolution record. */
function origin(resolved: ResolvedPlugin): { package: string; version: string } {
  if (resolved.packageDir) {
    const pkg = JSON.parse(readFileSync(join(resolved.packageDir, 'package.json'), 'utf8')) as { name?: string; version?: string };
    return { package: resolved.packageName ?? pkg.name ?? resolved.specifier, version: pkg.version ?? '' };
  }
  if (resolved.source === 'builtin') return { package: '(built-in)', version: '' };
  if (resolved.source === 'object') return { package: '(config object)', version: '' };
  return { package: resolved.file ?? resolved.specifier, version: '' };
}

function rows(side: PluginRow['side'], use: string, entries: readonly RuntimeEntry[]): PluginRow[] {
  return entries.map((e) => ({
    side,
    use,
    name: e.name,
    ...origin(e.resolved),
    kinds: kindsOf(e.plugin),
    options: e.options,
    ...(e.multiplier !== undefined ? { multiplier: e.multiplier } : {}),
  }));
}

/**
 * `ert plugins`: resolve and instantiate the plugins of both sides as the tracker and the
 * scheduler would, and list each configured use. Writes nothing.
 * JSON: `{ plugins: PluginRow[], extraSpecKeys: [{ key, description }] }`.
 */
export async function pluginsCommand(ctx: CommandContext): Promise<void> {
  const config = await ctx.config();
  const logger = await ctx.logger();
  const compute = await createPluginRuntime({ config, logger, side: 'compute' });
  const scheduler = await createPluginRuntime({ config, logger, side: 'scheduler', builtins: builtinFilters({ hostOf: () => undefined }) });
  try {
    const plugins = [
      ...rows('compute', 'resource', compute.resources),
      ...rows('scheduler', 'consumer', scheduler.consumers),
      ...rows('scheduler', 'filter', scheduler.filters),
      ...rows('scheduler', 'weigher', scheduler.weighers),
    ];
    const seen = new Set<string>();
    const extraSpecKeys = [...compute.extraSpecKeys, ...scheduler.extraSpecKeys]
      .filter((k) => !seen.has(k.key) && seen.add(k.key))
      .map((k) => ({ key: k.key, description: k.description }));
    ctx.out.result({ plugins, extraSpecKeys }, () =>
      ctx.out.table(plugins, [
        { header: 'SIDE', value: (r) => r.side },
        { header: 'USE', value: (r) => r.use },
        { header: 'NAME', value: (r) => r.name },
        { header: 'PACKAGE', value: (r) => r.package },
        { header: 'VERSION', value: (r) => r.version },
        { header: 'KINDS', value: (r) => r.kinds.join(',') },
        { header: 'OPTIONS', value: (r) => (r.multiplier !== undefined ? { multiplier: r.multiplier, ...(r.options as object) } : r.options) },
      ]) +
        '\nextra specs:\n' +
        ctx.out.table(extraSpecKeys, [
          { header: 'KEY', value: (k) => k.key },
          { header: 'DESCRIPTION', value: (k) => k.description },
        ]),
    );
  } finally {
    await Promise.allSettled([closeRuntime(compute), closeRuntime(scheduler)]);
  }
}

/** Runtimes may hold resources (a `close` when core provides one). */
export async function closeRuntime(runtime: object): Promise<void> {
  const close = (runtime as { close?: () => Promise<void> | void }).close;
  if (typeof close === 'function') await close.call(runtime);
}
