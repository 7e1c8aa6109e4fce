// A complete surfaced/1 agent in Node with @surfaced/agent (docs/agents-typescript.md).
//
// It hosts the surface domain "demo" ({count, log}; commands increment and echo {text}), and
// chats through a model: an OpenAI-compatible server when SURFACED_LLM_BASE_URL is set, else the
// package's scripted model. Its tool "increment" runs the same command the UI's button runs,
// through the daemon, so the chat and the button move one counter.
import { defineAgent, defineSurface, defineTool, SurfaceCommandError } from "../../web/agent/dist/index.js";

const demo = defineSurface({
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
      run: (args, ctx) => {
        if (typeof args?.text !== "string") throw new SurfaceCommandError("invalid_args", 'echo needs {"text": "..."}');
        ctx.setState((s) => ({ ...s, log: [...s.log, args.text] }));
        return { echoed: args.text, size: ctx.get().log.length };
      },
    },
  },
});

const increment = defineTool({
  name: "increment",
  description: "Add one to the demo counter (the same counter as the UI's increment button) and return the new count.",
  parameters: { type: "object", properties: {} },
  async run(_args, ctx) {
    const r = await ctx.runCommand("demo", "increment");
    if (!r.ok) throw new Error(`demo.increment: ${r.error.code}: ${r.error.message}`);
    return `count = ${r.data.count}`;
  },
});

await defineAgent({
  name: "node-demo",
  system:
    'You are the surfaced demo agent. A counter lives in the surface "demo". ' +
    "When the user asks to increment it, call the tool increment and report the new count.",
  surfaces: [demo],
  tools: [increment],
}).run();
