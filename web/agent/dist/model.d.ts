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
export type ModelDelta = {
    type: "text";
    text: string;
} | {
    type: "thinking";
    text: string;
}
/** Starts tool call number index. */
 | {
    type: "toolCall";
    index: number;
    id?: string;
    name?: string;
}
/** A fragment of tool call index's JSON arguments. */
 | {
    type: "toolCallArgs";
    index: number;
    text: string;
} | {
    type: "finish";
    reason: "stop" | "length" | "toolUse";
};
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
    dialog(req: DialogRequest, opts?: {
        signal?: AbortSignal;
    }): Promise<DialogAnswer>;
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
export declare const SCRIPTED_PREFIX = "(scripted model \u2014 no LLM configured) ";
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
export declare function scriptedModel(opts?: ScriptedModelOptions): Model;
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
export declare function openAIModel(opts: OpenAIModelOptions): Model;
/** modelFromEnv: openAIModel from SURFACED_LLM_BASE_URL, _MODEL and _API_KEY, or the scripted model. */
export declare function modelFromEnv(env?: Record<string, string | undefined>): Model;
