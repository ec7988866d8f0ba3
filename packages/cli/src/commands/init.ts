import { access, copyFile, mkdir, readdir } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CommandContext } from '../context.js';
import { CliError, CliErrorCode } from '../errors.js';

/** The starter files shipped in the package's `templates/` directory. */
export const TEMPLATES_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../templates');

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const rel = join(prefix, entry.name);
    if (entry.isDirectory()) files.push(...(await listFiles(join(dir, entry.name), rel)));
    else files.push(rel);
  }
  return files.sort();
}

const exists = (path: string): Promise<boolean> => access(path).then(
  () => true,
  () => false,
);

/**
 * `mkdir -p`, one level at a time: Node's recursive mkdir never settles on some paths
 * (`/proc/foo`, where mkdir says ENOENT for a parent that exists). A level that cannot be
 * created is ERT_CLI_CANNOT_WRITE naming it.
 */
async function makeDirs(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let d = dir; !(await exists(d)); d = dirname(d)) {
    missing.unshift(d);
    if (dirname(d) === d) break;
  }
  for (const d of missing) {
    try {
      await mkdir(d);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw new CliError(CliErrorCode.CANNOT_WRITE, `cannot create directory ${d}: ${(err as Error).message.replace(/, mkdir .*$/, '')}`, { path: d }, { cause: err });
    }
  }
}

/**
 * `ert init [dir]`: copy the starter config, flavors and providers.d example into `dir`.
 * Refuses (exit 2, nothing written) when any of them exists, unless --force.
 * JSON: `{ dir, files: string[] }` (paths relative to dir).
 */
export async function initCommand(ctx: CommandContext, dir: string, opts: { force?: boolean }): Promise<void> {
  const target = resolve(ctx.io.cwd, dir);
  const files = await listFiles(TEMPLATES_DIR);
  if (!opts.force) {
    const existing: string[] = [];
    for (const file of files) if (await exists(join(target, file))) existing.push(join(target, file));
    if (existing.length > 0) {
      throw new CliError(CliErrorCode.INIT_EXISTS, `${existing.join(', ')} already exists; use --force to overwrite`, {
        files: existing,
      });
    }
  }
  for (const file of files) {
    await makeDirs(dirname(join(target, file)));
    try {
      await copyFile(join(TEMPLATES_DIR, file), join(target, file));
    } catch (err) {
      throw new CliError(CliErrorCode.CANNOT_WRITE, `cannot write ${join(target, file)}: ${(err as Error).message.replace(/, copyfile .*$/, '')}`, { path: join(target, file) }, { cause: err });
    }
  }
  ctx.out.result({ dir: target, files }, () => {
    const where = relative(ctx.io.cwd, target) || '.';
    return `wrote ${files.map((f) => join(where, f)).join(', ')}\nnext: ert --config ${join(where, 'ert.config.yaml')} host discover\n`;
  });
}
