import { describe, expect, it } from 'vitest';
import { Backoff } from '../src/backoff.js';

describe('Backoff (capped exponential, equal jitter)', () => {
  it('doubles the ceiling per failure up to the cap, waiting between half and all of it', () => {
    const low = new Backoff({ baseMs: 100, capMs: 1000, random: () => 0 });
    const high = new Backoff({ baseMs: 100, capMs: 1000, random: () => 0.999999 });
    expect(Array.from({ length: 6 }, () => low.next())).toEqual([50, 100, 200, 400, 500, 500]);
    expect(Array.from({ length: 6 }, () => high.next())).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(low.attempts).toBe(6);
  });

  it('starts again from the base after reset, and stays finite after many failures', () => {
    const backoff = new Backoff({ baseMs: 100, capMs: 5000, random: () => 0.5 });
    for (let i = 0; i < 200; i++) expect(backoff.next()).toBeLessThanOrEqual(5000);
    backoff.reset();
    expect(backoff.attempts).toBe(0);
    expect(backoff.next()).toBe(75);
  });

  it('spreads agents that failed together (Math.random by default)', () => {
    const waits = new Set(Array.from({ length: 20 }, () => new Backoff({ baseMs: 1000, capMs: 60_000 }).next()));
    expect(waits.size).toBeGreaterThan(1);
  });
});
