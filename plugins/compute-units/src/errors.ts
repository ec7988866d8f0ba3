import { ErtError } from '@ert/plugin-api';

/** Stable error codes of the compute-units plugin. */
export const CuErrorCodes = {
  /** A `models[].match` is not a usable substring or `/regex/flags`. */
  invalidOption: 'ERT_CU_INVALID_OPTION',
  /** Stats were asked for while discovery found no usable CPU description. */
  unavailable: 'ERT_CU_UNAVAILABLE',
} as const;

export class CuError extends ErtError {}
