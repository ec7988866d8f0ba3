import { isErtError, messageOf } from '@ert/plugin-api';
import type { Problem } from './types.js';

/** A caught error as a report's problem: its code and message, and what it names (plugin, hook, class, file). */
export function problemFrom(err: unknown, extra: Partial<Problem> = {}): Problem {
  if (isErtError(err)) {
    const d = err.details as Record<string, unknown>;
    const pick = (k: string) => (typeof d[k] === 'string' ? { [k]: d[k] as string } : {});
    return { code: err.code, message: err.message, ...pick('plugin'), ...pick('hook'), ...pick('resourceClass'), ...pick('file'), ...extra };
  }
  return { code: 'ERT_TRACKER_UNEXPECTED', message: messageOf(err), ...extra };
}

/** The stable code of an ert error (undefined for anything else). */
export function codeOf(err: unknown): string | undefined {
  return isErtError(err) ? err.code : undefined;
}
