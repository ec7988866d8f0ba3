import { describe, expect, it } from 'vitest';
import { ErtError, isErtError, messageOf } from '@ert/plugin-api';

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
