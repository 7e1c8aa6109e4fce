// defineAgent: a standalone surfaced/1 agent in Node, what agentkit is in Go. It speaks both
// halves of the protocol on stdin and stdout: pi's RPC mode (prompt, abort, get_state,
// get_messages, get_commands, steer, follow_up, dialogs, the events of a turn) and the surface
// extension (agent_ready, dispatches, data pages, commands, session state, artifacts).
import { Host, setCurrentHost } from "./host";
import type { Artifacts, SessionState, SurfaceSnapshot } from "./host";
import { LineSplitter, lineWriter } from "./lines";
import type { WritableLike } from "./lines";
import { modelFromEnv } from "./model";
import type { DialogAnswer, DialogRequest, Dialogs, ImageContent, Model, ModelMessage, ModelToolCall, StopReason, ToolSpec } from "./model";
import { Env, isObject, T } from "./protocol";
import type { CommandResult, JSONSchema, Line, StateChange } from "./protocol";
import { Surface } from "./surface";
import type { SurfaceOptions } from "./surface";
import { parseTraceparent } from "./trace";
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
export type NoticeRequest =
  | { method: "notify"; message: string; notifyType?: "info" | "warning" | "error" }
  | { method: "setStatus"; statusKey: string; statusText?: string }
  | { method: "setWidget"; widgetKey: string; widgetLines?: string[]; widgetPlacement?: string }
  | { method: "setTitle"; title: string }
  | { method: "set_editor_text"; text: string };

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
export function defineSurface<S>(options: SurfaceOptions<S>): SurfaceOptions<S> {
  return options;
}

/** defineTool types a tool (the identity). */
export function defineTool<A = any>(tool: Tool<A>): Tool<A> {
  return tool;
}

/** defineAgent makes a standalone agent; call run() once. */
export function defineAgent(options: AgentOptions = {}): Agent {
  return new Agent(options);
}

type Block = { type: "text"; text: string } | { type: "thinking"; thinking: string } | { type: "toolCall"; id: string; name: string; arguments: unknown };

interface Message {
  role: "user" | "assistant" | "toolResult";
  content: any[];
  timestamp: number;
  stopReason?: StopReason;
  errorMessage?: string;
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
  details?: Record<string, unknown>;
}

interface UserInput {
  text: string;
  images?: ImageContent[];
  attachments?: { id: string; mediaType: string; name?: string }[];
}

interface Turn {
  ac: AbortController;
  done: Promise<void>;
  finish(): void;
  /** The abort commands to answer once the run has ended (their ids). */
  aborts: (string | undefined)[];
  /** The daemon's span of the prompt that started it, while the daemon traces. */
  trace?: TraceContext;
}

const BUSY = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.";
const ABORTED = "Request was aborted";

/** storedArguments keeps a tool call's arguments valid JSON: parsed when they parse, else the text. */
function storedArguments(text: string): unknown {
  if (text === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function argumentsText(a: unknown): string {
  return typeof a === "string" ? a : JSON.stringify(a ?? {});
}

function textOf(content: any[]): string {
  return content
    .filter((b) => b?.type === "text")
    .map((b) => b.text)
    .join("");
}

export class Agent implements Dialogs {
  readonly host: Host;
  private readonly opts: AgentOptions;
  private readonly model: Model;
  private tools = new Map<string, Tool>();
  private started = false;
  private history: Message[] = [];
  private turn: Turn | null = null;
  private steering: UserInput[] = [];
  private followUp: UserInput[] = [];
  private nextID = 0;
  private ended = false;
  private readonly logf: (m: string) => void;

  constructor(options: AgentOptions) {
    this.opts = options;
    this.model = options.model ?? modelFromEnv();
    this.logf = options.log ?? ((m) => process.stderr.write(m + "\n"));
    this.host = new Host(null, this.logf, "ag");
    for (const s of options.surfaces ?? []) this.addSurface(s);
    for (const t of options.tools ?? []) this.addTool(t);
  }

  /** addSurface declares a domain the agent hosts; before run. */
  addSurface<S>(options: SurfaceOptions<S>): this {
    if (this.started) throw new Error("@surfaced/agent: addSurface after run");
    this.host.addSurface(new Surface(options));
    return this;
  }

  /** addTool adds a tool the model may call; before run. */
  addTool<A>(tool: Tool<A>): this {
    if (this.started) throw new Error("@surfaced/agent: addTool after run");
    if (!isObject(tool) || typeof tool.name !== "string" || !tool.name || typeof tool.run !== "function") {
      throw new TypeError("@surfaced/agent: a tool needs a name and a run function");
    }
    if (this.tools.has(tool.name)) throw new TypeError(`@surfaced/agent: the tool ${tool.name} is added twice`);
    this.tools.set(tool.name, tool);
    return this;
  }

  private log(m: string, err?: unknown): void {
    this.host.log(m, err);
  }

  /**
   * run speaks the protocol on input and output (default stdin and stdout):
   * agent_ready first, then every line, until input ends. Then the running
   * turn is aborted, and run resolves once it has ended (5 s at most).
   */
  run(io: { input?: NodeJS.ReadableStream; output?: WritableLike } = {}): Promise<void> {
    if (this.started) return Promise.reject(new Error("@surfaced/agent: run called twice"));
    this.started = true;
    const input: NodeJS.ReadableStream = io.input ?? process.stdin;
    const output = io.output ?? process.stdout;
    this.host.connect(lineWriter(output));
    setCurrentHost(this.host);
    if (this.opts.onStateChanged) this.host.sessionState().onChange(this.opts.onStateChanged);
    this.host.announce(this.opts.name ?? "agent", !!this.opts.images);
    this.later(this.opts.onReady, "onReady");
    return new Promise((resolve) => {
      const split = new LineSplitter((buf) => this.line(buf));
      input.on("data", (chunk: Buffer | string) => split.push(chunk));
      input.on("end", () => {
        split.end();
        void this.shutdown().then(resolve);
      });
      input.on("error", (err: unknown) => {
        this.log("reading the daemon's lines failed", err);
        void this.shutdown().then(resolve);
      });
    });
  }

  private async shutdown(): Promise<void> {
    this.ended = true;
    this.steering = [];
    this.followUp = [];
    const t = this.turn;
    if (t) {
      t.ac.abort();
      await Promise.race([t.done, new Promise((r) => setTimeout(r, 5000).unref())]);
    }
    this.host.stop();
  }

  /** later runs a hook on its own, logging what it throws. */
  private later(f: ((a: Agent) => unknown) | undefined, what: string): void {
    if (!f) return;
    setImmediate(() => {
      Promise.resolve()
        .then(() => f(this))
        .catch((err) => this.log(what + " failed", err));
    });
  }

  private line(buf: Buffer): void {
    let msg: unknown;
    try {
      msg = JSON.parse(buf.toString("utf8"));
    } catch (err) {
      this.log(`a line that is not JSON dropped (${(err as Error).message}): ${buf.toString("utf8", 0, 200)}`);
      return;
    }
    if (!isObject(msg) || typeof msg.type !== "string" || !msg.type) {
      this.log(`a line without a string "type" dropped: ${buf.toString("utf8", 0, 200)}`);
      return;
    }
    const line = msg as Line;
    if (this.ended) return;
    if (this.host.handle(line)) return;
    const id = typeof line.id === "string" ? line.id : undefined;
    switch (line.type) {
      case "prompt":
      case "steer":
      case "follow_up":
        this.prompt(line, id);
        return;
      case "abort":
        this.abort(id);
        return;
      case "get_state":
        this.respond(id, line.type, this.stateData());
        return;
      case "get_messages":
        this.respond(id, line.type, { messages: this.history });
        return;
      case "get_commands":
        this.respond(id, line.type, {
          commands: [...this.host.surfaces.keys()].map((d) => ({ name: "surface:" + d, description: "agent-authoritative-surface probe: " + d, source: "extension" })),
        });
        return;
      default:
        // pi answers what it does not know with a failure; the id is kept so a waiting caller is released.
        this.fail(id, line.type, "Unknown command: " + line.type);
    }
  }

  private send(v: unknown): void {
    try {
      this.host.send(v);
    } catch (err) {
      this.log("a line could not be sent", err);
    }
  }

  private respond(id: string | undefined, command: string, data?: unknown): void {
    // "type" and "id" first: the daemon reads them from the first bytes of a line too long to keep.
    const r: Record<string, unknown> = { type: T.response };
    if (id !== undefined) r.id = id;
    Object.assign(r, { command, success: true });
    if (data !== undefined) r.data = data;
    this.send(r);
  }

  private fail(id: string | undefined, command: string, error: string): void {
    const r: Record<string, unknown> = { type: T.response };
    if (id !== undefined) r.id = id;
    Object.assign(r, { command, success: false, error });
    this.send(r);
  }

  private stateData(): Record<string, unknown> {
    return {
      model: this.model.info ?? { id: "custom", provider: "custom" },
      thinkingLevel: "off",
      isStreaming: this.turn !== null,
      isCompacting: false,
      steeringMode: "all",
      followUpMode: "all",
      sessionId: this.opts.sessionId ?? process.env[Env.sessionId] ?? "",
      sessionName: this.opts.name,
      autoCompactionEnabled: false,
      messageCount: this.history.length,
      pendingMessageCount: this.steering.length + this.followUp.length,
    };
  }

  private emitQueue(): void {
    this.send({ type: "queue_update", steering: this.steering.map((i) => i.text), followUp: this.followUp.map((i) => i.text) });
  }

  private prompt(line: Line, id: string | undefined): void {
    const text = typeof line.message === "string" ? line.message : "";
    const probe = /^\s*\/surface:(.+?)\s*$/.exec(text);
    if (line.type === "prompt" && probe && this.host.surfaces.has(probe[1])) {
      // pi runs extension commands at once, without a turn; the probes do nothing.
      this.respond(id, line.type);
      return;
    }
    const input: UserInput = { text };
    if (Array.isArray(line.images)) input.images = line.images as ImageContent[];
    if (Array.isArray(line.attachments)) input.attachments = line.attachments as UserInput["attachments"];
    if (this.turn) {
      const behavior = line.type === "steer" ? "steer" : line.type === "follow_up" ? "followUp" : line.streamingBehavior;
      if (behavior === "steer") this.steering.push(input);
      else if (behavior === "followUp" || behavior === "follow_up") this.followUp.push(input);
      else {
        this.fail(id, line.type, BUSY);
        return;
      }
      this.emitQueue();
      this.respond(id, line.type);
      return;
    }
    const t = this.newTurn();
    t.trace = parseTraceparent(line.traceparent);
    this.turn = t;
    this.respond(id, line.type);
    // agent_start goes out before the next line is read: runAgent is synchronous up to its first await.
    void this.runAgent(t, [input]);
  }

  private newTurn(): Turn {
    let finish!: () => void;
    const done = new Promise<void>((r) => (finish = r));
    return { ac: new AbortController(), done, finish, aborts: [] };
  }

  private abort(id: string | undefined): void {
    const t = this.turn;
    if (this.steering.length + this.followUp.length > 0) {
      this.steering = [];
      this.followUp = [];
      this.emitQueue();
    }
    if (!t) {
      this.respond(id, "abort");
      return;
    }
    t.ac.abort();
    // pi answers abort once the run has stopped: with the run's agent_end.
    t.aborts.push(id);
  }

  private async runAgent(t: Turn, inputs: UserInput[]): Promise<void> {
    for (;;) {
      let msgs: Message[];
      try {
        msgs = await this.runOnce(t, inputs);
      } catch (err) {
        this.log("the run failed", err);
        msgs = [];
      }
      const queued = this.ended ? [] : [...this.steering, ...this.followUp];
      this.steering = [];
      this.followUp = [];
      const next = queued.length ? this.newTurn() : null;
      if (next) this.emitQueue();
      this.turn = next;
      // agent_end and the answers to the aborts of the run go out in one write.
      const lines: unknown[] = [{ type: "agent_end", messages: msgs }];
      for (const id of t.aborts) lines.push(id === undefined ? { type: T.response, command: "abort", success: true } : { type: T.response, id, command: "abort", success: true });
      try {
        this.host.sendAll(lines);
      } catch (err) {
        this.log("agent_end could not be sent", err);
      }
      this.later(this.opts.onAgentEnd, "onAgentEnd");
      if (!this.ended) this.host.runHooks("agent_end");
      t.finish();
      if (!next) return;
      t = next;
      inputs = queued;
    }
  }

  private async runOnce(t: Turn, inputs: UserInput[]): Promise<Message[]> {
    const run: Message[] = [];
    const add = (m: Message) => {
      this.history.push(m);
      run.push(m);
    };
    const addInputs = (ins: UserInput[]) => {
      for (const i of ins) {
        const m = userMessage(i);
        this.send({ type: "message_start", message: m });
        this.send({ type: "message_end", message: m });
        add(m);
      }
    };
    this.send({ type: "agent_start" });
    this.send({ type: "turn_start" });
    addInputs(inputs);
    const maxSteps = this.opts.maxSteps ?? 8;
    let steps = 0;
    let first = true;
    let pending = this.take("steering");
    for (;;) {
      let more = true;
      while (more || pending.length) {
        if (!first) this.send({ type: "turn_start" });
        first = false;
        addInputs(pending);
        pending = [];
        let msg: Message;
        if (steps >= maxSteps) {
          msg = assistant([], "error", `@surfaced/agent: stopped after ${maxSteps} model calls in one prompt (maxSteps)`);
          this.send({ type: "message_start", message: msg });
          this.send({ type: "message_end", message: msg });
        } else {
          steps++;
          msg = await this.streamAssistant(t.ac.signal);
        }
        add(msg);
        if (msg.stopReason === "error" || msg.stopReason === "aborted") {
          this.send({ type: "turn_end", message: msg, toolResults: [] });
          return run;
        }
        const calls = msg.content.filter((b: Block) => b.type === "toolCall") as Extract<Block, { type: "toolCall" }>[];
        let results: Message[] = [];
        more = false;
        if (calls.length) {
          results = await this.runTools(t.ac.signal, calls, msg.stopReason === "length");
          for (const r of results) add(r);
          more = true;
        }
        this.send({ type: "turn_end", message: msg, toolResults: results });
        pending = this.take("steering");
      }
      pending = this.take("followUp");
      if (!pending.length) return run;
      steps = 0;
    }
  }

  private take(which: "steering" | "followUp"): UserInput[] {
    const q = this[which];
    this[which] = [];
    if (q.length) this.emitQueue();
    return q;
  }

  private request(signal: AbortSignal) {
    const tools: ToolSpec[] = [...this.tools.values()].map((t) => ({
      name: t.name,
      description: t.description,
      parameters: t.parameters ?? { type: "object", properties: {} },
    }));
    return { system: this.opts.system ?? "", messages: modelMessages(this.history), tools, signal, ui: this as Dialogs };
  }

  /** streamAssistant calls the model once and streams its answer as message_start, message_update… message_end. */
  private async streamAssistant(signal: AbortSignal): Promise<Message> {
    const blocks: Block[] = [];
    const args = new Map<number, string>(); // content index → argument text so far
    const toolIndex = new Map<number, number>(); // model's tool call index → content index
    let open = -1;
    const partial = (): Message => {
      const content = blocks.map((b, i) => (b.type === "toolCall" && args.has(i) ? { ...b, arguments: storedArguments(args.get(i)!) } : { ...b }));
      return { role: "assistant", content, timestamp: Date.now() };
    };
    const update = (type: string, contentIndex: number, extra: Record<string, unknown> = {}) => {
      this.send({ type: "message_update", message: partial(), assistantMessageEvent: { type, contentIndex, ...extra } });
    };
    const closeOpen = () => {
      if (open < 0) return;
      const ci = open;
      open = -1;
      const b = blocks[ci];
      if (b.type === "text") update("text_end", ci, { content: b.text });
      else if (b.type === "thinking") update("thinking_end", ci, { content: b.thinking });
      else update("toolcall_end", ci, { toolCall: { ...b, arguments: storedArguments(args.get(ci) ?? "") } });
    };
    const openBlock = (type: "text" | "thinking", start: string) => {
      if (open >= 0 && blocks[open].type === type) return open;
      closeOpen();
      blocks.push(type === "text" ? { type, text: "" } : { type, thinking: "" });
      open = blocks.length - 1;
      update(start, open);
      return open;
    };
    const toolStart = (index: number, id?: string, name?: string) => {
      const known = toolIndex.get(index);
      if (known !== undefined) {
        const b = blocks[known] as Extract<Block, { type: "toolCall" }>;
        if (!b.id && id) b.id = id;
        if (!b.name && name) b.name = name;
        return known;
      }
      closeOpen();
      blocks.push({ type: "toolCall", id: id || `call-${++this.nextID}`, name: name ?? "", arguments: {} });
      const ci = blocks.length - 1;
      open = ci;
      toolIndex.set(index, ci);
      args.set(ci, "");
      update("toolcall_start", ci);
      return ci;
    };

    this.send({ type: "message_start", message: partial() });
    let reason: string | undefined;
    let error: string | undefined;
    if (signal.aborted) {
      const msg = assistant([], "aborted", ABORTED);
      this.send({ type: "message_end", message: msg });
      return msg;
    }
    try {
      for await (const d of this.model.stream(this.request(signal))) {
        if (signal.aborted) break;
        if (d.type === "text" && d.text) {
          const ci = openBlock("text", "text_start");
          (blocks[ci] as { text: string }).text += d.text;
          update("text_delta", ci, { delta: d.text });
        } else if (d.type === "thinking" && d.text) {
          const ci = openBlock("thinking", "thinking_start");
          (blocks[ci] as { thinking: string }).thinking += d.text;
          update("thinking_delta", ci, { delta: d.text });
        } else if (d.type === "toolCall") {
          toolStart(d.index, d.id, d.name);
        } else if (d.type === "toolCallArgs") {
          const ci = toolStart(d.index);
          if (d.text) {
            args.set(ci, (args.get(ci) ?? "") + d.text);
            update("toolcall_delta", ci, { delta: d.text });
          }
        } else if (d.type === "finish") {
          reason = d.reason;
          break;
        }
      }
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    let stop: StopReason;
    let errMsg: string | undefined;
    if (signal.aborted) {
      stop = "aborted";
      errMsg = ABORTED;
    } else if (error !== undefined) {
      stop = "error";
      errMsg = error;
    } else {
      closeOpen(); // pi closes the open block only on a clean finish
      stop = reason === "length" ? "length" : toolIndex.size ? "toolUse" : "stop";
    }
    const msg = assistant(partial().content, stop, errMsg);
    this.send({ type: "message_end", message: msg });
    return msg;
  }

  /** runTools runs the calls one after the other; an abort stops the batch after the running call, as pi does. */
  private async runTools(signal: AbortSignal, calls: Extract<Block, { type: "toolCall" }>[], truncated: boolean): Promise<Message[]> {
    const results: Message[] = [];
    for (const call of calls) {
      this.send({ type: "tool_execution_start", toolCallId: call.id, toolName: call.name, args: call.arguments });
      let text: string;
      let isError = false;
      let details: Record<string, unknown> | undefined;
      if (truncated) {
        text = `Tool call ${JSON.stringify(call.name)} was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments.`;
        isError = true;
      } else {
        ({ text, isError, details } = await this.execTool(signal, call));
      }
      const result: Record<string, unknown> = { content: [{ type: "text", text }] };
      if (details) result.details = details;
      this.send({ type: "tool_execution_end", toolCallId: call.id, toolName: call.name, result, isError });
      const msg: Message = { role: "toolResult", toolCallId: call.id, toolName: call.name, content: [{ type: "text", text }], isError, timestamp: Date.now() };
      if (details) msg.details = details;
      this.send({ type: "message_start", message: msg });
      this.send({ type: "message_end", message: msg });
      results.push(msg);
      if (signal.aborted) break;
    }
    return results;
  }

  private async execTool(signal: AbortSignal, call: Extract<Block, { type: "toolCall" }>): Promise<{ text: string; isError: boolean; details?: Record<string, unknown> }> {
    const tool = this.tools.get(call.name);
    if (!tool) return { text: `Tool ${call.name} not found`, isError: true };
    if (!isObject(call.arguments)) {
      return { text: `Invalid arguments for tool ${call.name}: not a JSON object: ${argumentsText(call.arguments)}`, isError: true };
    }
    if (signal.aborted) return { text: "Operation aborted", isError: true };
    const links: string[] = [];
    const ctx: ToolCtx = {
      toolCallId: call.id,
      toolName: call.name,
      signal,
      agent: this,
      trace: this.turn?.trace,
      update: (text) => this.send({ type: "tool_execution_update", toolCallId: call.id, toolName: call.name, args: call.arguments, partialResult: { content: [{ type: "text", text }] } }),
      linkArtifact: (...ids) => links.push(...ids),
      runCommand: (domain, action, args) => this.host.runCommand(domain, action, args, signal),
      getSurface: (domain) => this.host.getSurface(domain, signal),
      state: this.host.sessionState(),
      artifacts: this.host.artifacts(signal),
      dialog: (req) => this.dialog(req, { signal }),
      notify: (req) => this.notify(req),
    };
    let details: Record<string, unknown> | undefined;
    try {
      const out = await tool.run(call.arguments, ctx);
      let text: string;
      if (typeof out === "string") text = out;
      else if (isObject(out) && typeof out.text === "string") {
        text = out.text;
        if (isObject(out.details)) details = { ...out.details };
      } else text = JSON.stringify(out ?? null);
      if (links.length) details = { ...details, artifacts: links };
      return details ? { text, isError: false, details } : { text, isError: false };
    } catch (err) {
      if (signal.aborted) return { text: "Operation aborted", isError: true };
      const text = err instanceof Error ? err.message : String(err);
      return links.length ? { text, isError: true, details: { artifacts: links } } : { text, isError: true };
    }
  }

  /** dialog asks the user (select, confirm, input, editor) and waits for the answer. */
  async dialog(req: DialogRequest, opts: { signal?: AbortSignal } = {}): Promise<DialogAnswer> {
    if (!["select", "confirm", "input", "editor"].includes(req.method)) {
      throw new TypeError(`@surfaced/agent: ${JSON.stringify(req.method)} is not a dialog method (select, confirm, input, editor); use notify`);
    }
    let signal = opts.signal;
    if (req.timeout && req.timeout > 0) {
      const t = AbortSignal.timeout(req.timeout);
      signal = signal ? AbortSignal.any([signal, t]) : t;
    }
    try {
      const ans = await this.host.request(T.extensionUIResponse, { type: T.extensionUIRequest, ...req }, signal);
      const out: DialogAnswer = {};
      if (ans.cancelled === true) out.cancelled = true;
      if (typeof ans.value === "string") out.value = ans.value;
      if (typeof ans.confirmed === "boolean") out.confirmed = ans.confirmed;
      return out;
    } catch (err) {
      // A withdrawn or timed-out dialog resolves as cancelled, as in pi.
      if (signal?.aborted) return { cancelled: true };
      throw err;
    }
  }

  /** notify sends a notice (notify, setStatus, setWidget, setTitle, set_editor_text). */
  notify(req: NoticeRequest): void {
    this.send({ type: T.extensionUIRequest, id: `ui-${++this.nextID}`, ...req });
  }

  runCommand<D = unknown>(domain: string, action: string, args?: unknown, opts: { signal?: AbortSignal } = {}): Promise<CommandResult<D>> {
    return this.host.runCommand<D>(domain, action, args, opts.signal);
  }

  getSurface<S = unknown>(domain: string, opts: { signal?: AbortSignal } = {}): Promise<SurfaceSnapshot<S>> {
    return this.host.getSurface<S>(domain, opts.signal);
  }

  get state(): SessionState {
    return this.host.sessionState();
  }

  get artifacts(): Artifacts {
    return this.host.artifacts();
  }
}

function assistant(content: any[], stopReason: StopReason, errorMessage?: string): Message {
  const m: Message = { role: "assistant", content, stopReason, timestamp: Date.now() };
  if (errorMessage) m.errorMessage = errorMessage;
  return m;
}

function userMessage(i: UserInput): Message {
  const content: any[] = [{ type: "text", text: i.text }];
  if (i.attachments?.length) {
    content.push({ type: "text", text: "Attached artifacts:" + i.attachments.map((a) => `\n- ${a.id} (${a.mediaType}${a.name ? ", " + a.name : ""})`).join("") });
  }
  for (const img of i.images ?? []) content.push({ type: "image", data: img.data, mimeType: img.mimeType });
  return { role: "user", content, timestamp: Date.now() };
}

/** modelMessages turns the pi-shaped history into what a model sees. */
function modelMessages(history: Message[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  let open: ModelToolCall[] = [];
  const closeOpen = () => {
    for (const c of open) out.push({ role: "toolResult", toolCallId: c.id, toolName: c.name, text: "No result provided", isError: true });
    open = [];
  };
  for (const m of history) {
    if (m.role === "user") {
      closeOpen();
      const images = m.content.filter((b) => b.type === "image").map((b) => ({ type: "image" as const, data: b.data, mimeType: b.mimeType }));
      out.push(images.length ? { role: "user", text: textOf(m.content), images } : { role: "user", text: textOf(m.content) });
    } else if (m.role === "assistant") {
      closeOpen();
      if (m.stopReason === "error" || m.stopReason === "aborted") continue;
      const toolCalls = m.content.filter((b) => b.type === "toolCall").map((b) => ({ id: b.id, name: b.name, arguments: argumentsText(b.arguments) }));
      const text = textOf(m.content);
      if (!text && !toolCalls.length) continue;
      out.push(toolCalls.length ? { role: "assistant", text, toolCalls } : { role: "assistant", text });
      open = [...toolCalls];
    } else {
      const i = open.findIndex((c) => c.id === m.toolCallId);
      if (i < 0) continue;
      open.splice(i, 1);
      out.push({ role: "toolResult", toolCallId: m.toolCallId, toolName: m.toolName, text: textOf(m.content), isError: !!m.isError });
    }
  }
  closeOpen();
  return out;
}
