// Surfaces: domains whose commands the agent computes. The agent holds no state of its own: each
// surface_dispatch brings the domain's current snapshot, the command computes against it, and the
// domain actor in the daemon commits what comes back, at the next rev
// (docs/agent-protocol.md, "Surface domains").
import type { Artifacts } from "./host";
import { Codes, failure, isObject, T } from "./protocol";
import type { CommandResult, ErrorBody, JSONSchema, Line, SurfaceDecl } from "./protocol";
import { parseTraceparent } from "./trace";
import type { TraceContext } from "./trace";

/**
 * SurfaceCommandError is a command failure with a stable code: thrown from a
 * command (or a data handler), the caller gets `{ok:false, error:{code, message}}`
 * with this code. Any other throw is `dispatch_failed`.
 */
export class SurfaceCommandError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = "SurfaceCommandError";
    this.code = code;
  }
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
export const HYDRATE_ACTION = "hydrate";
export const TURN_END_ACTION = "turn_end";

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

const hasOwn = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

/** copyJSON is a deep copy through JSON, so that no dispatch shares memory with another. */
function copyJSON<V>(v: V): V {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as V);
}

/**
 * errorOf turns a throw into a failure. A SurfaceCommandError is recognized by
 * its name and code, not by instanceof: pi loads each extension with a
 * module cache of its own, so the class may come from another copy of this
 * package.
 */
export function errorOf(err: unknown): { ok: false; error: ErrorBody } {
  if (isObject(err) && err.name === "SurfaceCommandError" && typeof err.code === "string" && err.code !== "") {
    return failure(err.code, typeof err.message === "string" ? err.message : String(err.code));
  }
  const message = err instanceof Error ? err.message : String(err);
  return failure(Codes.dispatchFailed, message || String(err));
}

/** normalize turns a command's return value into a result, as the protocol says. */
export function normalize(v: unknown): CommandResult {
  if (isObject(v) && v.ok === false) {
    const e = v.error;
    if (isObject(e) && typeof e.code === "string" && e.code !== "" && typeof e.message === "string") {
      return failure(e.code, e.message);
    }
    return failure(Codes.dispatchFailed, "the command returned ok:false without an error {code, message}");
  }
  return v === undefined ? { ok: true } : { ok: true, data: v };
}

class Ctx<S> implements SurfaceCtx<S> {
  changed = false;
  constructor(
    readonly domain: string,
    readonly action: string,
    readonly rev: number,
    readonly deadline: Date | undefined,
    readonly signal: AbortSignal,
    readonly artifacts: Artifacts,
    private state: S,
    readonly trace: TraceContext | undefined,
  ) {}
  get(): S {
    return this.state;
  }
  setState(next: S | ((current: S) => S)): void {
    this.state = typeof next === "function" ? (next as (s: S) => S)(this.state) : next;
    this.changed = true;
  }
}

/** deadlineSignal aborts at deadline (never, without one). */
function deadlineSignal(deadline: Date | undefined): { signal: AbortSignal; done(): void } {
  const ac = new AbortController();
  if (!deadline) return { signal: ac.signal, done() {} };
  const ms = deadline.getTime() - Date.now();
  const t = setTimeout(() => ac.abort(new SurfaceCommandError(Codes.timeout, "the caller's deadline passed")), Math.max(0, ms));
  t.unref?.();
  return { signal: ac.signal, done: () => clearTimeout(t) };
}

/** Surface is one declared domain: its declaration, its commands, its pages. */
export class Surface<S = unknown> {
  readonly domain: string;
  private opts: SurfaceOptions<S>;
  private handlers = new Map<string, CommandHandler<S>>();
  private schemas: Record<string, JSONSchema> = {};
  private initialJSON: string;

  constructor(opts: SurfaceOptions<S>) {
    if (!isObject(opts) || typeof opts.domain !== "string" || opts.domain === "") {
      throw new TypeError("@surfaced/agent: a surface needs a domain (a non-empty string)");
    }
    this.domain = opts.domain;
    this.opts = opts;
    if (!isObject(opts.commands)) throw new TypeError(`@surfaced/agent: surface ${opts.domain}: commands must be an object of handlers`);
    for (const [name, c] of Object.entries(opts.commands)) {
      const run = typeof c === "function" ? c : isObject(c) ? c.run : undefined;
      if (typeof run !== "function") throw new TypeError(`@surfaced/agent: surface ${opts.domain}: command ${name} is not a function`);
      if (name === "" || name === "surface:" + opts.domain) throw new TypeError(`@surfaced/agent: surface ${opts.domain}: ${JSON.stringify(name)} cannot name a command`);
      this.handlers.set(name, run);
      if (typeof c !== "function" && isObject(c.schema)) this.schemas[name] = c.schema;
    }
    for (const [name, schema] of Object.entries(opts.schemas ?? {})) {
      if (!this.handlers.has(name)) throw new TypeError(`@surfaced/agent: surface ${opts.domain}: a schema for ${name}, which is no command`);
      this.schemas[name] = schema;
    }
    for (const [action, hook] of [[HYDRATE_ACTION, opts.hydrate], [TURN_END_ACTION, opts.onTurnEnd]] as const) {
      if (hook === undefined) continue;
      if (typeof hook !== "function") throw new TypeError(`@surfaced/agent: surface ${opts.domain}: ${action} is not a function`);
      if (this.handlers.has(action)) {
        throw new TypeError(`@surfaced/agent: surface ${opts.domain}: the command ${action} is the ${action === HYDRATE_ACTION ? "hydrate" : "onTurnEnd"} hook's; rename the command`);
      }
      this.handlers.set(action, async (_args, ctx) => {
        const next = await hook(ctx);
        if (next !== undefined) ctx.setState(next as S);
      });
    }
    for (const [name, h] of Object.entries(opts.data ?? {})) {
      if (typeof h !== "function") throw new TypeError(`@surfaced/agent: surface ${opts.domain}: data handler ${name} is not a function`);
    }
    const initial = typeof opts.initialState === "function" ? (opts.initialState as () => S)() : opts.initialState;
    let json: string | undefined;
    try {
      json = JSON.stringify(initial ?? {});
    } catch (err) {
      throw new TypeError(`@surfaced/agent: surface ${opts.domain}: the initial state does not encode as JSON: ${(err as Error).message}`);
    }
    this.initialJSON = json ?? "{}";
  }

  /** Whether the surface has a hook to run as action (HYDRATE_ACTION, TURN_END_ACTION). */
  hasHook(action: string): boolean {
    return action === HYDRATE_ACTION ? !!this.opts.hydrate : action === TURN_END_ACTION ? !!this.opts.onTurnEnd : false;
  }

  /** The domain as agent_ready declares it. */
  decl(): SurfaceDecl {
    const d: SurfaceDecl = { domain: this.domain, commands: [...this.handlers.keys()].sort(), initialState: JSON.parse(this.initialJSON) };
    if (this.opts.data && Object.keys(this.opts.data).length) d.data = true;
    if (Object.keys(this.schemas).length) d.schemas = copyJSON(this.schemas);
    return d;
  }

  /** A fresh copy of the initial state. */
  initial(): S {
    return JSON.parse(this.initialJSON) as S;
  }

  /**
   * dispatch runs one command and normalizes its outcome. It never throws.
   * The state is present when the command succeeded and called setState.
   */
  async dispatch(msg: Line, host: SurfaceHost): Promise<{ result: CommandResult; state?: unknown }> {
    const action = typeof msg.action === "string" ? msg.action : "";
    if (action === "surface:" + this.domain) return { result: { ok: true } }; // the probe
    const handler = this.handlers.get(action); // a Map: own names only, never "constructor"
    if (!handler) return { result: failure(Codes.unknownAction, `surface ${this.domain} has no command ${JSON.stringify(action)}`) };
    const deadline = typeof msg.deadline === "string" ? new Date(msg.deadline) : undefined;
    const dl = deadlineSignal(deadline && !isNaN(deadline.getTime()) ? deadline : undefined);
    const state = msg.state === undefined || msg.state === null ? this.initial() : (msg.state as S);
    const ctx = new Ctx<S>(this.domain, action, typeof msg.rev === "number" ? msg.rev : 0, deadline, dl.signal, host.artifacts(dl.signal), state, parseTraceparent(msg.traceparent));
    let v: unknown;
    try {
      v = await handler(msg.args ?? {}, ctx);
    } catch (err) {
      const result = errorOf(err);
      if (result.error.code === Codes.dispatchFailed) host.log(`surface ${this.domain}: command ${action} threw`, err);
      return { result };
    } finally {
      dl.done();
    }
    const result = normalize(v);
    if (!result.ok || !ctx.changed) return { result };
    return { result, state: ctx.get() };
  }

  /** fetch serves one data page and returns the surface_fetch_result line. It never throws. */
  async fetch(msg: Line, host: SurfaceHost): Promise<Record<string, unknown>> {
    const line: Record<string, unknown> = { type: T.surfaceFetchResult, id: msg.id, ok: false };
    const data = this.opts.data;
    if (!data || !Object.keys(data).length) {
      line.error = { code: Codes.noDataPlane, message: `the surface ${this.domain} serves no data pages` };
      return line;
    }
    const path = typeof msg.path === "string" ? msg.path.replace(/^\/+/, "") : "";
    const slash = path.indexOf("/");
    const name = slash < 0 ? path : path.slice(0, slash);
    const handler = hasOwn(data, path) ? data[path] : hasOwn(data, name) ? data[name] : undefined;
    if (!handler) {
      line.error = { code: Codes.notFound, message: `the surface ${this.domain} has no page ${JSON.stringify(path)}` };
      return line;
    }
    const rawQuery = typeof msg.query === "string" ? msg.query : "";
    const req: DataRequest = {
      domain: this.domain,
      path,
      name: hasOwn(data, path) ? path : name,
      rest: hasOwn(data, path) ? "" : slash < 0 ? "" : path.slice(slash + 1),
      query: new URLSearchParams(rawQuery),
      rawQuery,
      rev: typeof msg.rev === "number" ? msg.rev : 0,
    };
    // The daemon waits 15 s for a page.
    const signal = AbortSignal.timeout(15_000);
    let page: Page;
    try {
      page = await handler(req, { signal, artifacts: host.artifacts(signal) });
    } catch (err) {
      const f = errorOf(err);
      if (f.error.code === Codes.dispatchFailed) host.log(`surface ${this.domain}: data page ${path} threw`, err);
      line.error = f.error;
      return line;
    }
    if (!isObject(page) || (page.data === undefined) === (typeof page.artifact !== "string" || page.artifact === "")) {
      line.error = { code: Codes.dispatchFailed, message: "a data handler returns a page: {data} or {artifact}, exactly one of them" };
      return line;
    }
    line.ok = true;
    if (page.data !== undefined) line.data = page.data;
    else line.artifact = page.artifact;
    if (typeof page.etag === "string" && page.etag !== "") line.etag = page.etag;
    if (typeof page.maxAge === "number" && page.maxAge > 0) line.maxAge = Math.floor(page.maxAge);
    return line;
  }
}
