import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bitCount, chooseWays, formatMask, isContiguous, largestRun, parseMask, runMask, runsOf } from '../src/ways.js';

const domains = fc.array(fc.integer({ min: 0, max: 0x7ff }), { minLength: 1, maxLength: 4 }).map((frees) => frees.map((free, id) => ({ id, free })));

describe('way bitmaps', () => {
  it('runs, counts and hex forms', () => {
    expect(runsOf(0x70f)).toEqual([
      { start: 0, length: 4 },
      { start: 8, length: 3 },
    ]);
    expect(largestRun(0x70f)).toBe(4);
    expect(bitCount(0x7ff)).toBe(11);
    expect(runMask(4, 3)).toBe(0x70);
    expect(runMask(0, 32)).toBe(0xffffffff);
    expect(isContiguous(0x7f0)).toBe(true);
    expect(isContiguous(0x7f7)).toBe(false);
    expect(isContiguous(0)).toBe(false);
    expect(parseMask('7ff\n')).toBe(0x7ff);
    expect(parseMask('fffffffff')).toBeUndefined();
    expect(parseMask('0x7ff')).toBeUndefined();
    expect(formatMask(0xffffffff)).toBe('ffffffff');
  });

  it('a choice is a contiguous run of exactly the requested free ways; a refusal means no run is long enough', () => {
    fc.assert(
      fc.property(domains, fc.integer({ min: 1, max: 11 }), fc.integer({ min: 1, max: 3 }), (ds, ways, minCbmBits) => {
        const choice = chooseWays({ minCbmBits, freeClosids: 1, domains: ds }, ways);
        const longest = Math.max(...ds.map((d) => largestRun(d.free)));
        if (typeof choice === 'string') {
          expect(ways < minCbmBits || longest < ways).toBe(true);
          return;
        }
        const domain = ds.find((d) => d.id === choice.domain)!;
        expect(ways).toBeGreaterThanOrEqual(minCbmBits);
        expect(isContiguous(choice.mask)).toBe(true);
        expect(bitCount(choice.mask)).toBe(ways);
        expect((choice.mask & ~domain.free) >>> 0).toBe(0);
        // Best fit: no other free run that holds the request is shorter than the one used.
        const used = runsOf(domain.free).find((r) => (runMask(r.start, r.length) & choice.mask) === choice.mask)!;
        const fitting = ds.flatMap((d) => runsOf(d.free)).filter((r) => r.length >= ways);
        expect(Math.min(...fitting.map((r) => r.length))).toBe(used.length);
      }),
    );
  });

  it('chooses as the plain definition does: every run of every domain tried, best fit, then the longest run left', () => {
    // The reference: chooseWays as first written (arrays of runs, the others' longest found
    // by a pass over them). The one in ways.ts allocates nothing but its answer; this holds it
    // to the same choices and the same refusals. Seen red with the two-longest shortcut
    // giving every domain the longest run (the others' longest wrong on the longest domain).
    const reference = (view: { minCbmBits: number; freeClosids: number; domains: Array<{ id: number; free: number }> }, ways: number) => {
      let best: { domain: number; mask: number; leftover: number; largestRunAfter: number } | undefined;
      const longestOf = (mask: number) => runsOf(mask).reduce((m, r) => Math.max(m, r.length), 0);
      for (const domain of view.domains) {
        const othersLargest = view.domains.reduce((m, d) => (d === domain ? m : Math.max(m, longestOf(d.free))), 0);
        for (const run of runsOf(domain.free)) {
          if (run.length < ways) continue;
          const mask = runMask(run.start, ways);
          const c = { domain: domain.id, mask, leftover: run.length - ways, largestRunAfter: Math.max(othersLargest, longestOf((domain.free & ~mask) >>> 0)) };
          const better =
            !best ||
            (c.leftover !== best.leftover
              ? c.leftover < best.leftover
              : c.largestRunAfter !== best.largestRunAfter
                ? c.largestRunAfter > best.largestRunAfter
                : c.domain !== best.domain
                  ? c.domain < best.domain
                  : c.mask < best.mask);
          if (better) best = c;
        }
      }
      return best && { domain: best.domain, mask: best.mask, largestRunAfter: best.largestRunAfter };
    };
    const wide = fc.array(fc.integer({ min: 0, max: 0xffffffff }), { minLength: 0, maxLength: 4 }).map((frees) => frees.map((free, id) => ({ id: 3 - id, free })));
    fc.assert(
      fc.property(fc.oneof(domains, wide), fc.integer({ min: 1, max: 33 }), (ds, ways) => {
        const view = { minCbmBits: 1, freeClosids: 1, domains: ds };
        const choice = chooseWays(view, ways);
        const expected = reference(view, ways);
        if (expected === undefined) expect(typeof choice).toBe('string');
        else expect(choice).toEqual(expected);
        for (const d of ds) expect(largestRun(d.free)).toBe(runsOf(d.free).reduce((m, r) => Math.max(m, r.length), 0));
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses without a free CLOSID whatever the ways', () => {
    expect(chooseWays({ minCbmBits: 1, freeClosids: 0, domains: [{ id: 0, free: 0x7ff }] }, 1)).toBe('no free CLOSID (every class of service is in use)');
  });
});
