import type { CapabilityOp, CapabilityRequirement } from '@ert/plugin-api';

/**
 * Nova's extra-specs operators (nova/scheduler/filters/extra_specs_ops.py), as used by
 * `capabilities:` and `aggregate_instance_extra_specs:` values.
 *
 * A value whose first word is an operator is an expression (`>= 2`, `<or> a <or> b`,
 * `<all-in> sse avx`); any other value is a plain string compared for equality, which
 * is what Nova does with it (its `value == req`), recorded here as `s==`.
 */

const NUMERIC_OPS: ReadonlySet<CapabilityOp> = new Set(['=', '==', '!=', '>=', '<=']);
const SINGLE_VALUE_OPS: ReadonlySet<CapabilityOp> = new Set(['=', '==', '!=', '>=', '<=', 's==', 's!=', '<in>']);
const ALL_OPS: ReadonlySet<string> = new Set<CapabilityOp>([...SINGLE_VALUE_OPS, '<or>', '<all-in>']);
/** Nova operators ert does not implement (string ordering); refused rather than misread. */
const UNSUPPORTED_NOVA_OPS: ReadonlySet<string> = new Set(['s<', 's<=', 's>', 's>=']);

const NUMBER_PATTERN = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** The number a capability or metadata value stands for (as Python's float() reads it), or undefined. */
export function toNumber(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  const text = value.trim();
  return NUMBER_PATTERN.test(text) ? Number(text) : undefined;
}

/** An operator expression: what `parseOpExpression` returns (a requirement without its key). */
export type OpExpression = Omit<CapabilityRequirement, 'key'>;

/**
 * Parse an extra-spec value as an operator expression. Returns the expression, or the
 * reason it is malformed (as a string) so callers can raise their own typed error
 * naming the key. Pure; never throws.
 */
export function parseOpExpression(raw: string): OpExpression | string {
  const words = raw.trim().split(/\s+/).filter((w) => w.length > 0);
  if (words.length === 0) return 'an empty value';
  const [first, ...rest] = words as [string, ...string[]];
  if (UNSUPPORTED_NOVA_OPS.has(first)) return `operator "${first}" is not supported (string ordering)`;
  if (!ALL_OPS.has(first)) return { op: 's==', values: [raw.trim()] };
  const op = first as CapabilityOp;
  if (op === '<or>') {
    // `<or> a <or> b <or> c`: values at even positions of `rest`, `<or>` between them.
    const values: string[] = [];
    for (let i = 0; i < rest.length; i++) {
      const word = rest[i]!;
      const expectValue = i % 2 === 0;
      if (expectValue === (word === '<or>')) return `"<or>" expects "<or> a <or> b ...", got "${raw.trim()}"`;
      if (expectValue) values.push(word);
    }
    if (values.length === 0 || rest.length % 2 === 0) return `"<or>" expects "<or> a <or> b ...", got "${raw.trim()}"`;
    return { op, values };
  }
  if (op === '<all-in>') {
    if (rest.length === 0) return `"<all-in>" needs at least one value`;
    return { op, values: rest };
  }
  if (rest.length !== 1) return `"${op}" takes exactly one value, got ${rest.length}`;
  const value = rest[0]!;
  if (NUMERIC_OPS.has(op) && toNumber(value) === undefined) return `"${op}" compares numbers, "${value}" is not a number`;
  return { op, values: [value] };
}

/**
 * Does `actual` (a host capability, or one aggregate metadata value) satisfy `req`?
 * Nova's semantics: `=` means "at least" (numeric >=); `==`, `!=`, `>=`, `<=` compare
 * numbers; `s==`, `s!=` compare strings; `<in>` is a substring test; `<all-in>` needs
 * every value as a substring; `<or>` needs one value equal to `actual`. A missing
 * (`undefined`) or, for numeric operators, non-numeric `actual` never matches. Pure.
 */
export function matchCapability(req: CapabilityRequirement | OpExpression, actual: string | number | undefined): boolean {
  if (actual === undefined) return false;
  const text = String(actual);
  switch (req.op) {
    case 's==':
      return text === req.values[0];
    case 's!=':
      return text !== req.values[0];
    case '<in>':
      return text.includes(req.values[0] ?? '');
    case '<all-in>':
      return req.values.every((v) => text.includes(v));
    case '<or>':
      return req.values.includes(text);
    default:
      return compareNumbers(req.op, actual, req.values[0]);
  }
}

function compareNumbers(op: CapabilityOp, actual: string | number, wanted: string | undefined): boolean {
  const x = toNumber(actual);
  const y = wanted === undefined ? undefined : toNumber(wanted);
  if (x === undefined || y === undefined) return false;
  switch (op) {
    case '=':
    case '>=':
      return x >= y;
    case '==':
      return x === y;
    case '!=':
      return x !== y;
    case '<=':
      return x <= y;
    default:
      return false;
  }
}

/**
 * Why a host's aggregate metadata fails `aggregate_instance_extra_specs` (Nova's
 * AggregateInstanceExtraSpecsFilter), or undefined when it passes. `specs` are the
 * keys after the `aggregate_instance_extra_specs:` prefix with their raw values;
 * `metadata` maps a key to its comma-separated values (from every aggregate of the
 * host). Each key must be present and one of its values must match the spec's value
 * (an operator expression, or a plain string compared for equality). A spec value
 * that does not parse never matches. Pure.
 */
export function aggregateExtraSpecsProblem(
  specs: Readonly<Record<string, string>>,
  metadata: Readonly<Record<string, string>>,
): string | undefined {
  for (const key in specs) {
    const raw = specs[key]!;
    const wanted = metadata[key];
    const values = wanted === undefined ? [] : wanted.split(',').map((v) => v.trim()).filter((v) => v.length > 0);
    if (values.length === 0) return `aggregate metadata has no "${key}" (wanted "${raw}")`;
    const req = parseOpExpression(raw);
    if (typeof req === 'string' || !values.some((v) => matchCapability(req, v))) {
      return `aggregate metadata "${key}=${wanted}" does not match "${raw}"`;
    }
  }
  return undefined;
}

/** True when `aggregateExtraSpecsProblem` finds nothing wrong. Pure. */
export function matchAggregateExtraSpecs(
  specs: Readonly<Record<string, string>>,
  metadata: Readonly<Record<string, string>>,
): boolean {
  return aggregateExtraSpecsProblem(specs, metadata) === undefined;
}
