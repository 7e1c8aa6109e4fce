import { createContext, useContext } from "react";
import type { Client, Session, SessionStatus } from "@surfaced/client";

/** What SurfacedProvider shares with the hooks below it. */
export interface SurfacedContextValue {
  client: Client;
  session: Session;
  /** The daemon's origin ("" for the page's own). */
  baseUrl: string;
  token?: string;
}

export const SurfacedContext = createContext<SurfacedContextValue | null>(null);

/** The stream's condition, shared through its own context so that it re-renders only its readers. */
export interface StreamInfo {
  /** The session stream is open. */
  connected: boolean;
  /** Rises on every (re)open and resync: lists that are not carried by sticky frames reload then. */
  generation: number;
  /** The last `session` frame. */
  status: SessionStatus | undefined;
  /** Set when the stream ended for good (the session ended, the credential was refused). */
  ended?: string;
}

export const StreamContext = createContext<StreamInfo>({ connected: false, generation: 0, status: undefined });

export function useSurfacedContext(hook: string): SurfacedContextValue {
  const v = useContext(SurfacedContext);
  if (!v) throw new Error(hook + " must be used inside <SurfacedProvider>");
  return v;
}
