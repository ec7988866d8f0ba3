import { ErtError } from '@ert/plugin-api';

/** Codes of the llc plugin's errors. */
export const LlcErrorCode = {
  /** Writing a resctrl group (mkdir, schemata, cpus_list) or removing it failed. */
  enforceFailed: 'ERT_LLC_ENFORCE_FAILED',
} as const;

/** Enforcement could not program the cache; details name the file and the kernel's last_cmd_status. */
export class LlcEnforcementError extends ErtError {
  constructor(message: string, details: { file: string; instance: string; lastCmdStatus?: string }, cause?: unknown) {
    super(LlcErrorCode.enforceFailed, message, details, { cause });
  }
}
