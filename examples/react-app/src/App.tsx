import { useEffect, useRef, useState, type FormEvent } from "react";
import { useChat } from "@ai-sdk/react";
import type { UIMessage } from "ai";
import {
  useChatHistory,
  useConversationBridge,
  useSessionStatus,
  useSurface,
  useSurfacedChatTransport,
  useSurfacedSession,
} from "@surfaced/react";

type Demo = { count: number; log: string[] };

export function App({ sessionId }: { sessionId: string }) {
  const history = useChatHistory();
  const status = useSessionStatus();
  return (
    <div className="app">
      <header className="topbar">
        <div className="brand">
          <span className="logo" aria-hidden="true">◆</span>
          <span>Counter studio</span>
        </div>
        <div className="session" title={sessionId}>
          <span className={"dot " + (status.connected ? (status.busy ? "busy" : "live") : "off")} />
          <span data-testid="connection">{status.connected ? (status.busy ? "agent is working" : "connected") : status.ended ? "ended" : "connecting"}</span>
        </div>
      </header>
      <main className="layout">
        {history.messages ? (
          <Workspace sessionId={sessionId} initial={history.messages} />
        ) : (
          <>
            <section className="chat card loading">Loading the conversation…</section>
            <CounterPanel />
          </>
        )}
      </main>
    </div>
  );
}

// Workspace holds the chat (useChat over the session's per-turn chat endpoint) and the panel;
// the panel's bridge sends its ops through the same chat, so they show there as they go out.
function Workspace({ sessionId, initial }: { sessionId: string; initial: UIMessage[] }) {
  const transport = useSurfacedChatTransport();
  const chat = useChat({ id: sessionId, transport, messages: initial, resume: true });
  return (
    <>
      <Chat chat={chat} />
      <CounterPanel send={(text) => chat.sendMessage({ text })} />
    </>
  );
}

function Chat({ chat }: { chat: ReturnType<typeof useChat> }) {
  const { messages, sendMessage, status, stop, error } = chat;
  const [input, setInput] = useState("");
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => {
    // A statement, not the arrow's value: newer browsers return a promise from scrollIntoView.
    end.current?.scrollIntoView({ block: "end" });
  }, [messages]);
  const busy = status === "submitted" || status === "streaming";
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const text = input.trim();
    if (!text) return;
    sendMessage({ text });
    setInput("");
  };
  return (
    <section className="chat card" aria-label="Conversation">
      <div className="messages" data-testid="messages">
        {messages.length === 0 && (
          <div className="empty">
            <h2>Talk to the agent</h2>
            <p>Try “increment the counter”, or press a button on the right: both move the same count.</p>
          </div>
        )}
        {messages.map((m) => (
          <Message key={m.id} m={m} />
        ))}
        {error && <div className="error" data-testid="chat-error">{error.message}</div>}
        <div ref={end} />
      </div>
      <form className="composer" onSubmit={submit}>
        <input
          data-testid="chat-input"
          value={input}
          onChange={(e) => setInput(e.target.value)}
          placeholder="Message the agent…"
          aria-label="Message"
          autoComplete="off"
        />
        {busy ? (
          <button type="button" className="secondary" onClick={() => stop()} data-testid="chat-stop">
            Stop
          </button>
        ) : (
          <button type="submit" data-testid="chat-send" disabled={!input.trim()}>
            Send
          </button>
        )}
      </form>
    </section>
  );
}

function Message({ m }: { m: UIMessage }) {
  return (
    <div className={"msg " + m.role} data-testid={"chat-message-" + m.role}>
      {m.parts.map((p, i) => {
        if (p.type === "text") return m.role === "user" ? <UserText key={i} text={p.text} /> : <p key={i} className="text">{p.text}</p>;
        if (p.type === "reasoning") return <p key={i} className="reasoning">{p.text}</p>;
        if (p.type.startsWith("tool-")) {
          const t = p as { type: string; state: string; input?: unknown; output?: unknown; errorText?: string };
          return (
            <div key={i} className={"tool " + t.state} data-testid="chat-tool">
              <span className="tool-name">{t.type.slice(5)}</span>
              <span className="tool-state">{toolState(t.state)}</span>
              {t.output !== undefined && <span className="tool-out">{outputText(t.output)}</span>}
              {t.errorText && <span className="tool-out err">{t.errorText}</span>}
            </div>
          );
        }
        return null;
      })}
    </div>
  );
}

// A surface-op sent through the bridge shows as what it asks, not as its fenced text.
function UserText({ text }: { text: string }) {
  const op = /^([^\n]*)\n\n```surface-op\ntool: ([^\n]*)/.exec(text);
  if (op) {
    return (
      <p className="text op" data-testid="chat-op">
        <span className="op-badge">{op[2]}</span> {op[1]}
      </p>
    );
  }
  return <p className="text">{text}</p>;
}

// outputText shows a tool's result: its text content when it has some (pi's tool results are
// {content:[{type:"text", text}]}), else the JSON.
function outputText(out: unknown): string {
  if (typeof out === "string") return out;
  const content = (out as { content?: { type?: string; text?: string }[] } | null)?.content;
  if (Array.isArray(content)) {
    const texts = content.filter((c) => c && c.type === "text" && typeof c.text === "string").map((c) => c.text);
    if (texts.length) return texts.join("\n");
  }
  return JSON.stringify(out);
}

function toolState(s: string): string {
  switch (s) {
    case "input-streaming":
      return "writing…";
    case "input-available":
      return "running…";
    case "output-error":
      return "failed";
    default:
      return "done";
  }
}

function CounterPanel({ send }: { send?: (text: string) => unknown }) {
  const session = useSurfacedSession();
  const demo = useSurface<Demo>("demo");
  const bridge = useConversationBridge("demo", send ? { conversation: send } : undefined);
  const [note, setNote] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  const readOnly = bridge.mode === "unavailable";
  // A note is about the last action; a new count answers it.
  useEffect(() => {
    setNote(null);
  }, [demo.rev]);

  const increment = async () => {
    setPending(true);
    const r = await demo.run("increment");
    setPending(false);
    setNote(r.ok ? null : r.error.message);
  };
  const ask = async () => {
    const r = await bridge.prompt({ title: "Increment the counter", tool: "increment", params: [["from", "counter panel"]] });
    setNote(r.ok ? "Asked the agent — see the conversation." : r.error.message);
  };

  return (
    <aside className="panel card" aria-label="Counter" data-testid="counter-panel">
      <div className="panel-head">
        <h2>Counter</h2>
        <span className={"badge " + bridge.mode} data-testid="bridge-mode">
          {bridge.mode === "prompt" ? "live" : bridge.mode === "command" ? "commands only" : "read-only"}
        </span>
      </div>
      {readOnly && (
        <div className="notice" role="status" data-testid="surface-unavailable">
          {session.ended
            ? "The session has ended: the counter is read-only."
            : "Surface unavailable: read-only. The agent that hosts it is not running."}
        </div>
      )}
      <div className="count" data-testid="counter-value" aria-live="polite">
        {demo.state ? demo.state.count : "—"}
      </div>
      <div className="rev">rev {demo.rev < 0 ? "—" : demo.rev}</div>
      <div className="actions">
        <button onClick={increment} disabled={readOnly || pending} data-testid="counter-increment">
          Increment
        </button>
        <button className="secondary" onClick={ask} disabled={readOnly} data-testid="counter-ask">
          Ask the agent
        </button>
      </div>
      {note && <p className="note" data-testid="counter-note">{note}</p>}
      <p className="hint">
        <strong>Increment</strong> runs the command directly. <strong>Ask the agent</strong> sends it through the conversation, so it is in the history.
      </p>
      {demo.state && demo.state.log.length > 0 && (
        <ul className="log">
          {demo.state.log.map((l, i) => (
            <li key={i}>{l}</li>
          ))}
        </ul>
      )}
    </aside>
  );
}
