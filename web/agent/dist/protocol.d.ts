/** The surface extension's protocol name, announced in agent_ready. */
export declare const PROTOCOL = "surfaced/1";
/** A JSON Schema (an object; the package does not interpret it). */
export type JSONSchema = Record<string, unknown>;
/** The `{code, message}` of a failure. */
export interface ErrorBody {
    code: string;
    message: string;
}
/** A command result as the protocol normalizes it: `{ok:true, data?}` or `{ok:false, error}`. */
export type CommandResult<D = unknown> = {
    ok: true;
    data?: D;
} | {
    ok: false;
    error: ErrorBody;
};
/** Reserved codes of command results (docs/agent-protocol.md, "Errors and reserved codes"). */
export declare const Codes: {
    readonly unknownAction: "unknown_action";
    readonly surfaceNotRegistered: "surface_not_registered";
    readonly dispatchFailed: "dispatch_failed";
    readonly timeout: "timeout";
    readonly invalidArgs: "invalid_args";
    readonly agentUnavailable: "agent_unavailable";
    readonly notFound: "not_found";
    readonly noDataPlane: "no_data_plane";
    /** This package's own: the process is not connected to a surfaced daemon (yet). */
    readonly unavailable: "unavailable";
};
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
export declare const T: {
    readonly agentReady: "agent_ready";
    readonly response: "response";
    readonly surfaceDispatch: "surface_dispatch";
    readonly surfaceDispatchResult: "surface_dispatch_result";
    readonly surfaceFetch: "surface_fetch";
    readonly surfaceFetchResult: "surface_fetch_result";
    readonly surfaceCommand: "surface_command";
    readonly surfaceCommandResult: "surface_command_result";
    readonly surfaceGet: "surface_get";
    readonly surfaceGetResult: "surface_get_result";
    readonly stateSet: "state_set";
    readonly stateDelete: "state_delete";
    readonly stateChanged: "state_changed";
    readonly surfaceRegisterResult: "surface_register_result";
    readonly artifactPut: "artifact_put";
    readonly artifactPutResult: "artifact_put_result";
    readonly artifactGet: "artifact_get";
    readonly artifactGetResult: "artifact_get_result";
    readonly artifactList: "artifact_list";
    readonly artifactListResult: "artifact_list_result";
    readonly artifactUrl: "artifact_url";
    readonly artifactUrlResult: "artifact_url_result";
    readonly extensionUIRequest: "extension_ui_request";
    readonly extensionUIResponse: "extension_ui_response";
};
/** The line types of the surface extension that the daemon writes to an agent. */
export declare const DAEMON_SURFACE_LINES: ReadonlySet<string>;
/** The answer types that settle a request the agent made, by its id. */
export declare const ANSWERS: ReadonlySet<string>;
/** The SURFACED_* environment the daemon gives an agent. */
export declare const Env: {
    readonly sessionId: "SURFACED_SESSION_ID";
    readonly artifactDir: "SURFACED_ARTIFACT_DIR";
    readonly llmBaseURL: "SURFACED_LLM_BASE_URL";
    readonly llmModel: "SURFACED_LLM_MODEL";
    readonly llmAPIKey: "SURFACED_LLM_API_KEY";
};
/** A record from the daemon, parsed. */
export type Line = {
    type: string;
    id?: string;
    [field: string]: unknown;
};
export declare function failure(code: string, message: string): {
    ok: false;
    error: ErrorBody;
};
/** Whether v is an object (not an array, not null). */
export declare function isObject(v: unknown): v is Record<string, unknown>;
