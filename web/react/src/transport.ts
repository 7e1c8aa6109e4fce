import { DefaultChatTransport, type HttpChatTransportInitOptions, type UIMessage } from "ai";
import { useMemo } from "react";
import type { Session } from "@surfaced/client";
import { useSurfacedContext } from "./context.js";

export type SurfacedChatTransportOptions<M extends UIMessage = UIMessage> = Omit<HttpChatTransportInitOptions<M>, "api"> & {
  /** The session: its id, or a Session of @surfaced/client (whose client gives baseUrl and token). */
  session: string | Session;
  /** The daemon's origin; the page's own origin when left out. */
  baseUrl?: string;
  /** A bearer token; without it the daemon's cookie authenticates (same origin). */
  token?: string;
  /**
   * Send only the last user message (default true): the daemon answers the last user message and
   * keeps the session's history itself, so the client's copy need not travel with every prompt.
   */
  lastMessageOnly?: boolean;
};

/**
 * surfacedChatTransport is the AI SDK's DefaultChatTransport set up for a surfaced session:
 * POST /api/sessions/{id}/chat for messages, GET …/chat/stream to resume (useChat's resume:true),
 * the bearer token or the page's cookie. Use the session id as useChat's id.
 */
export function surfacedChatTransport<M extends UIMessage = UIMessage>(opts: SurfacedChatTransportOptions<M>): DefaultChatTransport<M> {
  const { session, baseUrl, token, lastMessageOnly, ...rest } = opts;
  const id = typeof session === "string" ? session : session.id;
  const base = (baseUrl !== undefined ? baseUrl : typeof session === "string" ? "" : session.client.base).replace(/\/+$/, "");
  const bearer = token !== undefined ? token : typeof session === "string" ? "" : session.client.token;
  const api = base + "/api/sessions/" + encodeURIComponent(id) + "/chat";
  const auth: Record<string, string> = bearer ? { Authorization: "Bearer " + bearer } : {};
  const credentials: RequestCredentials = bearer ? "omit" : base ? "include" : "same-origin";
  const merge = (h: HeadersInit | undefined): HeadersInit => {
    const out = new Headers(h);
    for (const [k, v] of Object.entries(auth)) out.set(k, v);
    return out;
  };
  return new DefaultChatTransport<M>({
    credentials,
    ...rest,
    api,
    headers: rest.headers,
    prepareSendMessagesRequest:
      rest.prepareSendMessagesRequest ||
      ((o) => {
        let messages = o.messages;
        if (lastMessageOnly !== false) {
          const last = [...o.messages].reverse().find((m) => m.role === "user");
          messages = last ? [last] : [];
        }
        return {
          api: o.api,
          credentials: o.credentials,
          headers: merge(o.headers),
          body: { ...(o.body || {}), id: o.id, messages, trigger: o.trigger, messageId: o.messageId },
        };
      }),
    prepareReconnectToStreamRequest:
      rest.prepareReconnectToStreamRequest ||
      ((o) => ({ api: api + "/stream", credentials: o.credentials, headers: merge(o.headers) })),
  });
}

/** useSurfacedChatTransport is surfacedChatTransport for the SurfacedProvider's session, memoized. */
export function useSurfacedChatTransport<M extends UIMessage = UIMessage>(
  opts?: Omit<SurfacedChatTransportOptions<M>, "session" | "baseUrl" | "token">
): DefaultChatTransport<M> {
  const { session, baseUrl, token } = useSurfacedContext("useSurfacedChatTransport");
  // Options are read when the session changes: a transport is made once per session.
  // eslint-disable-next-line react-hooks/exhaustive-deps
  return useMemo(() => surfacedChatTransport<M>({ ...(opts || {}), session: session.id, baseUrl, token }), [session, baseUrl, token]);
}
