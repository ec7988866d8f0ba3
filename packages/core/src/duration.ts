import { ConfigError, CoreErrorCodes, describeValue } from './errors.js';

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** The form a duration takes in config: `500ms`, `60s`, `1.5m`, `1h` (also used by the config schema). */
export const DURATION_PATTERN = '^(\\d+(?:\\.\\d+)?)\\s*(ms|s|m|h)$';
const DURATION = new RegExp(DURATION_PATTERN);

/** What a duration must look like, worded for error messages. */
export const DURATION_EXPECTED = 'a duration such as "500ms", "60s", "5m", "1h" or a number of milliseconds';

/**
 * Milliseconds of a duration: a string `<number><ms|s|m|h>` or a non-negative number of
 * milliseconds. Fractions are allowed (`1.5s`); the result is rounded to a whole ms.
 * Pure; throws ConfigError ERT_CONFIG_INVALID naming the value for anything else.
 */
export function parseDuration(value: string | number): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return Math.round(value);
  } else if (typeof value === 'string') {
    const match = DURATION.exec(value.trim());
    if (match) return Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]);
  }
  throw new ConfigError(CoreErrorCodes.CONFIG_INVALID, `${describeValue(value)} is not a duration: expected ${DURATION_EXPECTED}`, {
    value,
  });
}
