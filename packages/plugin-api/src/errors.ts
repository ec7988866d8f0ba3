/**
 * Base class of every error ert raises on purpose. `code` is stable (documented, safe to
 * match on); `details` carries the values at fault (file, key, plugin, hook, amounts) so
 * that callers can print or serialise them without parsing the message.
 * Each package keeps its own catalogue of codes in its `errors.ts`.
 */
export class ErtError<Code extends string = string> extends Error {
  /** Stable machine-readable code (`ERT_...`), listed in the raising package's `errors.ts`. */
  readonly code: Code;
  /** The values at fault (file, key, plugin, hook, amounts); `{}` when none were given. */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: Code, message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }

  /** `{ name, code, message, details }`: what `JSON.stringify` writes (the stack and cause are left out). */
  toJSON(): Record<string, unknown> {
    return { name: this.name, code: this.code, message: this.message, details: this.details };
  }
}

/** True for any ErtError, including copies of this class loaded from another path. Never throws (false for a value whose traps or getters throw). */
export function isErtError(value: unknown): value is ErtError {
  try {
    return value instanceof Error && typeof (value as { code?: unknown }).code === 'string' && 'details' in value;
  } catch {
    return false;
  }
}

/** What `messageOf` says of a thrown value it cannot turn into text. */
export const UNPRINTABLE_THROWN = '<unprintable thrown value>';

/**
 * The message of any thrown value (an Error's message, anything else as a string), or
 * `UNPRINTABLE_THROWN`. Never throws: it runs in catch blocks, where a plugin may have thrown
 * `Object.create(null)`, an object whose `toString` throws, an Error whose `message` getter
 * throws or a Proxy whose traps throw.
 */
export function messageOf(thrown: unknown): string {
  try {
    if (thrown instanceof Error) {
      const message: unknown = thrown.message;
      return typeof message === 'string' ? message : String(message);
    }
    return String(thrown);
  } catch {
    return UNPRINTABLE_THROWN;
  }
}
