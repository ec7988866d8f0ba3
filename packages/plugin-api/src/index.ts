/**
 * @ert/plugin-api — the contract between ert's host and its plugins. It depends on
 * nothing: plugin packages depend on it (as a peer), never on the host's internals.
 * @module @ert/plugin-api
 */
export * from './version.js';
export * from './errors.js';
export * from './json.js';
export * from './resources.js';
export * from './requests.js';
export * from './host.js';
export * from './services.js';
export * from './plugins.js';
export * from './summaries.js';
