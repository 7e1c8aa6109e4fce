// Types of @surfaced/client (src/index.js documents the behaviour of every name).

export declare const version: string;
export declare const DEFAULT_FENCE: string;

/** An error answer of the daemon's API ({error:{code, message, fields?}}) or a failure to reach it. */
export declare class SurfacedError extends globalThis.Error {
  constructor(code: string, message?: string, status?: number, fields?: Record<string, unknown>);
  readonly code: string;
  readonly status: number;
  readonly fields?: Record<string, unknown>;
}
export { SurfacedError as Error };

export interface ErrorInfo {
  code: string;
  message: string;
  fields?: Record<string, unknown>;
}

// ------------------------------------------------------------------ surface-ops

/** A surface operation sent through the conversation as a fenced user message. */
export interface SurfaceOp {
  title: string;
  tool: string;
  params?: ReadonlyArray<readonly [string, unknown]>;
  /** The fence's info string (default "surface-op"). */
  fence?: string | null;
  /** What the bridge runs on the control plane instead when the conversation is not available. */
  fallback?: { action: string; args?: unknown };
}

/** Byte-identical to the daemon's surface.RenderOp. */
export declare function renderSurfaceOp(op: SurfaceOp): string;

// ------------------------------------------------------------------ state

export interface StateFrame {
  key: string;
  value?: unknown;
  rev: number;
  deleted?: boolean;
}

export interface StateEntry<T = unknown> {
  value: T;
  rev: number;
}

export declare class StateStore {
  apply(frame: StateFrame): boolean;
  get<T = unknown>(key: string): StateEntry<T> | undefined;
  rev(key: string): number | undefined;
  entry(key: string): { value?: unknown; rev: number; deleted?: boolean } | undefined;
  keys(): string[];
  reset(): void;
  on(key: string, cb: (entry: StateEntry | undefined, key: string) => void): () => void;
  onAny(cb: (key: string, entry: StateEntry | undefined) => void): () => void;
}

// ------------------------------------------------------------------ client

export interface ClientOptions {
  /** The daemon's origin, e.g. "http://127.0.0.1:7800" ("" for the page's own origin). */
  base?: string;
  /** A bearer token; without it the page's cookie (same origin) authenticates. */
  token?: string;
  fetch?: typeof globalThis.fetch;
  EventSource?: unknown;
  /** null turns XHR uploads off (fetch then, without progress). */
  XMLHttpRequest?: unknown;
  withCredentials?: boolean;
  setTimeout?: (fn: () => void, ms: number) => unknown;
  clearTimeout?: (t: unknown) => void;
}

export interface AgentInfo {
  name: string;
  title?: string;
  description?: string;
}

export interface SessionSummary {
  sessionId: string;
  agent: string;
  title?: string;
  status: string;
  createdAt?: string;
  updatedAt?: string;
  [k: string]: unknown;
}

export declare class Client {
  constructor(opts?: ClientOptions);
  readonly base: string;
  readonly token: string;
  withCredentials: boolean;
  request<T = any>(method: string, path: string, body?: unknown): Promise<T>;
  agents(): Promise<AgentInfo[]>;
  sessionsPage(opts?: { cursor?: string; limit?: number }): Promise<{ sessions: SessionSummary[]; nextCursor?: string }>;
  sessions(): Promise<SessionSummary[]>;
  createSession(opts?: { agent?: string; cwd?: string; title?: string }): Promise<{ sessionId: string }>;
  session(id: string): Session;
}

// ------------------------------------------------------------------ session

export interface SurfaceInfo {
  domain: string;
  commands?: string[];
  hosted?: string;
  rev?: number;
  available?: boolean;
}

export interface SessionStatus {
  status: "starting" | "ready" | "error" | "ended" | string;
  busy?: boolean;
  queued?: number;
  title?: string;
  images?: boolean;
  code?: string;
  detail?: string;
  surfaces?: SurfaceInfo[];
  [k: string]: unknown;
}

export interface SurfaceView<S = unknown> {
  domain: string;
  state: S | null;
  rev: number;
  /** The domain takes commands now: listed as available, and the session has not ended. */
  available: boolean;
  known: boolean;
  commands: string[];
  hosted?: string;
}

export type CommandResult<T = unknown> = { ok: true; data?: T } | { ok: false; error: ErrorInfo };

export interface Artifact {
  id: string;
  sessionId: string;
  mediaType: string;
  size: number;
  sha256: string;
  name?: string;
  createdAt: string;
  derivedFrom?: string;
  meta?: Record<string, unknown>;
}

export interface ArtifactEvent {
  event: "added" | "deleted";
  artifact: Artifact;
}

/** One chunk of the AI SDK's UI message stream (v1), as the session stream carries it. */
export interface ChatChunk {
  type: string;
  [k: string]: unknown;
}

export interface SubscribeHandlers {
  open?(): void;
  reconnecting?(): void;
  state?(frame: StateFrame, applied: boolean): void;
  session?(frame: SessionStatus): void;
  chat?(chunk: ChatChunk): void;
  uiRequest?(req: Record<string, unknown>): void;
  artifact?(ev: ArtifactEvent): void;
  diagnostic?(d: Record<string, unknown>): void;
  resync?(d: Record<string, unknown>): void;
  end?(d: { reason?: string; [k: string]: unknown }): void;
  error?(e: { code: string; message: string; fatal: boolean }): void;
  frame?(kind: string, data: unknown, id: string): void;
}

export declare class Subscription {
  readonly closed: boolean;
  readonly ended: boolean;
  readonly endReason: string | undefined;
  close(): void;
}

export interface TranscriptEntry {
  role: string;
  text?: string;
  toolCallId?: string;
  toolName?: string;
  args?: unknown;
  result?: unknown;
  isError?: boolean;
  via?: string;
  turnId: number;
  promptId?: number;
  attachmentIds?: string[];
  at: string;
}

export declare class Session {
  constructor(client: Client, id: string);
  readonly client: Client;
  readonly id: string;
  readonly store: StateStore;
  readonly status: SessionStatus | undefined;
  /**
   * The session has ended (a `session` frame or its summary said status "ended", or an `end` frame
   * said stopped, crashed or deleted). It stays true; every domain is read-only from then on.
   */
  readonly ended: boolean;
  lastEventId: string | undefined;
  subscribe(handlers?: SubscribeHandlers, opts?: { lastEventId?: string }): Subscription;
  close(): void;
  state<T = unknown>(key: string): StateEntry<T> | undefined;
  onState(key: string, cb: (entry: StateEntry | undefined, key: string) => void): () => void;
  onAnyState(cb: (key: string, entry: StateEntry | undefined) => void): () => void;
  onStatus(cb: (status: SessionStatus) => void): () => void;
  surface<S = unknown>(domain: string): SurfaceView<S>;
  surfaces(): SurfaceInfo[];
  refreshSurfaces(): Promise<SurfaceInfo[]>;
  onSurfaces(cb: (list: SurfaceInfo[]) => void): () => void;
  pendingDialogs(): Record<string, unknown>[];
  bridge(domain: string, opts?: BridgeOptions): Bridge;
  readonly artifacts: Artifacts;
  run<T = unknown>(domain: string, action: string, args?: unknown): Promise<CommandResult<T>>;
  prompt(text: string, opts?: { images?: unknown[]; attachmentIds?: string[] }): Promise<{ accepted: boolean; queued: boolean }>;
  abort(): Promise<unknown>;
  setPref(key: string, value: unknown): Promise<{ ok: boolean; rev: number }>;
  deletePref(key: string): Promise<{ ok: boolean; rev: number }>;
  answer(uiRequestId: string, response: { value?: unknown; confirmed?: boolean; cancelled?: boolean }): Promise<unknown>;
  messages(): Promise<TranscriptEntry[]>;
  summary(): Promise<SessionSummary>;
  getState(): Promise<Record<string, unknown>>;
  end(): Promise<unknown>;
}

// ------------------------------------------------------------------ conversation bridge

export type BridgeMode = "prompt" | "command" | "unavailable";

export interface BridgeOptions {
  /**
   * true: ops go out as POST …/prompt; false: no conversation ("command" mode at best); a function:
   * sends the op's text as a user message through the page's own chat (useChat's sendMessage).
   */
  conversation?: boolean | ((text: string, opts: { attachmentIds?: string[] }) => Promise<unknown> | unknown);
}

export type SubmitOpResult =
  | { ok: true; channel: "prompt"; accepted: boolean; queued: boolean }
  | { ok: true; channel: "command"; result: CommandResult }
  | { ok: false; error: ErrorInfo };

export declare class Bridge {
  constructor(session: Session, domain: string, opts?: BridgeOptions);
  readonly session: Session;
  readonly domain: string;
  readonly mode: BridgeMode;
  readonly available: boolean;
  run<T = unknown>(action: string, args?: unknown): Promise<CommandResult<T>>;
  prompt(op: SurfaceOp, opts?: { attachmentIds?: string[] }): Promise<SubmitOpResult>;
  onChange(cb: (bridge: Bridge) => void): () => void;
}

// ------------------------------------------------------------------ artifacts

export interface UploadOptions {
  name?: string;
  mediaType?: string;
  derivedFrom?: string;
  meta?: Record<string, unknown>;
  onProgress?: (p: { loaded: number; total?: number }) => void;
  signal?: AbortSignal;
}

export declare class Artifacts {
  constructor(session: Session);
  readonly session: Session;
  on(cb: (ev: ArtifactEvent) => void): () => void;
  list(opts?: { mediaType?: string; cursor?: string; limit?: number }): Promise<{ artifacts: Artifact[]; nextCursor?: string }>;
  listAll(opts?: { mediaType?: string }): Promise<Artifact[]>;
  get(id: string): Promise<{ artifact: Artifact; url: string }>;
  url(id: string): Promise<string>;
  contentUrl(id: string): string;
  delete(id: string): Promise<{ ok: true }>;
  upload(file: Blob | ArrayBuffer | Uint8Array, opts?: UploadOptions): Promise<{ artifact: Artifact; url: string }>;
}

// ------------------------------------------------------------------ chat assembly

export interface ChatPart {
  type: "text" | "reasoning" | "tool";
  [k: string]: unknown;
}

export interface ChatMessage {
  id: string;
  role: "user" | "assistant";
  turnId?: number;
  status?: "streaming" | "done" | "error" | "aborted";
  parts?: ChatPart[];
  text?: string;
  [k: string]: unknown;
}

export declare class ChatAssembler {
  messages: ChatMessage[];
  apply(chunk: ChatChunk): { message: ChatMessage | undefined; unseenStart: boolean };
  liveTurnIds(): Set<number>;
  hasPrompt(promptId: number): boolean;
  message(id: string): ChatMessage | undefined;
  userMessage(promptId: number): ChatMessage | undefined;
  remove(id: string): void;
  clear(): void;
}

/** Reads an SSE stream with fetch so that it can carry the bearer token. */
export declare class FetchEventSource {
  static for(client: Client): { new (url: string): FetchEventSource; CLOSED: number };
  readonly url: string;
  readyState: number;
  onopen: (() => void) | null;
  onerror: ((e: unknown) => void) | null;
  addEventListener(kind: string, cb: (e: { type: string; data: string; lastEventId: string }) => void): void;
  removeEventListener(kind: string, cb: (e: { type: string; data: string; lastEventId: string }) => void): void;
  close(): void;
}
