// The CopilotKit example: CopilotKit's chat on a surfaced agent over AG-UI, with no CopilotKit
// runtime. The page's URL names the AG-UI thread (?thread=<id>); without one it makes one and puts
// it there, so a reload continues the same thread (the daemon keeps its session). The agent is
// AG-UI's HttpAgent on the daemon's own origin (POST /ag-ui/demo), authenticated by the page's
// cookie; CopilotKit runs it as a self-managed agent.
import "@copilotkit/react-core/v2/styles.css";
import { StrictMode, useMemo } from "react";
import { createRoot } from "react-dom/client";
import { CopilotKitProvider, HttpAgent } from "@copilotkit/react-core/v2";
import { App } from "./App.js";
import { AGENT } from "./config.js";

function threadOfPage(): string {
  const u = new URL(location.href);
  let thread = u.searchParams.get("thread");
  if (!thread) {
    thread = crypto.randomUUID();
    u.searchParams.set("thread", thread);
    history.replaceState(null, "", u);
  }
  return thread;
}

function Root() {
  const thread = useMemo(threadOfPage, []);
  const agent = useMemo(() => new HttpAgent({ url: new URL("/ag-ui/" + AGENT, location.origin).href, threadId: thread }), [thread]);
  const agents = useMemo(() => ({ [AGENT]: agent }), [agent]);
  return (
    <CopilotKitProvider selfManagedAgents={agents} agentId={AGENT} enableInspector={false}>
      <App agent={agent} thread={thread} />
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Root />
  </StrictMode>
);
