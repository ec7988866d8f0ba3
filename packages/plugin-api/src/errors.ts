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

/** True for any ErtError, including copies of this class loaded from another path. */
export function isErtError(value: unknown): value is ErtError {
  return value instanceof Error && typeof (value as { code?: unknown }).code === 'string' && 'details' in value;
}

/** The message of any thrown value (an Error's message, anything else as a string). */
export function messageOf(thrown: unknown): string {
  return thrown instanceof Error ? thrown.message : String(thrown);
}
