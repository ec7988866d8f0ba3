/**
 * The query string as Placement's handlers decode it, to answer what it answers when an
 * escape is not UTF-8. `util.validate_query_params` (placement/util.py) validates
 * `dict(req.GET)` and turns a `UnicodeDecodeError` into 400 `Invalid query string parameters:
 * <the error>`; webob 1.8's `req.GET` is `parse_qsl_text(QUERY_STRING)` (webob/compat.py):
 * the query's bytes (Latin-1, PEP 3333), `+` made a space, split on `&` and `;` (empty pairs
 * dropped), each pair at its first `=`, each key and value percent-decoded (its own `unquote`)
 * and decoded as strict UTF-8, key before value, pair by pair. So the error names the first
 * key or value that is not UTF-8, and its position counts that key's or value's decoded bytes
 * (`name=ab%ff`: position 2; `%C3=x`: byte 0xc3 at 0, unexpected end of data).
 */

/** Python's `int(s, 16)` for the one or two characters after a `%` (ASCII whitespace around, an optional sign), or undefined where it raises. */
function pythonHex(s: string): number | undefined {
  const m = /^[\t\n\v\f\r ]*([+-]?)([0-9A-Fa-f]+)[\t\n\v\f\r ]*$/.exec(s);
  if (!m) return undefined;
  const n = Number.parseInt(m[2]!, 16);
  return m[1] === '-' ? 0 - n : n;
}

/**
 * webob 1.8's `unquote` (Python 3, webob/compat.py), bytes to bytes: each `%` takes the next
 * two characters as `int(item[:2], 16)` and, when that is a byte (0 to 255), stands for it;
 * else it is a literal `%`. Python's `int` makes `%f` at the end 0x0f and `% f` (`%+f`, the `+`
 * made a space first) 0x0f too.
 */
export function webobUnquote(s: string): number[] {
  const [first, ...items] = s.split('%');
  const bytes = latin1(first!);
  for (const item of items) {
    const n = pythonHex(item.slice(0, 2));
    if (n !== undefined && n >= 0 && n <= 255) bytes.push(n, ...latin1(item.slice(2)));
    else bytes.push(0x25, ...latin1(item));
  }
  return bytes;
}

/** A WSGI string's bytes (PEP 3333: Latin-1). Node refuses a request line with raw bytes above 0x7f, so ert's are ASCII. */
function latin1(s: string): number[] {
  return Array.from(s, (c) => c.charCodeAt(0) & 0xff);
}

/** The bytes a UTF-8 sequence's second byte may be, after its first (RFC 3629: no overlong forms, surrogates or code points above U+10FFFF). */
function secondByteRange(lead: number): [number, number] {
  if (lead === 0xe0) return [0xa0, 0xbf];
  if (lead === 0xed) return [0x80, 0x9f];
  if (lead === 0xf0) return [0x90, 0xbf];
  if (lead === 0xf4) return [0x80, 0x8f];
  return [0x80, 0xbf];
}

/**
 * The message of the `UnicodeDecodeError` Python's strict UTF-8 decoder raises on these bytes
 * (`str()` of it, as `%(exc)s` formats it), or undefined when they are UTF-8. As CPython's
 * decoder (Objects/unicodeobject.c, `decode_utf8`): a byte 0x80-0xC1 or 0xF5-0xFF where a
 * character starts is an `invalid start byte` (that byte); a lead byte followed by a byte that
 * cannot come next is an `invalid continuation byte` (the lead and the valid bytes after it,
 * not the bad one); a valid beginning cut off by the end is `unexpected end of data` (up to the
 * end). One byte is named `byte 0x.. in position N`, several `bytes in position N-M`.
 */
export function utf8DecodeError(bytes: readonly number[]): string | undefined {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    const length = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    if (length === 0) return decodeError(bytes, i, i + 1, 'invalid start byte');
    for (let k = 1; k < length; k++) {
      if (i + k >= bytes.length) return decodeError(bytes, i, bytes.length, 'unexpected end of data');
      const [low, high] = k === 1 ? secondByteRange(lead) : [0x80, 0xbf];
      const b = bytes[i + k]!;
      if (b < low || b > high) return decodeError(bytes, i, i + k, 'invalid continuation byte');
    }
    i += length;
  }
  return undefined;
}

/** `str(UnicodeDecodeError)` for bytes[start, end). */
function decodeError(bytes: readonly number[], start: number, end: number, reason: string): string {
  if (end - start === 1) return `'utf-8' codec can't decode byte 0x${bytes[start]!.toString(16).padStart(2, '0')} in position ${start}: ${reason}`;
  return `'utf-8' codec can't decode bytes in position ${start}-${end - 1}: ${reason}`;
}

const NON_ASCII_ESCAPE = /%[89a-fA-F][0-9a-fA-F]/;

/**
 * The `UnicodeDecodeError` message webob's `req.GET` raises for this query string (what
 * follows the first `?` of the request target, as received), or undefined when every key and
 * value is UTF-8.
 */
export function queryDecodeError(query: string): string | undefined {
  // Only an escape of a byte above 0x7f can break UTF-8 (the request line is ASCII), and such
  // an escape is two hex digits (no room for Python's sign or spaces): most queries stop here.
  if (!NON_ASCII_ESCAPE.test(query)) return undefined;
  for (const pair of query.replaceAll('+', ' ').split(/[&;]/)) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    for (const part of eq === -1 ? [pair] : [pair.slice(0, eq), pair.slice(eq + 1)]) {
      const error = utf8DecodeError(webobUnquote(part));
      if (error !== undefined) return error;
    }
  }
  return undefined;
}
