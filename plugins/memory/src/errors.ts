import { ErtError } from '@ert/plugin-api';

/** Stable error codes of the memory plugin. */
export const MemoryErrorCodes = {
  /** Stats were asked for while discovery found no usable memory description. */
  unavailable: 'ERT_MEMORY_UNAVAILABLE',
} as const;

export class MemoryError extends ErtError {}
