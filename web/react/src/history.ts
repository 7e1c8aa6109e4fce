import { useEffect, useState } from "react";
import type { UIMessage } from "ai";
import type { TranscriptEntry } from "@surfaced/client";
import { useSurfacedContext } from "./context.js";

/**
 * transcriptToUIMessages turns the session's transcript (GET …/messages) into the AI SDK's
 * UIMessages, for useChat's initial messages: a user message per prompt, an assistant message
 * per turn (id "turn-<turnId>", as the chat stream names it) with its reasoning, text and tools.
 */
export function transcriptToUIMessages(entries: TranscriptEntry[]): UIMessage[] {
  const out: UIMessage[] = [];
  let current: UIMessage | null = null;
  let currentTurn: number | undefined;
  let n = 0;
  for (const e of entries) {
    if (e.role === "user") {
      current = null;
      out.push({
        id: e.promptId !== undefined ? "prompt-" + e.promptId : "user-" + ++n,
        role: "user",
        parts: [{ type: "text", text: e.text || "" }],
      });
      continue;
    }
    if (!current || currentTurn !== e.turnId) {
      current = { id: e.turnId !== undefined ? "turn-" + e.turnId : "assistant-" + ++n, role: "assistant", parts: [] };
      if (out.some((m) => m.id === current!.id)) current.id += "-" + ++n;
      currentTurn = e.turnId;
      out.push(current);
    }
    switch (e.role) {
      case "assistant":
        current.parts.push({ type: "text", text: e.text || "", state: "done" });
        break;
      case "thinking":
        current.parts.push({ type: "reasoning", text: e.text || "", state: "done" });
        break;
      case "tool":
        current.parts.push(
          (e.isError
            ? {
                type: "tool-" + (e.toolName || "tool"),
                toolCallId: e.toolCallId || "call-" + ++n,
                state: "output-error",
                input: e.args ?? {},
                errorText: typeof e.result === "string" ? e.result : JSON.stringify(e.result ?? "the tool failed"),
              }
            : {
                type: "tool-" + (e.toolName || "tool"),
                toolCallId: e.toolCallId || "call-" + ++n,
                state: "output-available",
                input: e.args ?? {},
                output: e.result,
              }) as UIMessage["parts"][number]
        );
        break;
    }
  }
  return out;
}

/**
 * useChatHistory loads the session's transcript once, as UIMessages (undefined while it loads):
 * render useChat once it is in, with it as the initial messages, so a reload shows the history.
 */
export function useChatHistory(): { messages: UIMessage[] | undefined; error: Error | undefined } {
  const { session } = useSurfacedContext("useChatHistory");
  const [state, setState] = useState<{ messages: UIMessage[] | undefined; error: Error | undefined }>({ messages: undefined, error: undefined });
  useEffect(() => {
    let cancelled = false;
    setState({ messages: undefined, error: undefined });
    session.messages().then(
      (entries) => !cancelled && setState({ messages: transcriptToUIMessages(entries), error: undefined }),
      (error: Error) => !cancelled && setState({ messages: [], error })
    );
    return () => {
      cancelled = true;
    };
  }, [session]);
  return state;
}
