// Tests for static/surfaced.js, run by `node --test` (TestSurfacedJS in webui_test.go runs it).
// The library is loaded the way a browser loads a classic script: evaluated in its own context
// whose `window` is a fake with just the globals a test needs.
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import vm from "node:vm";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const source = fs.readFileSync(path.join(here, "..", "static", "surfaced.js"), "utf8");
const goldenPath = process.env.SURFACED_GOLDEN || path.join(here, "..", "..", "..", "..", "actors", "surface", "testdata", "surface-op.golden.json");

// load evaluates surfaced.js with window = globals and returns window.Surfaced.
function load(globals = {}) {
  const window = { console: { error() {}, warn() {} }, ...globals };
  const context = vm.createContext({ window });
  vm.runInContext(source, context, { filename: "surfaced.js" });
  assert.ok(window.Surfaced, "surfaced.js did not define window.Surfaced");
  return window.Surfaced;
}

// plain copies a value out of the vm realm so deepStrictEqual compares data, not prototypes.
const plain = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

function response(status, body, { raw } = {}) {
  const text = raw !== undefined ? raw : body === undefined ? "" : JSON.stringify(body);
  return { ok: status >= 200 && status < 300, status, statusText: "", text: async () => text };
}

// ------------------------------------------------------------------ renderSurfaceOp

test("renderSurfaceOp matches the golden file byte for byte", () => {
  const S = load();
  const cases = JSON.parse(fs.readFileSync(goldenPath, "utf8"));
  assert.ok(cases.length >= 10, "golden file too small");
  for (const c of cases) {
    const got = S.renderSurfaceOp(c.op);
    assert.equal(Buffer.from(got, "utf8").toString("hex"), Buffer.from(c.want, "utf8").toString("hex"), c.name);
  }
});

test("renderSurfaceOp skips undefined values and stringifies others", () => {
  const S = load();
  assert.equal(
    S.renderSurfaceOp({ title: "T", tool: "x", params: [["a", undefined], ["n", 0], ["f", false], ["s", "v"]] }),
    "T\n\n```surface-op\ntool: x\nn: 0\nf: false\ns: v\n```"
  );
  assert.equal(S.renderSurfaceOp({ title: "T", tool: "x", params: [], fence: null }), "T\n\n```surface-op\ntool: x\n```");
});

// ------------------------------------------------------------------ state store

test("state store applies frames by rev and drops stale ones", () => {
  const S = load();
  const st = new S.StateStore();
  assert.equal(st.apply({ key: "surface:demo", value: { count: 0 }, rev: 1 }), true);
  assert.equal(st.apply({ key: "surface:demo", value: { count: 2 }, rev: 3 }), true);
  assert.equal(st.apply({ key: "surface:demo", value: { count: 1 }, rev: 2 }), false, "lower rev must be dropped");
  assert.equal(st.apply({ key: "surface:demo", value: { count: 9 }, rev: 3 }), false, "equal rev must be dropped");
  assert.deepStrictEqual(plain(st.get("surface:demo")), { value: { count: 2 }, rev: 3 });
  // Keys are independent.
  assert.equal(st.apply({ key: "canvas.model", value: "m", rev: 1 }), true);
  assert.deepStrictEqual(plain(st.get("canvas.model")), { value: "m", rev: 1 });
});

test("state store keeps tombstones: a late lower rev never resurrects a deleted key", () => {
  const S = load();
  const st = new S.StateStore();
  st.apply({ key: "k", value: "a", rev: 1 });
  assert.equal(st.apply({ key: "k", rev: 3, deleted: true }), true);
  assert.equal(st.get("k"), undefined);
  assert.equal(st.rev("k"), 3);
  assert.deepStrictEqual(plain(st.entry("k")), { deleted: true, rev: 3 });
  assert.equal(st.apply({ key: "k", value: "late", rev: 2 }), false);
  assert.equal(st.apply({ key: "k", value: "same", rev: 3 }), false);
  assert.equal(st.get("k"), undefined);
  assert.deepStrictEqual(plain(st.keys()), []);
  assert.equal(st.apply({ key: "k", value: "back", rev: 4 }), true);
  assert.deepStrictEqual(plain(st.get("k")), { value: "back", rev: 4 });
  // A delete of a key never seen is a tombstone too.
  st.apply({ key: "never", rev: 5, deleted: true });
  assert.equal(st.apply({ key: "never", value: 1, rev: 1 }), false);
});

test("state store rejects malformed frames", () => {
  const S = load();
  const st = new S.StateStore();
  for (const bad of [null, {}, { key: "k" }, { key: "k", rev: "1" }, { key: "", rev: 1 }, { key: 5, rev: 1 }, { key: "k", rev: NaN }]) {
    assert.equal(st.apply(bad), false, JSON.stringify(bad));
  }
  assert.deepStrictEqual(plain(st.keys()), []);
});

test("state store notifies per key and resets", () => {
  const S = load();
  const st = new S.StateStore();
  const seen = [];
  const off = st.on("a", (e, key) => seen.push([key, plain(e)]));
  const any = [];
  st.onAny((key, e) => any.push([key, plain(e)]));
  st.apply({ key: "a", value: 1, rev: 1 });
  st.apply({ key: "a", value: 0, rev: 1 }); // dropped: no notification
  st.apply({ key: "b", value: 2, rev: 1 });
  st.apply({ key: "a", rev: 2, deleted: true });
  off();
  st.apply({ key: "a", value: 3, rev: 3 });
  assert.deepStrictEqual(seen, [["a", { value: 1, rev: 1 }], ["a", undefined]]);
  st.reset();
  assert.equal(st.get("a"), undefined);
  assert.equal(st.rev("a"), undefined, "reset forgets tombstones and revs");
  assert.equal(st.apply({ key: "a", value: "low", rev: 1 }), true, "after reset any rev applies");
  assert.deepStrictEqual(any.slice(0, 3), [["a", { value: 1, rev: 1 }], ["b", { value: 2, rev: 1 }], ["a", undefined]]);
  assert.ok(any.some(([k, e]) => k === "b" && e === undefined), "reset notifies removed keys");
});

// ------------------------------------------------------------------ fake browser for sessions

class FakeEventSource {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSED = 2;
  static all = [];
  constructor(url, opts) {
    this.url = url;
    this.opts = opts;
    this.readyState = FakeEventSource.CONNECTING;
    this.listeners = new Map();
    this.closedByClient = false;
    FakeEventSource.all.push(this);
  }
  addEventListener(kind, fn) {
    if (!this.listeners.has(kind)) this.listeners.set(kind, []);
    this.listeners.get(kind).push(fn);
  }
  close() {
    this.readyState = FakeEventSource.CLOSED;
    this.closedByClient = true;
  }
  open() {
    this.readyState = FakeEventSource.OPEN;
    this.onopen && this.onopen({});
  }
  emit(kind, id, data) {
    for (const fn of this.listeners.get(kind) || []) fn({ data: typeof data === "string" ? data : JSON.stringify(data), lastEventId: id });
  }
  fail(closed) {
    this.readyState = closed ? FakeEventSource.CLOSED : FakeEventSource.CONNECTING;
    this.onerror && this.onerror({});
  }
}

function fakeBrowser(routes = {}) {
  FakeEventSource.all = [];
  const requests = [];
  const timers = [];
  const fetch = async (url, init) => {
    requests.push({ url, method: init.method, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    const key = init.method + " " + url;
    const r = routes[key];
    if (typeof r === "function") return r(init);
    if (r) return r;
    return response(404, { error: { code: "not_found", message: "no route " + key } });
  };
  const S = load({
    fetch,
    EventSource: FakeEventSource,
    setTimeout: (fn, ms) => {
      timers.push({ fn, ms });
      return timers.length;
    },
    clearTimeout: () => {},
  });
  return { S, requests, timers, sources: FakeEventSource.all };
}

const tick = () => new Promise((r) => setImmediate(r));

test("subscribe applies frames, remembers the last id and resyncs", async () => {
  const { S, sources } = fakeBrowser({
    "GET /api/sessions/s1/surfaces": response(200, { surfaces: [{ domain: "demo", commands: ["increment"], hosted: "agent", rev: 1 }] }),
  });
  const session = new S.Client().session("s1");
  const got = [];
  session.subscribe({
    state: (f, applied) => got.push(["state", f.key, applied]),
    session: (f) => got.push(["session", f.status]),
    resync: () => got.push(["resync"]),
  });
  assert.equal(sources.length, 1);
  assert.equal(sources[0].url, "/api/sessions/s1/events");
  const es = sources[0];
  es.open();
  es.emit("state", "e1-4", { key: "surface:demo", value: { count: 0, log: [] }, rev: 1 });
  es.emit("session", "e1-4", { status: "ready", busy: false, queued: 0 });
  es.emit("state", "e1-5", { key: "surface:demo", value: { count: 1, log: [] }, rev: 2 });
  es.emit("state", "e1-6", { key: "surface:demo", value: { count: 0, log: [] }, rev: 1 });
  await tick();
  assert.equal(session.lastEventId, "e1-6");
  assert.deepStrictEqual(plain(session.surface("demo")), {
    domain: "demo", state: { count: 1, log: [] }, rev: 2, available: true, known: true, commands: ["increment"], hosted: "agent",
  });
  assert.deepStrictEqual(plain(session.surface("other")), { domain: "other", state: null, rev: -1, available: false, known: true, commands: [] });
  es.emit("state", "e1-7", { key: "x.y", rev: 3, deleted: true });
  es.emit("resync", "e2-1", { reason: "epoch" });
  assert.equal(session.state("surface:demo"), undefined, "resync clears the view");
  assert.equal(session.store.rev("x.y"), undefined, "resync clears tombstones too");
  es.emit("state", "e2-1", { key: "surface:demo", value: { count: 7, log: [] }, rev: 1 });
  assert.deepStrictEqual(plain(session.state("surface:demo")), { value: { count: 7, log: [] }, rev: 1 });
  assert.deepStrictEqual(got.map((g) => g.join(" ")), [
    "state surface:demo true", "session ready", "state surface:demo true", "state surface:demo false",
    "state x.y true", "resync", "state surface:demo true",
  ]);
});

test("a frame that is not JSON is reported and skipped", () => {
  const { S, sources } = fakeBrowser({ "GET /api/sessions/s1/surfaces": response(200, { surfaces: [] }) });
  const session = new S.Client().session("s1");
  const errors = [];
  const states = [];
  session.subscribe({ error: (e) => errors.push(plain(e)), state: (f) => states.push(f.key) });
  sources[0].emit("state", "e-1", "{not json");
  sources[0].emit("state", "e-2", { key: "a.b", value: 1, rev: 1 });
  assert.deepStrictEqual(errors, [{ code: "invalid_frame", message: "a state frame is not JSON", fatal: false }]);
  assert.deepStrictEqual(states, ["a.b"]);
});

test("a throwing handler does not break the stream", () => {
  const { S, sources } = fakeBrowser({ "GET /api/sessions/s1/surfaces": response(200, { surfaces: [] }) });
  const session = new S.Client().session("s1");
  session.subscribe({ state: () => { throw new Error("handler bug"); } });
  sources[0].emit("state", "e-1", { key: "a.b", value: 1, rev: 1 });
  sources[0].emit("state", "e-2", { key: "a.b", value: 2, rev: 2 });
  assert.deepStrictEqual(plain(session.state("a.b")), { value: 2, rev: 2 });
});

test("a closed stream is reopened with ?lastEventId=, a live one is left to the browser", async () => {
  const { S, sources, timers } = fakeBrowser({
    "GET /api/sessions/s%2F1": response(200, { sessionId: "s/1", status: "ready" }),
    "GET /api/sessions/s%2F1/surfaces": response(200, { surfaces: [] }),
  });
  const session = new S.Client().session("s/1");
  const events = [];
  session.subscribe({ reconnecting: () => events.push("reconnecting"), open: () => events.push("open") });
  const es = sources[0];
  assert.equal(es.url, "/api/sessions/s%2F1/events");
  es.open();
  es.emit("chat", "ab-9", { type: "start" });
  es.fail(false); // the browser reconnects by itself and sends Last-Event-ID
  assert.equal(sources.length, 1);
  es.fail(true); // the browser gave up
  await tick();
  await tick();
  assert.equal(timers.length, 1, "reopen is scheduled with backoff");
  assert.ok(timers[0].ms > 0);
  timers[0].fn();
  assert.equal(sources.length, 2);
  assert.equal(sources[1].url, "/api/sessions/s%2F1/events?lastEventId=ab-9");
  // Frames from the abandoned EventSource are ignored.
  es.emit("chat", "ab-99", { type: "start" });
  assert.equal(session.lastEventId, "ab-9");
  assert.deepStrictEqual(events, ["open", "reconnecting", "reconnecting"]);
});

test("a closed stream of a session that is gone is not reopened", async () => {
  const { S, sources, timers } = fakeBrowser({
    "GET /api/sessions/s1/surfaces": response(200, { surfaces: [] }),
  });
  const session = new S.Client().session("s1");
  const errors = [];
  session.subscribe({ error: (e) => errors.push(plain(e)) });
  sources[0].fail(true);
  await tick();
  await tick();
  assert.equal(timers.length, 0);
  assert.equal(sources.length, 1);
  assert.deepStrictEqual(errors, [{ code: "not_found", message: "no route GET /api/sessions/s1", fatal: true }]);
});

test("end closes the stream; slow_consumer reconnects with the last id; a later action wakes an idle end", async () => {
  const { S, sources, timers } = fakeBrowser({
    "GET /api/sessions/s1/surfaces": response(200, { surfaces: [] }),
    "POST /api/sessions/s1/prompt": response(202, { accepted: true, queued: false }),
    "POST /api/sessions/s1/surfaces/demo/increment": response(200, { ok: true, data: { count: 1 } }),
  });
  const session = new S.Client().session("s1");
  const ends = [];
  session.subscribe({ end: (d) => ends.push(d.reason) });
  sources[0].emit("state", "e-3", { key: "a.b", value: 1, rev: 1 });
  sources[0].emit("end", "e-3", { reason: "slow_consumer" });
  assert.ok(sources[0].closedByClient);
  assert.equal(sources.length, 2);
  assert.equal(sources[1].url, "/api/sessions/s1/events?lastEventId=e-3");
  sources[1].emit("end", "e-4", { reason: "idle" });
  assert.ok(sources[1].closedByClient);
  assert.equal(sources.length, 2, "no reconnect after end");
  assert.equal(timers.length, 0);
  await session.prompt("hi");
  assert.equal(sources.length, 3, "a prompt wakes an idle stream");
  assert.equal(sources[2].url, "/api/sessions/s1/events?lastEventId=e-4");
  sources[2].emit("end", "e-5", { reason: "stopped" });
  const r = await session.run("demo", "increment");
  assert.equal(r.ok, true);
  assert.equal(sources.length, 3, "a stopped session is not woken");
  assert.deepStrictEqual(ends, ["slow_consumer", "idle", "stopped"]);
});

test("surfaces are refreshed when the session turns ready and when an unlisted snapshot arrives", async () => {
  let calls = 0;
  let list = [];
  const { S, sources } = fakeBrowser({
    "GET /api/sessions/s1/surfaces": () => {
      calls++;
      return response(200, { surfaces: list });
    },
  });
  const session = new S.Client().session("s1");
  session.subscribe({});
  await tick();
  assert.equal(calls, 1);
  assert.equal(session.surface("demo").available, false);
  const es = sources[0];
  es.emit("session", "e-1", { status: "starting", busy: false });
  await tick();
  assert.equal(calls, 1);
  list = [{ domain: "demo", commands: ["increment"], hosted: "agent", rev: 0 }];
  es.emit("session", "e-2", { status: "ready", busy: false });
  await tick();
  assert.equal(calls, 2);
  assert.equal(session.surface("demo").available, true);
  es.emit("session", "e-3", { status: "ready", busy: true });
  await tick();
  assert.equal(calls, 2, "a ready→ready frame does not refresh");
  es.emit("state", "e-4", { key: "surface:canvas", value: {}, rev: 1 });
  await tick();
  assert.equal(calls, 3, "a snapshot of an unlisted domain refreshes");
  es.emit("state", "e-5", { key: "surface:canvas", value: {}, rev: 2 });
  await tick();
  assert.equal(calls, 3, "only once per unlisted domain");
});

// ------------------------------------------------------------------ run never throws

test("run posts {args} and never throws", async () => {
  const cases = [
    ["ok", () => response(200, { ok: true, data: { count: 1 } }), { ok: true, data: { count: 1 } }],
    ["command failure", () => response(200, { ok: false, error: { code: "unknown_action", message: "no" } }), { ok: false, error: { code: "unknown_action", message: "no" } }],
    ["http error", () => response(409, { error: { code: "session_ended", message: "ended" } }), { ok: false, error: { code: "session_ended", message: "ended" } }],
    ["http error without body", () => response(500, undefined), { ok: false, error: { code: "http_500", message: "the server answered 500" } }],
    ["not json", () => response(200, undefined, { raw: "<html>" }), { ok: false, error: { code: "invalid_result" } }],
    ["no ok field", () => response(200, { count: 1 }), { ok: false, error: { code: "invalid_result" } }],
    ["ok false without error", () => response(200, { ok: false }), { ok: false, error: { code: "invalid_result" } }],
    ["network failure", () => Promise.reject(new TypeError("Failed to fetch")), { ok: false, error: { code: "send_failed" } }],
    ["fetch throws synchronously", () => { throw new Error("boom"); }, { ok: false, error: { code: "send_failed" } }],
    ["body read fails", () => ({ ok: true, status: 200, text: () => Promise.reject(new Error("reset")) }), { ok: false, error: { code: "send_failed" } }],
  ];
  for (const [name, reply, want] of cases) {
    const { S, requests } = fakeBrowser({ "POST /api/sessions/s1/surfaces/demo/increment": reply });
    const session = new S.Client().session("s1");
    const got = plain(await session.run("demo", "increment", { by: 2 }));
    if (want.error && want.error.message === undefined) {
      assert.equal(got.ok, false, name);
      assert.equal(got.error.code, want.error.code, name);
      assert.equal(typeof got.error.message, "string", name);
    } else {
      assert.deepStrictEqual(got, want, name);
    }
    assert.deepStrictEqual(requests, [{ url: "/api/sessions/s1/surfaces/demo/increment", method: "POST", body: { args: { by: 2 } } }], name);
  }
  // Args that cannot be serialized, a missing fetch, and an omitted args object.
  const { S } = fakeBrowser({});
  const r1 = plain(await new S.Client().session("s1").run("demo", "x", { n: 10n }));
  assert.equal(r1.ok, false);
  assert.equal(r1.error.code, "invalid_args");
  const S2 = load({});
  const r2 = plain(await new S2.Client().session("s1").run("demo", "x"));
  assert.equal(r2.error.code, "send_failed");
  // base is prefixed (its trailing slash dropped) and path segments are escaped.
  const c = fakeBrowser({ "POST http://h/api/sessions/s1/surfaces/a%20b/c%2Fd": response(200, { ok: true }) });
  assert.deepStrictEqual(plain(await new c.S.Client({ base: "http://h/" }).session("s1").run("a b", "c/d")), { ok: true });
  assert.deepStrictEqual(c.requests[0].body, {});
});

test("other requests reject with a Surfaced.Error carrying the server's code", async () => {
  const { S, requests } = fakeBrowser({
    "POST /api/sessions": response(400, { error: { code: "agent_required", message: "name one of a, b", fields: ["agent"] } }),
    "POST /api/sessions/s1/ui-response": response(200, { ok: true }),
    "POST /api/sessions/s1/state": response(200, { ok: true, rev: 2 }),
    "GET /api/sessions": (init) => response(200, { sessions: [{ sessionId: "s1" }], nextCursor: "c2" }),
    "GET /api/sessions?cursor=c2": response(200, { sessions: [{ sessionId: "s2" }] }),
  });
  const client = new S.Client();
  await assert.rejects(client.createSession({ title: "x" }), (e) => e.code === "agent_required" && e.status === 400 && e.fields[0] === "agent");
  assert.deepStrictEqual(plain((await client.sessions()).map((s) => s.sessionId)), ["s1", "s2"]);
  const s = client.session("s1");
  await s.answer("u1", { confirmed: false });
  await s.answer("u2", { value: "" });
  await s.answer("u3", { cancelled: true });
  assert.deepStrictEqual(plain(await s.setPref("canvas.model", "m")), { ok: true, rev: 2 });
  await s.deletePref("canvas.model");
  const down = fakeBrowser({ "POST /api/sessions/s1/prompt": () => Promise.reject(new TypeError("Failed to fetch")) });
  await assert.rejects(new down.S.Client().session("s1").prompt("hi"), (e) => e.code === "send_failed" && e.name === "SurfacedError" && /Failed to fetch/.test(e.message));
  const html = fakeBrowser({ "GET /api/agents": response(200, undefined, { raw: "<html>" }) });
  await assert.rejects(new html.S.Client().agents(), (e) => e.code === "invalid_result");
  assert.deepStrictEqual(requests.filter((r) => r.method === "POST" && r.url !== "/api/sessions").map((r) => r.body), [
    { id: "u1", confirmed: false }, { id: "u2", value: "" }, { id: "u3", cancelled: true },
    { key: "canvas.model", value: "m", op: "set" }, { key: "canvas.model", op: "delete" },
  ]);
});

// ------------------------------------------------------------------ chat assembly

test("chat assembler builds turns, replaces preliminary tool output and marks queued prompts", () => {
  const S = load();
  const a = new S.ChatAssembler();
  a.apply({ type: "data-user-message", data: { promptId: "p1", text: "hello", via: "browser", queued: false } });
  a.apply({ type: "data-user-message", data: { promptId: "p2", text: "later", via: "acp", queued: true } });
  const start = a.apply({ type: "start", messageId: "turn-1", messageMetadata: { turnId: "t1", promptIds: ["p1"] } });
  assert.equal(start.unseenStart, false);
  a.apply({ type: "start-step" });
  a.apply({ type: "reasoning-start", id: "r0" });
  a.apply({ type: "reasoning-delta", id: "r0", delta: "hmm" });
  a.apply({ type: "reasoning-end", id: "r0" });
  a.apply({ type: "text-start", id: "x0" });
  a.apply({ type: "text-delta", id: "x0", delta: "Hel" });
  a.apply({ type: "text-delta", id: "x0", delta: "lo" });
  a.apply({ type: "tool-input-available", toolCallId: "c1", toolName: "bash", input: { cmd: "ls" } });
  a.apply({ type: "tool-output-available", toolCallId: "c1", output: "a", preliminary: true });
  a.apply({ type: "tool-output-available", toolCallId: "c1", output: "a\nb", preliminary: true });
  let m = a.message("turn-1");
  assert.equal(m.parts.find((p) => p.type === "tool").output, "a\nb", "preliminary output is replaced, not appended");
  a.apply({ type: "tool-output-available", toolCallId: "c1", output: "a\nb\nc" });
  a.apply({ type: "tool-input-available", toolCallId: "c2", toolName: "read", input: { path: "x" } });
  a.apply({ type: "tool-output-error", toolCallId: "c2", errorText: "ENOENT" });
  a.apply({ type: "text-end", id: "x0" });
  a.apply({ type: "finish-step" });
  a.apply({ type: "data-agent-event", data: { type: "queue_update" } });
  const fin = a.apply({ type: "finish", messageMetadata: { turnId: "t1", promptIds: ["p1"], stopReason: "end_turn" } });
  assert.equal(fin.unseenStart, false);
  m = a.message("turn-1");
  assert.deepStrictEqual(plain(m), {
    id: "turn-1", role: "assistant", turnId: "t1", promptIds: ["p1"], status: "done", startSeen: true, stopReason: "end_turn",
    parts: [
      { type: "reasoning", id: "r0", text: "hmm", state: "done" },
      { type: "text", id: "x0", text: "Hello", state: "done" },
      { type: "tool", toolCallId: "c1", toolName: "bash", input: { cmd: "ls" }, inputText: "", output: "a\nb\nc", preliminary: false, state: "output-available" },
      { type: "tool", toolCallId: "c2", toolName: "read", input: { path: "x" }, inputText: "", preliminary: false, errorText: "ENOENT", state: "output-error" },
    ],
  });
  assert.equal(a.userMessage("p1").queued, false);
  assert.equal(a.userMessage("p1").turnId, "t1");
  assert.equal(a.userMessage("p2").queued, true, "p2 waits for the next turn");
  a.apply({ type: "start", messageId: "turn-2", messageMetadata: { turnId: "t2", promptIds: ["p2"] } });
  assert.equal(a.userMessage("p2").queued, false);
  a.apply({ type: "text-delta", id: "x0", delta: "second" }); // part ids are scoped to their turn
  a.apply({ type: "abort" });
  a.apply({ type: "finish", messageMetadata: { turnId: "t2", stopReason: "cancelled" } });
  assert.equal(a.message("turn-2").status, "aborted");
  assert.equal(a.message("turn-2").parts[0].text, "second");
  assert.equal(a.message("turn-1").parts[1].text, "Hello");
  assert.deepStrictEqual(plain(a.messages.map((x) => x.id)), ["user-p1", "user-p2", "turn-1", "turn-2"]);
  assert.deepStrictEqual(plain([...a.liveTurnIds()]), ["t1", "t2"]);
  assert.equal(a.hasPrompt("p2"), true);
});

test("chat assembler creates parts for unknown ids and reports a finish whose start it missed", () => {
  const S = load();
  const a = new S.ChatAssembler();
  // Joined mid-turn: deltas for parts whose start we never saw.
  const r1 = a.apply({ type: "text-delta", id: "x3", delta: "…tail" });
  assert.ok(r1.message);
  assert.equal(r1.message.startSeen, false);
  a.apply({ type: "tool-output-available", toolCallId: "c9", output: { content: [{ type: "text", text: "ok" }] } });
  const m = r1.message;
  assert.deepStrictEqual(plain(m.parts.map((p) => [p.type, p.id || p.toolCallId, p.text || p.state])), [["text", "x3", "…tail"], ["tool", "c9", "output-available"]]);
  const fin = a.apply({ type: "finish", messageMetadata: { turnId: "t7", stopReason: "end_turn" } });
  assert.equal(fin.unseenStart, true);
  assert.equal(fin.message, m);
  assert.equal(m.turnId, "t7");
  a.remove(m.id);
  assert.equal(a.messages.length, 0);
  assert.equal(a.liveTurnIds().has("t7"), false);
  // A finish with nothing open at all is also unseen.
  assert.equal(a.apply({ type: "finish", messageMetadata: { turnId: "t8" } }).unseenStart, true);
  // A finish for another turn than the open one: the open one is closed, the finish is unseen.
  a.apply({ type: "start", messageId: "turn-9", messageMetadata: { turnId: "t9", promptIds: [] } });
  assert.equal(a.apply({ type: "finish", messageMetadata: { turnId: "t10" } }).unseenStart, true);
  assert.equal(a.message("turn-9").status, "done");
  // Errors are kept on the message.
  a.apply({ type: "start", messageId: "turn-11", messageMetadata: { turnId: "t11" } });
  a.apply({ type: "error", errorText: "model unavailable" });
  a.apply({ type: "finish", messageMetadata: { turnId: "t11", stopReason: "error" } });
  assert.equal(a.message("turn-11").status, "error");
  assert.equal(a.message("turn-11").error, "model unavailable");
  // Unknown chunk types and garbage change nothing.
  const before = a.messages.length;
  for (const c of [null, {}, { type: "data-something" }, { type: "future-chunk" }]) assert.equal(a.apply(c).message, undefined);
  assert.equal(a.messages.length, before);
});

test("a start without messageId or with a reused one still gets a unique message", () => {
  const S = load();
  const a = new S.ChatAssembler();
  a.apply({ type: "start", messageId: "turn-1", messageMetadata: { turnId: "t1" } });
  a.apply({ type: "finish", messageMetadata: { turnId: "t1" } });
  a.apply({ type: "start", messageId: "turn-1", messageMetadata: { turnId: "t2" } });
  a.apply({ type: "start" });
  assert.equal(new Set(a.messages.map((m) => m.id)).size, 3);
  assert.equal(a.messages[0].status, "done");
  assert.equal(a.messages[1].status, "done", "a new start closes the open turn");
});
