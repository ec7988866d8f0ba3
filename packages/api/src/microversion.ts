/**
 * Placement's microversions (1.0-1.39) and their negotiation, as microversion_parse and
 * Placement 8.0.0 do it (PLACEMENT-API.md §1.1): the `OpenStack-API-Version` header (name and
 * service matched case-insensitively, a comma-separated list whose last `placement` entry
 * wins, repeated headers folded with commas), `latest` = 1.39, no header = 1.0, each part
 * parsed as an integer (`1.01` = 1.1).
 */

/** A microversion, `1.39` = `{ major: 1, minor: 39 }` (the shape @ert/placement takes). */
export interface Version {
  readonly major: number;
  readonly minor: number;
}

export const MIN_VERSION: Version = Object.freeze({ major: 1, minor: 0 });
export const MAX_VERSION: Version = Object.freeze({ major: 1, minor: 39 });
export const SERVICE_TYPE = 'placement';
export const VERSION_HEADER = 'openstack-api-version';

const parsed = new Map<string, Version>();

/** `v('1.12')`: the version a literal names (parsed once; handlers compare with it per request and per item). */
export function v(text: `${number}.${number}`): Version {
  let version = parsed.get(text);
  if (version === undefined) {
    const [major, minor] = text.split('.').map(Number) as [number, number];
    version = Object.freeze({ major, minor });
    parsed.set(text, version);
  }
  return version;
}

export function compare(a: Version, b: Version): number {
  return a.major !== b.major ? a.major - b.major : a.minor - b.minor;
}

/** Whether `version` is at least `min` (Placement's `want_version.matches(min)`). */
export function atLeast(version: Version, min: Version): boolean {
  return compare(version, min) >= 0;
}

export function formatVersion(version: Version): string {
  return `${version.major}.${version.minor}`;
}

export type Negotiated =
  | { ok: true; version: Version }
  /** 400: the value is not two integers. */
  | { ok: false; status: 400; message: string }
  /** 406: well formed but not one of 1.0-1.39. */
  | { ok: false; status: 406; message: string };

/** Python's int() on a version part: optional surrounding whitespace, optional sign, digits (and `_` between digits). */
function pyInt(text: string): number | undefined {
  const t = text.trim();
  if (!/^[+-]?\d+(_\d+)*$/.test(t)) return undefined;
  return Number(t.replaceAll('_', ''));
}

/** microversion_parse.check_standard_header: the value asked for, or undefined when none is. */
function requestedValue(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  for (const entry of header.split(',').reverse()) {
    const m = /^(\S+)\s+(.+)$/s.exec(entry.trim());
    if (m && m[1]!.toLowerCase() === SERVICE_TYPE) return m[2]!.trim();
  }
  return undefined;
}

/**
 * The version a request asks for, from the raw `openstack-api-version` header value (Node
 * joins repeated headers with ", ", which is the same folding). Messages are Placement's.
 */
export function negotiate(header: string | string[] | undefined): Negotiated {
  const folded = Array.isArray(header) ? header.join(',') : header;
  let text = requestedValue(folded) ?? formatVersion(MIN_VERSION);
  if (text === 'latest') text = formatVersion(MAX_VERSION);
  const dot = text.indexOf('.');
  const parts = dot < 0 ? [text] : [text.slice(0, dot), text.slice(dot + 1)];
  const ints = parts.map(pyInt);
  if (parts.length !== 2 || ints.some((n) => n === undefined)) {
    const bad = parts.find((p, i) => ints[i] === undefined);
    const reason = parts.length !== 2 ? `Version.__new__() missing 1 required positional argument: 'minor'` : `invalid literal for int() with base 10: '${bad}'`;
    return { ok: false, status: 400, message: `Invalid microversion: invalid version string: ${text}; ${reason}` };
  }
  const version = { major: ints[0]!, minor: ints[1]! };
  if (compare(version, MIN_VERSION) < 0 || compare(version, MAX_VERSION) > 0) {
    return { ok: false, status: 406, message: `Invalid microversion: Unacceptable version header: ${text}` };
  }
  return { ok: true, version };
}

/** A range of microversions a handler serves; `max` undefined = up to the newest. */
export interface VersionRange {
  readonly min: Version;
  readonly max?: Version;
}

export function inRange(version: Version, range: VersionRange): boolean {
  return atLeast(version, range.min) && (range.max === undefined || compare(version, range.max) <= 0);
}
