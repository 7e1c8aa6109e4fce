#!/usr/bin/env python3
"""A complete surfaced/1 agent in Python, standard library only.

It hosts one surface domain, "notes" (state {"items": [...]}; commands
"add" {"text"} and "clear"), and answers prompts without a model: a prompt
"note <text>" runs the command notes/add through the daemon as a tool call;
anything else is echoed back word by word, slowly enough to be aborted.
docs/agent-protocol.md describes every line it reads and writes.
"""
import json
import os
import sys
import threading
import time

out_lock = threading.Lock()


def send(msg):
    """Writes one protocol line: a JSON object and a newline, in one write."""
    line = json.dumps(msg, separators=(",", ":"))  # never holds a raw newline
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def log(*args):
    """Logs go to stderr (the session log); stdout is the protocol."""
    print("python-agent:", *args, file=sys.stderr, flush=True)


def respond(cmd, success=True, data=None, error=None):
    """Answers a command of pi's RPC mode."""
    msg = {"type": "response", "command": cmd["type"], "success": success}
    if "id" in cmd:
        msg["id"] = cmd["id"]
    if data is not None:
        msg["data"] = data
    if error is not None:
        msg["error"] = error
    send(msg)


# The surface. The daemon's domain actor holds the state: every
# surface_dispatch brings it, and the answer carries the new one.

def run_command(action, args, state):
    """Returns (result, new state or None when unchanged)."""
    if action == "add":
        text = args.get("text") if isinstance(args, dict) else None
        if not isinstance(text, str) or not text.strip():
            return {"ok": False, "error": {"code": "invalid_args",
                                           "message": 'add needs {"text": "..."}'}}, None
        items = state.get("items", []) + [text.strip()]
        return {"ok": True, "data": {"count": len(items)}}, {"items": items}
    if action == "clear":
        return {"ok": True}, {"items": []}
    return {"ok": False, "error": {"code": "unknown_action", "message": "no command " + action}}, None


def dispatch(msg):
    result, state = run_command(msg["action"], msg.get("args") or {}, msg.get("state") or {})
    answer = {"type": "surface_dispatch_result", "id": msg["id"], "result": result}
    if state is not None:
        answer["state"] = state
    send(answer)


# Requests the agent makes of the daemon (surface_command), answered by id.

pending = {}
pending_lock = threading.Lock()
request_ids = iter(range(1, 1 << 62))


def request(msg):
    """Sends a request and waits for the line that answers it."""
    done = threading.Event()
    with pending_lock:
        rid = "py-%d" % next(request_ids)
        pending[rid] = [done, None]
    send(dict(msg, id=rid))
    done.wait()
    with pending_lock:
        return pending.pop(rid)[1]


def answered(msg):
    with pending_lock:
        waiter = pending.get(msg.get("id"))
        if waiter:
            waiter[1] = msg
            waiter[0].set()


# Turns. One runs at a time, on a thread of its own, so that the main loop
# keeps reading: the dispatch the daemon sends for the tool's own
# surface_command must be answered while the tool waits for its result.

turn_lock = threading.Lock()
current = None  # the running turn's abort flag (a threading.Event), or None
history = []


def delta(text):
    send({"type": "message_update",
          "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": text}})


def run_turn(text, aborted):
    global current
    send({"type": "turn_start"})
    reply = "You said: " + text
    if text.lower().startswith("note "):
        call = {"toolCallId": "call-1", "toolName": "note"}
        send(dict(call, type="tool_execution_start", args={"text": text[5:]}))
        res = request({"type": "surface_command", "domain": "notes",
                       "action": "add", "args": {"text": text[5:]}})
        ok = res.get("ok", False)
        out = json.dumps(res.get("data") if ok else res.get("error"))
        send(dict(call, type="tool_execution_end", isError=not ok,
                  result={"content": [{"type": "text", "text": out}]}))
        reply = ("Noted: " if ok else "The note failed: ") + out
    send({"type": "message_start", "message": {"role": "assistant", "content": []}})
    send({"type": "message_update",
          "assistantMessageEvent": {"type": "text_start", "contentIndex": 0}})
    said, stop = [], "stop"
    for i, word in enumerate(reply.split(" ")):
        if aborted.is_set():
            stop = "aborted"
            break
        delta(word if i == 0 else " " + word)
        said.append(word)
        time.sleep(0.05)
    message = {"role": "assistant", "content": [{"type": "text", "text": " ".join(said)}],
               "stopReason": stop}
    send({"type": "message_update",
          "assistantMessageEvent": {"type": "text_end", "contentIndex": 0}})
    send({"type": "message_end", "message": message})
    send({"type": "turn_end", "message": message, "toolResults": []})
    history.extend([{"role": "user", "content": text}, message])
    with turn_lock:
        current = None  # idle before agent_end: a prompt sent in answer to it is taken
    send({"type": "agent_end", "messages": [message]})


def prompt(cmd):
    global current
    with turn_lock:
        if current is not None:
            respond(cmd, False, error="already streaming")
            return
        current = threading.Event()
        aborted = current
    respond(cmd)
    # agent_start before the next line is read: the daemon asks get_state
    # after the answer, and a run must have begun by then.
    send({"type": "agent_start"})
    threading.Thread(target=run_turn, args=(cmd.get("message", ""), aborted), daemon=True).start()


def state():
    with turn_lock:
        busy = current is not None
    return {"isStreaming": busy, "isCompacting": False, "messageCount": len(history),
            "sessionId": os.environ.get("SURFACED_SESSION_ID", "")}


def handle(msg):
    kind = msg.get("type")
    if kind == "prompt":
        prompt(msg)
    elif kind == "abort":
        with turn_lock:
            if current is not None:
                current.set()
        respond(msg)
    elif kind == "get_state":
        respond(msg, data=state())
    elif kind == "get_messages":
        respond(msg, data={"messages": history})
    elif kind == "get_commands":
        respond(msg, data={"commands": [{"name": "surface:notes", "source": "extension"}]})
    elif kind == "surface_dispatch":
        dispatch(msg)
    elif kind in ("surface_command_result", "surface_get_result", "extension_ui_response"):
        answered(msg)
    elif kind in ("state_changed", "surface_register_result"):
        log(kind, json.dumps(msg))
    else:
        respond(msg, False, error="Unknown command: %s" % kind)


def main():
    send({"type": "agent_ready", "protocol": "surfaced/1", "name": "python-notes",
          "surfaces": [{"domain": "notes", "commands": ["add", "clear"],
                        "initialState": {"items": []}}]})
    for line in sys.stdin.buffer:  # bytes, split on b"\n" only, as the protocol splits
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as err:
            log("dropped a line that is not JSON:", err)
            continue
        if isinstance(msg, dict):
            handle(msg)
    # stdin ended: the daemon is stopping this agent.


if __name__ == "__main__":
    main()
