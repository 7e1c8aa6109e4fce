// Host is the surfaced/1 side of an agent process, shared by a pi extension and a standalone
// agent: it announces the agent, serves the daemon's surface lines (dispatches, data pages,
// state changes) and makes the agent's requests (commands, snapshots, session state, artifacts).
import { encodeLine } from "./lines";
import type { WriteLine } from "./lines";
import { ANSWERS, Codes, Env, failure, isObject, PROTOCOL, T } from "./protocol";
import type { Artifact, CommandResult, Line, StateChange } from "./protocol";
import { Surface, SurfaceCommandError } from "./surface";
import type { SurfaceHost } from "./surface";

/** The session's artifacts, through the artifact lines: files move by path, never as bytes on the pipe. */
export interface Artifacts {
  /** The session's scratch directory ($SURFACED_ARTIFACT_DIR): write files to put there. */
  readonly dir: string | undefined;
  /** Has the daemon ingest the file at path (in dir or the session's cwd) as a new artifact. */
  put(path: string, mediaType: string, opts?: PutOptions): Promise<{ artifact: Artifact; url: string }>;
  /** Has the daemon write the artifact's bytes to a file in dir; returns its path. */
  get(id: string): Promise<{ path: string; artifact?: Artifact }>;
  /** A page of the session's artifacts, newest first. */
  list(query?: ListQuery): Promise<{ artifacts: Artifact[]; nextCursor?: string }>;
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
export type SurfaceSnapshot<S = unknown> = { ok: true; state: S | null; rev?: number } | { ok: false; error: { code: string; message: string } };

function checkKey(key: string): void {
  if (typeof key !== "string" || key === "") throw new TypeError("@surfaced/agent: a session state key is a non-empty string");
  if (key.startsWith("surface:")) {
    throw new SurfaceCommandError(
      "state_refused",
      `the key ${JSON.stringify(key)} is a surface snapshot, written only by its domain: run a command (runCommand), read it with getSurface`,
    );
  }
}

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted", "AbortError");
}

export class Host implements SurfaceHost {
  readonly surfaces = new Map<string, Surface<any>>();
  /** Set once agent_ready is written. */
  announced = false;
  private pending = new Map<string, (line: Line) => void>();
  private prefs = new Map<string, unknown>();
  private listeners = new Set<(c: StateChange) => void>();
  private nextID = 0;
  private write: WriteLine | null;

  constructor(
    write: WriteLine | null,
    private readonly logf: (message: string) => void,
    private readonly idPrefix = "ts",
  ) {
    this.write = write;
  }

  log(message: string, err?: unknown): void {
    const detail = err === undefined ? "" : ": " + (err instanceof Error ? (err.stack ?? err.message) : String(err));
    this.logf("@surfaced/agent: " + message + detail);
  }

  /** connect sets where lines go (a standalone agent connects when it runs). */
  connect(write: WriteLine): void {
    this.write = write;
  }

  /** Whether lines can go to the daemon. */
  get connected(): boolean {
    return this.write !== null;
  }

  /** send writes one line; it throws when the value does not encode. */
  send(v: unknown): void {
    if (!this.write) throw new SurfaceCommandError(Codes.unavailable, "not connected to a surfaced daemon");
    this.write(encodeLine(v));
  }

  /** sendAll writes several lines with one write, so that the daemon reads them together. */
  sendAll(values: unknown[]): void {
    if (!this.write) throw new SurfaceCommandError(Codes.unavailable, "not connected to a surfaced daemon");
    this.write(values.map(encodeLine).join(""));
  }

  /** stop releases every waiting request (the daemon is gone). */
  stop(): void {
    this.write = null;
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const settle of waiting) settle({ type: "", stopped: true });
  }

  addSurface(s: Surface<any>): void {
    if (this.surfaces.has(s.domain)) throw new TypeError(`@surfaced/agent: the surface ${s.domain} is declared twice`);
    this.surfaces.set(s.domain, s);
  }

  /** announce writes agent_ready, then runs the hydrate hooks. */
  announce(name: string, images: boolean): void {
    const line: Record<string, unknown> = { type: T.agentReady, protocol: PROTOCOL, name, images };
    const surfaces = [...this.surfaces.values()].map((s) => s.decl());
    if (surfaces.length) line.surfaces = surfaces;
    this.send(line);
    this.announced = true;
    this.runHooks(T.agentReady);
  }

  /**
   * runHooks runs the hydrate hooks (after agent_ready) or the onTurnEnd
   * hooks (after a turn) as commands of their domains, without waiting.
   */
  runHooks(after: typeof T.agentReady | "agent_end"): void {
    const action = after === T.agentReady ? "hydrate" : "turn_end";
    for (const s of this.surfaces.values()) {
      if (!s.hasHook(action)) continue;
      void this.runCommand(s.domain, action).then((r) => {
        if (!r.ok) this.log(`surface ${s.domain}: the ${action} hook failed: ${r.error.code}: ${r.error.message}`);
      });
    }
  }

  /**
   * handle serves one line of the surface extension; it reports false for
   * any other line.
   */
  handle(line: Line): boolean {
    switch (line.type) {
      case T.surfaceDispatch:
        void this.dispatch(line);
        return true;
      case T.surfaceFetch:
        void this.fetch(line);
        return true;
      case T.stateChanged:
        this.stateChanged(line);
        return true;
      case T.surfaceRegisterResult:
        if (line.ok !== true) {
          const e = isObject(line.error) ? line.error : {};
          this.log(`the daemon refused the surface ${String(line.domain)}: ${String(e.code)}: ${String(e.message)}`);
        }
        return true;
    }
    if (ANSWERS.has(line.type) && typeof line.id === "string") {
      const settle = this.pending.get(line.type + "\0" + line.id);
      if (settle) {
        this.pending.delete(line.type + "\0" + line.id);
        settle(line);
      } else if (line.type !== T.extensionUIResponse) {
        // (A dialog's answer may come after the dialog was given up, as in pi.)
        this.log(`an answer for no pending request ignored (${line.type} ${line.id})`);
      }
      return true;
    }
    return false;
  }

  private async dispatch(msg: Line): Promise<void> {
    const domain = typeof msg.domain === "string" ? msg.domain : "";
    const s = this.surfaces.get(domain);
    const out = s
      ? await s.dispatch(msg, this)
      : { result: failure(Codes.surfaceNotRegistered, `this agent hosts no surface ${JSON.stringify(domain)}`) as CommandResult, state: undefined };
    const line: Record<string, unknown> = { type: T.surfaceDispatchResult, id: msg.id, result: out.result };
    if (out.state !== undefined) line.state = out.state;
    this.answer(line, msg);
  }

  private async fetch(msg: Line): Promise<void> {
    const domain = typeof msg.domain === "string" ? msg.domain : "";
    const s = this.surfaces.get(domain);
    const line = s
      ? await s.fetch(msg, this)
      : { type: T.surfaceFetchResult, id: msg.id, ok: false, error: { code: Codes.surfaceNotRegistered, message: `this agent hosts no surface ${JSON.stringify(domain)}` } };
    this.answer(line, msg);
  }

  /** answer sends an answer; one that does not encode (a BigInt, a cycle) becomes dispatch_failed. */
  private answer(line: Record<string, unknown>, msg: Line): void {
    let text: string;
    try {
      text = encodeLine(line);
    } catch (err) {
      const error = { code: Codes.dispatchFailed, message: "the answer does not encode as JSON: " + (err as Error).message };
      text = encodeLine(line.type === T.surfaceDispatchResult ? { type: line.type, id: msg.id, result: { ok: false, error } } : { type: line.type, id: msg.id, ok: false, error });
    }
    if (!this.write) return;
    this.write(text);
  }

  private stateChanged(line: Line): void {
    if (typeof line.key !== "string") return;
    const change: StateChange = { key: line.key, rev: typeof line.rev === "number" ? line.rev : 0 };
    if (line.deleted === true) {
      change.deleted = true;
      this.prefs.delete(line.key);
    } else {
      change.value = line.value;
      this.prefs.set(line.key, line.value);
    }
    for (const l of this.listeners) {
      try {
        l(change);
      } catch (err) {
        this.log("a session state listener threw", err);
      }
    }
  }

  /** request writes a request line with a fresh id and waits for its answer of answerType. */
  request(answerType: string, fields: Record<string, unknown>, signal?: AbortSignal): Promise<Line> {
    if (!this.write || !this.announced) {
      return Promise.reject(new SurfaceCommandError(Codes.unavailable, "not connected to a surfaced daemon (yet)"));
    }
    if (signal?.aborted) return Promise.reject(abortError(signal));
    const id = `${this.idPrefix}-${++this.nextID}`;
    const key = answerType + "\0" + id;
    return new Promise<Line>((resolve, reject) => {
      const onAbort = () => {
        this.pending.delete(key);
        reject(abortError(signal!));
      };
      this.pending.set(key, (line) => {
        signal?.removeEventListener("abort", onAbort);
        if (line.stopped) reject(new SurfaceCommandError(Codes.unavailable, "the agent stopped before the daemon answered"));
        else resolve(line);
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        this.send({ ...fields, id });
      } catch (err) {
        this.pending.delete(key);
        signal?.removeEventListener("abort", onAbort);
        reject(err);
      }
    });
  }

  /**
   * runCommand runs action on a domain of the session (native or agent-hosted,
   * this agent's own included) through its domain actor, as a client's command
   * runs. It never rejects: a failure is `{ok:false, error}`. Never await it
   * inside a command of the same domain: it waits behind that command.
   */
  async runCommand<D = unknown>(domain: string, action: string, args?: unknown, signal?: AbortSignal): Promise<CommandResult<D>> {
    const line: Record<string, unknown> = { type: T.surfaceCommand, domain, action };
    if (args !== undefined) line.args = args;
    try {
      const ans = await this.request(T.surfaceCommandResult, line, signal);
      if (ans.ok === true) return ans.data === undefined ? { ok: true } : { ok: true, data: ans.data as D };
      const e = isObject(ans.error) ? ans.error : {};
      return failure(typeof e.code === "string" ? e.code : Codes.dispatchFailed, typeof e.message === "string" ? e.message : "the daemon answered ok:false");
    } catch (err) {
      if (isObject(err) && err.name === "SurfaceCommandError") return failure(String(err.code), String(err.message));
      return failure(Codes.dispatchFailed, err instanceof Error ? err.message : String(err));
    }
  }

  /** getSurface reads a domain's current snapshot and rev. It never rejects. */
  async getSurface<S = unknown>(domain: string, signal?: AbortSignal): Promise<SurfaceSnapshot<S>> {
    try {
      const ans = await this.request(T.surfaceGetResult, { type: T.surfaceGet, domain }, signal);
      if (ans.ok === true) {
        const out: SurfaceSnapshot<S> = { ok: true, state: (ans.state ?? null) as S | null };
        if (typeof ans.rev === "number") out.rev = ans.rev;
        return out;
      }
      const e = isObject(ans.error) ? ans.error : {};
      return failure(typeof e.code === "string" ? e.code : Codes.surfaceNotRegistered, typeof e.message === "string" ? e.message : "the daemon answered ok:false");
    } catch (err) {
      if (isObject(err) && err.name === "SurfaceCommandError") return failure(String(err.code), String(err.message));
      return failure(Codes.dispatchFailed, err instanceof Error ? err.message : String(err));
    }
  }

  /** The session state, as this process knows it. */
  sessionState(): SessionState {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const host = this;
    return {
      get available() {
        return host.write !== null && host.announced;
      },
      get<V>(key: string): V | undefined {
        checkKey(key);
        return host.prefs.get(key) as V | undefined;
      },
      set(key: string, value: unknown) {
        checkKey(key);
        if (!host.announced) throw new SurfaceCommandError(Codes.unavailable, "not connected to a surfaced daemon (yet)");
        const v = value === undefined ? null : value;
        host.send({ type: T.stateSet, key, value: v });
        // The daemon does not echo the agent's own writes.
        host.prefs.set(key, JSON.parse(JSON.stringify(v)));
      },
      delete(key: string) {
        checkKey(key);
        if (!host.announced) throw new SurfaceCommandError(Codes.unavailable, "not connected to a surfaced daemon (yet)");
        host.send({ type: T.stateDelete, key });
        host.prefs.delete(key);
      },
      snapshot() {
        return Object.fromEntries(host.prefs);
      },
      onChange(listener: (c: StateChange) => void) {
        host.listeners.add(listener);
        return () => {
          host.listeners.delete(listener);
        };
      },
    };
  }

  /** The session's artifacts; their calls end with signal. */
  artifacts(signal?: AbortSignal): Artifacts {
    const call = async (answerType: string, fields: Record<string, unknown>) => {
      const ans = await this.request(answerType, fields, signal);
      if (ans.ok !== true) {
        const e = isObject(ans.error) ? ans.error : {};
        throw new SurfaceCommandError(typeof e.code === "string" ? e.code : Codes.dispatchFailed, typeof e.message === "string" ? e.message : "the daemon answered ok:false");
      }
      return ans;
    };
    return {
      get dir() {
        return process.env[Env.artifactDir] || undefined;
      },
      async put(path, mediaType, opts = {}) {
        const fields: Record<string, unknown> = { type: T.artifactPut, path, mediaType };
        if (opts.name) fields.name = opts.name;
        if (opts.derivedFrom) fields.derivedFrom = opts.derivedFrom;
        if (opts.meta !== undefined) fields.meta = opts.meta;
        const ans = await call(T.artifactPutResult, fields);
        return { artifact: ans.artifact as Artifact, url: String(ans.url ?? "") };
      },
      async get(id) {
        const ans = await call(T.artifactGetResult, { type: T.artifactGet, artifact: id });
        return { path: String(ans.path ?? ""), artifact: ans.artifact as Artifact | undefined };
      },
      async list(query = {}) {
        const fields: Record<string, unknown> = { type: T.artifactList };
        if (query.mediaType) fields.mediaType = query.mediaType;
        if (query.cursor) fields.cursor = query.cursor;
        if (query.limit) fields.limit = query.limit;
        const ans = await call(T.artifactListResult, fields);
        const out: { artifacts: Artifact[]; nextCursor?: string } = { artifacts: Array.isArray(ans.artifacts) ? (ans.artifacts as Artifact[]) : [] };
        if (typeof ans.nextCursor === "string" && ans.nextCursor) out.nextCursor = ans.nextCursor;
        return out;
      },
      async url(id, ttlSeconds) {
        const fields: Record<string, unknown> = { type: T.artifactUrl, artifact: id };
        if (ttlSeconds) fields.ttl = Math.ceil(ttlSeconds);
        const ans = await call(T.artifactUrlResult, fields);
        return String(ans.url ?? "");
      },
    };
  }
}

// The process's connection, for the functions that take no agent (runCommand, getSessionState):
// one per process on globalThis, since pi loads each extension with a module cache of its own.
const CURRENT = Symbol.for("@surfaced/agent.host");

export function currentHost(): Host | undefined {
  return (globalThis as Record<symbol, unknown>)[CURRENT] as Host | undefined;
}

export function setCurrentHost(h: Host): void {
  (globalThis as Record<symbol, unknown>)[CURRENT] = h;
}
