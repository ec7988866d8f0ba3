import { describe, expect, it } from 'vitest';
import { aggregateExtraSpecsProblem, matchAggregateExtraSpecs, matchCapability, parseOpExpression, type OpExpression } from '@ert/placement';

const expr = (raw: string): OpExpression => {
  const parsed = parseOpExpression(raw);
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
};

// Expectations follow nova/scheduler/filters/extra_specs_ops.py and its unit tests.
describe('matchCapability (Nova extra_specs_ops)', () => {
  const cases: Array<[string, string | number | undefined, boolean]> = [
    ['1', '1', true],
    ['1', '2', false],
    ['Intel', 'Intel', true],
    ['Intel', 'AMD', false],
    ['= 123', '123', true],
    ['= 123', '124', true], // Nova's `=` means "at least"
    ['= 123', '122', false],
    ['= 123', 123.5, true],
    ['= 123', 'abc', false],
    ['== 123', '123', true],
    ['== 123', '123.0', true],
    ['== 123', '124', false],
    ['!= 123', '124', true],
    ['!= 123', '123', false],
    ['>= 2', 4, true],
    ['>= 2', 2, true],
    ['>= 2', 1, false],
    ['<= 2', 1, true],
    ['<= 2', '3', false],
    ['s== abc', 'abc', true],
    ['s== abc', 'abd', false],
    ['s!= abc', 'abd', true],
    ['s!= abc', 'abc', false],
    ['<in> 11', '12311321', true],
    ['<in> 12311321', '11', false],
    ['<all-in> 11 12', '12311321', true],
    ['<all-in> 11 99', '12311321', false],
    ['<or> 11 <or> 12', '12', true],
    ['<or> 11 <or> 12', '13', false],
    ['<or> 11', '11', true],
    ['>= 2', undefined, false],
    ['abc', undefined, false],
  ];
  it.each(cases)('"%s" against %s -> %s', (raw, actual, expected) => {
    expect(matchCapability({ key: 'k', ...expr(raw) }, actual)).toBe(expected);
  });

  it('parses operator expressions', () => {
    expect(parseOpExpression('  <or> a <or> b <or> c ')).toEqual({ op: '<or>', values: ['a', 'b', 'c'] });
    expect(parseOpExpression('<all-in> x')).toEqual({ op: '<all-in>', values: ['x'] });
    expect(parseOpExpression('plain words stay whole')).toEqual({ op: 's==', values: ['plain words stay whole'] });
    expect(parseOpExpression('<or> a <or>')).toMatch(/<or>/);
    expect(parseOpExpression('s>= a')).toMatch(/not supported/);
  });
});

describe('matchAggregateExtraSpecs (Nova AggregateInstanceExtraSpecsFilter)', () => {
  it('needs every key present with a matching value among the comma-separated ones', () => {
    expect(matchAggregateExtraSpecs({ ssd: 'true' }, { ssd: 'true' })).toBe(true);
    expect(matchAggregateExtraSpecs({ ssd: 'true' }, { ssd: 'false, true' })).toBe(true);
    expect(matchAggregateExtraSpecs({ ssd: 'true' }, { ssd: 'false' })).toBe(false);
    expect(matchAggregateExtraSpecs({ ssd: 'true' }, {})).toBe(false);
    expect(matchAggregateExtraSpecs({ ssd: 'true', cores: '>= 8' }, { ssd: 'true', cores: '4,16' })).toBe(true);
    expect(matchAggregateExtraSpecs({ ssd: 'true', cores: '>= 8' }, { ssd: 'true', cores: '4' })).toBe(false);
    expect(matchAggregateExtraSpecs({ hv: '<or> kvm <or> qemu' }, { hv: 'xen,qemu' })).toBe(true);
    expect(matchAggregateExtraSpecs({}, {})).toBe(true);
  });

  it('names the key that failed', () => {
    expect(aggregateExtraSpecsProblem({ ssd: 'true' }, {})).toBe('aggregate metadata has no "ssd" (wanted "true")');
    expect(aggregateExtraSpecsProblem({ ssd: 'true' }, { ssd: 'false' })).toBe('aggregate metadata "ssd=false" does not match "true"');
    expect(aggregateExtraSpecsProblem({ ssd: 'true' }, { ssd: ' , ' })).toMatch(/has no "ssd"/);
  });
});
