import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { PLUGIN_API_VERSION, PLUGIN_KINDS, isPlugin, kindsOf, type Plugin, type PluginKind, type PluginManifest } from '@ert/plugin-api';
import type { PluginRef } from './config.js';
import { CoreErrorCodes, PluginLoadError, describeValue, messageOf } from './errors.js';
import { lazyRequire } from './lazy-require.js';

/** semver, loaded when the first plugin is checked: a command that loads no plugin does not load its 46 files. */
const semver = lazyRequire<typeof import('semver')>('semver');

/** Which entry point of a plugin package a process loads. */
export type PluginSide = 'compute' | 'scheduler';

/** The kinds each side may load. */
export const SIDE_KINDS: Readonly<Record<PluginSide, readonly PluginKind[]>> = {
  compute: ['resource'],
  scheduler: ['consumer', 'filter', 'weigher'],
};

/** How a plugin was found, for logs and `ert plugins` style listings. */
export interface ResolvedPlugin {
  /** The name the plugin is called by (see PluginRef). */
  name: string;
  plugin: Plugin;
  /** builtin: from `builtins`; object: given by a JS config; path: a file; package: from node_modules or a package directory. */
  source: 'builtin' | 'object' | 'path' | 'package';
  /** What the config asked for (`vcpu`, `./plugins/gpu.js`, `@acme/ert-foo`). */
  specifier: string;
  /** The file imported (path and package sources). */
  file?: string;
  packageName?: string;
  packageDir?: string;
  manifest?: PluginManifest;
}

/** One package name or path the loader tried, and why it did not resolve. */
export interface CandidateFailure {
  specifier: string;
  reason: string;
}

/** Options of `resolvePlugin`. */
export interface ResolvePluginOptions {
  ref: PluginRef;
  side: PluginSide;
  /** The kinds the config uses this plugin for; each must be provided. */
  kinds: readonly PluginKind[];
  /** Directory names resolve from (the config file's directory). */
  fromDir: string;
  /** Plugins known by name, checked before packages. */
  builtins?: Readonly<Record<string, Plugin>>;
  /** Export conditions used to pick a package entry's file; default `defaultConditions()`. */
  conditions?: readonly string[];
}

/**
 * Export conditions for plugin entries: when this module itself runs from its TypeScript
 * sources (tests), plugin packages are loaded from theirs too (`ert-source`); from `dist`,
 * plugins load their built output.
 */
export function defaultConditions(): string[] {
  const fromSources = fileURLToPath(import.meta.url).endsWith('.ts');
  return fromSources ? ['ert-source', 'node', 'import', 'default'] : ['node', 'import', 'default'];
}

/** True for a specifier the loader takes as a path rather than a package name. */
export function isPathSpecifier(specifier: string): boolean {
  return specifier.startsWith('.') || specifier.startsWith('/');
}

/**
 * The package names a specifier may mean, in the order they are tried: a short name tries
 * `@ert/plugin-<name>`, `ert-plugin-<name>`, then the name itself; a scoped name is taken as written.
 */
export function packageCandidates(specifier: string): string[] {
  return specifier.startsWith('@') ? [specifier] : [`@ert/plugin-${specifier}`, `ert-plugin-${specifier}`, specifier];
}

/** The package whose version is the plugin API version. */
const PLUGIN_API_PACKAGE = '@ert/plugin-api';

/** Where the @ert/plugin-api this host runs is installed (named in version errors). */
const PLUGIN_API_DIR = (() => {
  try {
    return dirname(createRequire(import.meta.url).resolve(`${PLUGIN_API_PACKAGE}/package.json`));
  } catch {
    return 'location unknown';
  }
})();

function loadError(code: string, message: string, details: Record<string, unknown>, cause?: unknown): PluginLoadError {
  return new PluginLoadError(code, message, details, cause === undefined ? undefined : { cause });
}

/** The name a plugin is called by: the ref's name, unless the ref was only a path or scoped package. */
function activeName(ref: PluginRef, plugin: Plugin): string {
  if (ref.plugin !== undefined || ref.use !== undefined) return ref.name;
  return isPathSpecifier(ref.name) || ref.name.startsWith('@') ? plugin.name : ref.name;
}

/**
 * The plugin API a plugin object was made with (`plugin.apiVersion`, stamped by the
 * `definePlugin` of the @ert/plugin-api copy it imported) must be one this host's API
 * serves: a plugin made with X.Y.* needs a host whose version satisfies ^X.Y.0 (the same
 * major, or the same minor below 1.0.0, and not older than the plugin's minor).
 */
function checkMadeWith(name: string, plugin: Plugin, where: string): void {
  const made = semver().valid(plugin.apiVersion);
  const needs = made === null ? undefined : `^${semver().major(made)}.${semver().minor(made)}.0`;
  if (needs === undefined || !semver().satisfies(PLUGIN_API_VERSION, needs, { includePrerelease: true })) {
    throw loadError(
      CoreErrorCodes.PLUGIN_API_MISMATCH,
      `Plugin "${name}" (${where}) was made with @ert/plugin-api ${describeValue(plugin.apiVersion)}${needs === undefined ? ' (not a version)' : `, so it needs ${needs}`}, but the @ert/plugin-api found is ${PLUGIN_API_VERSION}`,
      { plugin: name, apiVersion: plugin.apiVersion, hostApiVersion: PLUGIN_API_VERSION },
    );
  }
}

function checkKinds(name: string, plugin: Plugin, kinds: readonly PluginKind[], where: string): void {
  const provided = kindsOf(plugin);
  const missing = kinds.filter((k) => !provided.includes(k));
  if (missing.length > 0) {
    throw loadError(
      CoreErrorCodes.PLUGIN_KIND_NOT_PROVIDED,
      `Plugin "${name}" (${where}) is configured as ${missing.join(', ')} but provides only ${provided.join(', ') || 'nothing'}`,
      { plugin: name, missing, provides: provided },
    );
  }
}

/**
 * What a failed import says about the module format, when that is why it failed: a file
 * Node loads as an ES module (`.mjs`, or `.js` under a package.json with `"type": "module"`)
 * written as CommonJS, the reverse, or a CommonJS plugin whose `require()` of an ES module
 * (such as @ert/plugin-api) this Node refuses.
 */
function formatHint(file: string, err: unknown): string | undefined {
  const code = (err as { code?: unknown }).code;
  const message = messageOf(err);
  if (code === 'ERR_REQUIRE_ESM' || code === 'ERR_REQUIRE_ASYNC_MODULE') {
    return `${file} is CommonJS and require()s an ES module (@ert/plugin-api is one), which this Node (${process.version}) does not allow: use Node >= 20.19 (require of ES modules), or write the plugin as an ES module (.mjs, or .js under "type": "module", with import and export default)`;
  }
  if (/\b(require|module|exports|__dirname|__filename) is not defined in ES module scope/.test(message)) {
    return `${file} is loaded as an ES module (.mjs, or .js under a package.json with "type": "module") but is written as CommonJS: use import and export default, or name it .cjs to keep module.exports = definePlugin(...)`;
  }
  if (/Cannot use import statement outside a module|Unexpected token 'export'/.test(message)) {
    return `${file} is loaded as CommonJS (.cjs, or .js without "type": "module") but is written as an ES module: name it .mjs (or set "type": "module"), or use require and module.exports = definePlugin(...)`;
  }
  return undefined;
}

/**
 * Import a plugin entry, ES module or CommonJS: its default export (`export default
 * definePlugin(...)`), which for CommonJS is `module.exports` (`module.exports =
 * definePlugin(...)`), or the `default` of a CommonJS module compiled from an ES module
 * (`exports.__esModule = true; exports.default = ...`, what TypeScript emits).
 */
async function importDefault(name: string, file: string): Promise<Plugin> {
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (err) {
    const hint = formatHint(file, err);
    throw loadError(
      CoreErrorCodes.PLUGIN_IMPORT_FAILED,
      `Plugin "${name}": importing ${file} failed: ${hint ?? messageOf(err)}`,
      { plugin: name, file, ...(hint === undefined ? {} : { format: hint }) },
      err,
    );
  }
  let exported = module.default;
  if (!isPlugin(exported) && typeof exported === 'object' && exported !== null) {
    const compiled = exported as { __esModule?: unknown; default?: unknown };
    if (compiled.__esModule === true && isPlugin(compiled.default)) exported = compiled.default;
  }
  if (!isPlugin(exported)) {
    throw loadError(
      CoreErrorCodes.PLUGIN_NOT_A_PLUGIN,
      `Plugin "${name}": the default export of ${file} is ${exported === undefined ? 'missing' : describeValue(exported)}, not a plugin made by definePlugin (an ES module has export default definePlugin(...), a CommonJS one module.exports = definePlugin(...))`,
      { plugin: name, file },
    );
  }
  return exported;
}

/** The target of an `exports` entry under the given conditions (Node's algorithm, without errors). */
function exportTarget(target: unknown, conditions: readonly string[]): string | undefined {
  if (typeof target === 'string') return target;
  if (Array.isArray(target)) {
    for (const t of target) {
      const found = exportTarget(t, conditions);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (typeof target === 'object' && target !== null) {
    for (const [condition, value] of Object.entries(target)) {
      if (condition !== 'default' && !conditions.includes(condition)) continue;
      const found = exportTarget(value, conditions);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** Map a package subpath (`./compute`) through the package's `exports` to a path relative to its directory. */
export function resolveExportSubpath(exportsField: unknown, subpath: string, conditions: readonly string[]): string | undefined {
  if (exportsField === undefined) return subpath;
  const sugar =
    typeof exportsField === 'string' || Array.isArray(exportsField) || Object.keys(exportsField as object).every((k) => !k.startsWith('.'));
  const map = (sugar ? { '.': exportsField } : exportsField) as Record<string, unknown>;
  if (Object.hasOwn(map, subpath)) return exportTarget(map[subpath], conditions);
  for (const [key, value] of Object.entries(map)) {
    const star = key.indexOf('*');
    if (star < 0) continue;
    const prefix = key.slice(0, star);
    const suffix = key.slice(star + 1);
    if (subpath.length >= key.length - 1 && subpath.startsWith(prefix) && subpath.endsWith(suffix)) {
      const match = subpath.slice(prefix.length, subpath.length - suffix.length);
      return exportTarget(value, conditions)?.replaceAll('*', match);
    }
  }
  return undefined;
}

/** The package's `ert` manifest and its plugin API range (`peerDependencies["@ert/plugin-api"]`), checked. */
function readManifest(name: string, packageName: string, packageDir: string): { manifest: PluginManifest; apiRange: string } {
  const pkg = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { ert?: unknown; peerDependencies?: Record<string, unknown> };
  const where = `package ${packageName} at ${packageDir}`;
  if (pkg.ert === undefined) {
    throw loadError(
      CoreErrorCodes.PLUGIN_MANIFEST_MISSING,
      `Plugin "${name}": ${where} has no "ert" block in its package.json, so it is not an ert plugin`,
      { plugin: name, package: packageName, packageDir },
    );
  }
  const m = pkg.ert as Partial<Record<keyof PluginManifest, unknown>>;
  const problems: string[] = [];
  if (typeof m !== 'object' || m === null) problems.push(`"ert" is ${describeValue(m)}, expected an object`);
  else {
    if ('apiVersion' in m) {
      problems.push(`ert.apiVersion is not read any more: the plugin API range is peerDependencies["${PLUGIN_API_PACKAGE}"] (e.g. "^${PLUGIN_API_VERSION}")`);
    }
    if (!Array.isArray(m.provides) || m.provides.some((k) => !PLUGIN_KINDS.includes(k as PluginKind))) {
      problems.push(`ert.provides is ${describeValue(m.provides)}, expected a list of ${PLUGIN_KINDS.join(', ')}`);
    }
    for (const side of ['compute', 'scheduler'] as const) {
      if (m[side] !== undefined && typeof m[side] !== 'string') problems.push(`ert.${side} is ${describeValue(m[side])}, expected an export subpath such as "./${side}"`);
    }
  }
  const range = pkg.peerDependencies?.[PLUGIN_API_PACKAGE];
  if (typeof range !== 'string' || semver().validRange(range) === null) {
    problems.push(
      range === undefined
        ? `peerDependencies["${PLUGIN_API_PACKAGE}"] is missing: declare the range of plugin API versions the package works with, e.g. "^${PLUGIN_API_VERSION}"`
        : `peerDependencies["${PLUGIN_API_PACKAGE}"] is ${describeValue(range)}, expected a semver range such as "^${PLUGIN_API_VERSION}"`,
    );
  }
  if (problems.length > 0) {
    throw loadError(CoreErrorCodes.PLUGIN_MANIFEST_INVALID, `Plugin "${name}": ${where} has an invalid manifest: ${problems.join('; ')}`, {
      plugin: name,
      package: packageName,
      problems,
    });
  }
  return { manifest: m as PluginManifest, apiRange: range as string };
}

/** Load a plugin package found at `packageDir`: manifest, API range, kinds, the side's entry. */
async function loadPackage(
  ref: PluginRef,
  options: ResolvePluginOptions,
  packageName: string,
  packageDir: string,
): Promise<ResolvedPlugin> {
  const label = ref.use !== undefined || isPathSpecifier(ref.name) || ref.name.startsWith('@') ? packageName : ref.name;
  const { manifest, apiRange } = readManifest(label, packageName, packageDir);
  const where = `package ${packageName}`;
  if (!semver().satisfies(PLUGIN_API_VERSION, apiRange, { includePrerelease: true })) {
    throw loadError(
      CoreErrorCodes.PLUGIN_API_MISMATCH,
      `Plugin "${label}" (${where} at ${packageDir}) declares peerDependencies["${PLUGIN_API_PACKAGE}"] ${JSON.stringify(apiRange)}, but the ${PLUGIN_API_PACKAGE} found is ${PLUGIN_API_VERSION} (${PLUGIN_API_DIR}): install a version of the plugin made for ${PLUGIN_API_VERSION}, or an ert whose ${PLUGIN_API_PACKAGE} is in ${JSON.stringify(apiRange)}`,
      { plugin: label, package: packageName, apiRange, hostApiVersion: PLUGIN_API_VERSION, hostApiDir: PLUGIN_API_DIR },
    );
  }
  const missing = options.kinds.filter((k) => !manifest.provides.includes(k));
  if (missing.length > 0) {
    throw loadError(
      CoreErrorCodes.PLUGIN_KIND_NOT_PROVIDED,
      `Plugin "${label}" (${where}) is configured as ${missing.join(', ')} but its manifest provides only ${manifest.provides.join(', ') || 'nothing'}`,
      { plugin: label, package: packageName, missing, provides: manifest.provides },
    );
  }
  const subpath = manifest[options.side];
  if (subpath === undefined) {
    throw loadError(
      CoreErrorCodes.PLUGIN_ENTRY_MISSING,
      `Plugin "${label}" (${where}) declares no ${options.side} entry in its manifest ("ert.${options.side}")`,
      { plugin: label, package: packageName, side: options.side },
    );
  }
  const normalized = subpath.startsWith('.') ? subpath : `./${subpath}`;
  const pkg = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { exports?: unknown };
  const conditions = options.conditions ?? defaultConditions();
  const target = resolveExportSubpath(pkg.exports, normalized, conditions);
  const file = target === undefined ? undefined : resolve(packageDir, target);
  if (file === undefined || !existsSync(file)) {
    throw loadError(
      CoreErrorCodes.PLUGIN_ENTRY_MISSING,
      `Plugin "${label}" (${where}): its ${options.side} entry ${normalized} ${file === undefined ? `is not in the package's exports for conditions ${conditions.join(', ')}` : `resolves to ${file}, which does not exist`}`,
      { plugin: label, package: packageName, side: options.side, subpath: normalized },
    );
  }
  const plugin = await importDefault(label, file);
  const name = activeName(ref, plugin);
  checkMadeWith(name, plugin, where);
  checkKinds(name, plugin, options.kinds, where);
  return { name, plugin, source: 'package', specifier: ref.use ?? ref.name, file, packageName, packageDir, manifest };
}

/** The directory of this module: packages resolvable from here are the host's own install. */
const HOST_INSTALL_DIR = dirname(fileURLToPath(import.meta.url));

/** Where `<pkg>/package.json` is, seen from `fromDir`, or why it is not there. */
function locatePackage(packageName: string, from: string): { dir: string } | { reason: string } {
  const fromDir = resolve(from);
  const require = createRequire(join(fromDir, 'noop.js'));
  try {
    return { dir: resolve(require.resolve(`${packageName}/package.json`), '..') };
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') {
      // Installed, but its exports hide package.json: find it on the same search path.
      for (const dir of require.resolve.paths(packageName) ?? []) {
        if (existsSync(join(dir, packageName, 'package.json'))) return { dir: join(dir, packageName) };
      }
      return { reason: 'installed but its package.json cannot be located' };
    }
    if (code === 'MODULE_NOT_FOUND') return { reason: `not installed in any node_modules from ${fromDir} up` };
    return { reason: messageOf(err) };
  }
}

/**
 * Find, check and import one plugin for one side. Order: a plugin object in the ref; a
 * builtin by name; a path (`.` or `/` first; a directory holding a package.json is loaded
 * as a package); else the package candidates of `packageCandidates`, resolved from
 * `fromDir`, the first one installed being used. A package must carry an `ert` manifest
 * whose `provides` lists every kind asked, and a `peerDependencies["@ert/plugin-api"]` range
 * that includes PLUGIN_API_VERSION (the version of the @ert/plugin-api this host runs); only
 * the entry of `side` is imported (ES module or CommonJS), its default export must be a
 * plugin, and the API version it was made with must be one this host serves (`checkMadeWith`).
 * Throws PluginLoadError (codes in errors.ts); ERT_PLUGIN_NOT_FOUND lists every candidate
 * and why it failed. Idempotent (Node caches the imported modules).
 */
export async function resolvePlugin(options: ResolvePluginOptions): Promise<ResolvedPlugin> {
  const { ref, kinds } = options;
  if (ref.plugin !== undefined) {
    checkMadeWith(ref.name, ref.plugin, 'plugin object from the config');
    checkKinds(ref.name, ref.plugin, kinds, 'plugin object from the config');
    return { name: ref.name, plugin: ref.plugin, source: 'object', specifier: ref.name };
  }
  const specifier = ref.use ?? ref.name;
  const builtin = options.builtins?.[specifier];
  if (builtin !== undefined) {
    const name = ref.use !== undefined ? ref.name : specifier;
    checkMadeWith(name, builtin, 'builtin');
    checkKinds(name, builtin, kinds, 'builtin');
    return { name, plugin: builtin, source: 'builtin', specifier };
  }
  if (isPathSpecifier(specifier)) {
    const path = resolve(options.fromDir, specifier);
    if (!existsSync(path)) {
      throw loadError(CoreErrorCodes.PLUGIN_NOT_FOUND, `Plugin "${ref.name}" not found: tried ${path} (no such file or directory)`, {
        plugin: ref.name,
        candidates: [{ specifier: path, reason: 'no such file or directory' }],
      });
    }
    if (statSync(path).isDirectory()) {
      if (!existsSync(join(path, 'package.json'))) {
        throw loadError(CoreErrorCodes.PLUGIN_NOT_FOUND, `Plugin "${ref.name}" not found: ${path} is a directory without a package.json`, {
          plugin: ref.name,
          candidates: [{ specifier: path, reason: 'a directory without a package.json' }],
        });
      }
      const pkg = JSON.parse(readFileSync(join(path, 'package.json'), 'utf8')) as { name?: string };
      return loadPackage(ref, options, pkg.name ?? path, path);
    }
    const plugin = await importDefault(ref.name, path);
    const name = activeName(ref, plugin);
    checkMadeWith(name, plugin, path);
    checkKinds(name, plugin, kinds, path);
    return { name, plugin, source: 'path', specifier, file: path };
  }
  const failures: CandidateFailure[] = [];
  if (options.builtins !== undefined) failures.push({ specifier, reason: 'not a builtin' });
  // The config's directory first (a project's own node_modules), then where ert itself is
  // installed, so the first-party plugins that ship with the CLI resolve from any directory.
  const searchDirs = [...new Set([resolve(options.fromDir), HOST_INSTALL_DIR])];
  for (const candidate of packageCandidates(specifier)) {
    const reasons: string[] = [];
    for (const dir of searchDirs) {
      const found = locatePackage(candidate, dir);
      if ('dir' in found) return loadPackage(ref, options, candidate, found.dir);
      reasons.push(found.reason);
    }
    failures.push({ specifier: candidate, reason: reasons.join('; ') });
  }
  throw loadError(
    CoreErrorCodes.PLUGIN_NOT_FOUND,
    `Plugin "${ref.name}" not found; tried: ${failures.map((f) => `${f.specifier} (${f.reason})`).join('; ')}`,
    { plugin: ref.name, candidates: failures },
  );
}
