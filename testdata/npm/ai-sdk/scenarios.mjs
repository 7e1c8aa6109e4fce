// Drives surfaced's per-turn chat endpoint with the AI SDK's own client code
// (the pinned "ai" package), unmodified: DefaultChatTransport with
// prepareReconnectToStreamRequest pointing at /chat/stream, readUIMessageStream,
// and AbstractChat (what useChat runs) where the chat's message list matters.
// Run by the gateway's Go tests:
//
//   node scenarios.mjs <scenario> [args...]
//
// with SURFACED_URL (the daemon), SURFACED_TOKEN (a bearer token) and
// SURFACED_SESSION (a session id) in the environment. A scenario prints one
// JSON object with what it observed on stdout and exits 0; the Go test judges
// it. A failure inside the SDK exits 1 with the error on stderr.
import { AbstractChat, DefaultChatTransport, readUIMessageStream } from "ai";

const base = process.env.SURFACED_URL;
const token = process.env.SURFACED_TOKEN;
const session = process.env.SURFACED_SESSION;
const [scenario, ...args] = process.argv.slice(2);
const auth = { Authorization: `Bearer ${token}` };

// transport is the stock transport with what the spec's preset sets: the
// URL, the credential, and the resume URL. fetch, when given, wraps the
// global fetch (a dropped connection).
function transport(fetch) {
  return new DefaultChatTransport({
    api: `${base}/api/sessions/${session}/chat`,
    headers: auth,
    prepareReconnectToStreamRequest: () => ({ api: `${base}/api/sessions/${session}/chat/stream` }),
    fetch,
  });
}

let nextId = 0;
const userMessage = (text) => ({ id: `u${++nextId}`, role: "user", parts: [{ type: "text", text }] });

// read consumes a chunk stream with readUIMessageStream, recording every
// chunk; onChunk sees each as it passes. It returns the chunks, the last
// message snapshot and the errors the SDK reported.
async function read(stream, onChunk) {
  const chunks = [];
  const errors = [];
  const recorded = stream.pipeThrough(
    new TransformStream({
      async transform(chunk, controller) {
        chunks.push(chunk);
        controller.enqueue(chunk);
        if (onChunk) await onChunk(chunk);
      },
    }),
  );
  let message;
  for await (const m of readUIMessageStream({ stream: recorded, onError: (e) => errors.push(String(e?.message ?? e)) })) {
    message = m;
  }
  return { chunks, message, errors };
}

function send(t, text, { signal, messages } = {}) {
  return t.sendMessages({
    chatId: session,
    messages: messages ?? [userMessage(text)],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: signal,
  });
}

async function post(path) {
  const res = await fetch(`${base}/api/sessions/${session}${path}`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: "{}",
  });
  return { status: res.status, body: await res.json() };
}

// State is the smallest ChatState, as a framework binding keeps it; it
// tells a waiter when the messages change.
class State {
  constructor(messages = []) {
    this.status = "ready";
    this.error = undefined;
    this._messages = messages;
    this.waiters = [];
  }
  get messages() {
    return this._messages;
  }
  set messages(ms) {
    this._messages = ms;
    this.waiters = this.waiters.filter((w) => !w());
  }
  pushMessage = (m) => {
    this.messages = this.messages.concat(m);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (i, m) => {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  };
  snapshot = (x) => structuredClone(x);
}

class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    const state = new State(messages);
    super({ id: session, ...init, state });
    this.chatState = state;
  }
  // until resolves once cond() holds for the messages.
  until(cond) {
    return new Promise((resolve) => {
      const check = () => cond() && (resolve(), true);
      if (!check()) this.chatState.waiters.push(check);
    });
  }
}

// droppable is a fetch whose first chat response loses its connection once
// drop() is called, after its first text-delta: the body then fails the way
// a network drop makes it fail, and the socket is closed.
function droppable() {
  let dropped = false;
  let drop;
  const dropping = new Promise((resolve) => (drop = resolve));
  const fetchFn = async (url, init) => {
    const res = await fetch(url, init);
    if (dropped || !String(url).endsWith("/chat") || !res.body) return res;
    dropped = true;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let seen = "";
    let cut = false;
    const body = new ReadableStream({
      async pull(controller) {
        if (cut) {
          await dropping;
          await reader.cancel();
          controller.error(new TypeError("network error: the connection was lost"));
          return;
        }
        const { value, done } = await reader.read();
        if (done) return controller.close();
        seen += decoder.decode(value, { stream: true });
        const at = seen.indexOf('"type":"text-delta"');
        const end = at < 0 ? -1 : seen.indexOf("\n\n", at);
        if (end < 0) return controller.enqueue(value);
        // Pass the events up to the first delta's end; nothing after it.
        const extra = new TextEncoder().encode(seen.slice(end + 2)).length;
        controller.enqueue(value.slice(0, value.length - extra));
        cut = true;
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return { fetch: fetchFn, drop };
}

const scenarios = {
  // One message; the whole answer.
  async send() {
    return read(await send(transport(), args[0]));
  },

  // POST …/abort once the first text arrives: the stream shows abort, then
  // finish.
  async abort() {
    let aborted;
    const out = await read(await send(transport(), args[0]), async (c) => {
      if (c.type === "text-delta" && !aborted) aborted = await post("/abort");
    });
    return { ...out, aborted };
  },

  // A second message while the first one's turn runs: it waits in the
  // inbox, and its stream is the turn that answers it.
  async queued() {
    const t = transport();
    let second;
    const first = read(await send(t, args[0]), async (c) => {
      if (c.type === "text-delta" && !second) second = send(t, args[1]).then((s) => read(s));
    });
    const a = await first;
    return { first: a, second: await second };
  },

  // useChat's stop(): the request is cancelled, the turn is not; resuming
  // replays it from its start to its end.
  async stop() {
    const chat = new Chat({ transport: transport() });
    const sent = chat.sendMessage({ text: args[0] });
    // Stop once some text has arrived.
    await chat.until(() => chat.lastMessage?.role === "assistant" && textOf(chat.lastMessage).length > 0);
    await chat.stop();
    const stopped = { status: chat.status, text: textOf(chat.lastMessage), id: chat.lastMessage.id };
    await sent;
    await chat.resumeStream();
    return { stopped, status: chat.status, error: chat.error?.message, messages: chat.messages };
  },

  // A connection dropped mid-turn: the SDK sees a network error; resuming
  // (useChat's resume, or a reload) replays the turn from its start into
  // the same message.
  async drop() {
    const conn = droppable();
    const chat = new Chat({ transport: transport(conn.fetch) });
    const sent = chat.sendMessage({ text: args[0] });
    await chat.until(() => chat.lastMessage?.role === "assistant" && textOf(chat.lastMessage).length > 0);
    conn.drop();
    await sent;
    const dropped = { status: chat.status, error: chat.error?.message, text: textOf(chat.lastMessage), count: chat.messages.length };
    chat.clearError();
    await chat.resumeStream();
    const again = await transport().reconnectToStream({ chatId: session });
    return { dropped, status: chat.status, error: chat.error?.message, messages: chat.messages, afterEnd: again };
  },

  // regenerate(): the same prompt again, a new turn, a new message.
  async regenerate() {
    const chat = new Chat({ transport: transport() });
    await chat.sendMessage({ text: args[0] });
    const first = structuredClone(chat.messages);
    await chat.regenerate();
    return { first, messages: chat.messages, status: chat.status, error: chat.error?.message };
  },

  // One message in a chat that already holds the messages of
  // SURFACED_MESSAGES (a session restart in between): the new answer is a
  // message of its own.
  async continue() {
    const messages = JSON.parse(process.env.SURFACED_MESSAGES || "[]");
    const chat = new Chat({ transport: transport(), messages });
    await chat.sendMessage({ text: args[0] });
    return { messages: chat.messages, status: chat.status, error: chat.error?.message };
  },

  // sendMessage with files: SURFACED_FILES holds FileUIParts as a browser's
  // file input gives them (convertFileListToFileUIParts: data: URLs), or
  // as an app builds them (the url of an artifact, any other URL).
  async files() {
    const files = JSON.parse(process.env.SURFACED_FILES || "[]");
    const chat = new Chat({ transport: transport() });
    await chat.sendMessage({ text: args[0], files });
    return { messages: chat.messages, status: chat.status, error: chat.error?.message };
  },

  // Nothing runs: the resume answers 204, which the SDK reads as nothing.
  async idle() {
    return { resumed: await transport().reconnectToStream({ chatId: session }) };
  },
};

function textOf(m) {
  return (m?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join("");
}

const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}; known: ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
try {
  console.log(JSON.stringify(await run()));
} catch (e) {
  console.error(e?.stack ?? e);
  process.exit(1);
}
