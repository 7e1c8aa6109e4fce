// The lines of the agent protocol (docs/agent-protocol.md) that this package reads and writes,
// and the shapes the API hands out. Names and fields follow the document exactly.

/** The surface extension's protocol name, announced in agent_ready. */
export const PROTOCOL = "surfaced/1";

/** A JSON Schema (an object; the package does not interpret it). */
export type JSONSchema = Record<string, unknown>;

/** The `{code, message}` of a failure. */
export interface ErrorBody {
  code: string;
  message: string;
}

/** A command result as the protocol normalizes it: `{ok:true, data?}` or `{ok:false, error}`. */
export type CommandResult<D = unknown> = { ok: true; data?: D } | { ok: false; error: ErrorBody };

/** Reserved codes of command results (docs/agent-protocol.md, "Errors and reserved codes"). */
export const Codes = {
  unknownAction: "unknown_action",
  surfaceNotRegistered: "surface_not_registered",
  dispatchFailed: "dispatch_failed",
  timeout: "timeout",
  invalidArgs: "invalid_args",
  agentUnavailable: "agent_unavailable",
  notFound: "not_found",
  noDataPlane: "no_data_plane",
  /** This package's own: the process is not connected to a surfaced daemon (yet). */
  unavailable: "unavailable",
} as const;

/** An artifact of the session as the daemon describes it (docs/artifacts.md). */
export interface Artifact {
  id: string;
  sessionId?: string;
  mediaType: string;
  size: number;
  sha256?: string;
  name?: string;
  createdAt?: string;
  derivedFrom?: string;
  meta?: Record<string, unknown>;
}

/** One domain declared in agent_ready. */
export interface SurfaceDecl {
  domain: string;
  commands: string[];
  initialState?: unknown;
  data?: boolean;
  /** Per command, the JSON Schema of its args; the schema's `description` describes the command. */
  schemas?: Record<string, JSONSchema>;
}

/** A change of the session state a client made (a `state_changed` line). */
export interface StateChange {
  key: string;
  value?: unknown;
  rev: number;
  deleted?: boolean;
}

// Line types, both ways.
export const T = {
  agentReady: "agent_ready",
  response: "response",
  surfaceDispatch: "surface_dispatch",
  surfaceDispatchResult: "surface_dispatch_result",
  surfaceFetch: "surface_fetch",
  surfaceFetchResult: "surface_fetch_result",
  surfaceCommand: "surface_command",
  surfaceCommandResult: "surface_command_result",
  surfaceGet: "surface_get",
  surfaceGetResult: "surface_get_result",
  stateSet: "state_set",
  stateDelete: "state_delete",
  stateChanged: "state_changed",
  surfaceRegisterResult: "surface_register_result",
  artifactPut: "artifact_put",
  artifactPutResult: "artifact_put_result",
  artifactGet: "artifact_get",
  artifactGetResult: "artifact_get_result",
  artifactList: "artifact_list",
  artifactListResult: "artifact_list_result",
  artifactUrl: "artifact_url",
  artifactUrlResult: "artifact_url_result",
  extensionUIRequest: "extension_ui_request",
  extensionUIResponse: "extension_ui_response",
} as const;

/** The line types of the surface extension that the daemon writes to an agent. */
export const DAEMON_SURFACE_LINES: ReadonlySet<string> = new Set([
  T.surfaceDispatch,
  T.surfaceFetch,
  T.surfaceCommandResult,
  T.surfaceGetResult,
  T.stateChanged,
  T.surfaceRegisterResult,
  T.artifactPutResult,
  T.artifactGetResult,
  T.artifactListResult,
  T.artifactUrlResult,
]);

/** The answer types that settle a request the agent made, by its id. */
export const ANSWERS: ReadonlySet<string> = new Set([
  T.surfaceCommandResult,
  T.surfaceGetResult,
  T.artifactPutResult,
  T.artifactGetResult,
  T.artifactListResult,
  T.artifactUrlResult,
  T.extensionUIResponse,
]);

/** The SURFACED_* environment the daemon gives an agent. */
export const Env = {
  sessionId: "SURFACED_SESSION_ID",
  artifactDir: "SURFACED_ARTIFACT_DIR",
  llmBaseURL: "SURFACED_LLM_BASE_URL",
  llmModel: "SURFACED_LLM_MODEL",
  llmAPIKey: "SURFACED_LLM_API_KEY",
} as const;

/** A record from the daemon, parsed. */
export type Line = { type: string; id?: string; [field: string]: unknown };

export function failure(code: string, message: string): { ok: false; error: ErrorBody } {
  return { ok: false, error: { code, message } };
}

/** Whether v is an object (not an array, not null). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
