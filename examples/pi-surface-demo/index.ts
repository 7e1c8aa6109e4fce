// The demo counter as a pi extension: pi (unmodified, in its RPC mode) hosts the surface domain
// "demo" under surfaced, and its model moves the same counter through the tool "increment".
//
//   pi --mode rpc --extension ./examples/pi-surface-demo/index.ts     (agent.json does this)
//
// The UI's increment button runs demo/increment through the daemon, which dispatches it to this
// extension; the tool runs the very same command through the daemon (runCommand), so the button
// and the chat are two clients of one writer, and the snapshot they see is the daemon's.
// In your own extension, import from "@surfaced/agent"; this one imports the package's build
// from the repository, so that it runs with nothing installed but pi.
import { Type } from "typebox";
import { createSurface, runCommand, SurfaceCommandError } from "../../web/agent/dist/index.js";

type DemoState = { count: number; log: string[] };

export default function (pi: any) {
  createSurface<DemoState>(pi, {
    domain: "demo",
    initialState: () => ({ count: 0, log: [] }),
    commands: {
      increment: (_args, ctx) => {
        ctx.setState((s) => ({ ...s, count: s.count + 1 }));
        return { count: ctx.get().count };
      },
      echo: {
        schema: {
          description: "Append a line of text to the demo log.",
          type: "object",
          properties: { text: { type: "string" } },
          required: ["text"],
        },
        run: (args: { text?: unknown }, ctx) => {
          if (typeof args?.text !== "string") throw new SurfaceCommandError("invalid_args", 'echo needs {"text": "..."}');
          const text = args.text;
          ctx.setState((s) => ({ ...s, log: [...s.log, text] }));
          return { echoed: text, size: ctx.get().log.length };
        },
      },
    },
  });

  pi.registerTool({
    name: "increment",
    label: "Increment",
    description: "Add one to the demo counter (the same counter as the UI's increment button) and return the new count.",
    parameters: Type.Object({}),
    async execute(_toolCallId: string, _params: unknown, signal?: AbortSignal) {
      const r = await runCommand<{ count: number }>("demo", "increment", undefined, { signal });
      if (!r.ok) throw new Error(`demo.increment: ${r.error.code}: ${r.error.message}`);
      return { content: [{ type: "text", text: `count = ${r.data!.count}` }], details: { count: r.data!.count } };
    },
  });
}
