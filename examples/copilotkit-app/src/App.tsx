import { useCallback, useEffect, useRef, useState } from "react";
import { CopilotChat, HttpAgent, useAgent, useConfigureSuggestions, useInterrupt, useRenderTool } from "@copilotkit/react-core/v2";
import { SurfacedProvider, useSurface } from "@surfaced/react";
import { transcriptToMessages, type TranscriptEntry } from "./history.js";
import { AGENT } from "./config.js";

// The run's shared state (docs/ag-ui.md): the session's keys with their revs, and its domains.
interface SharedState {
  entries?: Record<string, { value: unknown; rev: number }>;
  surfaces?: Record<string, { available: boolean; hosted: string; commands: string[] }>;
}
type Demo = { count: number; log: string[] };

// A state-only run (no new user message) answers the thread's state and names its session; a
// thread's first run creates the session. It runs on an agent of its own, so the chat's messages
// never go out again with it.
async function fetchThread(thread: string): Promise<{ state: SharedState; sessionId?: string }> {
  const probe = new HttpAgent({ url: new URL("/ag-ui/" + AGENT, location.origin).href, threadId: thread });
  let sessionId: string | undefined;
  await probe.runAgent(
    {},
    {
      onRunStartedEvent: ({ event }) => {
        sessionId = (event as { metadata?: { surfaced?: { sessionId?: string } } }).metadata?.surfaced?.sessionId;
      },
    }
  );
  return { state: probe.state as SharedState, sessionId };
}

export function App({ agent, thread }: { agent: HttpAgent; thread: string }) {
  const [sessionId, setSessionId] = useState<string>();
  const [error, setError] = useState<string>();
  // The agent's state and messages re-render the app as runs change them.
  useAgent({ agentId: AGENT });
  useEffect(() => {
    let live = true;
    fetchThread(thread).then(
      async ({ state, sessionId }) => {
        if (!live) return;
        if (!agent.isRunning) agent.setState(state);
        setSessionId(sessionId);
        // A reload continues the thread: its history comes back into the chat.
        if (sessionId && agent.messages.length === 0) {
          const res = await fetch(`/api/sessions/${sessionId}/messages`);
          if (res.ok && live && agent.messages.length === 0) {
            const { messages } = (await res.json()) as { messages: TranscriptEntry[] };
            agent.setMessages(transcriptToMessages(messages) as Parameters<typeof agent.setMessages>[0]);
          }
        }
      },
      (e: Error) => live && setError(e.message)
    );
    return () => {
      live = false;
    };
  }, [agent, thread]);
  useInterrupt({ agentId: AGENT, render: (p) => <Dialog {...p} /> });
  // The agent's tool calls show in the chat as chips with their results.
  useRenderTool({ name: "*", render: (p: ToolChipProps) => <ToolChip {...p} /> }, []);
  useConfigureSuggestions(
    {
      available: "always",
      consumerAgentId: AGENT,
      suggestions: [
        { title: "Increment the counter", message: "Increment the counter, please." },
        { title: "Think it over", message: "Think about the counter, then say hello." },
        { title: "Pick a colour", message: "Let me choose a colour." },
      ],
    },
    []
  );

  return (
    <div className="app">
      <header className="topbar">
        <div className="brand">
          <span className="logo" aria-hidden="true">◆</span>
          <span>Counter studio</span>
          <span className="tag">CopilotKit · AG-UI</span>
        </div>
        <div className="session" title={"thread " + thread}>
          <span className={"dot " + (error ? "off" : agent.isRunning ? "busy" : sessionId ? "live" : "off")} />
          <span data-testid="connection">{error ? "offline" : agent.isRunning ? "agent is working" : sessionId ? "connected" : "connecting"}</span>
        </div>
      </header>
      <main className="layout">
        <section className="chat card" aria-label="Conversation" data-testid="chat">
          <CopilotChat
            agentId={AGENT}
            threadId={thread}
            labels={{ chatInputPlaceholder: "Message the agent…", chatDisclaimerText: "The demo agent on surfaced, over AG-UI." }}
            welcomeScreen
          />
        </section>
        {sessionId ? (
          <SurfacedProvider session={sessionId}>
            <CounterPanel agent={agent} thread={thread} />
          </SurfacedProvider>
        ) : (
          <aside className="panel card loading">{error ? "Could not reach the agent: " + error : "Opening the thread…"}</aside>
        )}
      </main>
    </div>
  );
}

// The counter shows the demo surface from the AG-UI shared state. Its button runs the surface's
// command through @surfaced/react; the change reaches the shared state as a STATE_DELTA of the run
// streaming then, or, with no run open, through a state-only run the panel makes when the session's
// stream says the surface moved past what the shared state holds.
function CounterPanel({ agent, thread }: { agent: HttpAgent; thread: string }) {
  const shared = (agent.state ?? {}) as SharedState;
  const entry = shared.entries?.["surface:demo"];
  const demo = entry?.value as Demo | undefined;
  const available = shared.surfaces?.demo?.available ?? false;
  const surface = useSurface<Demo>("demo");
  const [busy, setBusy] = useState(false);
  const [failed, setFailed] = useState<string>();
  const { activity, note } = useStateActivity(agent);

  const syncing = useRef(false);
  const sync = useCallback(async () => {
    if (syncing.current || agent.isRunning) return;
    syncing.current = true;
    try {
      const { state } = await fetchThread(thread);
      if (!agent.isRunning) {
        agent.setState(state);
        note("sync", "a state-only run: " + countOf(state));
      }
    } finally {
      syncing.current = false;
    }
  }, [agent, thread]);
  useEffect(() => {
    if (surface.rev > (entry?.rev ?? 0)) void sync();
  }, [surface.rev, entry?.rev, sync]);

  const increment = async () => {
    setBusy(true);
    setFailed(undefined);
    const r = await surface.run("increment");
    setBusy(false);
    if (!r.ok) setFailed(r.error?.message ?? "the command failed");
  };

  return (
    <aside className="panel card" aria-label="Counter">
      <div className="panel-head">
        <h2>Counter</h2>
        <span className={"badge " + (available ? "ok" : "warn")} data-testid="surface-availability">
          {available ? "live" : "read-only"}
        </span>
      </div>
      <div className="count" data-testid="counter-value">
        {demo ? demo.count : "–"}
      </div>
      <div className="meta" data-testid="counter-rev">
        {entry ? `rev ${entry.rev} · from the shared state` : "waiting for the state…"}
      </div>
      <button className="primary" data-testid="counter-increment" disabled={!available || busy} onClick={increment}>
        {busy ? "Incrementing…" : "Increment"}
      </button>
      {failed && (
        <div className="error" data-testid="counter-error">
          {failed}
        </div>
      )}
      <p className="hint">Or ask the chat: “increment the counter”. Both move the same count.</p>
      <h3>Shared state</h3>
      <ol className="activity" data-testid="state-activity">
        {activity.length === 0 && <li className="quiet">Deltas appear here as runs stream them.</li>}
        {activity.map((a) => (
          <li key={a.n}>
            <span className={"kind " + a.kind}>{a.kind}</span>
            <span className="what">{a.text}</span>
          </li>
        ))}
      </ol>
    </aside>
  );
}

interface Activity {
  n: number;
  kind: "snapshot" | "delta" | "sync";
  text: string;
}

function countOf(state: unknown): string {
  const e = (state as SharedState | undefined)?.entries?.["surface:demo"];
  return e ? `count ${(e.value as Demo).count} (rev ${e.rev})` : "no counter yet";
}

// useStateActivity keeps the last state events the agent's runs applied (and the panel's own
// state-only runs, which note adds).
function useStateActivity(agent: HttpAgent): { activity: Activity[]; note: (kind: Activity["kind"], text: string) => void } {
  const [items, setItems] = useState<Activity[]>([]);
  const seq = useRef(0);
  const note = useCallback((kind: Activity["kind"], text: string) => {
    setItems((xs) => (xs[0]?.kind === kind && xs[0]?.text === text ? xs : [{ n: ++seq.current, kind, text }, ...xs].slice(0, 6)));
  }, []);
  useEffect(() => {
    const sub = agent.subscribe({
      onStateSnapshotEvent: ({ event }) => {
        note("snapshot", "as the run began: " + countOf((event as { snapshot: unknown }).snapshot));
      },
      onStateDeltaEvent: ({ event }) => {
        const ops = (event as { delta: { op: string; path: string; value?: unknown }[] }).delta;
        note("delta", ops.map(describe).join(", "));
      },
    });
    return () => sub.unsubscribe();
  }, [agent, note]);
  return { activity: items, note };
}

function describe(op: { op: string; path: string; value?: unknown }): string {
  const path = op.path.replace(/^\/entries\//, "").replace(/^\/surfaces\//, "domain ").replace(/~1/g, "/").replace(/~0/g, "~");
  if (op.op === "remove") return `${path} removed`;
  const v = op.value;
  return typeof v === "object" && v !== null ? `${path} set` : `${path} = ${JSON.stringify(v)}`;
}

interface DialogProps {
  interrupt?: { id: string; reason: string; message?: string; metadata?: { surfaced?: { options?: string[] } } } | unknown;
  resolve: (payload: unknown) => void;
  cancel: () => void;
}

// Dialog answers the agent's dialog (an AG-UI interrupt): the payload its responseSchema says.
function Dialog({ interrupt, resolve, cancel }: DialogProps) {
  const i = interrupt as { id: string; reason: string; message?: string; metadata?: { surfaced?: { options?: string[] } } } | undefined;
  const [text, setText] = useState("");
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    // The chat's input floats over the bottom of its scroller, whose content leaves room for it:
    // scrolling the scroller to its end shows the whole dialog above the input (scrollIntoView
    // would put the dialog's buttons under it).
    let scroller = box.current?.parentElement;
    while (scroller && !/(auto|scroll)/.test(getComputedStyle(scroller).overflowY)) scroller = scroller.parentElement;
    scroller?.scrollTo({ top: scroller.scrollHeight, behavior: "smooth" });
  }, []);
  if (!i) return <></>;
  const options = i.metadata?.surfaced?.options ?? [];
  return (
    <div className="dialog" data-testid="agent-dialog" ref={box}>
      <div className="dialog-title">{i.message ?? "The agent asks"}</div>
      <div className="dialog-actions">
        {i.reason === "confirm" && (
          <>
            <button className="primary" onClick={() => resolve({ confirmed: true })}>
              Yes
            </button>
            <button onClick={() => resolve({ confirmed: false })}>No</button>
          </>
        )}
        {i.reason === "select" &&
          options.map((o) => (
            <button key={o} onClick={() => resolve({ value: o })}>
              {o}
            </button>
          ))}
        {(i.reason === "input" || i.reason === "editor") && (
          <>
            <input value={text} onChange={(e) => setText(e.target.value)} aria-label="Answer" />
            <button className="primary" onClick={() => resolve({ value: text })}>
              Send
            </button>
          </>
        )}
        <button className="quiet" onClick={() => cancel()}>
          Dismiss
        </button>
      </div>
    </div>
  );
}

interface ToolChipProps {
  name: string;
  status: "inProgress" | "executing" | "complete";
  result?: string;
}

// ToolChip is a tool call in the chat: its name, and its result once it has one.
function ToolChip({ name, status, result }: ToolChipProps) {
  return (
    <div className={"tool-chip " + status} data-testid="chat-tool">
      <span className="tool-icon" aria-hidden="true" />
      <span className="tool-name">{name}</span>
      <span className="tool-state">{status === "complete" ? result ?? "done" : status === "executing" ? "running…" : "preparing…"}</span>
    </div>
  );
}
