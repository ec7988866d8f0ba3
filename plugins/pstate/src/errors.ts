import { ErtError } from '@ert/plugin-api';

/** Codes of the pstate plugin's errors. */
export const PstateErrorCode = {
  /** Writing a policy file (scaling_governor, energy_performance_preference, scaling_min_freq) failed. */
  enforceFailed: 'ERT_PSTATE_ENFORCE_FAILED',
  /** The instance asks for P-state settings but its CPUs are not known, so no policy can be chosen. */
  cpusUnknown: 'ERT_PSTATE_CPUS_UNKNOWN',
} as const;

/** Enforcement could not set or restore a policy; details name the file and the instance. */
export class PstateEnforcementError extends ErtError {
  constructor(code: (typeof PstateErrorCode)[keyof typeof PstateErrorCode], message: string, details: { instance: string; file?: string }, cause?: unknown) {
    super(code, message, details, { cause });
  }
}
