// Unit tests of @surfaced/react's hooks and transport, with React rendering into happy-dom and a
// Session of @surfaced/client over a fake fetch and a fake EventSource the test drives. (The
// example app's browser test runs them against a real daemon in chromium.)
import test from "node:test";
import assert from "node:assert/strict";
import { Window } from "happy-dom";

const win = new Window({ url: "http://daemon.test/app/" });
globalThis.window = win;
globalThis.document = win.document;
if (typeof globalThis.navigator === "undefined") globalThis.navigator = win.navigator;
globalThis.IS_REACT_ACT_ENVIRONMENT = true;

const React = await import("react");
const { act, createElement: h } = React;
const { createRoot } = await import("react-dom/client");
const { Client } = await import("@surfaced/client");
const lib = await import("../dist/index.js");
const { FakeEventSource, fakeFetch, response, tick } = await import("../../client/test/fakes.mjs");

const demoOn = { domain: "demo", hosted: "agent", available: true, commands: ["increment"] };

// mount renders a component that calls hook() inside a provider; it returns the latest value.
async function mount(hook, routes = {}) {
  FakeEventSource.all = [];
  const f = fakeFetch({ "GET /api/sessions/s1/surfaces": response(200, { surfaces: [] }), ...routes });
  const client = new Client({ fetch: f.fetch, EventSource: FakeEventSource, XMLHttpRequest: null, setTimeout: () => 0, clearTimeout: () => {} });
  const session = client.session("s1");
  const seen = { current: undefined, renders: 0 };
  function Probe() {
    seen.current = hook();
    seen.renders++;
    return null;
  }
  const el = document.createElement("div");
  const root = createRoot(el);
  await act(async () => root.render(h(lib.SurfacedProvider, { session }, h(Probe))));
  const es = FakeEventSource.all.at(-1);
  await act(async () => es.open());
  const emit = (kind, id, data) => act(async () => es.emit(kind, id, data));
  return { seen, es, emit, requests: f.requests, unmount: () => act(async () => root.unmount()) };
}

test("useSurface: undefined and rev -1 before a snapshot, then the state plane's snapshots, revs only rising", async () => {
  const m = await mount(() => lib.useSurface("demo"), { "POST /api/sessions/s1/surfaces/demo/increment": response(200, { ok: true, data: { count: 99 } }) });
  assert.equal(m.seen.current.state, undefined);
  assert.equal(m.seen.current.rev, -1);
  assert.equal(m.seen.current.available, false);
  await m.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  assert.equal(m.seen.current.available, true);
  await m.emit("state", "1-2", { key: "surface:demo", value: { count: 2 }, rev: 2 });
  assert.deepEqual(m.seen.current.state, { count: 2 });
  await m.emit("state", "1-3", { key: "surface:demo", value: { count: 1 }, rev: 1 });
  assert.deepEqual(m.seen.current.state, { count: 2 }, "a lower rev is dropped");
  assert.equal(m.seen.current.rev, 2);
  const r = await m.seen.current.run("increment");
  assert.deepEqual(r, { ok: true, data: { count: 99 } });
  assert.deepEqual(m.seen.current.state, { count: 2 }, "the state never comes from a command's result");
  const renders = m.seen.renders;
  await m.emit("state", "1-4", { key: "other", value: 1, rev: 1 });
  assert.equal(m.seen.renders, renders, "another key does not re-render");
  await m.unmount();
});

test("useConversationBridge: the mode follows the session; prompt goes through the given chat sender", async () => {
  const sent = [];
  const m = await mount(() => lib.useConversationBridge("demo", { conversation: (text) => sent.push(text) }));
  assert.equal(m.seen.current.mode, "unavailable");
  await m.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  assert.equal(m.seen.current.mode, "prompt");
  const r = await m.seen.current.prompt({ title: "Add one", tool: "increment", params: [["by", 1]] });
  assert.equal(r.ok, true);
  assert.deepEqual(sent, ["Add one\n\n```surface-op\ntool: increment\nby: 1\n```"]);
  await m.emit("session", "1-2", { status: "error", surfaces: [{ ...demoOn, available: false }] });
  assert.equal(m.seen.current.mode, "unavailable");
  assert.equal(m.seen.current.available, false);
  await m.emit("session", "1-3", { status: "ready", surfaces: [demoOn] });
  assert.equal(m.seen.current.mode, "prompt");
  await m.emit("end", "1-4", { reason: "crashed" });
  assert.equal(m.seen.current.mode, "unavailable", "the session ended: read-only");
  await m.unmount();
});

test("useSurface: read-only once the session ended, whatever the frames before said", async () => {
  const m = await mount(() => lib.useSurface("demo"));
  await m.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  assert.equal(m.seen.current.available, true);
  await m.emit("session", "1-2", { status: "ended", code: "restart_exhausted" }); // no surfaces
  assert.equal(m.seen.current.available, false);
  await m.unmount();
});

test("useArtifacts: the list of its media type, kept live by artifact frames", async () => {
  const img = (id) => ({ id, mediaType: "image/png", size: 1 });
  const m = await mount(() => lib.useArtifacts({ mediaType: "image/*" }), {
    "GET /api/sessions/s1/artifacts?mediaType=image%2F*&limit=500": response(200, { artifacts: [img("b"), img("a")] }),
  });
  await act(async () => tick());
  assert.equal(m.seen.current.loading, false);
  assert.deepEqual(m.seen.current.artifacts.map((a) => a.id), ["b", "a"]);
  await m.emit("artifact", "1-1", { event: "added", artifact: img("c") });
  await m.emit("artifact", "1-2", { event: "added", artifact: { id: "t", mediaType: "text/plain" } });
  assert.deepEqual(m.seen.current.artifacts.map((a) => a.id), ["c", "b", "a"], "a text artifact is not an image");
  await m.emit("artifact", "1-3", { event: "deleted", artifact: img("b") });
  assert.deepEqual(m.seen.current.artifacts.map((a) => a.id), ["c", "a"]);
  assert.equal(m.seen.current.contentUrl("a"), "/api/artifacts/a/content");
  await m.unmount();
});

test("matchesMediaType", () => {
  assert.equal(lib.matchesMediaType("image/*", "image/png"), true);
  assert.equal(lib.matchesMediaType("text/plain", "text/plain; charset=utf-8"), true);
  assert.equal(lib.matchesMediaType("image/*", "imagex/png"), false);
  assert.equal(lib.matchesMediaType(undefined, "anything/else"), true);
});

test("surfacedChatTransport: POST …/chat with the last user message and the token; resume from …/chat/stream", async () => {
  const calls = [];
  const stream = 'data: {"type":"start","messageId":"turn-1"}\n\ndata: {"type":"text-start","id":"t"}\n\ndata: {"type":"text-delta","id":"t","delta":"hi"}\n\ndata: {"type":"text-end","id":"t"}\n\ndata: {"type":"finish"}\n\ndata: [DONE]\n\n';
  const fetch = async (url, init) => {
    calls.push({ url, init });
    if (init.method === "GET") return new Response(null, { status: 204 });
    return new Response(stream, { status: 200, headers: { "Content-Type": "text/event-stream", "x-vercel-ai-ui-message-stream": "v1" } });
  };
  const t = lib.surfacedChatTransport({ session: "s 1", baseUrl: "http://d.test/", token: "tok", fetch });
  const messages = [
    { id: "u1", role: "user", parts: [{ type: "text", text: "old" }] },
    { id: "a1", role: "assistant", parts: [{ type: "text", text: "answer" }] },
    { id: "u2", role: "user", parts: [{ type: "text", text: "new" }] },
  ];
  const chunks = await t.sendMessages({ chatId: "s 1", messages, trigger: "submit-message", messageId: undefined, abortSignal: undefined });
  const got = [];
  for await (const c of chunks) got.push(c.type === "text-delta" ? c.delta : c.type);
  assert.deepEqual(got, ["start", "text-start", "hi", "text-end", "finish"]);
  assert.equal(calls[0].url, "http://d.test/api/sessions/s%201/chat");
  assert.equal(new Headers(calls[0].init.headers).get("authorization"), "Bearer tok");
  assert.equal(calls[0].init.credentials, "omit");
  const body = JSON.parse(calls[0].init.body);
  assert.deepEqual(body.messages.map((m) => m.id), ["u2"]);
  assert.equal(body.trigger, "submit-message");
  assert.equal(await t.reconnectToStream({ chatId: "s 1" }), null, "204: nothing to resume");
  assert.equal(calls[1].url, "http://d.test/api/sessions/s%201/chat/stream");
  assert.equal(new Headers(calls[1].init.headers).get("authorization"), "Bearer tok");

  // Same origin, no token: the cookie.
  const same = lib.surfacedChatTransport({ session: "s1", fetch });
  await same.reconnectToStream({ chatId: "s1" });
  assert.equal(calls[2].url, "/api/sessions/s1/chat/stream");
  assert.equal(calls[2].init.credentials, "same-origin");
  assert.equal(new Headers(calls[2].init.headers).get("authorization"), null);
});

test("transcriptToUIMessages: a user message per prompt, an assistant message per turn", () => {
  const got = lib.transcriptToUIMessages([
    { role: "user", text: "increment", promptId: 1, turnId: 1, at: "" },
    { role: "thinking", text: "hmm", turnId: 1, at: "" },
    { role: "assistant", text: "Calling it.", turnId: 1, at: "" },
    { role: "tool", toolName: "increment", toolCallId: "c1", args: {}, result: "count = 1", turnId: 1, at: "" },
    { role: "tool", toolName: "echo", toolCallId: "c2", args: { text: "x" }, result: "boom", isError: true, turnId: 1, at: "" },
    { role: "assistant", text: "Done.", turnId: 1, at: "" },
    { role: "user", text: "again", promptId: 2, turnId: 2, at: "" },
    { role: "assistant", text: "Sure.", turnId: 2, at: "" },
  ]);
  assert.deepEqual(got.map((m) => m.id), ["prompt-1", "turn-1", "prompt-2", "turn-2"]);
  assert.deepEqual(got[1].parts.map((p) => p.type + (p.state ? ":" + p.state : "")), [
    "reasoning:done",
    "text:done",
    "tool-increment:output-available",
    "tool-echo:output-error",
    "text:done",
  ]);
  assert.equal(got[1].parts[2].output, "count = 1");
  assert.equal(got[1].parts[3].errorText, "boom");
});

test("a hook outside SurfacedProvider says so", async () => {
  function Probe() {
    lib.useSurface("demo");
    return null;
  }
  const root = createRoot(document.createElement("div"));
  const errors = [];
  const orig = console.error;
  console.error = () => {};
  try {
    await act(async () => {
      root.render(h(class extends React.Component {
        constructor(p) {
          super(p);
          this.state = {};
        }
        static getDerivedStateFromError(e) {
          errors.push(e.message);
          return { failed: true };
        }
        render() {
          return this.state.failed ? null : h(Probe);
        }
      }));
    });
  } finally {
    console.error = orig;
  }
  // React renders once more after an error before it gives up: the same error.
  assert.deepEqual([...new Set(errors)], ["useSurface must be used inside <SurfacedProvider>"]);
});
