/**
 * JSON text written straight into a growing Buffer, for answers of hundreds of kilobytes
 * (allocation candidates): writing a few thousand pieces into bytes took about a fifth of the
 * time of joining them as strings and encoding the result, and the bytes go out as they are.
 * Pieces go in as text or bytes that are already JSON: write a few large pieces rather than
 * many small ones (each write is a call into the runtime).
 */
export class JsonWriter {
  private buf: Buffer;
  private at = 0;

  /** `capacity`: the bytes to start with (the buffer doubles as needed). */
  constructor(capacity = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(capacity);
  }

  /** Text that is already JSON. */
  raw(text: string): this {
    this.room(text.length * 3);
    this.at += this.buf.write(text, this.at, 'utf8');
    return this;
  }

  /** Bytes that are already JSON (a fragment kept serialised). */
  bytes(bytes: Uint8Array): this {
    this.room(bytes.length);
    this.buf.set(bytes, this.at);
    this.at += bytes.length;
    return this;
  }

  /** The bytes written (a view of the writer's buffer: write nothing more after). */
  done(): Buffer {
    return this.buf.subarray(0, this.at);
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }
}

/**
 * `s` as a JSON string: printable ASCII without `"` or `\` (uuids, class and trait names) is
 * put between quotes as it is, faster than JSON.stringify on short strings.
 */
export function jsonString(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return JSON.stringify(s);
  }
  return `"${s}"`;
}

/** `n` as JSON writes it (null when not finite). */
export function jsonNumber(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null';
}
