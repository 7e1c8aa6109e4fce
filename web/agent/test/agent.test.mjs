// Tests of @surfaced/agent (the committed build, web/agent/dist, which build.mjs --check holds to
// the source): framing, result normalization, the standalone agent over real streams, and whole
// lines through a real non-blocking pipe whose stdout.write pi has replaced. The package inside
// the real pi, under the real daemon, is tested in internal/pitest.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  defineAgent,
  defineSurface,
  getSessionState,
  isPiRPC,
  normalize,
  parseTraceparent,
  runCommand,
  scriptedModel,
  SurfaceCommandError,
} from "../dist/index.js";

const dist = fileURLToPath(new URL("../dist/index.js", import.meta.url));

// A daemon on the other end of two streams: it reads the agent's lines and writes its own.
function wire(options) {
  const input = new PassThrough();
  const output = new PassThrough();
  const agent = defineAgent({ model: scriptedModel(), log: () => {}, ...options });
  const lines = [];
  const waiters = [];
  let buf = "";
  output.on("data", (c) => {
    buf += c.toString("utf8");
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = JSON.parse(buf.slice(0, i));
      buf = buf.slice(i + 1);
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.pred(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  const done = agent.run({ input, output });
  return {
    agent,
    lines,
    done,
    send: (v) => input.write(JSON.stringify(v) + "\n"),
    end: () => input.end(),
    next(pred) {
      const seen = lines.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const w = { pred, resolve };
        waiters.push(w);
        setTimeout(() => reject(new Error("no such line; seen: " + JSON.stringify(lines).slice(0, 2000))), 5000).unref();
      });
    },
  };
}

const counter = defineSurface({
  domain: "demo",
  initialState: { count: 0, log: [] },
  commands: {
    increment: (_a, ctx) => {
      ctx.setState((s) => ({ ...s, count: s.count + 1 }));
      return { count: ctx.get().count };
    },
    value: (_a, ctx) => ctx.get().count,
    nothing: () => undefined,
    coded: (_a, ctx) => {
      ctx.setState({ count: 99, log: [] });
      throw new SurfaceCommandError("out_of_stock", "none left");
    },
    thrown: () => {
      throw new Error("boom");
    },
    thrownString: () => {
      throw "a string";
    },
    refused: () => ({ ok: false, error: { code: "not_allowed", message: "no" } }),
    badRefusal: () => ({ ok: false, error: { message: "no code" } }),
    // A SurfaceCommandError from another copy of the package (pi gives each extension its own).
    foreign: () => {
      const e = new Error("from another copy");
      e.name = "SurfaceCommandError";
      e.code = "foreign_code";
      throw e;
    },
    async deadline(_a, ctx) {
      await new Promise((resolve, reject) => {
        const t = setTimeout(resolve, 5000);
        ctx.signal.addEventListener("abort", () => {
          clearTimeout(t);
          reject(ctx.signal.reason);
        });
      });
    },
    args: (a) => a,
  },
  schemas: { increment: { description: "Add one.", type: "object", properties: {} } },
  data: {
    rows: (req) => ({ data: { from: req.query.get("from"), rest: req.rest, rev: req.rev }, etag: `rows-${req.rev}`, maxAge: 60 }),
    missing: () => {
      throw new SurfaceCommandError("not_found", "no such rows");
    },
    bad: () => ({ etag: "x" }),
  },
});

test("normalize: a value, undefined, a refusal passed through, a malformed refusal", () => {
  assert.deepEqual(normalize({ n: 1 }), { ok: true, data: { n: 1 } });
  assert.deepEqual(normalize(0), { ok: true, data: 0 });
  assert.deepEqual(normalize(undefined), { ok: true });
  assert.deepEqual(normalize({ ok: false, error: { code: "x_y", message: "m" } }), { ok: false, error: { code: "x_y", message: "m" } });
  assert.equal(normalize({ ok: false }).error.code, "dispatch_failed");
  assert.deepEqual(normalize({ ok: true, data: 1 }), { ok: true, data: { ok: true, data: 1 } });
});

test("isPiRPC", () => {
  assert.ok(isPiRPC(["node", "pi", "--mode", "rpc"]));
  assert.ok(isPiRPC(["node", "pi", "--mode=rpc", "-e", "x.ts"]));
  assert.ok(!isPiRPC(["node", "pi", "--mode", "json"]));
  assert.ok(!isPiRPC(["node", "pi", "-p", "rpc"]));
});

test("outside an agent, runCommand and the session state say so", async () => {
  const r = await runCommand("demo", "increment");
  assert.equal(r.ok, false);
  assert.equal(r.error.code, "unavailable");
  assert.equal(getSessionState().available, false);
  assert.throws(() => getSessionState().set("ui.theme", "dark"), /not connected/);
});

test("agent_ready first, with the domain, its commands, initial state and schemas", async () => {
  const w = wire({ name: "t", surfaces: [counter], images: true });
  const ready = await w.next((l) => l.type === "agent_ready");
  assert.equal(w.lines[0].type, "agent_ready");
  assert.equal(ready.protocol, "surfaced/1");
  assert.equal(ready.images, true);
  assert.deepEqual(ready.surfaces[0].domain, "demo");
  assert.deepEqual(ready.surfaces[0].initialState, { count: 0, log: [] });
  assert.ok(ready.surfaces[0].commands.includes("increment") && ready.surfaces[0].commands.includes("thrown"));
  assert.equal(ready.surfaces[0].data, true);
  assert.deepEqual(ready.surfaces[0].schemas, { increment: { description: "Add one.", type: "object", properties: {} } });
  w.send({ id: "r1", type: "get_commands" });
  const cmds = await w.next((l) => l.id === "r1");
  assert.deepEqual(cmds.data.commands.map((c) => c.name), ["surface:demo"]);
  w.send({ id: "x1", type: "frobnicate" });
  const unknown = await w.next((l) => l.id === "x1");
  assert.equal(unknown.success, false);
  assert.equal(unknown.error, "Unknown command: frobnicate");
  w.end();
  await w.done;
});

test("dispatch: results normalized as the protocol says; a failed command changes nothing", async () => {
  const w = wire({ surfaces: [counter] });
  const state = { count: 4, log: [] };
  let n = 0;
  const run = async (action, extra = {}) => {
    const id = `demo#${++n}`;
    w.send({ type: "surface_dispatch", id, domain: "demo", action, args: {}, state, rev: 7, ...extra });
    return w.next((l) => l.type === "surface_dispatch_result" && l.id === id);
  };
  let r = await run("increment");
  assert.deepEqual(r.result, { ok: true, data: { count: 5 } });
  assert.deepEqual(r.state, { count: 5, log: [] });
  assert.deepEqual(state, { count: 4, log: [] });
  r = await run("value");
  assert.deepEqual(r.result, { ok: true, data: 4 });
  assert.equal(r.state, undefined, "no setState: no state");
  r = await run("nothing");
  assert.deepEqual(r.result, { ok: true });
  r = await run("coded");
  assert.deepEqual(r.result, { ok: false, error: { code: "out_of_stock", message: "none left" } });
  assert.equal(r.state, undefined, "a failed command's state is not sent");
  r = await run("thrown");
  assert.deepEqual(r.result, { ok: false, error: { code: "dispatch_failed", message: "boom" } });
  r = await run("thrownString");
  assert.deepEqual(r.result, { ok: false, error: { code: "dispatch_failed", message: "a string" } });
  r = await run("refused");
  assert.deepEqual(r.result, { ok: false, error: { code: "not_allowed", message: "no" } });
  r = await run("badRefusal");
  assert.equal(r.result.error.code, "dispatch_failed");
  r = await run("foreign");
  assert.deepEqual(r.result, { ok: false, error: { code: "foreign_code", message: "from another copy" } });
  r = await run("constructor");
  assert.equal(r.result.error.code, "unknown_action");
  r = await run("surface:demo");
  assert.deepEqual(r.result, { ok: true });
  r = await run("deadline", { deadline: new Date(Date.now() + 50).toISOString() });
  assert.equal(r.result.error.code, "timeout");
  r = await run("increment", { state: null });
  assert.deepEqual(r.state, { count: 1, log: [] }, "no state: the initial state");
  w.send({ type: "surface_dispatch", id: "a1", domain: "demo", action: "args", args: { x: [1, "2"] }, state, rev: 1 });
  assert.deepEqual((await w.next((l) => l.id === "a1")).result.data, { x: [1, "2"] });
  w.send({ type: "surface_dispatch", id: "n1", domain: "nope", action: "x", state, rev: 1 });
  assert.equal((await w.next((l) => l.id === "n1")).result.error.code, "surface_not_registered");
  w.end();
  await w.done;
});

test("data pages: a page with its etag, a coded refusal, an invalid page", async () => {
  const w = wire({ surfaces: [counter] });
  w.send({ type: "surface_fetch", id: "f1", domain: "demo", path: "rows/2", query: "from=100&n=5", rev: 12 });
  const f1 = await w.next((l) => l.id === "f1");
  assert.deepEqual(f1, { type: "surface_fetch_result", id: "f1", ok: true, data: { from: "100", rest: "2", rev: 12 }, etag: "rows-12", maxAge: 60 });
  w.send({ type: "surface_fetch", id: "f2", domain: "demo", path: "missing", rev: 1 });
  assert.equal((await w.next((l) => l.id === "f2")).error.code, "not_found");
  w.send({ type: "surface_fetch", id: "f3", domain: "demo", path: "nothing-here", rev: 1 });
  assert.equal((await w.next((l) => l.id === "f3")).error.code, "not_found");
  w.send({ type: "surface_fetch", id: "f4", domain: "demo", path: "bad", rev: 1 });
  assert.equal((await w.next((l) => l.id === "f4")).error.code, "dispatch_failed");
  w.end();
  await w.done;
});

test("a turn: the tool runs the command through the daemon, while the agent keeps serving it", async () => {
  const w = wire({
    surfaces: [counter],
    tools: [
      {
        name: "increment",
        async run(_args, ctx) {
          const r = await ctx.runCommand("demo", "increment");
          return r.ok ? `count = ${r.data.count}` : `failed: ${r.error.code}`;
        },
      },
    ],
  });
  w.send({ id: "turn.prompt.1", type: "prompt", message: "please increment" });
  const ans = await w.next((l) => l.type === "response" && l.id === "turn.prompt.1");
  assert.equal(ans.success, true);
  const cmd = await w.next((l) => l.type === "surface_command");
  assert.deepEqual([cmd.domain, cmd.action], ["demo", "increment"]);
  // The daemon runs it on the agent's own domain: a dispatch, then the command's result.
  w.send({ type: "surface_dispatch", id: "demo#9", domain: "demo", action: "increment", args: {}, state: { count: 2, log: [] }, rev: 3 });
  const d = await w.next((l) => l.type === "surface_dispatch_result" && l.id === "demo#9");
  w.send({ type: "surface_command_result", id: cmd.id, ok: true, data: d.result.data });
  const end = await w.next((l) => l.type === "agent_end");
  const types = w.lines.map((l) => l.type);
  assert.ok(types.indexOf("agent_start") < types.indexOf("tool_execution_start"));
  const toolEnd = w.lines.find((l) => l.type === "tool_execution_end");
  assert.deepEqual(toolEnd.result.content, [{ type: "text", text: "count = 3" }]);
  assert.equal(toolEnd.isError, false);
  const last = end.messages[end.messages.length - 1];
  assert.equal(last.stopReason, "stop");
  assert.match(last.content[0].text, /The increment tool answered: count = 3\./);
  w.send({ id: "m1", type: "get_messages" });
  // The prompt, the assistant's tool call, its result, the answer.
  assert.deepEqual((await w.next((l) => l.id === "m1")).data.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"]);
  w.end();
  await w.done;
});

test("trace context: a dispatch's and a prompt's traceparent reach the command and the tool; a bad one is ignored", async () => {
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const seen = {};
  const traced = defineSurface({
    domain: "t",
    initialState: {},
    commands: { look: (_a, ctx) => ctx.trace ?? null },
  });
  const w = wire({
    surfaces: [traced],
    tools: [{ name: "increment", run: (_a, ctx) => ((seen.tool = ctx.trace), "ok") }],
  });
  w.send({ traceparent: tp, type: "surface_dispatch", id: "t#1", domain: "t", action: "look", args: {}, state: {}, rev: 1 });
  const d = await w.next((l) => l.type === "surface_dispatch_result" && l.id === "t#1");
  assert.deepEqual(d.result.data, { traceparent: tp, traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", sampled: true });
  for (const [i, bad] of ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", 7].entries()) {
    w.send({ traceparent: bad, type: "surface_dispatch", id: `t#b${i}`, domain: "t", action: "look", args: {}, state: {}, rev: 1 });
    const r = await w.next((l) => l.type === "surface_dispatch_result" && l.id === `t#b${i}`);
    assert.equal(r.result.ok, true);
    assert.equal(r.result.data, null, `traceparent ${JSON.stringify(bad)}`);
  }
  const promptTp = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-00";
  w.send({ traceparent: promptTp, id: "turn.prompt.1", type: "prompt", message: "please increment" });
  await w.next((l) => l.type === "agent_end");
  assert.equal(seen.tool?.traceparent, promptTp);
  assert.equal(seen.tool?.sampled, false);
  assert.equal(parseTraceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"), undefined);
  w.end();
  await w.done;
});

test("abort: the run ends aborted, answered with its agent_end", async () => {
  const w = wire({ model: scriptedModel({ slowPace: 20 }) });
  w.send({ id: "p", type: "prompt", message: "slow" });
  await w.next((l) => l.type === "message_update" && l.assistantMessageEvent.type === "text_delta");
  w.send({ id: "s", type: "get_state" });
  assert.equal((await w.next((l) => l.id === "s")).data.isStreaming, true);
  w.send({ id: "a", type: "abort" });
  const end = await w.next((l) => l.type === "agent_end");
  assert.equal(end.messages.at(-1).stopReason, "aborted");
  const abort = await w.next((l) => l.id === "a");
  assert.equal(abort.success, true);
  assert.equal(w.lines.indexOf(abort), w.lines.indexOf(end) + 1);
  w.send({ id: "s2", type: "get_state" });
  assert.equal((await w.next((l) => l.id === "s2")).data.isStreaming, false);
  w.end();
  await w.done;
});

test("session state: clients' writes arrive, the agent's go out, surface:* is refused", async () => {
  const changes = [];
  const w = wire({ onStateChanged: (c) => changes.push(c) });
  await w.next((l) => l.type === "agent_ready");
  w.send({ type: "state_changed", key: "ui.theme", value: "dark", rev: 3 });
  w.send({ type: "state_changed", key: "gone", rev: 4, deleted: true });
  w.send({ id: "sync", type: "get_state" });
  await w.next((l) => l.id === "sync");
  assert.deepEqual(changes, [{ key: "ui.theme", value: "dark", rev: 3 }, { key: "gone", rev: 4, deleted: true }]);
  const st = w.agent.state;
  assert.equal(st.available, true);
  assert.equal(st.get("ui.theme"), "dark");
  // The module-level view is the running agent's.
  assert.equal(getSessionState().get("ui.theme"), "dark");
  st.set("notes.last", { text: "milk" });
  st.delete("ui.theme");
  assert.deepEqual(await w.next((l) => l.type === "state_set"), { type: "state_set", key: "notes.last", value: { text: "milk" } });
  assert.deepEqual(await w.next((l) => l.type === "state_delete"), { type: "state_delete", key: "ui.theme" });
  assert.deepEqual(st.snapshot(), { "notes.last": { text: "milk" } });
  assert.throws(() => st.set("surface:demo", {}), (e) => e.code === "state_refused");
  w.end();
  await w.done;
});

test("artifacts: calls go out as lines and failures keep their codes", async () => {
  const w = wire({});
  await w.next((l) => l.type === "agent_ready");
  const put = w.agent.artifacts.put("out.png", "image/png", { name: "out.png" });
  const line = await w.next((l) => l.type === "artifact_put");
  assert.deepEqual([line.path, line.mediaType, line.name], ["out.png", "image/png", "out.png"]);
  w.send({ type: "artifact_put_result", id: line.id, ok: false, error: { code: "path_refused", message: "outside" } });
  await assert.rejects(put, (e) => e.code === "path_refused");
  const url = w.agent.artifacts.url("att_x", 60);
  const u = await w.next((l) => l.type === "artifact_url");
  assert.equal(u.ttl, 60);
  w.send({ type: "artifact_url_result", id: u.id, ok: true, url: "/api/artifacts/att_x/content?sig=1" });
  assert.equal(await url, "/api/artifacts/att_x/content?sig=1");
  w.end();
  await w.done;
});

// pi takes process.stdout over (its write goes to stderr) and the pipe is non-blocking: a line
// far over the pipe's 64 KiB, written through the package while the process writes lines of its
// own and the reader is slow, arrives whole and never interleaved.
test("whole lines through a non-blocking pipe whose stdout.write was replaced", async () => {
  const probe = spawn(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `
      const dist = ${JSON.stringify(dist)};
      const m = await import(dist);
      const raw = process.stdout.write.bind(process.stdout);
      process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);
      console.log("to stderr, not the protocol");
      // The package writes a line through the stream's own write: a standalone agent's host.
      const agent = m.defineAgent({ name: "pipe", log: () => {} });
      const input = new (await import("node:stream")).PassThrough();
      void agent.run({ input, output: process.stdout });
      const big = "y".repeat(2 << 20);
      for (let i = 0; i < 6; i++) {
        raw(JSON.stringify({ type: "pi_line", i, pad: "p".repeat(100000) }) + "\\n");
        agent.host.send({ type: "big", i, big });
      }
      raw(JSON.stringify({ type: "done" }) + "\\n");
      input.end();
      `,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  probe.stderr.on("data", (c) => (stderr += c));
  // A slow reader: the pipe fills, and the writer meets EAGAIN and partial writes.
  const lines = await new Promise((resolve, reject) => {
    const got = [];
    let buf = Buffer.alloc(0);
    const take = (c) => {
      buf = Buffer.concat([buf, c]);
      let i;
      while ((i = buf.indexOf(10)) >= 0) {
        got.push(buf.subarray(0, i).toString("utf8"));
        buf = buf.subarray(i + 1);
      }
    };
    probe.stdout.pause();
    const tick = setInterval(() => {
      const c = probe.stdout.read(128 << 10) ?? probe.stdout.read();
      if (c) take(c);
    }, 1);
    probe.stdout.on("end", () => {
      clearInterval(tick);
      resolve(got);
    });
    probe.on("error", reject);
  });
  const parsed = lines.map((l) => JSON.parse(l)); // every line is whole JSON
  assert.equal(parsed[0].type, "agent_ready");
  assert.deepEqual(
    parsed.filter((l) => l.type === "big").map((l) => [l.i, l.big.length]),
    [0, 1, 2, 3, 4, 5].map((i) => [i, 2 << 20]),
  );
  assert.equal(parsed.filter((l) => l.type === "pi_line").length, 6);
  assert.equal(parsed.at(-1).type, "done");
  assert.match(stderr, /to stderr, not the protocol/);
});

test("hooks: hydrate after agent_ready and onTurnEnd after agent_end run as the domain's commands", async () => {
  const w = wire({
    surfaces: [
      defineSurface({
        domain: "h",
        initialState: { starts: 0, turns: 0 },
        commands: {},
        hydrate: (ctx) => ({ ...ctx.get(), starts: ctx.get().starts + 1 }),
        onTurnEnd: (ctx) => ctx.setState((s) => ({ ...s, turns: s.turns + 1 })),
      }),
    ],
  });
  const ready = await w.next((l) => l.type === "agent_ready");
  assert.deepEqual(ready.surfaces[0].commands, ["hydrate", "turn_end"]);
  // The agent runs hydrate through the daemon, which dispatches it back.
  const hydrate = await w.next((l) => l.type === "surface_command" && l.action === "hydrate");
  w.send({ type: "surface_dispatch", id: "h#1", domain: "h", action: "hydrate", args: {}, state: { starts: 4, turns: 2 }, rev: 9 });
  assert.deepEqual((await w.next((l) => l.id === "h#1")).state, { starts: 5, turns: 2 });
  w.send({ type: "surface_command_result", id: hydrate.id, ok: true });
  w.send({ id: "p", type: "prompt", message: "hi" });
  await w.next((l) => l.type === "agent_end");
  const turnEnd = await w.next((l) => l.type === "surface_command" && l.action === "turn_end");
  w.send({ type: "surface_dispatch", id: "h#2", domain: "h", action: "turn_end", args: {}, state: { starts: 5, turns: 2 }, rev: 10 });
  assert.deepEqual((await w.next((l) => l.id === "h#2")).state, { starts: 5, turns: 3 });
  w.send({ type: "surface_command_result", id: turnEnd.id, ok: true });
  assert.throws(
    () => defineAgent({ surfaces: [{ domain: "x", initialState: {}, commands: { hydrate: () => 1 }, hydrate: () => {} }] }),
    /the command hydrate is the hydrate hook's/,
  );
  w.end();
  await w.done;
});
