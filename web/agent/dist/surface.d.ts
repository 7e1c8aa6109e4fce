import type { Artifacts } from "./host";
import type { CommandResult, ErrorBody, JSONSchema, Line, SurfaceDecl } from "./protocol";
import type { TraceContext } from "./trace";
/**
 * SurfaceCommandError is a command failure with a stable code: thrown from a
 * command (or a data handler), the caller gets `{ok:false, error:{code, message}}`
 * with this code. Any other throw is `dispatch_failed`.
 */
export declare class SurfaceCommandError extends Error {
    readonly code: string;
    constructor(code: string, message: string);
}
/** What a command sees: the state it runs against and the means to change it. */
export interface SurfaceCtx<S> {
    readonly domain: string;
    readonly action: string;
    /** The rev of the state the command runs against. */
    readonly rev: number;
    /** When the caller stops waiting (absent: no deadline); an answer after it is ignored. */
    readonly deadline?: Date;
    /** Aborts at the deadline: hand it to fetch() and the like. */
    readonly signal: AbortSignal;
    /** The session's artifacts; their calls end with signal. Bytes go by path, never in a snapshot. */
    readonly artifacts: Artifacts;
    /**
     * The daemon's span of this dispatch, while it traces (absent otherwise): start the command's own
     * spans under it to join the daemon's trace (docs/agents-typescript.md, "Tracing").
     */
    readonly trace?: TraceContext;
    /** The current state, changes made by setState included. */
    get(): S;
    /** Replaces the state with next(current) (or next); the domain commits it at the next rev. */
    setState(next: S | ((current: S) => S)): void;
}
/** A command: its result becomes `{ok:true, data}`; see SurfaceOptions for failures. */
export type CommandHandler<S, A = any> = (args: A, ctx: SurfaceCtx<S>) => unknown;
/** A command with the JSON Schema of its args (the schema's `description` describes the command). */
export interface CommandSpec<S, A = any> {
    run: CommandHandler<S, A>;
    schema?: JSONSchema;
}
/** A data page request: GET /api/sessions/{id}/surfaces/{domain}/data/{path}?{query}. */
export interface DataRequest {
    domain: string;
    /** The page's path below data/, without a leading slash ("rows/2"). */
    path: string;
    /** The first segment of path: the name the handler was found by ("rows"). */
    name: string;
    /** The rest of path after name ("2"), or "". */
    rest: string;
    query: URLSearchParams;
    rawQuery: string;
    /** The domain's rev the page is asked at. */
    rev: number;
}
/** What a data handler sees besides the request. */
export interface DataCtx {
    readonly signal: AbortSignal;
    readonly artifacts: Artifacts;
}
/**
 * A data page: JSON `data` (at most 1 MiB encoded) or the id of an `artifact`
 * holding a larger one, exactly one of them. `etag` lets a client revalidate
 * (the daemon answers 304 itself until the rev changes); `maxAge` (seconds) is
 * how long a client may keep the page.
 */
export interface Page {
    data?: unknown;
    artifact?: string;
    etag?: string;
    maxAge?: number;
}
/** Serves the pages of one name; it must only read. A SurfaceCommandError keeps its code (not_found: 404). */
export type DataHandler = (req: DataRequest, ctx: DataCtx) => Page | Promise<Page>;
/** A hook: it may change the state through ctx.setState, or return the new state. */
export type SurfaceHook<S> = (ctx: SurfaceCtx<S>) => S | void | undefined | Promise<S | void | undefined>;
/** The action a `hydrate` hook runs as, and the one an `onTurnEnd` hook runs as. */
export declare const HYDRATE_ACTION = "hydrate";
export declare const TURN_END_ACTION = "turn_end";
export interface SurfaceOptions<S> {
    /** The domain's name ("demo"); its snapshot key is `surface:<domain>`. */
    domain: string;
    /**
     * The snapshot when the session has none stored: a JSON value, or a function
     * that makes one. Each dispatch gets a copy of its own.
     */
    initialState: S | (() => S);
    /**
     * The commands by action name. A command's return value v is `{ok:true, data:v}`
     * (undefined: no data); a returned `{ok:false, error:{code, message}}` passes
     * through; a thrown SurfaceCommandError keeps its code; any other throw is
     * `dispatch_failed`. A command that fails changes no state.
     */
    commands: Record<string, CommandHandler<S> | CommandSpec<S>>;
    /** Per action, the JSON Schema of its args (also settable per command as CommandSpec.schema). */
    schemas?: Record<string, JSONSchema>;
    /** The data plane: page handlers by name, the first segment of a page's path. */
    data?: Record<string, DataHandler>;
    /**
     * Runs each time the agent process starts, once it is connected (after a
     * restart too), as the command `hydrate` of the domain: the place to
     * rebuild the snapshot from the agent's own data. Clients may run it too.
     */
    hydrate?: SurfaceHook<S>;
    /** Runs after each turn of the agent (agent_end), as the command `turn_end` of the domain. */
    onTurnEnd?: SurfaceHook<S>;
}
/** What the surface needs of the connection to the daemon. */
export interface SurfaceHost {
    artifacts(signal?: AbortSignal): Artifacts;
    log(message: string, err?: unknown): void;
}
/**
 * errorOf turns a throw into a failure. A SurfaceCommandError is recognized by
 * its name and code, not by instanceof: pi loads each extension with a
 * module cache of its own, so the class may come from another copy of this
 * package.
 */
export declare function errorOf(err: unknown): {
    ok: false;
    error: ErrorBody;
};
/** normalize turns a command's return value into a result, as the protocol says. */
export declare function normalize(v: unknown): CommandResult;
/** Surface is one declared domain: its declaration, its commands, its pages. */
export declare class Surface<S = unknown> {
    readonly domain: string;
    private opts;
    private handlers;
    private schemas;
    private initialJSON;
    constructor(opts: SurfaceOptions<S>);
    /** Whether the surface has a hook to run as action (HYDRATE_ACTION, TURN_END_ACTION). */
    hasHook(action: string): boolean;
    /** The domain as agent_ready declares it. */
    decl(): SurfaceDecl;
    /** A fresh copy of the initial state. */
    initial(): S;
    /**
     * dispatch runs one command and normalizes its outcome. It never throws.
     * The state is present when the command succeeded and called setState.
     */
    dispatch(msg: Line, host: SurfaceHost): Promise<{
        result: CommandResult;
        state?: unknown;
    }>;
    /** fetch serves one data page and returns the surface_fetch_result line. It never throws. */
    fetch(msg: Line, host: SurfaceHost): Promise<Record<string, unknown>>;
}
