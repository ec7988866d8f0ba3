import { ErtError } from '@ert/plugin-api';

/** Stable error codes of the disk plugin. */
export const DiskErrorCodes = {
  /** Stats were asked for while discovery could not read the instance paths. */
  unavailable: 'ERT_DISK_UNAVAILABLE',
} as const;

export class DiskError extends ErtError {}
