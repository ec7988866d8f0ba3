import { describe, expect, it } from 'vitest';
import { ErtError, UNPRINTABLE_THROWN, isErtError, messageOf } from '@ert/plugin-api';

class SampleError extends ErtError<'ERT_SAMPLE_A' | 'ERT_SAMPLE_B'> {}

describe('ErtError', () => {
  it('keeps code, details, cause and the subclass name; serialises without the stack', () => {
    const cause = new Error('root cause');
    const err = new SampleError('ERT_SAMPLE_A', 'went wrong', { key: 'tracker.interval' }, { cause });
    expect(err).toBeInstanceOf(ErtError);
    expect(err.name).toBe('SampleError');
    expect(err.code).toBe('ERT_SAMPLE_A');
    expect(err.cause).toBe(cause);
    expect(err.toJSON()).toEqual({ name: 'SampleError', code: 'ERT_SAMPLE_A', message: 'went wrong', details: { key: 'tracker.interval' } });
    expect(isErtError(err)).toBe(true);
    expect(isErtError(cause)).toBe(false);
  });
});

describe('messageOf', () => {
  it("gives an Error's message and any other thrown value as a string", () => {
    expect(messageOf(new TypeError('bad type'))).toBe('bad type');
    expect(messageOf('plain string')).toBe('plain string');
    expect(messageOf(42)).toBe('42');
    expect(messageOf(undefined)).toBe('undefined');
  });
});

/** Values a plugin can throw that have no readable text: each made fresh per use. */
const HOSTILE: Array<[string, () => unknown]> = [
  ['Object.create(null)', () => Object.create(null)],
  [
    'an object whose toString throws',
    () => ({
      toString() {
        throw new Error('toString exploded');
      },
    }),
  ],
  [
    'a Proxy whose getPrototypeOf throws',
    () =>
      new Proxy(
        {},
        {
          getPrototypeOf() {
            throw new Error('getPrototypeOf exploded');
          },
        },
      ),
  ],
  [
    'an Error whose message getter throws',
    () =>
      Object.defineProperty(new Error('hidden'), 'message', {
        get() {
          throw new Error('message getter exploded');
        },
      }),
  ],
];

// messageOf runs in catch blocks (the dispatcher's, the tracker's): a throw there replaces the
// plugin's error with a bare TypeError naming nobody. Seen red with messageOf back to
// `thrown instanceof Error ? thrown.message : String(thrown)` (each case threw), and
// isErtError without its try (the Proxy case threw).
describe('messageOf and isErtError never throw', () => {
  for (const [what, make] of HOSTILE) {
    it(`${what}: the fallback text, not a throw`, () => {
      expect(messageOf(make())).toBe(UNPRINTABLE_THROWN);
      expect(isErtError(make())).toBe(false);
    });
  }
});
