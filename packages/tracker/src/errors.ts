import { ErtError } from '@ert/plugin-api';

/**
 * The tracker's error catalogue. Codes are stable; `details` names the file, entry,
 * plugin, provider or class at fault.
 */
export const TrackerErrorCodes = {
  /** A provider config file cannot be read or parsed (details: file). */
  PROVIDER_CONFIG_INVALID: 'ERT_TRACKER_PROVIDER_CONFIG_INVALID',
  /** The same provider is described twice across provider config files (details: file, index, identification, otherFile, otherIndex). */
  PROVIDER_CONFIG_DUPLICATE: 'ERT_TRACKER_PROVIDER_CONFIG_DUPLICATE',
  /** A provider config entry adds a class a plugin already reports on that provider (details: file, index, identification, resourceClass, plugin). */
  PROVIDER_CONFIG_CONFLICT: 'ERT_TRACKER_PROVIDER_CONFIG_CONFLICT',
  /** A provider config entry without `parent` matches no provider of this host; it is skipped and reported, not thrown (details: file, index). */
  PROVIDER_CONFIG_UNMATCHED: 'ERT_TRACKER_PROVIDER_CONFIG_UNMATCHED',
  /** Two plugins report the same class on the same provider (details: provider, resourceClass, plugins). */
  INVENTORY_CONFLICT: 'ERT_TRACKER_INVENTORY_CONFLICT',
  /** A plugin's `discover` returned something that is not a valid Discovery (details: plugin, path). */
  INVALID_DISCOVERY: 'ERT_TRACKER_INVALID_DISCOVERY',
  /** An operation needs a store and the tracker was created without one. */
  NO_STORE: 'ERT_TRACKER_NO_STORE',
  /** The tracker was stopped, or started twice (details: state). */
  STATE: 'ERT_TRACKER_STATE',
  /** The instance is not on this host, or not in the state the operation needs (details: instance, state). */
  INSTANCE: 'ERT_TRACKER_INSTANCE',
  /** The host's root provider is not in the store (sync has not run). */
  HOST_NOT_SYNCED: 'ERT_TRACKER_HOST_NOT_SYNCED',
  /** The host was registered from another machine or root than this tracker reads; nothing is written (details: host, registered, machine). */
  HOST_MACHINE_MISMATCH: 'ERT_TRACKER_HOST_MACHINE_MISMATCH',
  /** A host profile directory for `buildFleet` is missing or empty (details: profilesDir). */
  FLEET: 'ERT_TRACKER_FLEET',
} as const;

export type TrackerErrorCode = (typeof TrackerErrorCodes)[keyof typeof TrackerErrorCodes];

export class TrackerError extends ErtError<TrackerErrorCode> {}
