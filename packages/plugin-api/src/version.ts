import { readFileSync } from 'node:fs';

/**
 * The plugin API version: the version of this @ert/plugin-api package, read from its own
 * package.json (one version story: there is no separate number to keep in step). A plugin
 * package states the range it works with as `peerDependencies["@ert/plugin-api"]`, and a
 * plugin object records the version it was made with (see `definePlugin`); the host refuses
 * a plugin whose range excludes this version, naming both. Semver, with the compatibility
 * policy of docs/plugins.md ("Versions and compatibility"): below 1.0.0 a minor bump may
 * break plugins; from 1.0.0 only a major bump does.
 */
export const PLUGIN_API_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
