// Drives surfaced's AG-UI endpoint with AG-UI's own client (the pinned
// @ag-ui/client), unmodified: the stock HttpAgent, which validates every
// event against @ag-ui/core's schemas (a malformed one fails the run, an
// unknown field is stripped with a warning) and verifies the sequence (a
// message's content only while it is open, nothing after RUN_FINISHED, ...).
// Run by the gateway's Go tests:
//
//   node scenarios.mjs <scenario> [args...]
//
// with SURFACED_URL (the daemon), SURFACED_TOKEN (a bearer token), AGUI_URL
// (the endpoint: <daemon>/ag-ui/<agent> or <daemon>/api/sessions/<id>/ag-ui)
// and AGUI_THREAD (the threadId) in the environment. A scenario prints one
// JSON object with what it observed on stdout and exits 0; the Go test
// judges it. A failure outside the client exits 1 with the error on stderr.
import { HttpAgent } from "@ag-ui/client";
import { EventEncoder } from "@ag-ui/encoder";
import { RunAgentInputSchema } from "@ag-ui/core/schemas";
import fs from "node:fs";

const base = process.env.SURFACED_URL;
const token = process.env.SURFACED_TOKEN;
const url = process.env.AGUI_URL;
const thread = process.env.AGUI_THREAD;
const [scenario, ...args] = process.argv.slice(2);
const auth = { Authorization: `Bearer ${token}` };

// Every warning the client prints (a stripped field, a patch that did not
// apply, an event it could not place) is recorded: the Go tests want none.
const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...xs) => warnings.push(xs.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(" "));
}

// What a frontend sends besides its messages: CopilotKit's tools, context
// and forwardedProps (the state is the client's own, echoed).
const extras = {
  tools: [{ name: "show_card", description: "Show a card in the page.", parameters: { type: "object", properties: { title: { type: "string" } } } }],
  context: [{ description: "the page", value: "the counter demo" }],
  forwardedProps: { app: "scenarios" },
};

let nextId = 0;
const userMessage = (content) => ({ id: `user-${process.pid}-${++nextId}`, role: "user", content });

function newAgent(opts = {}) {
  return new HttpAgent({ url, threadId: thread, headers: { ...auth, ...(opts.headers ?? {}) } });
}

// run runs the agent once, recording every event the client applied and
// what it holds afterwards. onEvent sees each event as it passes.
async function run(agent, params = {}, onEvent) {
  const events = [];
  let error;
  try {
    await agent.runAgent(params, {
      onEvent: async ({ event }) => {
        events.push(event);
        if (onEvent) await onEvent(event);
      },
    });
  } catch (e) {
    error = String(e?.message ?? e);
  }
  const started = events.find((e) => e.type === "RUN_STARTED");
  return {
    events,
    error,
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts,
    sessionId: started?.metadata?.surfaced?.sessionId,
  };
}

async function post(path, body = {}) {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function get(path) {
  const res = await fetch(`${base}${path}`, { headers: auth });
  return { status: res.status, body: await res.json() };
}

// once resolves on the first event of type.
function once(type) {
  let fire;
  const seen = new Promise((r) => (fire = r));
  return { seen, on: (e) => e.type === type && fire(e) };
}

const scenarios = {
  // One run of a new client with one user message; then GET …/state.
  async run(text) {
    const agent = newAgent();
    agent.addMessage(userMessage(text));
    const r = await run(agent, extras);
    const after = r.sessionId ? await get(`/api/sessions/${r.sessionId}/state`) : {};
    return { ...r, stateAfter: after.body };
  },

  // Two runs of one client on its thread, as a frontend makes them: the
  // second sends back the state the first built, the history, the tools,
  // the context and the forwardedProps.
  async twice(first, second) {
    const agent = newAgent();
    agent.addMessage(userMessage(first));
    const r1 = await run(agent, extras);
    agent.addMessage(userMessage(second));
    const r2 = await run(agent, extras);
    return { runs: [r1, r2] };
  },

  // A run that stops at the agent's dialog, and the run that answers it
  // (payload: the JSON of the answer, or "cancel").
  async interrupt(text, payload) {
    const agent = newAgent();
    agent.addMessage(userMessage(text));
    const r1 = await run(agent, extras);
    const resume = agent.pendingInterrupts.map((i) =>
      payload === "cancel" ? { interruptId: i.id, status: "cancelled" } : { interruptId: i.id, status: "resolved", payload: JSON.parse(payload) },
    );
    const r2 = await run(agent, { ...extras, resume });
    return { runs: [r1, r2] };
  },

  // Two clients of the thread: the second sends its message while the
  // first's turn runs (it waits in the session's inbox).
  async queued(first, second) {
    const a1 = newAgent();
    const a2 = newAgent();
    a1.addMessage(userMessage(first));
    const content = once("TEXT_MESSAGE_CONTENT");
    const p1 = run(a1, extras, content.on);
    await content.seen;
    a2.addMessage(userMessage(second));
    const p2 = run(a2, extras);
    return { runs: await Promise.all([p1, p2]) };
  },

  // The explicit abort: POST /api/sessions/{id}/abort once the turn streams.
  async abort(text) {
    const agent = newAgent();
    agent.addMessage(userMessage(text));
    let sessionId, aborted;
    const r = await run(agent, extras, async (e) => {
      if (e.type === "RUN_STARTED") sessionId = e.metadata?.surfaced?.sessionId;
      if (e.type === "TEXT_MESSAGE_CONTENT" && !aborted) {
        aborted = await post(`/api/sessions/${sessionId}/abort`);
      }
    });
    return { ...r, aborted };
  },

  // The client stops reading (HttpAgent.abortRun closes the stream) once
  // the turn streams: the turn goes on in the session.
  async close(text) {
    const agent = newAgent();
    agent.addMessage(userMessage(text));
    const r = await run(agent, extras, (e) => {
      if (e.type === "TEXT_MESSAGE_CONTENT") agent.abortRun();
    });
    return r;
  },

  // A browser's command (POST …/surfaces/{domain}/{action}) lands while the
  // run streams; after the run the client's state (the snapshot with every
  // delta applied) is compared with GET …/state by the Go test.
  async command(text, domain, action) {
    const agent = newAgent();
    agent.addMessage(userMessage(text));
    let sessionId, command;
    const r = await run(agent, extras, async (e) => {
      if (e.type === "RUN_STARTED") sessionId = e.metadata?.surfaced?.sessionId;
      if (e.type === "TEXT_MESSAGE_CONTENT" && !command) {
        command = await post(`/api/sessions/${sessionId}/surfaces/${domain}/${action}`);
      }
    });
    const after = await get(`/api/sessions/${sessionId}/state`);
    return { ...r, command, stateAfter: after.body };
  },

  // A run that prompts nothing (no user message at the end): the state.
  async state() {
    const agent = newAgent();
    const r = await run(agent, extras);
    const after = await get(`/api/sessions/${r.sessionId}/state`);
    return { ...r, stateAfter: after.body };
  },

  // The raw stream of one run, checked against @ag-ui/encoder: every event
  // is "data: <JSON>" and a blank line, and the encoder's framing of the
  // parsed event parses to the same event. Comments (keep-alives) are
  // counted apart.
  async frames(text) {
    const body = {
      threadId: thread,
      runId: "frames-run",
      messages: [userMessage(text)],
      ...extras,
    };
    const res = await fetch(url, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify(body),
    });
    const raw = await res.text();
    const encoder = new EventEncoder();
    const chunks = raw.split("\n\n");
    const tail = chunks.pop();
    const bad = [];
    let events = 0,
      exactly = 0,
      comments = 0;
    for (const c of chunks) {
      if (c.startsWith(":")) {
        comments++;
        continue;
      }
      const m = /^data: (.*)$/s.exec(c);
      if (!m || m[1].includes("\n")) {
        bad.push(c);
        continue;
      }
      const ev = JSON.parse(m[1]);
      const again = encoder.encodeSSE(ev);
      // Byte for byte what the encoder writes, but for the state's values,
      // which are the session's JSON as stored (its number spellings, its
      // escapes): those parse to the same event.
      const exact = again === c + "\n\n";
      const same = JSON.stringify(JSON.parse(again.slice("data: ".length))) === JSON.stringify(ev);
      if (!same || (!exact && !ev.type.startsWith("STATE_"))) bad.push(c);
      if (exact) exactly++;
      events++;
    }
    return { status: res.status, contentType: res.headers.get("content-type"), events, exactly, comments, bad, tail, first: raw.slice(0, 5) };
  },

  // The verdict of @ag-ui/core's RunAgentInputSchema on each input of a
  // JSON file (an array): the Go test holds its own decoder to the same.
  async schema(file) {
    const inputs = JSON.parse(fs.readFileSync(file, "utf8"));
    return {
      verdicts: inputs.map((input) => {
        const r = RunAgentInputSchema.safeParse(input);
        return r.success ? { ok: true } : { ok: false, path: r.error.issues[0].path.join(".") };
      }),
    };
  },
};

const fn = scenarios[scenario];
if (!fn) {
  process.stderr.write(`unknown scenario ${scenario}\n`);
  process.exit(2);
}
const out = await fn(...args);
process.stdout.write(JSON.stringify({ ...out, warnings }) + "\n");
