// A reloaded page continues its thread: the session's transcript (GET …/messages) becomes the chat's
// AG-UI messages, with the ids the AG-UI stream gives them (turn-<id> for the assistant, result-<id>
// for a tool's answer), so the next run's events extend them.
export interface TranscriptEntry {
  role: "user" | "assistant" | "thinking" | "tool";
  text?: string;
  toolCallId?: string;
  toolName?: string;
  args?: unknown;
  result?: unknown;
  isError?: boolean;
  turnId: number;
  promptId?: number;
}

type Message =
  | { id: string; role: "user"; content: string }
  | {
      id: string;
      role: "assistant";
      content?: string;
      toolCalls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
    }
  | { id: string; role: "tool"; toolCallId: string; content: string };

// resultText is a tool result as the AG-UI stream renders it: the texts of {content: [text parts]}.
function resultText(r: unknown): string {
  const parts = (r as { content?: { type: string; text?: string }[] } | null)?.content;
  if (Array.isArray(parts) && parts.every((p) => p.type === "text")) return parts.map((p) => p.text ?? "").join("\n");
  return typeof r === "string" ? r : JSON.stringify(r ?? null);
}

export function transcriptToMessages(entries: TranscriptEntry[]): Message[] {
  const out: Message[] = [];
  const steps = new Map<number, number>(); // assistant messages per turn
  let current: Extract<Message, { role: "assistant" }> | undefined;
  entries.forEach((e, i) => {
    switch (e.role) {
      case "user":
        out.push({ id: `prompt-${e.promptId ?? i}`, role: "user", content: e.text ?? "" });
        current = undefined;
        break;
      case "assistant": {
        const n = (steps.get(e.turnId) ?? 0) + 1;
        steps.set(e.turnId, n);
        current = { id: n === 1 ? `turn-${e.turnId}` : `turn-${e.turnId}-${n}`, role: "assistant", content: e.text ?? "" };
        out.push(current);
        break;
      }
      case "tool": {
        if (!current) {
          const n = (steps.get(e.turnId) ?? 0) + 1;
          steps.set(e.turnId, n);
          current = { id: n === 1 ? `turn-${e.turnId}` : `turn-${e.turnId}-${n}`, role: "assistant" };
          out.push(current);
        }
        const id = e.toolCallId ?? `tool-${i}`;
        (current.toolCalls ??= []).push({ id, type: "function", function: { name: e.toolName ?? "tool", arguments: JSON.stringify(e.args ?? {}) } });
        out.push({ id: `result-${id}`, role: "tool", toolCallId: id, content: resultText(e.result) });
        current = undefined;
        break;
      }
    }
  });
  return out;
}
