// createSurface inside the real pi (docs/agent-protocol.md, "Surfaces inside pi"). pi runs
// unmodified: its RPC mode keeps stdin and stdout for its own commands and events, and the
// extension adds the surface extension beside them in the same process:
//
// - stdout: pi takes process.stdout over before it loads extensions (process.stdout.write and
//   console.log reach stderr). The extension writes whole lines through the stream's own write,
//   the one pi writes its lines with, so lines never interleave, however long.
// - stdin: pi reads it with a "data" listener of its own. The extension adds another once pi's
//   is attached (so that no line reaches the stream before pi reads), takes the lines of the
//   surface extension and leaves the rest to pi. pi answers each line it does not know with an
//   id-less "Unknown command" failure; the daemon expects one per surface line it wrote.
// - announcement: agent_ready goes out as pi starts reading, after every extension has loaded,
//   with every domain declared; it says whether prompts may carry images (the model pi runs),
//   since a surfaced/1 agent is not asked.
// - one connection per process, on globalThis: pi loads each extension with a module cache of
//   its own, so each has its own copy of this package.
import { currentHost, Host, setCurrentHost } from "./host";
import { LineSplitter, lineWriter, sniffType } from "./lines";
import { DAEMON_SURFACE_LINES, Env, isObject } from "./protocol";
import type { CommandResult, Line } from "./protocol";
import type { SurfaceSnapshot } from "./host";
import { Surface, TURN_END_ACTION } from "./surface";
import type { SurfaceOptions } from "./surface";

/** The part of pi's ExtensionAPI this package uses. */
export interface PiExtensionAPI {
  on(event: string, handler: (event: any, ctx: any) => unknown): void;
  registerCommand(name: string, options: { description?: string; handler: (args: string, ctx: any) => unknown }): void;
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
  run<D = unknown>(action: string, args?: unknown, opts?: { signal?: AbortSignal }): Promise<CommandResult<D>>;
  /** Reads this domain's snapshot and rev (as getSurface). */
  get(opts?: { signal?: AbortSignal }): Promise<SurfaceSnapshot<S>>;
}

const PI = Symbol.for("@surfaced/agent.pi");

/** isPiRPC reports whether argv runs pi in its RPC mode (`--mode rpc`). */
export function isPiRPC(argv: readonly string[]): boolean {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--mode" && argv[i + 1] === "rpc") return true;
    if (argv[i] === "--mode=rpc") return true;
  }
  return false;
}

function stderrLog(message: string): void {
  process.stderr.write(message + "\n");
}

/** PiConnection is the process's one connection to the daemon when pi hosts the agent. */
class PiConnection {
  readonly host: Host;
  /** pi runs in RPC mode under a surfaced daemon: the surface extension is on. */
  readonly active: boolean;
  private name = "pi";
  private images: boolean | undefined;
  private modelImages = false;
  private bound = new WeakSet<object>();

  constructor() {
    this.active = isPiRPC(process.argv) && !!process.env[Env.sessionId];
    this.host = new Host(this.active ? lineWriter(process.stdout) : null, stderrLog, "pi");
    if (!currentHost()) setCurrentHost(this.host);
    if (this.active) this.whenPiReads();
  }

  configure(opts: PiAgentOptions): void {
    if (typeof opts.name === "string" && opts.name) this.name = opts.name;
    if (typeof opts.images === "boolean") this.images = opts.images;
  }

  /** bind learns from pi's events: the model (images) at session start. */
  bind(pi: PiExtensionAPI): void {
    if (this.bound.has(pi)) return;
    this.bound.add(pi);
    pi.on("session_start", (_event, ctx) => {
      const input = isObject(ctx) && isObject(ctx.model) ? ctx.model.input : undefined;
      this.modelImages = Array.isArray(input) && input.includes("image");
    });
  }

  /**
   * whenPiReads starts the connection when pi attaches its stdin reader: by
   * then every extension has loaded and the session has started, and no line
   * can reach the stream before pi reads it.
   */
  private whenPiReads(): void {
    const stdin = process.stdin;
    const onListener = (event: string | symbol) => {
      if (event !== "data") return;
      stdin.off("newListener", onListener);
      this.start();
    };
    stdin.on("newListener", onListener);
  }

  private start(): void {
    const split = new LineSplitter((buf) => {
      const type = sniffType(buf);
      if (!DAEMON_SURFACE_LINES.has(type)) return; // pi's own command: pi answers it
      let msg: unknown;
      try {
        msg = JSON.parse(buf.toString("utf8"));
      } catch {
        return; // pi reports the line it cannot parse
      }
      if (isObject(msg) && typeof msg.type === "string") this.host.handle(msg as Line);
    });
    process.stdin.on("data", (chunk: Buffer | string) => split.push(chunk));
    process.stdin.on("end", () => {
      split.end();
      this.host.stop();
    });
    try {
      this.host.announce(this.name, this.images ?? this.modelImages);
    } catch (err) {
      this.host.log("agent_ready could not be written", err);
    }
  }
}

function piConnection(): PiConnection {
  const g = globalThis as Record<symbol, unknown>;
  let c = g[PI] as PiConnection | undefined;
  if (!c) {
    c = new PiConnection();
    g[PI] = c;
  }
  return c;
}

/**
 * connectPi makes this pi process a surfaced/1 agent. createSurface calls it;
 * an extension that hosts no surface but runs commands or writes the session
 * state (runCommand, getSessionState) calls it from its factory. Outside
 * `pi --mode rpc` under a surfaced daemon it does nothing.
 */
export function connectPi(pi: PiExtensionAPI, opts: PiAgentOptions = {}): void {
  const c = piConnection();
  c.configure(opts);
  c.bind(pi);
}

/**
 * createSurface declares a surface domain hosted by this pi extension: its
 * commands run in pi's process when a client (or a tool, through runCommand)
 * runs them; the snapshot lives in the daemon.
 * It also registers pi's command `surface:<domain>`, the domain's probe.
 */
export function createSurface<S>(pi: PiExtensionAPI, options: SurfaceOptions<S> & PiAgentOptions): SurfaceHandle<S> {
  const c = piConnection();
  c.configure(options);
  c.bind(pi);
  const s = new Surface<S>(options);
  const host = c.host;
  if (!host.announced) {
    host.addSurface(s);
  } else if (host.surfaces.has(s.domain)) {
    // pi loaded the extension again (/reload): the new code serves the domain as declared.
    host.surfaces.set(s.domain, s);
  } else {
    host.log(`the surface ${s.domain} was created after the agent announced itself; it is hosted once pi restarts`);
  }
  try {
    pi.registerCommand("surface:" + s.domain, {
      description: "agent-authoritative-surface probe: " + s.domain,
      handler: async () => {},
    });
  } catch (err) {
    host.log(`the probe command surface:${s.domain} could not be registered`, err);
  }
  if (options.onTurnEnd) {
    pi.on("agent_end", () => {
      if (host.announced) {
        void host.runCommand(s.domain, TURN_END_ACTION).then((r) => {
          if (!r.ok) host.log(`surface ${s.domain}: the onTurnEnd hook failed: ${r.error.code}: ${r.error.message}`);
        });
      }
    });
  }
  return {
    domain: s.domain,
    run: (action, args, opts) => host.runCommand(s.domain, action, args, opts?.signal),
    get: (opts) => host.getSurface<S>(s.domain, opts?.signal),
  };
}
