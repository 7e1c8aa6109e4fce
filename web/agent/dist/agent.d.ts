import { Host } from "./host";
import type { Artifacts, SessionState, SurfaceSnapshot } from "./host";
import type { WritableLike } from "./lines";
import type { DialogAnswer, DialogRequest, Dialogs, Model } from "./model";
import type { CommandResult, JSONSchema, StateChange } from "./protocol";
import type { SurfaceOptions } from "./surface";
import type { TraceContext } from "./trace";
/** What a tool returns: its text for the model, and details for clients (pi's tool result). */
export interface ToolOutput {
    text: string;
    details?: Record<string, unknown>;
}
/** A function the model may call. */
export interface Tool<A = any> {
    name: string;
    description?: string;
    /** The JSON Schema of the arguments object; default an object without properties. */
    parameters?: JSONSchema;
    /**
     * Runs one call; its text goes back to the model. A throw is an error result
     * with the error's message. ctx.signal aborts with the turn. It may wait on
     * the daemon (runCommand): the agent keeps serving it meanwhile.
     */
    run(args: A, ctx: ToolCtx): string | ToolOutput | Promise<string | ToolOutput>;
}
/** What a running tool call sees. */
export interface ToolCtx {
    readonly toolCallId: string;
    readonly toolName: string;
    readonly signal: AbortSignal;
    readonly agent: Agent;
    /**
     * The daemon's span of the prompt whose turn runs the tool, while it traces (absent otherwise):
     * start the tool's own spans under it to join the daemon's trace (docs/agents-typescript.md, "Tracing").
     */
    readonly trace?: TraceContext;
    /** Reports progress (tool_execution_update): each text replaces the last; send the whole text so far. */
    update(text: string): void;
    /** Puts artifacts (by id) in the result's details.artifacts; editors see them as links. */
    linkArtifact(...ids: string[]): void;
    runCommand<D = unknown>(domain: string, action: string, args?: unknown): Promise<CommandResult<D>>;
    getSurface<S = unknown>(domain: string): Promise<SurfaceSnapshot<S>>;
    readonly state: SessionState;
    readonly artifacts: Artifacts;
    dialog(req: DialogRequest): Promise<DialogAnswer>;
    notify(req: NoticeRequest): void;
}
/** A notice on the user's screen: no answer. */
export type NoticeRequest = {
    method: "notify";
    message: string;
    notifyType?: "info" | "warning" | "error";
} | {
    method: "setStatus";
    statusKey: string;
    statusText?: string;
} | {
    method: "setWidget";
    widgetKey: string;
    widgetLines?: string[];
    widgetPlacement?: string;
} | {
    method: "setTitle";
    title: string;
} | {
    method: "set_editor_text";
    text: string;
};
export interface AgentOptions {
    /** Announced in agent_ready; default "agent". */
    name?: string;
    /** The system prompt. */
    system?: string;
    /** Answers prompts; default modelFromEnv() (an OpenAI-compatible server from SURFACED_LLM_*, else the scripted model). */
    model?: Model;
    /** Model calls per prompt (model → tools → model …); default 8. */
    maxSteps?: number;
    /** Prompts may carry images. */
    images?: boolean;
    /** Reported by get_state; default $SURFACED_SESSION_ID. */
    sessionId?: string;
    surfaces?: SurfaceOptions<any>[];
    tools?: Tool[];
    /** Runs once after agent_ready, without delaying anything. */
    onReady?: (agent: Agent) => unknown;
    /** Runs after each agent_end, without delaying the next run. */
    onAgentEnd?: (agent: Agent) => unknown;
    /** Runs for every change a client makes to the session state. */
    onStateChanged?: (change: StateChange) => void;
    /** Where logs go; default stderr (stdout is the protocol). */
    log?: (message: string) => void;
}
/** defineSurface types a surface's options (the identity): defineAgent({surfaces: [defineSurface({...})]}). */
export declare function defineSurface<S>(options: SurfaceOptions<S>): SurfaceOptions<S>;
/** defineTool types a tool (the identity). */
export declare function defineTool<A = any>(tool: Tool<A>): Tool<A>;
/** defineAgent makes a standalone agent; call run() once. */
export declare function defineAgent(options?: AgentOptions): Agent;
export declare class Agent implements Dialogs {
    readonly host: Host;
    private readonly opts;
    private readonly model;
    private tools;
    private started;
    private history;
    private turn;
    private steering;
    private followUp;
    private nextID;
    private ended;
    private readonly logf;
    constructor(options: AgentOptions);
    /** addSurface declares a domain the agent hosts; before run. */
    addSurface<S>(options: SurfaceOptions<S>): this;
    /** addTool adds a tool the model may call; before run. */
    addTool<A>(tool: Tool<A>): this;
    private log;
    /**
     * run speaks the protocol on input and output (default stdin and stdout):
     * agent_ready first, then every line, until input ends. Then the running
     * turn is aborted, and run resolves once it has ended (5 s at most).
     */
    run(io?: {
        input?: NodeJS.ReadableStream;
        output?: WritableLike;
    }): Promise<void>;
    private shutdown;
    /** later runs a hook on its own, logging what it throws. */
    private later;
    private line;
    private send;
    private respond;
    private fail;
    private stateData;
    private emitQueue;
    private prompt;
    private newTurn;
    private abort;
    private runAgent;
    private runOnce;
    private take;
    private request;
    /** streamAssistant calls the model once and streams its answer as message_start, message_update… message_end. */
    private streamAssistant;
    /** runTools runs the calls one after the other; an abort stops the batch after the running call, as pi does. */
    private runTools;
    private execTool;
    /** dialog asks the user (select, confirm, input, editor) and waits for the answer. */
    dialog(req: DialogRequest, opts?: {
        signal?: AbortSignal;
    }): Promise<DialogAnswer>;
    /** notify sends a notice (notify, setStatus, setWidget, setTitle, set_editor_text). */
    notify(req: NoticeRequest): void;
    runCommand<D = unknown>(domain: string, action: string, args?: unknown, opts?: {
        signal?: AbortSignal;
    }): Promise<CommandResult<D>>;
    getSurface<S = unknown>(domain: string, opts?: {
        signal?: AbortSignal;
    }): Promise<SurfaceSnapshot<S>>;
    get state(): SessionState;
    get artifacts(): Artifacts;
}
