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
export declare function lineWriter(stream: WritableLike): WriteLine;
/** JSON text of one record, its newline included. JSON.stringify never writes a raw newline. */
export declare function encodeLine(value: unknown): string;
/**
 * LineSplitter turns chunks of a byte stream into records: split on "\n"
 * only (U+2028 and "\r" inside a record are ordinary), one "\r" before the
 * "\n" dropped, blank records (spaces, tabs, "\r") skipped, an unterminated
 * tail kept until the rest comes.
 */
export declare class LineSplitter {
    private readonly onLine;
    private parts;
    constructor(onLine: (line: Buffer) => void);
    push(chunk: Buffer | string): void;
    /** end hands over an unterminated last record. */
    end(): void;
    private emit;
}
/**
 * sniffType reads a record's "type" from its first bytes without parsing it
 * (the daemon writes "type" within the first members of every line), so
 * that the lines meant for pi (a prompt with its images) are not parsed
 * twice in its process.
 */
export declare function sniffType(line: Buffer): string;
