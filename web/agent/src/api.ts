// The functions that reach the process's connection to the daemon without holding it: a pi
// tool, a hook or any module of a standalone agent calls them.
import { currentHost, Host } from "./host";
import type { Artifacts, SessionState, SurfaceSnapshot } from "./host";
import type { CommandResult } from "./protocol";

// Before any connection exists, answers come from a host that is not connected.
let offline: Host | undefined;
function host(): Host {
  return currentHost() ?? (offline ??= new Host(null, (m) => process.stderr.write(m + "\n")));
}

/**
 * getSessionState returns the session's key-value state (state_set and
 * state_delete lines; the clients' writes arrive as state_changed). Keys
 * `surface:*` are refused. `available` is false outside a surfaced agent.
 */
export function getSessionState(): SessionState {
  return host().sessionState();
}

/**
 * runCommand runs action on a domain of the session (a `surface_command`
 * line), exactly as the UI's button runs it: a pi tool moves the same state
 * the button moves. It never rejects; outside a surfaced agent it answers
 * `{ok:false, error:{code:"unavailable"}}`. Never await it inside a command of
 * the same domain: it waits behind that command until the settle window ends.
 */
export function runCommand<D = unknown>(domain: string, action: string, args?: unknown, opts: { signal?: AbortSignal } = {}): Promise<CommandResult<D>> {
  return host().runCommand<D>(domain, action, args, opts.signal);
}

/** getSurface reads a domain's current snapshot and rev (a `surface_get` line). It never rejects. */
export function getSurface<S = unknown>(domain: string, opts: { signal?: AbortSignal } = {}): Promise<SurfaceSnapshot<S>> {
  return host().getSurface<S>(domain, opts.signal);
}

/** getArtifacts returns the session's artifacts; their calls end with signal. */
export function getArtifacts(signal?: AbortSignal): Artifacts {
  return host().artifacts(signal);
}
