/**
 * The `Accept` check of Placement's GET handlers (`util.check_accept('application/json')`),
 * as webob 1.8 (Debian bookworm's, under Placement 8.0.0) reads the header
 * (webob/acceptparse.py) once Placement's RequestLog middleware has made a missing, empty or
 * `*\/*` one application/json: a header that is not valid RFC 7231 syntax is ignored; a valid
 * one must admit application/json, judged by its most specific matching range.
 */

// RFC 7230 / 7231 grammar, as acceptparse.py spells it.
const OWS = '[ \\t]*';
const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
const QUOTED_STRING = '"(?:[\\t \\x21\\x23-\\x5b\\x5d-\\x7e\\x80-\\xff]|\\\\[\\t \\x21-\\x7e\\x80-\\xff])*"';
const PARAMETER = `${TOKEN}=(?:${TOKEN}|${QUOTED_STRING})`;
/** media-range: groups 1 (type/subtype) and 2 (its parameters; `q` is never one). */
const MEDIA_RANGE = `(${TOKEN}/${TOKEN})((?:${OWS};${OWS}(?![qQ]=)${PARAMETER})*)`;
const QVALUE = '(?:0(?:\\.[0-9]{0,3})?)|(?:1(?:\\.0{0,3})?)';
const ACCEPT_EXT = `${OWS};${OWS}${TOKEN}(?:=(?:${TOKEN}|${QUOTED_STRING}))?`;
/** A media range and its accept-params: group 3 is the qvalue. */
const ELEMENT = `${MEDIA_RANGE}(?:${OWS};${OWS}[qQ]=(${QVALUE})((?:${ACCEPT_EXT})*))?`;
/** `#element` (RFC 7230 section 7): empty elements allowed, the empty header too. */
const VALID_HEADER = new RegExp(`^(?:$|(?:,|${ELEMENT})(?:${OWS},(?:${OWS}${ELEMENT})?)*$)`);
/** Every element of a header, compiled once (`matchAll` copies it, so its `lastIndex` is never shared). */
const ELEMENTS = new RegExp(ELEMENT, 'g');

/**
 * `Accept` as Placement's handlers and webob's error pages read it: its RequestLog middleware
 * (placement/requestlog.py, before any handler) sets `HTTP_ACCEPT` to application/json when
 * `not accept or accept == '*\/*'`, and the empty string is falsy in Python. (webob alone
 * would read an empty header as valid and matching nothing, `AcceptValidHeader('')`, whose
 * `acceptable_offers` is empty: a 406 from `check_accept`.)
 */
export function placementAccept(accept: string | undefined): string {
  return accept === undefined || accept === '' || accept === '*/*' ? 'application/json' : accept;
}

/**
 * Whether Placement would serve JSON for this `Accept` header: true when it is absent, empty
 * or `*\/*` (`placementAccept`) or not valid syntax (webob ignores it), else when
 * application/json's most specific matching range (`application/json` without parameters, then
 * `application/*`, then `*\/*`) has q > 0. A range with media type parameters
 * (`application/json; charset=utf-8`) does not match: 406, as in webob.
 */
export function acceptsJson(header: string | undefined): boolean {
  const accept = placementAccept(header);
  if (!VALID_HEADER.test(accept)) return true;
  let best: { specificity: number; q: number } | undefined;
  for (const match of accept.matchAll(ELEMENTS)) {
    const specificity = jsonSpecificity(match[1]!, match[2]!);
    if (specificity === 0 || (best !== undefined && specificity <= best.specificity)) continue;
    best = { specificity, q: match[3] === undefined ? 1 : Number(match[3]) };
  }
  return best !== undefined && best.q > 0;
}

/** How specifically a media range (`type/subtype`, then its parameters) names application/json, as webob ranks it; 0 when it does not. */
function jsonSpecificity(range: string, parameters: string): number {
  const [type, subtype] = range.toLowerCase().split('/');
  if (type === 'application' && subtype === 'json') return parameters === '' ? 3 : 0;
  if (type === 'application' && subtype === '*') return 2;
  return type === '*' && subtype === '*' ? 1 : 0;
}
