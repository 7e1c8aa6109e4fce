import type { Artifacts, SessionState, SurfaceSnapshot } from "./host";
import type { CommandResult } from "./protocol";
/**
 * getSessionState returns the session's key-value state (state_set and
 * state_delete lines; the clients' writes arrive as state_changed). Keys
 * `surface:*` are refused. `available` is false outside a surfaced agent.
 */
export declare function getSessionState(): SessionState;
/**
 * runCommand runs action on a domain of the session (a `surface_command`
 * line), exactly as the UI's button runs it: a pi tool moves the same state
 * the button moves. It never rejects; outside a surfaced agent it answers
 * `{ok:false, error:{code:"unavailable"}}`. Never await it inside a command of
 * the same domain: it waits behind that command until the settle window ends.
 */
export declare function runCommand<D = unknown>(domain: string, action: string, args?: unknown, opts?: {
    signal?: AbortSignal;
}): Promise<CommandResult<D>>;
/** getSurface reads a domain's current snapshot and rev (a `surface_get` line). It never rejects. */
export declare function getSurface<S = unknown>(domain: string, opts?: {
    signal?: AbortSignal;
}): Promise<SurfaceSnapshot<S>>;
/** getArtifacts returns the session's artifacts; their calls end with signal. */
export declare function getArtifacts(signal?: AbortSignal): Artifacts;
