/**
 * @ert/tracker — the compute-host tracker: discovers the host through resource plugins
 * and provider config files, keeps it in the store, and claims instances on it.
 */
export * from './errors.js';
export { createTracker } from './tracker.js';
export type { ClaimObservation, Tracker, TrackerObserver, TrackerOptions } from './tracker-api.js';
export { buildFleet, type BuildFleetOptions } from './fleet.js';
export { HostEventWatch, type HeldResources, type HostEvent, type HostEventAllocation, type HostEventType, type HostEventWatchOptions, type InstanceView } from './host-events.js';
export { refusalReason, type ConfirmReport } from './reservations.js';
export { loadProviderConfigs, parseProviderConfig, HOST_PLACEHOLDER, PROVIDER_CONFIG_SCHEMA_VERSION, type ProviderConfigEntry } from './provider-config.js';
export { uuidV5, providerUuid, childProviderName, migrationUuid, ERT_PROVIDER_NAMESPACE } from './ids.js';
export type { DesiredProvider } from './tree.js';
export type * from './types.js';
