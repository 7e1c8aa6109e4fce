// Models for standalone agents: a streaming interface, an OpenAI-compatible chat-completions
// client, and a deterministic scripted model for demos and tests (the same script as agentkit's).
import { Env } from "./protocol";
import type { JSONSchema } from "./protocol";

/** An image of a prompt, as pi's RPC mode carries it. */
export interface ImageContent {
  type: "image";
  data: string;
  mimeType: string;
}

/** Why an assistant message ended, as pi spells it. A model yields stop, length or toolUse. */
export type StopReason = "stop" | "length" | "toolUse" | "error" | "aborted";

/** One streamed piece of a model's answer. */
export type ModelDelta =
  | { type: "text"; text: string }
  | { type: "thinking"; text: string }
  /** Starts tool call number index. */
  | { type: "toolCall"; index: number; id?: string; name?: string }
  /** A fragment of tool call index's JSON arguments. */
  | { type: "toolCallArgs"; index: number; text: string }
  | { type: "finish"; reason: "stop" | "length" | "toolUse" };

/** A tool call as the model wrote it; arguments is JSON text (maybe malformed). */
export interface ModelToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * One entry of the conversation as a model sees it. Failed and aborted
 * assistant messages are left out, and a tool call without a result gets a
 * synthetic error result, so every history a model receives is well formed.
 */
export interface ModelMessage {
  role: "user" | "assistant" | "toolResult";
  text: string;
  images?: ImageContent[];
  toolCalls?: ModelToolCall[];
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
}

/** A tool as the model sees it. */
export interface ToolSpec {
  name: string;
  description?: string;
  parameters: JSONSchema;
}

/** A dialog on the user's screen (pi's extension UI). */
export interface DialogRequest {
  method: "select" | "confirm" | "input" | "editor";
  title: string;
  message?: string;
  options?: string[];
  placeholder?: string;
  prefill?: string;
  /** Milliseconds; when it passes the answer is cancelled (as in pi). */
  timeout?: number;
}

export interface DialogAnswer {
  value?: string;
  confirmed?: boolean;
  cancelled?: boolean;
}

export interface Dialogs {
  dialog(req: DialogRequest, opts?: { signal?: AbortSignal }): Promise<DialogAnswer>;
}

/** One model call. */
export interface ModelRequest {
  system: string;
  messages: ModelMessage[];
  tools: ToolSpec[];
  /** Aborts when the turn is aborted: stop promptly. */
  signal: AbortSignal;
  /** Opens dialogs; real models never need it (the scripted model does). */
  ui?: Dialogs;
}

/** What a model reports of itself (get_state's model). */
export interface ModelInfo {
  id: string;
  provider: string;
  baseUrl?: string;
}

/**
 * A streaming chat model. stream yields deltas in order and ends after a
 * finish delta, or throws when the call fails. A stream that ends without a
 * finish is "stop", or "toolUse" when it made tool calls.
 */
export interface Model {
  readonly info?: ModelInfo;
  stream(req: ModelRequest): AsyncIterable<ModelDelta>;
}

/** The first words of every scripted reply, so nobody mistakes it for a language model. */
export const SCRIPTED_PREFIX = "(scripted model — no LLM configured) ";

function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export interface ScriptedModelOptions {
  /** Pause between the deltas of ordinary replies (ms); default none. */
  pace?: number;
  /** Pause between the deltas of a "slow" reply (ms); default 50. */
  slowPace?: number;
  /** Ends the process for "crash"; default process.exit. */
  exit?: (code: number) => void;
}

/**
 * scriptedModel is a deterministic stand-in for a language model: it reacts to
 * words of the last user message (a word that starts with the trigger counts):
 * think (reasoning first), crash (exit 3), fail, long (length), slow (40 deltas
 * 50 ms apart, abortable), ask (a confirm dialog), choose (a select dialog),
 * "echo: <text>" and increment (call those tools when the agent has them);
 * anything else gets a friendly reply. After a tool call it reports the
 * result: "The increment tool answered: count = 3."
 */
export function scriptedModel(opts: ScriptedModelOptions = {}): Model {
  return {
    info: { id: "scripted", provider: "@surfaced/agent" },
    stream: (req) => scripted(req, opts),
  };
}

function triggerWords(text: string): (trigger: string) => boolean {
  const words = text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  return (trigger) => words.some((w) => w.startsWith(trigger));
}

async function* say(text: string, pace: number, signal: AbortSignal): AsyncGenerator<ModelDelta> {
  const parts = text.split(/(?<= )/);
  for (let i = 0; i < parts.length; i += 3) {
    if (i > 0) await pause(pace, signal);
    yield { type: "text", text: parts.slice(i, i + 3).join("") };
  }
}

async function* callTool(id: string, name: string, args: unknown): AsyncGenerator<ModelDelta> {
  const text = JSON.stringify(args);
  const cut = Math.floor(text.length / 2);
  yield { type: "toolCall", index: 0, id, name };
  yield { type: "toolCallArgs", index: 0, text: text.slice(0, cut) };
  yield { type: "toolCallArgs", index: 0, text: text.slice(cut) };
  yield { type: "finish", reason: "toolUse" };
}

async function* scripted(req: ModelRequest, opts: ScriptedModelOptions): AsyncGenerator<ModelDelta> {
  const pace = opts.pace ?? 0;
  const { signal } = req;
  const last = req.messages[req.messages.length - 1];
  if (!last) {
    yield* say(SCRIPTED_PREFIX + "There is nothing to answer yet.", pace, signal);
    yield { type: "finish", reason: "stop" };
    return;
  }
  if (last.role === "toolResult") {
    let start = req.messages.length;
    while (start > 0 && req.messages[start - 1].role === "toolResult") start--;
    const said = req.messages
      .slice(start)
      .map((r) => (r.isError ? `The ${r.toolName} tool failed: ${r.text}.` : `The ${r.toolName} tool answered: ${r.text}.`))
      .join(" ");
    yield* say(SCRIPTED_PREFIX + said, pace, signal);
    yield { type: "finish", reason: "stop" };
    return;
  }
  const prompt = last.text;
  const has = triggerWords(prompt);
  const hasTool = (name: string) => req.tools.some((t) => t.name === name);
  const callID = `scripted-call-${req.messages.length}`;
  if (has("think")) {
    for (const t of ["The prompt asks me to think. ", "I am a script, ", "so my thoughts are fixed: ", "answer plainly."]) {
      yield { type: "thinking", text: t };
      await pause(pace, signal);
    }
  }
  const echo = /echo:/i.exec(prompt);
  if (has("crash")) {
    yield* say(SCRIPTED_PREFIX + "Crashing now with exit code 3, as the prompt asked.", pace, signal);
    (opts.exit ?? ((code: number) => process.exit(code)))(3);
    throw new Error("scripted crash: the process should have exited");
  } else if (has("fail")) {
    yield* say(SCRIPTED_PREFIX + "Starting an answer that will fail…", pace, signal);
    throw new Error("scripted failure: the prompt asked for one");
  } else if (has("long")) {
    yield* say(SCRIPTED_PREFIX + "This answer is long, so it stops at the length limit, right in the", pace, signal);
    yield { type: "finish", reason: "length" };
  } else if (has("slow")) {
    yield { type: "text", text: SCRIPTED_PREFIX + "Counting slowly:" };
    for (let i = 1; i <= 40; i++) {
      await pause(opts.slowPace ?? 50, signal);
      yield { type: "text", text: ` ${i}` };
    }
    yield { type: "finish", reason: "stop" };
  } else if (has("ask") || has("choose")) {
    const ask = has("ask");
    const ui: DialogRequest = ask
      ? { method: "confirm", title: "Scripted question", message: "The scripted model asks: shall I go on?" }
      : { method: "select", title: "Choose a colour", options: ["red", "green", "blue"] };
    if (!req.ui) {
      yield* say(SCRIPTED_PREFIX + `I would open a ${ui.method} dialog, but no user interface is attached.`, pace, signal);
      yield { type: "finish", reason: "stop" };
      return;
    }
    yield* say(SCRIPTED_PREFIX + `Opening a ${ui.method} dialog. `, pace, signal);
    const a = await req.ui.dialog(ui, { signal });
    const text = ask
      ? a.cancelled
        ? "You dismissed the question."
        : a.confirmed
          ? "You answered yes."
          : "You answered no."
      : a.cancelled
        ? "You chose nothing."
        : `You chose: ${a.value}.`;
    yield* say(text, pace, signal);
    yield { type: "finish", reason: "stop" };
  } else if (echo) {
    const text = prompt.slice(echo.index + 5).trim();
    if (!hasTool("echo")) {
      yield* say(SCRIPTED_PREFIX + `This agent has no echo tool, so I cannot echo “${text}”.`, pace, signal);
      yield { type: "finish", reason: "stop" };
      return;
    }
    yield* say(SCRIPTED_PREFIX + "Calling the echo tool.", pace, signal);
    yield* callTool(callID, "echo", { text });
  } else if (has("increment")) {
    if (!hasTool("increment")) {
      yield* say(SCRIPTED_PREFIX + "This agent has no increment tool, so there is no counter to move.", pace, signal);
      yield { type: "finish", reason: "stop" };
      return;
    }
    yield* say(SCRIPTED_PREFIX + "Calling the increment tool.", pace, signal);
    yield* callTool(callID, "increment", {});
  } else {
    const chars = [...prompt];
    const quoted = chars.length > 200 ? chars.slice(0, 200).join("") + "…" : prompt;
    yield* say(
      SCRIPTED_PREFIX +
        `You said: “${quoted}”. I am a deterministic stand-in for a language model; ` +
        "set SURFACED_LLM_BASE_URL and SURFACED_LLM_MODEL to talk to a real one. " +
        "Words that drive me: increment, echo: <text>, think, slow, ask, choose, fail, long, crash.",
      pace,
      signal,
    );
    yield { type: "finish", reason: "stop" };
  }
}

export interface OpenAIModelOptions {
  /** The base including the version: "http://127.0.0.1:11434/v1". */
  baseURL: string;
  model: string;
  apiKey?: string;
  /** Extra request headers. */
  headers?: Record<string, string>;
}

/**
 * openAIModel is a client of an OpenAI-compatible chat-completions endpoint
 * (POST {baseURL}/chat/completions, stream: true, server-sent events back).
 * Reasoning is read from reasoning_content or reasoning.
 */
export function openAIModel(opts: OpenAIModelOptions): Model {
  return {
    info: { id: opts.model, provider: "openai-compatible", baseUrl: opts.baseURL },
    stream: (req) => openAIStream(opts, req),
  };
}

/** modelFromEnv: openAIModel from SURFACED_LLM_BASE_URL, _MODEL and _API_KEY, or the scripted model. */
export function modelFromEnv(env: Record<string, string | undefined> = process.env): Model {
  const base = env[Env.llmBaseURL];
  if (!base) return scriptedModel();
  return openAIModel({ baseURL: base, model: env[Env.llmModel] ?? "", apiKey: env[Env.llmAPIKey] || undefined });
}

function openAIMessages(req: ModelRequest): unknown[] {
  const out: unknown[] = [];
  if (req.system) out.push({ role: "system", content: req.system });
  for (const m of req.messages) {
    if (m.role === "user") {
      if (!m.images?.length) out.push({ role: "user", content: m.text });
      else
        out.push({
          role: "user",
          content: [{ type: "text", text: m.text }, ...m.images.map((i) => ({ type: "image_url", image_url: { url: `data:${i.mimeType};base64,${i.data}` } }))],
        });
    } else if (m.role === "assistant") {
      const msg: Record<string, unknown> = { role: "assistant", content: m.text || null };
      if (m.toolCalls?.length) msg.tool_calls = m.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
      out.push(msg);
    } else {
      out.push({ role: "tool", tool_call_id: m.toolCallId, content: m.text });
    }
  }
  return out;
}

async function* openAIStream(opts: OpenAIModelOptions, req: ModelRequest): AsyncGenerator<ModelDelta> {
  const body: Record<string, unknown> = { model: opts.model, messages: openAIMessages(req), stream: true };
  if (req.tools.length) body.tools = req.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.parameters } }));
  const headers: Record<string, string> = { "content-type": "application/json", accept: "text/event-stream", ...opts.headers };
  if (opts.apiKey) headers.authorization = "Bearer " + opts.apiKey;
  const resp = await fetch(opts.baseURL.replace(/\/+$/, "") + "/chat/completions", { method: "POST", headers, body: JSON.stringify(body), signal: req.signal });
  if (!resp.ok || !resp.body) {
    const text = await resp.text().catch(() => "");
    throw new Error(`openai-compatible model ${JSON.stringify(opts.model)}: HTTP ${resp.status}: ${text.slice(0, 500)}`);
  }
  const decoder = new TextDecoder();
  let buf = "";
  let finish: "stop" | "length" | "toolUse" | undefined;
  for await (const chunk of resp.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") {
        yield { type: "finish", reason: finish ?? "stop" };
        return;
      }
      let ev: any;
      try {
        ev = JSON.parse(data);
      } catch {
        throw new Error(`openai-compatible model: an event that is not JSON: ${data.slice(0, 200)}`);
      }
      if (ev.error) throw new Error(`openai-compatible model: ${JSON.stringify(ev.error).slice(0, 500)}`);
      for (const c of ev.choices ?? []) {
        const d = c.delta ?? c.message ?? {};
        const thinking = d.reasoning_content ?? d.reasoning;
        if (typeof thinking === "string" && thinking) yield { type: "thinking", text: thinking };
        if (typeof d.content === "string" && d.content) yield { type: "text", text: d.content };
        for (const tc of d.tool_calls ?? []) {
          const index = typeof tc.index === "number" ? tc.index : 0;
          if (tc.id || tc.function?.name) yield { type: "toolCall", index, id: tc.id, name: tc.function?.name };
          if (tc.function?.arguments) yield { type: "toolCallArgs", index, text: tc.function.arguments };
        }
        const fr = c.finish_reason;
        if (fr === "length") finish = "length";
        else if (fr === "tool_calls" || fr === "function_call") finish = "toolUse";
        else if (typeof fr === "string") finish = "stop";
      }
    }
  }
  yield { type: "finish", reason: finish ?? "stop" };
}
