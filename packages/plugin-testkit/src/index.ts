/**
 * @ert/plugin-testkit — what a plugin author needs to test an ert plugin without ert's host:
 * contexts (`resourceContext`, `pluginContext`, a captured logger, a manual clock), requests
 * (`specFromFlavor` through the real parser, `requestSpec`, `claimRequest`, `claimedInstance`),
 * host states, fixture `/proc` + `/sys` trees (`writeHostTree`), stats checks against the
 * declared schema (`statsProblems`, `assertValidStats`) and the plugin contract
 * (`describePluginContract`, `verifyPluginContract`).
 * @module @ert/plugin-testkit
 */
export * from './errors.js';
export * from './context.js';
export * from './requests.js';
export * from './host-state.js';
export * from './stats.js';
export * from './fixture.js';
export * from './contract.js';
