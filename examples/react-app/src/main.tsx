// The example app: a session of the demo agent in React. The page's URL names the session
// (?session=<id>); without one it starts a session and puts its id there, so a reload resumes it.
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { Client } from "@surfaced/client";
import { SurfacedProvider } from "@surfaced/react";
import { App } from "./App.js";

function Root() {
  const [session, setSession] = useState<string | null>(() => new URLSearchParams(location.search).get("session"));
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (session) return;
    new Client().createSession({ title: "React example" }).then(
      ({ sessionId }) => {
        const u = new URL(location.href);
        u.searchParams.set("session", sessionId);
        history.replaceState(null, "", u);
        setSession(sessionId);
      },
      (e: Error) => setError(e.message)
    );
  }, [session]);
  if (error) return <div className="splash" data-testid="start-error">Could not start a session: {error}</div>;
  if (!session) return <div className="splash">Starting a session…</div>;
  return (
    <SurfacedProvider session={session}>
      <App sessionId={session} />
    </SurfacedProvider>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Root />
  </StrictMode>
);
