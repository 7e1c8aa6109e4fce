// A pi extension for surfaced's tests of @surfaced/agent inside the real pi: it hosts the surface
// domain "lab" ({n}) with a command for each case the tests need, a data plane, and the tool
// lab_inc, which runs lab/inc through the daemon as the UI's button would.
import { Writable } from "node:stream";
import { Type } from "typebox";
import { createSurface, getSessionState, runCommand, SurfaceCommandError } from "../../../../web/agent/dist/index.js";

type Lab = { n: number; blob?: string };

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    });
  });
}

// A line on stdout as pi writes its own (the stream's own write; process.stdout.write is pi's).
const writeLine = (v: unknown) => Writable.prototype.write.call(process.stdout, JSON.stringify(v) + "\n");

export default function (pi: any) {
  createSurface<Lab>(pi, {
    domain: "lab",
    initialState: () => ({ n: 0 }),
    commands: {
      inc: (_args, ctx) => {
        ctx.setState((s) => ({ ...s, n: s.n + 1 }));
        return { n: ctx.get().n };
      },
      // A snapshot of a given size.
      big: (args: { bytes: number }, ctx) => {
        ctx.setState((s) => ({ ...s, blob: "b".repeat(args.bytes) }));
        return { bytes: args.bytes };
      },
      // A result of a given size.
      result: (args: { bytes: number }) => ({ text: "r".repeat(args.bytes) }),
      throws: () => {
        throw new Error("the handler broke");
      },
      coded: () => {
        throw new SurfaceCommandError("out_of_stock", "nothing left to sell");
      },
      refuses: () => ({ ok: false, error: { code: "not_allowed", message: "the lab refuses" } }),
      // Tells it has started (a session state key), then takes ms, then counts.
      slow: async (args: { ms: number }, ctx) => {
        getSessionState().set("lab.slow", "started");
        await sleep(args.ms, ctx.signal);
        ctx.setState((s) => ({ ...s, n: s.n + 1 }));
        return { n: ctx.get().n };
      },
      pid: () => ({ pid: process.pid }),
      kv_get: (args: { key: string }) => ({ value: getSessionState().get(args.key) ?? null }),
      kv_set: (args: { key: string; value: unknown }) => {
        getSessionState().set(args.key, args.value);
        return { set: args.key };
      },
      // Floods stdout with lines nobody asked for: pi's refusals of surface lines the daemon
      // never wrote, after the command has answered.
      flood: (args: { lines: number }) => {
        setImmediate(() => {
          for (let i = 0; i < args.lines; i++) {
            writeLine({ type: "response", command: "surface_dispatch", success: false, error: "Unknown command: surface_dispatch" });
          }
        });
        return { lines: args.lines };
      },
    },
    data: {
      rows: (req) => {
        const from = Number(req.query.get("from") ?? 0);
        const n = Number(req.query.get("n") ?? 10);
        return { data: { rows: Array.from({ length: n }, (_, i) => from + i), rev: req.rev }, etag: `rows-${from}-${n}-${req.rev}`, maxAge: 60 };
      },
    },
  });

  // A domain of hooks only: hydrate counts the starts of pi, onTurnEnd the turns.
  createSurface<{ starts: number; turns: number }>(pi, {
    domain: "hooks",
    initialState: { starts: 0, turns: 0 },
    commands: {},
    hydrate: (ctx) => ({ ...ctx.get(), starts: ctx.get().starts + 1 }),
    onTurnEnd: (ctx) => {
      ctx.setState((s) => ({ ...s, turns: s.turns + 1 }));
    },
  });

  pi.registerTool({
    name: "lab_inc",
    label: "Count in the lab",
    description: "Add one to the lab's counter, as the UI's button does.",
    parameters: Type.Object({}),
    async execute(_id: string, _params: unknown, signal?: AbortSignal) {
      const r = await runCommand<{ n: number }>("lab", "inc", undefined, { signal });
      if (!r.ok) throw new Error(`lab.inc: ${r.error.code}: ${r.error.message}`);
      return { content: [{ type: "text", text: `n = ${r.data!.n}` }], details: {} };
    },
  });
}
