/**
 * The plugin API version this contract defines. A plugin records the version it was
 * built against (see `definePlugin`) and its package manifest states the range it
 * targets; the host refuses a plugin whose range does not include this version.
 * Semver: a major bump breaks plugins; a minor bump only adds optional hooks or fields.
 */
export const PLUGIN_API_VERSION = '1.0.0';
