import type { WriteLine } from "./lines";
import { T } from "./protocol";
import type { Artifact, CommandResult, Line, StateChange } from "./protocol";
import { Surface } from "./surface";
import type { SurfaceHost } from "./surface";
/** The session's artifacts, through the artifact lines: files move by path, never as bytes on the pipe. */
export interface Artifacts {
    /** The session's scratch directory ($SURFACED_ARTIFACT_DIR): write files to put there. */
    readonly dir: string | undefined;
    /** Has the daemon ingest the file at path (in dir or the session's cwd) as a new artifact. */
    put(path: string, mediaType: string, opts?: PutOptions): Promise<{
        artifact: Artifact;
        url: string;
    }>;
    /** Has the daemon write the artifact's bytes to a file in dir; returns its path. */
    get(id: string): Promise<{
        path: string;
        artifact?: Artifact;
    }>;
    /** A page of the session's artifacts, newest first. */
    list(query?: ListQuery): Promise<{
        artifacts: Artifact[];
        nextCursor?: string;
    }>;
    /** A signed URL of the artifact's bytes, relative to the daemon, valid for ttl seconds (default 3600). */
    url(id: string, ttlSeconds?: number): Promise<string>;
}
export interface PutOptions {
    name?: string;
    derivedFrom?: string;
    meta?: Record<string, unknown>;
}
export interface ListQuery {
    mediaType?: string;
    cursor?: string;
    limit?: number;
}
/**
 * The session's key-value state (docs/agent-protocol.md, "Session state"). Writes are
 * state_set/state_delete lines; reads see the agent's own writes and the clients' (state_changed).
 * `surface:*` keys belong to their domains and are refused: use runCommand and getSurface.
 */
export interface SessionState {
    /** Whether the process is connected to a surfaced daemon; writes before then throw. */
    readonly available: boolean;
    get<V = unknown>(key: string): V | undefined;
    set(key: string, value: unknown): void;
    delete(key: string): void;
    /** Every key known, as a plain object. */
    snapshot(): Record<string, unknown>;
    /** Calls listener for every change a client makes; returns the unsubscribe function. */
    onChange(listener: (change: StateChange) => void): () => void;
}
/** A domain's snapshot as stored, or why not. */
export type SurfaceSnapshot<S = unknown> = {
    ok: true;
    state: S | null;
    rev?: number;
} | {
    ok: false;
    error: {
        code: string;
        message: string;
    };
};
export declare class Host implements SurfaceHost {
    private readonly logf;
    private readonly idPrefix;
    readonly surfaces: Map<string, Surface<any>>;
    /** Set once agent_ready is written. */
    announced: boolean;
    private pending;
    private prefs;
    private listeners;
    private nextID;
    private write;
    constructor(write: WriteLine | null, logf: (message: string) => void, idPrefix?: string);
    log(message: string, err?: unknown): void;
    /** connect sets where lines go (a standalone agent connects when it runs). */
    connect(write: WriteLine): void;
    /** Whether lines can go to the daemon. */
    get connected(): boolean;
    /** send writes one line; it throws when the value does not encode. */
    send(v: unknown): void;
    /** sendAll writes several lines with one write, so that the daemon reads them together. */
    sendAll(values: unknown[]): void;
    /** stop releases every waiting request (the daemon is gone). */
    stop(): void;
    addSurface(s: Surface<any>): void;
    /** announce writes agent_ready, then runs the hydrate hooks. */
    announce(name: string, images: boolean): void;
    /**
     * runHooks runs the hydrate hooks (after agent_ready) or the onTurnEnd
     * hooks (after a turn) as commands of their domains, without waiting.
     */
    runHooks(after: typeof T.agentReady | "agent_end"): void;
    /**
     * handle serves one line of the surface extension; it reports false for
     * any other line.
     */
    handle(line: Line): boolean;
    private dispatch;
    private fetch;
    /** answer sends an answer; one that does not encode (a BigInt, a cycle) becomes dispatch_failed. */
    private answer;
    private stateChanged;
    /** request writes a request line with a fresh id and waits for its answer of answerType. */
    request(answerType: string, fields: Record<string, unknown>, signal?: AbortSignal): Promise<Line>;
    /**
     * runCommand runs action on a domain of the session (native or agent-hosted,
     * this agent's own included) through its domain actor, as a client's command
     * runs. It never rejects: a failure is `{ok:false, error}`. Never await it
     * inside a command of the same domain: it waits behind that command.
     */
    runCommand<D = unknown>(domain: string, action: string, args?: unknown, signal?: AbortSignal): Promise<CommandResult<D>>;
    /** getSurface reads a domain's current snapshot and rev. It never rejects. */
    getSurface<S = unknown>(domain: string, signal?: AbortSignal): Promise<SurfaceSnapshot<S>>;
    /** The session state, as this process knows it. */
    sessionState(): SessionState;
    /** The session's artifacts; their calls end with signal. */
    artifacts(signal?: AbortSignal): Artifacts;
}
export declare function currentHost(): Host | undefined;
export declare function setCurrentHost(h: Host): void;
