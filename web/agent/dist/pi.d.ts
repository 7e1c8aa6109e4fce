import type { CommandResult } from "./protocol";
import type { SurfaceSnapshot } from "./host";
import type { SurfaceOptions } from "./surface";
/** The part of pi's ExtensionAPI this package uses. */
export interface PiExtensionAPI {
    on(event: string, handler: (event: any, ctx: any) => unknown): void;
    registerCommand(name: string, options: {
        description?: string;
        handler: (args: string, ctx: any) => unknown;
    }): void;
}
/** How pi announces itself to the daemon. */
export interface PiAgentOptions {
    /** The agent's name in agent_ready (for the daemon's logs); default "pi". */
    name?: string;
    /** Whether prompts may carry images; default: whether the model pi runs takes them. */
    images?: boolean;
}
/** A surface created in pi. */
export interface SurfaceHandle<S> {
    readonly domain: string;
    /** Runs a command of this domain through the daemon (as runCommand). */
    run<D = unknown>(action: string, args?: unknown, opts?: {
        signal?: AbortSignal;
    }): Promise<CommandResult<D>>;
    /** Reads this domain's snapshot and rev (as getSurface). */
    get(opts?: {
        signal?: AbortSignal;
    }): Promise<SurfaceSnapshot<S>>;
}
/** isPiRPC reports whether argv runs pi in its RPC mode (`--mode rpc`). */
export declare function isPiRPC(argv: readonly string[]): boolean;
/**
 * connectPi makes this pi process a surfaced/1 agent. createSurface calls it;
 * an extension that hosts no surface but runs commands or writes the session
 * state (runCommand, getSessionState) calls it from its factory. Outside
 * `pi --mode rpc` under a surfaced daemon it does nothing.
 */
export declare function connectPi(pi: PiExtensionAPI, opts?: PiAgentOptions): void;
/**
 * createSurface declares a surface domain hosted by this pi extension: its
 * commands run in pi's process when a client (or a tool, through runCommand)
 * runs them; the snapshot lives in the daemon.
 * It also registers pi's command `surface:<domain>`, the domain's probe.
 */
export declare function createSurface<S>(pi: PiExtensionAPI, options: SurfaceOptions<S> & PiAgentOptions): SurfaceHandle<S>;
