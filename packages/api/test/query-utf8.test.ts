import { describe, expect, it } from 'vitest';
import { queryDecodeError, utf8DecodeError, webobUnquote } from '../src/query-utf8.js';

/**
 * The query string decoded as Placement 8.0.0's webob 1.8 decodes it, checked against Python
 * itself: every expected value below was printed once by Debian's python3 (3.11.2, the one
 * placement-api runs on) with webob 1.8.6, not written by hand. A test may not run Python, so
 * they are tables; regenerate them with the one-liners above each.
 */

describe('query-utf8', () => {
  // /usr/bin/python3 -c "import json
  // for h in [...]:
  //   try: bytes.fromhex(h).decode('utf-8'); m=None
  //   except UnicodeDecodeError as e: m=str(e)
  //   print([h, m])"
  const BYTES: ReadonlyArray<readonly [string, string | undefined]> = [
    ['', undefined],
    ['41', undefined],
    ['c3a9', undefined],
    ['e282ac', undefined],
    ['f09f9880', undefined],
    ['efbfbd', undefined],
    ['f48fbfbf', undefined],
    ['ed9fbf', undefined],
    ['ff', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
    ['80', "'utf-8' codec can't decode byte 0x80 in position 0: invalid start byte"],
    ['bf', "'utf-8' codec can't decode byte 0xbf in position 0: invalid start byte"],
    ['c0af', "'utf-8' codec can't decode byte 0xc0 in position 0: invalid start byte"],
    ['c1bf', "'utf-8' codec can't decode byte 0xc1 in position 0: invalid start byte"],
    ['f5808080', "'utf-8' codec can't decode byte 0xf5 in position 0: invalid start byte"],
    ['f8', "'utf-8' codec can't decode byte 0xf8 in position 0: invalid start byte"],
    ['fe', "'utf-8' codec can't decode byte 0xfe in position 0: invalid start byte"],
    ['41ff', "'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"],
    ['c3a9ff', "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"],
    ['c341', "'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte"],
    ['c3c3', "'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte"],
    ['e08080', "'utf-8' codec can't decode byte 0xe0 in position 0: invalid continuation byte"],
    ['e09f80', "'utf-8' codec can't decode byte 0xe0 in position 0: invalid continuation byte"],
    ['eda080', "'utf-8' codec can't decode byte 0xed in position 0: invalid continuation byte"],
    ['edbfbf', "'utf-8' codec can't decode byte 0xed in position 0: invalid continuation byte"],
    ['e282', "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"],
    ['e28241', "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte"],
    ['f08f8080', "'utf-8' codec can't decode byte 0xf0 in position 0: invalid continuation byte"],
    ['f4908080', "'utf-8' codec can't decode byte 0xf4 in position 0: invalid continuation byte"],
    ['f09f98', "'utf-8' codec can't decode bytes in position 0-2: unexpected end of data"],
    ['f09f9841', "'utf-8' codec can't decode bytes in position 0-2: invalid continuation byte"],
    ['f09f41', "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte"],
    ['f0', "'utf-8' codec can't decode byte 0xf0 in position 0: unexpected end of data"],
    ['e2', "'utf-8' codec can't decode byte 0xe2 in position 0: unexpected end of data"],
    ['c3', "'utf-8' codec can't decode byte 0xc3 in position 0: unexpected end of data"],
    ['eda0', "'utf-8' codec can't decode byte 0xed in position 0: invalid continuation byte"],
    ['f090', "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"],
    ['41e282ac80', "'utf-8' codec can't decode byte 0x80 in position 4: invalid start byte"],
    ['e282ace2', "'utf-8' codec can't decode byte 0xe2 in position 3: unexpected end of data"],
    ['c3a9c3', "'utf-8' codec can't decode byte 0xc3 in position 2: unexpected end of data"],
  ];

  it.each(BYTES)('names the first UTF-8 error of %s as Python does', (hex, expected) => {
    expect(utf8DecodeError([...Buffer.from(hex, 'hex')])).toBe(expected);
  });

  // /usr/bin/python3 -c "from webob.compat import unquote
  // for s in [...]: print([s, unquote(s.encode('latin-1')).hex()])"
  const UNQUOTE: ReadonlyArray<readonly [string, string]> = [
    ['abc', '616263'],
    ['%41', '41'],
    ['%ff', 'ff'],
    ['%FF', 'ff'],
    ['%f', '0f'],
    ['%f ', '0f'],
    [' %f', '200f'],
    ['% f', '0f'],
    ['%-0', '00'],
    ['%-1', '252d31'],
    ['%+1', '01'],
    ['%zz', '257a7a'],
    ['%', '25'],
    ['%%41', '2541'],
    ['%4', '04'],
    ['a%4g', '61253467'],
    ['%0x', '253078'],
    ['%41%', '4125'],
    ['%c3%a9x', 'c3a978'],
  ];

  it.each(UNQUOTE)('percent-decodes %j as webob 1.8 does', (s, hex) => {
    expect(Buffer.from(webobUnquote(s)).toString('hex')).toBe(hex);
  });

  // /usr/bin/python3 -c "from webob.compat import parse_qsl_text
  // for q in [...]:
  //   try: list(parse_qsl_text(q)); m=None
  //   except UnicodeDecodeError as e: m=str(e)
  //   print([q, m])"
  const QUERIES: ReadonlyArray<readonly [string, string | undefined]> = [
    ['name=%ff', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
    ['name=ab%ff', "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"],
    ['name=%C3%A9%ff', "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"],
    ['%ff=x', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
    ['name=x&uuid=%ff', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
    ['name=%ff&uuid=%fe', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
    ['%C3=x&name=%ff', "'utf-8' codec can't decode byte 0xc3 in position 0: unexpected end of data"],
    ['name=%E2%82', "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"],
    ['name=a+%ff', "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"],
    ['name=a%2B%ff', "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"],
    ['a;name=x%ff', "'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"],
    ['name=%+f%ff', "'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"],
    ['name=%f', undefined],
    ['name=%C3%f', "'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte"],
    ['name=%zz%ff', "'utf-8' codec can't decode byte 0xff in position 3: invalid start byte"],
    ['name=%%ff', "'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"],
    ['name=%C3%A9', undefined],
    ['member_of=in:%ff', "'utf-8' codec can't decode byte 0xff in position 3: invalid start byte"],
    ['name=%-0%ff', "'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"],
    ['name=%ff=x', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
    ['x==%ff', "'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"],
    ['%ff', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
    ['ab%ff', "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"],
    ['name=%e2%82%ac%e2%82', "'utf-8' codec can't decode bytes in position 3-4: unexpected end of data"],
    ['resources=VCPU:1&required=%ED%A0%80', "'utf-8' codec can't decode byte 0xed in position 0: invalid continuation byte"],
    ['name=ok&&%ff', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
    ['name=%c3%28', "'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte"],
    ['name=cn%zz1', undefined],
    ['name=%zz', undefined],
    ['name=%', undefined],
    ['name=%ff%', "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"],
  ];

  it.each(QUERIES)('decodes the query %j as webob 1.8 does: each key and value apart, in order', (query, expected) => {
    expect(queryDecodeError(query)).toBe(expected);
  });
});
