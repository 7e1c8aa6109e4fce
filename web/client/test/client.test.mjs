// Unit tests of @surfaced/client's conversation bridge, artifacts, token mode and fetch-based
// stream reader (the rest of the client is tested through the embedded /surfaced.js by
// gateway/internal/webui/testdata/surfaced_test.mjs).
import test from "node:test";
import assert from "node:assert/strict";
import { Client, FetchEventSource, SurfacedError, renderSurfaceOp } from "../src/index.js";
import { FakeEventSource, FakeXHR, fakeFetch, response, tick } from "./fakes.mjs";

const noTimers = { setTimeout: () => 0, clearTimeout: () => {} };

function setup(routes, opts = {}) {
  FakeEventSource.all = [];
  FakeXHR.all = [];
  const f = fakeFetch({ "GET /api/sessions/s1/surfaces": response(200, { surfaces: [] }), ...routes });
  const client = new Client({ fetch: f.fetch, EventSource: FakeEventSource, XMLHttpRequest: FakeXHR, ...noTimers, ...opts });
  const session = client.session("s1");
  const handlers = {};
  session.subscribe(handlers);
  const es = FakeEventSource.all[0];
  es.open();
  return { client, session, es, requests: f.requests, handlers };
}

const demoOn = { domain: "demo", hosted: "agent", available: true, commands: ["increment"] };

test("bridge: unavailable until the domain is registered, prompt while it is, unavailable when its agent is down", async () => {
  const { session, es } = setup();
  const bridge = session.bridge("demo");
  const seen = [];
  const off = bridge.onChange((b) => seen.push(b.mode));
  assert.equal(bridge.mode, "unavailable");
  assert.equal(bridge.available, false);
  es.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  assert.equal(bridge.mode, "prompt");
  es.emit("session", "1-2", { status: "error", code: "agent_crashed", surfaces: [{ ...demoOn, available: false }] });
  assert.equal(bridge.mode, "unavailable");
  es.emit("session", "1-3", { status: "ready", surfaces: [{ domain: "other", available: true }] });
  assert.equal(bridge.mode, "unavailable", "a domain that is not registered is unavailable");
  off();
  es.emit("session", "1-4", { status: "ready", surfaces: [demoOn] });
  assert.deepEqual(seen.slice(-1), ["unavailable"], "onChange stops after unsubscribe");
  assert.ok(seen.length >= 3);
});

test("bridge: command mode when the conversation is off; unavailable once the session ended", () => {
  const { session, es } = setup();
  es.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  assert.equal(session.bridge("demo", { conversation: false }).mode, "command");
  es.emit("session", "1-2", { status: "ended", surfaces: [{ ...demoOn, available: false }] });
  assert.equal(session.bridge("demo").mode, "unavailable", "an ended session takes no commands");
  assert.equal(session.bridge("demo", { conversation: false }).mode, "unavailable");
});

// The rule of an ended session: every domain is read-only, whatever the frames before (or a list
// answered late) said. A server before every frame listed the surfaces sent an ended frame without
// them, and a page kept the last list's available:true.
const notesOn = { domain: "notes", hosted: "native", available: true, commands: ["add"] };

test("ended: a frame without surfaces after ready leaves every domain read-only", () => {
  const { session, es } = setup();
  const bridge = session.bridge("demo");
  const modes = [];
  bridge.onChange((b) => modes.push(b.mode));
  es.emit("session", "1-1", { status: "ready", surfaces: [demoOn, notesOn] });
  assert.equal(session.surface("demo").available, true);
  assert.equal(session.ended, false);
  es.emit("session", "1-2", { status: "ended", code: "restart_exhausted" });
  assert.equal(session.ended, true);
  assert.equal(session.surface("demo").available, false, "agent-hosted");
  assert.equal(session.surface("notes").available, false, "native: an ended session takes no commands at all");
  assert.equal(bridge.mode, "unavailable");
  assert.equal(bridge.available, false);
  assert.equal(modes.at(-1), "unavailable", "onChange told the panel");
});

test("ended: an ended frame that still says available is read-only", () => {
  const { session, es } = setup();
  es.emit("session", "1-1", { status: "ended", surfaces: [demoOn, notesOn] });
  assert.equal(session.surface("demo").available, false);
  assert.equal(session.surface("notes").available, false);
  assert.equal(session.surface("demo").known, true);
  assert.deepEqual(session.surface("notes").commands, ["add"], "the list stays: what the domain was");
});

test("ended: an end frame that says the session ended is enough, without a session frame", () => {
  for (const reason of ["stopped", "crashed", "deleted"]) {
    const { session, es } = setup();
    const seen = [];
    session.onSurfaces(() => seen.push(session.surface("demo").available));
    es.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
    es.emit("end", "1-2", { reason });
    assert.equal(session.ended, true, reason);
    assert.equal(session.surface("demo").available, false, reason);
    assert.equal(session.bridge("demo").mode, "unavailable", reason);
    assert.equal(seen.at(-1), false, reason + ": surface listeners were told");
  }
  for (const reason of ["idle", "shutdown", "moved", "slow_consumer", "revoked"]) {
    const { session, es } = setup();
    es.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
    es.emit("end", "1-2", { reason });
    assert.equal(session.ended, false, reason + " does not end the session");
  }
});

test("ended: later frames and a surface list answered late do not make a domain available again", async () => {
  let release;
  const late = new Promise((r) => (release = r));
  let gets = 0;
  const answers = [
    () => response(200, { surfaces: [] }), // the subscription's own
    () => late.then(() => response(200, { surfaces: [demoOn] })), // sent while ready, answered after the end
  ];
  const { session, es } = setup({
    "GET /api/sessions/s1/surfaces": () => (answers[gets++] || (() => response(200, { surfaces: [{ ...demoOn, available: false }] })))(),
  });
  for (let i = 0; i < 5 && gets < 1; i++) await tick();
  await tick(); // the subscription's own list is in
  es.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  const listed = session.refreshSurfaces();
  assert.equal(gets, 2);
  es.emit("session", "1-2", { status: "ended", surfaces: [{ ...demoOn, available: false }] });
  release();
  await listed;
  assert.equal(session.surfaces().find((s) => s.domain === "demo").available, false, "the list sent before the frame is older: dropped");
  assert.equal(session.surface("demo").available, false);
  es.emit("session", "1-3", { status: "ready", surfaces: [demoOn] });
  assert.equal(session.ended, true, "ended is for good");
  assert.equal(session.surface("demo").available, false);
  assert.equal(session.bridge("demo").mode, "unavailable");
});

test("ended: a stream refused because the session ended takes the summary as its status", async () => {
  FakeEventSource.all = [];
  const summary = { sessionId: "s1", status: "ended", code: "restart_exhausted", detail: "the agent crashed",
    surfaces: [{ ...demoOn, rev: 3, available: false }, { ...notesOn, rev: 1, available: false }] };
  const f = fakeFetch({ "GET /api/sessions/s1/surfaces": response(200, { surfaces: [] }), "GET /api/sessions/s1": response(200, summary) });
  const client = new Client({ fetch: f.fetch, EventSource: FakeEventSource, ...noTimers });
  const session = client.session("s1");
  const calls = [];
  session.subscribe({ session: (s) => calls.push(["session", s.status]), end: (d) => calls.push(["end", d.reason]) });
  const es = FakeEventSource.all[0];
  es.readyState = FakeEventSource.CLOSED; // the server answered 409 session_ended
  es.onerror({});
  for (let i = 0; i < 5 && calls.length < 2; i++) await tick();
  assert.deepEqual(calls, [["session", "ended"], ["end", "stopped"]]);
  assert.equal(session.ended, true);
  assert.equal(session.status.code, "restart_exhausted");
  assert.deepEqual(session.surfaces().map((s) => s.domain), ["demo", "notes"]);
  assert.equal(session.surface("notes").available, false);
});

test("bridge.prompt renders the surface-op and sends it as a prompt with its attachments", async () => {
  const { session, es, requests } = setup({ "POST /api/sessions/s1/prompt": response(202, { accepted: true, queued: true }) });
  es.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  const op = { title: "Brighten", tool: "image_edit", params: [["attachmentId", "att_1"], ["empty", ""], ["amount", 20]] };
  const r = await session.bridge("demo").prompt(op, { attachmentIds: ["att_1"] });
  assert.deepEqual(r, { ok: true, channel: "prompt", accepted: true, queued: true });
  const sent = requests.find((q) => q.key === "POST /api/sessions/s1/prompt");
  assert.deepEqual(sent.body, { message: renderSurfaceOp(op), attachmentIds: ["att_1"] });
  assert.equal(sent.body.message, "Brighten\n\n```surface-op\ntool: image_edit\nattachmentId: att_1\namount: 20\n```");
});

test("bridge.prompt through the page's own chat sender", async () => {
  const { session, es, requests } = setup();
  es.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  const calls = [];
  const bridge = session.bridge("demo", { conversation: async (text, o) => calls.push([text, o]) });
  assert.equal(bridge.mode, "prompt");
  const r = await bridge.prompt({ title: "T", tool: "increment" }, { attachmentIds: ["att_2"] });
  assert.equal(r.ok, true);
  assert.deepEqual(calls, [["T\n\n```surface-op\ntool: increment\n```", { attachmentIds: ["att_2"] }]]);
  assert.equal(requests.filter((q) => q.key.startsWith("POST")).length, 0, "no POST /prompt of its own");
});

test("bridge.prompt never rejects: unavailable, no_fallback, the fallback command, an HTTP error", async () => {
  const { session, es, requests } = setup({
    "POST /api/sessions/s1/surfaces/demo/increment": response(200, { ok: true, data: { count: 1 } }),
    "POST /api/sessions/s1/prompt": response(409, { error: { code: "agent_unavailable", message: "down" } }),
  });
  const op = { title: "T", tool: "increment", fallback: { action: "increment" } };
  let r = await session.bridge("demo").prompt(op);
  assert.equal(r.ok, false);
  assert.equal(r.error.code, "unavailable");
  assert.equal(requests.filter((q) => q.key.startsWith("POST")).length, 0);

  es.emit("session", "1-1", { status: "ready", surfaces: [demoOn] });
  const noChat = session.bridge("demo", { conversation: false });
  r = await noChat.prompt({ title: "T", tool: "increment" });
  assert.equal(r.error.code, "no_fallback");
  r = await noChat.prompt(op);
  assert.deepEqual(r, { ok: true, channel: "command", result: { ok: true, data: { count: 1 } } });

  r = await session.bridge("demo").prompt(op);
  assert.deepEqual(r, { ok: false, error: { code: "agent_unavailable", message: "down" } });

  es.emit("session", "1-2", { status: "ended", surfaces: [{ ...demoOn, available: false }] });
  const before = requests.length;
  r = await noChat.prompt(op);
  assert.equal(r.error.code, "unavailable", "an ended session runs no fallback command");
  assert.equal(requests.length, before, "nothing was sent");
});

test("bridge.run goes to the control plane", async () => {
  const { session, requests } = setup({ "POST /api/sessions/s1/surfaces/demo/echo": response(200, { ok: true }) });
  assert.deepEqual(await session.bridge("demo").run("echo", { text: "hi" }), { ok: true });
  assert.deepEqual(requests.at(-1).body, { args: { text: "hi" } });
});

test("artifacts.upload sends the bytes raw with their type, name, lineage and meta, and reports progress", async () => {
  const { session } = setup();
  const artifact = { id: "att_9", mediaType: "image/png", size: 6 };
  FakeXHR.answer = { status: 201, body: { artifact, url: "/api/artifacts/att_9/content?exp=4102444800&sig=ab" } };
  const file = new File([new Uint8Array([1, 2, 3, 4, 5, 6])], "cat & dog.png", { type: "image/png" });
  const progress = [];
  const r = await session.artifacts.upload(file, { derivedFrom: "att_1", meta: { seed: 7 }, onProgress: (p) => progress.push(p) });
  assert.deepEqual(r.artifact, artifact);
  const x = FakeXHR.all[0];
  assert.equal(x.method, "POST");
  assert.equal(x.url, "/api/sessions/s1/artifacts?name=cat%20%26%20dog.png&derivedFrom=att_1");
  assert.equal(x.headers["Content-Type"], "image/png");
  assert.equal(x.headers["Surfaced-Artifact-Meta"], '{"seed":7}');
  assert.equal(x.body, file);
  assert.deepEqual(progress, [
    { loaded: 3, total: 6 },
    { loaded: 6, total: 6 },
  ]);
  // The URL of the answer is remembered until it expires.
  assert.equal(await session.artifacts.url("att_9"), "/api/artifacts/att_9/content?exp=4102444800&sig=ab");
});

test("artifacts.upload rejects with the API's error", async () => {
  const { session } = setup();
  FakeXHR.answer = { status: 413, body: { error: { code: "too_large", message: "over 64 MiB" } } };
  await assert.rejects(session.artifacts.upload(new Blob(["x"])), (e) => e instanceof SurfacedError && e.code === "too_large" && e.status === 413);
});

test("artifacts.upload without XMLHttpRequest uses fetch", async () => {
  const art = { id: "att_3", mediaType: "text/plain" };
  const { session, requests } = setup(
    { "POST /api/sessions/s1/artifacts": response(201, { artifact: art, url: "/u?exp=1&sig=x" }) },
    { XMLHttpRequest: null, token: "tok" }
  );
  const r = await session.artifacts.upload(new Uint8Array([104, 105]), { mediaType: "text/plain" });
  assert.deepEqual(r.artifact, art);
  const q = requests.find((x) => x.key === "POST /api/sessions/s1/artifacts");
  assert.equal(q.init.headers["Content-Type"], "text/plain");
  assert.equal(q.init.headers.Authorization, "Bearer tok");
  assert.equal(q.init.credentials, "omit");
});

test("artifacts.list, listAll and url: the query, every page, a cached signed URL renewed when it expires", async () => {
  const exp = (s) => Math.floor(Date.now() / 1000) + s;
  let gets = 0;
  const { session, requests } = setup({
    "GET /api/sessions/s1/artifacts?mediaType=image%2F*&limit=2": response(200, { artifacts: [{ id: "a" }], nextCursor: "c1" }),
    "GET /api/sessions/s1/artifacts?mediaType=image%2F*&limit=500": response(200, { artifacts: [{ id: "a" }, { id: "b" }], nextCursor: "c1" }),
    "GET /api/sessions/s1/artifacts?mediaType=image%2F*&cursor=c1&limit=500": response(200, { artifacts: [{ id: "c" }] }),
    "GET /api/sessions/s1/artifacts/att_1": () => {
      gets++;
      // The first URL expires within the renewal margin, the second an hour from now.
      return response(200, { artifact: { id: "att_1" }, url: "/api/artifacts/att_1/content?exp=" + exp(gets === 1 ? 30 : 3600) + "&sig=" + gets });
    },
  });
  assert.deepEqual(await session.artifacts.list({ mediaType: "image/*", limit: 2 }), { artifacts: [{ id: "a" }], nextCursor: "c1" });
  assert.deepEqual((await session.artifacts.listAll({ mediaType: "image/*" })).map((a) => a.id), ["a", "b", "c"]);
  const u1 = await session.artifacts.url("att_1");
  assert.match(u1, /sig=1$/);
  const u2 = await session.artifacts.url("att_1");
  assert.match(u2, /sig=2$/, "a URL about to expire is renewed");
  assert.equal(await session.artifacts.url("att_1"), u2, "a fresh one is reused");
  assert.equal(gets, 2);
  assert.equal(session.artifacts.contentUrl("att 1"), "/api/artifacts/att%201/content");
  assert.ok(requests.length > 0);
});

test("artifact frames reach artifacts.on and the subscriber, and a deletion forgets its URL", async () => {
  let gets = 0;
  const { session, es, handlers } = setup({
    "GET /api/sessions/s1/artifacts/att_1": () => {
      gets++;
      return response(200, { artifact: { id: "att_1" }, url: "/c?exp=4102444800&sig=" + gets });
    },
  });
  const seen = [];
  const frames = [];
  handlers.artifact = (d) => frames.push(d.event);
  const off = session.artifacts.on((ev) => seen.push(ev.event + ":" + ev.artifact.id));
  await session.artifacts.url("att_1");
  es.emit("artifact", "1-1", { event: "added", artifact: { id: "att_2" } });
  es.emit("artifact", "1-2", { event: "deleted", artifact: { id: "att_1" } });
  es.emit("artifact", "1-3", { event: "added" }); // malformed: no artifact
  off();
  es.emit("artifact", "1-4", { event: "added", artifact: { id: "att_3" } });
  assert.deepEqual(seen, ["added:att_2", "deleted:att_1"]);
  assert.deepEqual(frames, ["added", "deleted", "added", "added"]);
  await session.artifacts.url("att_1");
  assert.equal(gets, 2, "the deleted artifact's URL was not reused");
});

test("a token: bearer on requests, and the stream read with fetch from the last event id", async () => {
  const enc = new TextEncoder();
  const streams = [];
  const f = fakeFetch({
    "GET /api/sessions/s1/surfaces": response(200, { surfaces: [demoOn] }),
    "GET /api/sessions/s1": response(200, { status: "ready" }),
  });
  const fetch = async (url, init) => {
    if (!url.includes("/events")) return f.fetch(url, init);
    let ctl;
    const body = new ReadableStream({ start: (c) => (ctl = c) });
    streams.push({ url, init, push: (s) => ctl.enqueue(enc.encode(s)), end: () => ctl.close() });
    return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
  const timers = [];
  const client = new Client({ base: "http://d.test", token: "secret", fetch, setTimeout: (fn) => timers.push(fn), clearTimeout: () => {} });
  const session = client.session("s1");
  const states = [];
  let opened = 0;
  session.subscribe({ open: () => opened++, state: (fr) => states.push(fr.value) });
  await tick();
  await tick();
  assert.equal(streams.length, 1);
  assert.equal(streams[0].url, "http://d.test/api/sessions/s1/events");
  assert.equal(streams[0].init.headers.Authorization, "Bearer secret");
  assert.equal(f.requests[0].init.headers.Authorization, "Bearer secret");
  streams[0].push(': hello\n\nevent: state\nid: 1-1\ndata: {"key":"surface:demo",\r\ndata: "value":1,"rev":1}\r\n\r\nevent: sta');
  streams[0].push('te\nid: 1-2\ndata: {"key":"surface:demo","value":2,"rev":2}\n\n');
  await tick();
  await tick();
  assert.equal(opened, 1);
  assert.deepEqual(states, [1, 2]);
  assert.equal(session.lastEventId, "1-2");
  // The stream ends: the client checks the session and resumes from the last id.
  streams[0].end();
  for (let i = 0; i < 10 && timers.length === 0; i++) await tick();
  assert.equal(timers.length, 1, "a reopen is scheduled");
  timers[0]();
  await tick();
  assert.equal(streams[1].url, "http://d.test/api/sessions/s1/events?lastEventId=1-2");
  session.close();
});

test("FetchEventSource: close before the answer fires nothing", async () => {
  let resolve;
  const client = new Client({ fetch: () => new Promise((r) => (resolve = r)), token: "t" });
  const Source = FetchEventSource.for(client);
  const es = new Source("/x");
  let errors = 0;
  es.onerror = () => errors++;
  await tick();
  es.close();
  resolve(new Response("data: 1\n\n", { status: 200 }));
  await tick();
  await tick();
  assert.equal(errors, 0);
  assert.equal(es.readyState, 2);
});
