/** The daemon's span a line was sent in (a W3C traceparent, parsed). */
export interface TraceContext {
    /** The header's value as it came: `00-<trace id>-<span id>-<flags>`. */
    readonly traceparent: string;
    readonly traceId: string;
    /** The daemon's span: the dispatch's round trip, or the prompt's turn. */
    readonly spanId: string;
    readonly sampled: boolean;
}
/** parseTraceparent reads a W3C traceparent; undefined for anything else (absent, malformed, all-zero ids, version ff). */
export declare function parseTraceparent(v: unknown): TraceContext | undefined;
