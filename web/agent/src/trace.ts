// Trace context: while the daemon traces, the lines it sends on behalf of a traced request carry a
// W3C traceparent (docs/agent-protocol.md, "Trace context"). The package hands it to the code that
// handles the line (SurfaceCtx.trace, ToolCtx.trace), which continues the trace with its own
// OpenTelemetry SDK: propagation.extract(context.active(), { traceparent: trace.traceparent }).

/** The daemon's span a line was sent in (a W3C traceparent, parsed). */
export interface TraceContext {
  /** The header's value as it came: `00-<trace id>-<span id>-<flags>`. */
  readonly traceparent: string;
  readonly traceId: string;
  /** The daemon's span: the dispatch's round trip, or the prompt's turn. */
  readonly spanId: string;
  readonly sampled: boolean;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** parseTraceparent reads a W3C traceparent; undefined for anything else (absent, malformed, all-zero ids, version ff). */
export function parseTraceparent(v: unknown): TraceContext | undefined {
  if (typeof v !== "string") return undefined;
  const m = TRACEPARENT.exec(v);
  if (!m || m[1] === "ff" || /^0+$/.test(m[2]) || /^0+$/.test(m[3])) return undefined;
  return { traceparent: v, traceId: m[2], spanId: m[3], sampled: (parseInt(m[4], 16) & 1) === 1 };
}
