// Drives surfaced's /acp mount with the official ACP TypeScript SDK
// (client() + createHttpStream), unmodified. Run by acpgw's Go tests:
//
//   node scenarios.mjs <scenario>
//
// with ACP_URL (the mount's URL), ACP_TOKEN (a bearer token) and ACP_CWD (an
// absolute directory for sessions) in the environment. A scenario prints one
// JSON object with what it observed on stdout and exits 0; the Go test
// judges it. Any failure inside the SDK exits 1 with the error on stderr.
import { client } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";

const url = process.env.ACP_URL;
const token = process.env.ACP_TOKEN;
const cwd = process.env.ACP_CWD;
const scenario = process.argv[2];

function stream() {
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (process.env.ACP_AGENT) headers["Surfaced-Agent"] = process.env.ACP_AGENT;
  return createHttpStream(url, { headers });
}

const init = { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: "sdk-test", version: "1" } };

// recorder collects session/update notifications (per session) and markers
// in one arrival-ordered log.
function recorder() {
  const log = [];
  return {
    log,
    onUpdate: ({ params }) => {
      const u = params.update;
      const entry = { session: params.sessionId, kind: u.sessionUpdate };
      if (u.content && u.content.type === "text") entry.text = u.content.text;
      if (u.toolCallId) entry.toolCallId = u.toolCallId;
      if (u.status) entry.status = u.status;
      if ("rawInput" in u) entry.rawInput = u.rawInput;
      if ("rawOutput" in u) entry.rawOutput = u.rawOutput;
      if (u.title !== undefined) entry.title = u.title;
      log.push(entry);
    },
    mark: (m) => log.push({ mark: m }),
  };
}

function textOf(log, session) {
  return log.filter((e) => e.kind === "agent_message_chunk" && (!session || e.session === session)).map((e) => e.text).join("");
}

async function waitFor(pred, what, ms = 10000) {
  const until = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const scenarios = {
  // initialize, session/new, a prompt streamed in chunks, session/list,
  // session/close; then a second connection loads the session (replay before
  // the answer) and prompts again.
  async roundtrip() {
    const out = {};
    const rec = recorder();
    await client({ name: "sdk-test" })
      .onNotification("session/update", rec.onUpdate)
      .connectWith(stream(), async (ctx) => {
        out.initialize = await ctx.request("initialize", init);
        const s = await ctx.buildSession(cwd).start();
        out.sessionId = s.sessionId;
        const chunks = [];
        const p = s.prompt("hello there");
        for (;;) {
          const m = await s.nextUpdate();
          if (m.kind === "stop") {
            out.stopReason = m.stopReason;
            break;
          }
          if (m.update.sessionUpdate === "agent_message_chunk") chunks.push(m.update.content.text);
        }
        await p;
        out.chunks = chunks;
        out.list = await ctx.request("session/list", {});
        out.listOtherCwd = await ctx.request("session/list", { cwd: "/nonexistent-dir-for-test" });
        out.close = await ctx.request("session/close", { sessionId: s.sessionId });
        s.dispose();
      });
    const rec2 = recorder();
    await client({ name: "sdk-test-2" })
      .onNotification("session/update", rec2.onUpdate)
      .connectWith(stream(), async (ctx) => {
        await ctx.request("initialize", init);
        out.load = await ctx.request("session/load", { sessionId: out.sessionId, cwd, mcpServers: [] });
        out.replayAtAnswer = rec2.log.slice();
        rec2.mark("after-load");
        const r = await ctx.request("session/prompt", { sessionId: out.sessionId, prompt: [{ type: "text", text: "again" }] });
        out.secondStop = r.stopReason;
        out.afterLoad = rec2.log.slice();
      });
    return out;
  },

  // session/cancel stops the running turn; its prompt answers cancelled.
  async cancel() {
    const out = {};
    const rec = recorder();
    await client({ name: "sdk-test" })
      .onNotification("session/update", rec.onUpdate)
      .connectWith(stream(), async (ctx) => {
        await ctx.request("initialize", init);
        const s = await ctx.request("session/new", { cwd, mcpServers: [] });
        const p = ctx.request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text: "slow please" }] });
        await waitFor(() => rec.log.some((e) => e.kind === "agent_message_chunk"), "the first chunk");
        await ctx.notify("session/cancel", { sessionId: s.sessionId });
        const r = await p;
        out.stopReason = r.stopReason;
        out.text = textOf(rec.log);
        // The session still works.
        const r2 = await ctx.request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text: "after" }] });
        out.afterStop = r2.stopReason;
        out.afterText = textOf(rec.log).slice(out.text.length);
      });
    return out;
  },

  // A prompt sent while a turn runs is held: it answers end_turn after the
  // next turn's reply, in order.
  async queued() {
    const out = {};
    const rec = recorder();
    await client({ name: "sdk-test" })
      .onNotification("session/update", rec.onUpdate)
      .connectWith(stream(), async (ctx) => {
        await ctx.request("initialize", init);
        const s = await ctx.request("session/new", { cwd, mcpServers: [] });
        const first = ctx.request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text: "slow first" }] })
          .then((r) => { rec.mark("first:" + r.stopReason); return r; });
        await waitFor(() => rec.log.some((e) => e.kind === "agent_message_chunk"), "the first chunk");
        const second = ctx.request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text: "second" }] })
          .then((r) => { rec.mark("second:" + r.stopReason); return r; });
        const third = ctx.request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text: "third" }] })
          .then((r) => { rec.mark("third:" + r.stopReason); return r; });
        await Promise.all([first, second, third]);
      });
    out.log = rec.log;
    return out;
  },

  // Two connections on one session each see the reply exactly once,
  // whoever prompted.
  async twoClients() {
    const out = {};
    const recA = recorder();
    const recB = recorder();
    let sessionId;
    let resumed;
    const resumedP = new Promise((r) => (resumed = r));
    let finished;
    const finishedP = new Promise((r) => (finished = r));
    const a = client({ name: "sdk-a" })
      .onNotification("session/update", recA.onUpdate)
      .connectWith(stream(), async (ctx) => {
        await ctx.request("initialize", init);
        const s = await ctx.request("session/new", { cwd, mcpServers: [] });
        sessionId = s.sessionId;
        await resumedP;
        const r = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "for both" }] });
        out.aStop = r.stopReason;
        await finishedP;
      });
    const b = (async () => {
      await waitFor(() => sessionId !== undefined, "the session id");
      await client({ name: "sdk-b" })
        .onNotification("session/update", recB.onUpdate)
        .connectWith(stream(), async (ctx) => {
          await ctx.request("initialize", init);
          out.resume = await ctx.request("session/resume", { sessionId, cwd, mcpServers: [] });
          resumed();
          await waitFor(() => textOf(recB.log) === "echo: for both", "B to see the reply");
          // Nothing more arrives twice.
          await new Promise((r) => setTimeout(r, 300));
          finished();
        });
    })();
    await Promise.all([a, b]);
    out.aText = textOf(recA.log);
    out.bText = textOf(recB.log);
    out.bKinds = recB.log.map((e) => e.kind);
    out.aKinds = recA.log.map((e) => e.kind);
    return out;
  },

  // A tool call and a permission request (the fake agent's "tool" and
  // "ask" prompts).
  async tools() {
    const out = {};
    const rec = recorder();
    out.permissions = [];
    await client({ name: "sdk-test" })
      .onNotification("session/update", rec.onUpdate)
      .onRequest("session/request_permission", async ({ params }) => {
        out.permissions.push(params);
        const allow = params.options.find((o) => o.kind === "allow_once");
        return { outcome: { outcome: "selected", optionId: allow.optionId } };
      })
      .connectWith(stream(), async (ctx) => {
        await ctx.request("initialize", init);
        const s = await ctx.request("session/new", { cwd, mcpServers: [] });
        out.toolStop = (await ctx.request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text: "tool" }] })).stopReason;
        out.askStop = (await ctx.request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text: "ask" }] })).stopReason;
      });
    out.log = rec.log;
    return out;
  },
};

const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}; have ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
const timer = setTimeout(() => {
  console.error(`scenario ${scenario} timed out`);
  process.exit(3);
}, 60000);
try {
  const out = await run();
  clearTimeout(timer);
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(0);
} catch (err) {
  clearTimeout(timer);
  console.error(err && err.stack ? err.stack : String(err));
  if (err && err.data !== undefined) console.error("data:", JSON.stringify(err.data));
  process.exit(1);
}
