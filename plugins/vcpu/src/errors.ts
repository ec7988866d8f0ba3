import { ErtError } from '@ert/plugin-api';

/** Stable error codes of the vcpu plugin. */
export const VcpuErrorCodes = {
  /** An option is well-formed JSON but not usable (`reservedCpus: "5-3"`). */
  invalidOption: 'ERT_VCPU_INVALID_OPTION',
  /** Stats were asked for while discovery found no usable hardware description. */
  unavailable: 'ERT_VCPU_UNAVAILABLE',
} as const;

export class VcpuError extends ErtError {}
