// Scenarios of the official MCP TypeScript SDK's client against a real
// surfaced daemon (mcpgw's tests run them: node scenarios.mjs <name>).
//
// Each scenario talks to the Go test in lines: it writes one JSON object per
// line on stdout (what it saw, or that it is ready for the test's next
// move) and, where the test acts in between (a browser's button press, a
// daemon restart), reads one line from stdin before it goes on. The last
// line is the scenario's result; anything wrong throws (exit 1).
//
// Environment: MCP_URL (the mount, or a session's path below it),
// MCP_TOKEN, and per scenario SESSION_ID, SURFACED_BIN, SURFACED_URL.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResourceUpdatedNotificationSchema, LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { createInterface } from "node:readline";

const lines = createInterface({ input: process.stdin });
const heard = [];
const waiting = [];
lines.on("line", (l) => (waiting.length ? waiting.shift()(l) : heard.push(l)));
const hear = () => new Promise((resolve) => (heard.length ? resolve(heard.shift()) : waiting.push(resolve)));
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

function check(cond, what, got) {
  if (!cond) throw new Error(what + ": " + JSON.stringify(got));
}

async function connect(url = process.env.MCP_URL, onUpdate) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: "Bearer " + process.env.MCP_TOKEN } },
  });
  const client = new Client({ name: "surfaced-ts-test", version: "1.0.0" }, { capabilities: {} });
  if (onUpdate) client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => onUpdate(n.params.uri));
  await client.connect(transport);
  return { client, transport };
}

async function call(client, name, args, options) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  return { res, out: res.structuredContent ?? {} };
}

// waitFor resolves when pred holds for something pushed to list.
function waiter() {
  const seen = [];
  let wake = null;
  return {
    push(x) {
      seen.push(x);
      if (wake) wake();
    },
    seen,
    async until(pred, what, ms = 15000) {
      const deadline = Date.now() + ms;
      while (!seen.some(pred)) {
        if (Date.now() > deadline) throw new Error("timed out waiting for " + what + ": " + JSON.stringify(seen));
        await new Promise((r) => {
          wake = r;
          setTimeout(r, 200);
        });
      }
    },
  };
}

const scenarios = {
  // initialize (2025-11-25, stateful), tools/list, create a session, prompt
  // with progress, run demo.increment (the test watches a browser's SSE).
  async basic() {
    const { client, transport } = await connect();
    const tools = (await client.listTools()).tools.map((t) => t.name);
    const { out: created } = await call(client, "create_session", { title: "from the TypeScript SDK" });
    say({ step: "created", sessionId: created.sessionId, protocolVersion: transport.protocolVersion, sessionHeader: !!transport.sessionId, tools });
    await hear(); // the test's browser watches
    const progress = [];
    const { res: p, out: answer } = await call(client, "prompt", { sessionId: created.sessionId, message: "slow" }, {
      onprogress: (n) => progress.push(n.message),
      timeout: 60000,
    });
    check(!p.isError && answer.stopReason === "end_turn", "prompt", answer);
    const { res: r, out: cmd } = await call(client, "run_command", { sessionId: created.sessionId, domain: "demo", action: "increment" });
    check(!r.isError && cmd.ok === true, "run_command", cmd);
    say({ step: "done", text: answer.text, progress: progress.length, rev: cmd.rev, latest: LATEST_PROTOCOL_VERSION });
    await client.close();
  },

  // Subscribe to the demo surface; the test presses a browser's button; the
  // update comes, and the resource reads the new state.
  async subscribe() {
    const updates = waiter();
    const { client } = await connect(process.env.MCP_URL, (uri) => updates.push(uri));
    const uri = `surfaced://sessions/${process.env.SESSION_ID}/surfaces/demo`;
    const templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    await client.subscribeResource({ uri });
    say({ step: "subscribed", templates });
    await hear(); // the button was pressed
    await updates.until((u) => u === uri, "notifications/resources/updated");
    const read = await client.readResource({ uri });
    say({ step: "done", updates: updates.seen, text: read.contents[0].text, rev: read.contents[0]._meta?.rev });
    await client.close();
  },

  // A prompt cancelled mid-turn: the turn is aborted (the test watches).
  async cancel() {
    const { client } = await connect();
    const ac = new AbortController();
    let started = false;
    const pending = call(client, "prompt", { sessionId: process.env.SESSION_ID, message: "hang" }, {
      signal: ac.signal,
      onprogress: () => {
        if (!started) {
          started = true;
          ac.abort("the user changed their mind");
        }
      },
      timeout: 60000,
    });
    let error = "";
    try {
      await pending;
    } catch (e) {
      error = String(e);
    }
    check(started && error !== "", "the cancelled prompt", { started, error });
    // The SDK sends notifications/cancelled without waiting for it: the
    // client stays open until the test saw the turn aborted.
    say({ step: "cancelled", error });
    await hear();
    await client.close();
  },

  // The agent's dialog reaches the client as progress; answer_dialog answers
  // it and the turn goes on.
  async dialog() {
    const { client } = await connect();
    const sessionId = process.env.SESSION_ID;
    let answered = null;
    const { out } = await call(client, "prompt", { sessionId, message: "ask" }, {
      timeout: 60000,
      onprogress: (n) => {
        const m = /^dialog (\S+) \(confirm\)/.exec(n.message ?? "");
        if (m && !answered) answered = call(client, "answer_dialog", { sessionId, dialogId: m[1], confirmed: true });
      },
    });
    check(answered !== null, "no dialog came as progress", out);
    const { res: a } = await answered;
    check(!a.isError, "answer_dialog", a);
    say({ step: "done", text: out.text });
    await client.close();
  },

  // Attached to one session: its commands are tools with their schemas.
  async attached() {
    const { client } = await connect();
    const tools = (await client.listTools()).tools;
    const echo = tools.find((t) => t.name === "demo_echo");
    check(echo && echo.inputSchema.properties?.text?.type === "string", "demo_echo's schema", echo);
    const { res, out } = await call(client, "demo_increment", {});
    check(!res.isError && out.ok === true, "demo_increment", out);
    const { res: bad, out: badOut } = await call(client, "demo_echo", { text: 42 });
    check(bad.isError && badOut.error?.code === "invalid_args", "demo_echo with a number", badOut);
    say({ step: "done", tools: tools.map((t) => t.name), rev: out.rev });
    await client.close();
  },

  // Bad input: an unknown tool is -32602; a foreign or missing session is
  // not_found, the same answer.
  async badinput() {
    const { client } = await connect();
    let code = 0;
    try {
      await client.callTool({ name: "no_such_tool", arguments: {} });
    } catch (e) {
      code = e.code;
    }
    check(code === -32602, "unknown tool", code);
    const answers = [];
    for (const sid of [process.env.SESSION_ID, "a".repeat(process.env.SESSION_ID.length)]) {
      const { res, out } = await call(client, "run_command", { sessionId: sid, domain: "demo", action: "increment" });
      check(res.isError && out.error?.code === "not_found", "run_command on " + sid, out);
      answers.push(res.content[0].text.replaceAll(sid, "ID"));
    }
    check(answers[0] === answers[1], "foreign and missing answer alike", answers);
    say({ step: "done", code });
    await client.close();
  },

  // surfaced mcp launched over stdio by the client: it works, the test
  // restarts the daemon, it works again (the bridge reconnects by itself,
  // and the subscription is made again).
  async stdio() {
    const transport = new StdioClientTransport({
      command: process.env.SURFACED_BIN,
      args: ["mcp", "--url", process.env.SURFACED_URL],
      env: { ...process.env, SURFACED_TOKEN: process.env.MCP_TOKEN },
      stderr: "inherit",
    });
    const updates = waiter();
    const client = new Client({ name: "surfaced-ts-stdio", version: "1.0.0" }, { capabilities: {} });
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params.uri));
    await client.connect(transport);
    const { out: created } = await call(client, "create_session", {});
    const sid = created.sessionId;
    const uri = `surfaced://sessions/${sid}/surfaces/demo`;
    await client.subscribeResource({ uri });
    const { out: before } = await call(client, "run_command", { sessionId: sid, domain: "demo", action: "increment" });
    await updates.until((u) => u === uri, "the update before the restart");
    say({ step: "before", sessionId: sid, rev: before.rev });
    await hear(); // the daemon was restarted
    const got = updates.seen.length;
    let after = null;
    for (let i = 0; i < 60 && !after; i++) {
      const { res, out } = await call(client, "run_command", { sessionId: sid, domain: "demo", action: "increment" }, { timeout: 30000 });
      if (!res.isError) after = out;
      else await new Promise((r) => setTimeout(r, 250));
    }
    check(after && after.rev > before.rev, "a command after the restart", after);
    await updates.until((u, i) => updates.seen.length > got, "the update after the restart");
    say({ step: "done", rev: after.rev, updates: updates.seen.length });
    await client.close();
  },
};

const name = process.argv[2];
if (!scenarios[name]) {
  console.error("unknown scenario " + name + "; one of " + Object.keys(scenarios).join(", "));
  process.exit(2);
}
try {
  await scenarios[name]();
  lines.close();
  process.exit(0);
} catch (e) {
  console.error(e?.stack ?? String(e));
  process.exit(1);
}
