/**
 * The outcome of reading one hardware fact. Readers never throw for a missing, unreadable
 * or malformed file: they return `{ ok: false }` naming the machine path at fault and what
 * was wrong with it, so a plugin can report `{ available: false, reason }` verbatim.
 */
export type Reading<T> = { ok: true; value: T } | { ok: false; file: string; problem: string };

/** A successful reading. */
export function found<T>(value: T): Reading<T> {
  return { ok: true, value };
}

/** A failed reading of `file` (a machine path such as `/proc/cpuinfo`). */
export function unreadable<T = never>(file: string, problem: string): Reading<T> {
  return { ok: false, file, problem };
}

/** One line for logs and `Discovery.reason`: `/proc/cpuinfo: no processor records`. */
export function describeFailure(reading: { file: string; problem: string }): string {
  return `${reading.file}: ${reading.problem}`;
}
