import { describe, expect, it } from 'vitest';
import { seededRandom } from '../src/index.js';

describe('seededRandom', () => {
  it('repeats its sequence for a seed and differs between seeds', () => {
    const take = (seed: number) => {
      const next = seededRandom(seed);
      return Array.from({ length: 5 }, next);
    };
    expect(take(7)).toEqual(take(7));
    expect(take(7)).not.toEqual(take(8));
  });

  it('yields numbers in [0, 1) spread over the interval', () => {
    const next = seededRandom(1);
    const values = Array.from({ length: 10_000 }, next);
    expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    expect(mean).toBeGreaterThan(0.45);
    expect(mean).toBeLessThan(0.55);
  });
});
