// Framing: one JSON object per line, split on "\n" only (docs/agent-protocol.md, "Framing").

/** Writes one whole record (a JSON text and its "\n"). */
export type WriteLine = (text: string) => void;

/** The part of a writable stream the writer needs. */
export interface WritableLike {
  write(chunk: string): boolean;
}

/**
 * lineWriter writes through the write method the stream's class defines, not
 * through `stream.write` as it may have been replaced: pi takes process.stdout
 * over before it loads extensions by assigning its own `write` (which sends
 * everything to stderr), and writes its own lines with the class's method.
 * Going through the same method, a line is one chunk of the same stream as
 * pi's: the stream writes chunks whole and in order, through partial writes
 * and EAGAIN on the non-blocking pipe, so lines never interleave.
 */
export function lineWriter(stream: WritableLike): WriteLine {
  let proto = Object.getPrototypeOf(stream) as object | null;
  while (proto && !Object.prototype.hasOwnProperty.call(proto, "write")) proto = Object.getPrototypeOf(proto);
  const write = (proto ? (proto as WritableLike).write : stream.write) as (chunk: string) => boolean;
  return (text: string) => {
    write.call(stream, text);
  };
}

/** JSON text of one record, its newline included. JSON.stringify never writes a raw newline. */
export function encodeLine(value: unknown): string {
  return JSON.stringify(value) + "\n";
}

const NL = 0x0a;
const CR = 0x0d;

/**
 * LineSplitter turns chunks of a byte stream into records: split on "\n"
 * only (U+2028 and "\r" inside a record are ordinary), one "\r" before the
 * "\n" dropped, blank records (spaces, tabs, "\r") skipped, an unterminated
 * tail kept until the rest comes.
 */
export class LineSplitter {
  private parts: Buffer[] = [];

  constructor(private readonly onLine: (line: Buffer) => void) {}

  push(chunk: Buffer | string): void {
    let buf = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    for (;;) {
      const i = buf.indexOf(NL);
      if (i < 0) {
        if (buf.length) this.parts.push(buf);
        return;
      }
      let line = buf.subarray(0, i);
      if (this.parts.length) {
        this.parts.push(line);
        line = Buffer.concat(this.parts);
        this.parts = [];
      }
      buf = buf.subarray(i + 1);
      this.emit(line);
    }
  }

  /** end hands over an unterminated last record. */
  end(): void {
    if (!this.parts.length) return;
    const line = Buffer.concat(this.parts);
    this.parts = [];
    this.emit(line);
  }

  private emit(line: Buffer): void {
    let n = line.length;
    if (n && line[n - 1] === CR) n--;
    let blank = true;
    for (let j = 0; j < n; j++) {
      const c = line[j];
      if (c !== 0x20 && c !== 0x09 && c !== CR) {
        blank = false;
        break;
      }
    }
    if (!blank) this.onLine(line.subarray(0, n));
  }
}

const TYPE_RE = /"type"\s*:\s*"([A-Za-z0-9_:.-]+)"/;

/**
 * sniffType reads a record's "type" from its first bytes without parsing it
 * (the daemon writes "type" within the first members of every line), so
 * that the lines meant for pi (a prompt with its images) are not parsed
 * twice in its process.
 */
export function sniffType(line: Buffer): string {
  const m = TYPE_RE.exec(line.toString("latin1", 0, Math.min(line.length, 256)));
  return m ? m[1] : "";
}
