import { useEffect, useMemo, useState, type ReactNode } from "react";
import { Client, Session } from "@surfaced/client";
import { StreamContext, SurfacedContext, type StreamInfo, type SurfacedContextValue } from "./context.js";

export interface SurfacedProviderProps {
  /** The session: its id, or a Session of @surfaced/client. */
  session: string | Session;
  /** The daemon's origin, e.g. "http://127.0.0.1:7800"; the page's own origin when left out. */
  baseUrl?: string;
  /** A bearer token; without it the daemon's cookie authenticates (same origin). */
  token?: string;
  children?: ReactNode;
}

/**
 * SurfacedProvider opens one session stream (state, status, artifacts) and shares it with every
 * hook below it: useSurface, useConversationBridge, useArtifacts, useSessionStatus.
 */
export function SurfacedProvider({ session, baseUrl, token, children }: SurfacedProviderProps) {
  const value = useMemo<SurfacedContextValue>(() => {
    if (typeof session === "string") {
      const client = new Client({ base: baseUrl || "", token });
      return { client, session: client.session(session), baseUrl: client.base, token };
    }
    return { client: session.client, session, baseUrl: session.client.base, token: session.client.token || undefined };
  }, [session, baseUrl, token]);

  const [stream, setStream] = useState<StreamInfo>({ connected: false, generation: 0, status: value.session.status });

  useEffect(() => {
    const s = value.session;
    setStream({ connected: false, generation: 0, status: s.status });
    const sub = s.subscribe({
      open: () => setStream((p) => ({ ...p, connected: true, generation: p.generation + 1, ended: undefined })),
      reconnecting: () => setStream((p) => (p.connected ? { ...p, connected: false } : p)),
      resync: () => setStream((p) => ({ ...p, generation: p.generation + 1 })),
      session: (status) => setStream((p) => ({ ...p, status })),
      end: (d) => setStream((p) => ({ ...p, connected: false, ended: (d && d.reason) || "ended" })),
      error: (e) => {
        if (e.fatal) setStream((p) => ({ ...p, connected: false, ended: e.code }));
      },
    });
    return () => sub.close();
  }, [value]);

  return (
    <SurfacedContext.Provider value={value}>
      <StreamContext.Provider value={stream}>{children}</StreamContext.Provider>
    </SurfacedContext.Provider>
  );
}
