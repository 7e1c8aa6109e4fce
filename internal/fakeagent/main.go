// Command fakeagent is a scriptable agent for the daemon's own tests: it
// speaks the pi RPC base protocol and the surfaced/1 extension, and misbehaves
// on request (crash, hang, never get ready, duplicate domains, bad lines).
//
// Flags choose the start-up; prompts choose the turn:
//
//	crash      exit 3 in the middle of the turn
//	slow       40 text deltas 25 ms apart (abortable)
//	hang...    (at the start) one text delta, then nothing until the turn is aborted
//	tool       call surface_command demo increment from a tool, report the result
//	toolfail   a tool call that fails with the code disk_full
//	tools N    N concurrent surface_command demo increment
//	burst N    N text deltas at once
//	ask        open a confirm dialog and report the answer
//	asktext    open an input dialog and report the answer
//	state K V  state_set K to the JSON V
//	badline    write a line that is not JSON, then answer
//	fail       end with stopReason error
//	anything else: reply "echo: <prompt>"
//
// With -schemas every declared domain declares args schemas (echo and fill
// take {text: string}, sleep {ms: integer}).
//
// With -data every declared domain has a data plane: surface_fetch answers
// {path, query, rev}, with the ETag r<rev>.
//
// Commands of every declared domain (state {count, log}): increment, echo
// {text}, fill {text} (log = [text]), sleep {ms}, crash (exits 4), fail (an
// error with code "nope"), badresult (a result without "ok").
//
// A line that carries a traceparent is reported on stderr ("fakeagent:
// <type> <id> traceparent <value>").
//
// Misbehaviour flags, for the tests of surfaced agent check: -protocol (what
// agent_ready announces), -bad-line (a line that is not JSON before
// agent_ready), -no-agent-start (turns without agent_start), -ignore-abort
// (abort is answered and ignored), -ignore-term (SIGTERM and the end of stdin are
// ignored), -surfaces-once FILE (domains are declared only by the first
// process, which creates FILE: a restarted agent declares none), -ready-gate
// FILE (agent_ready waits while FILE exists: the agent stays starting until
// the test removes it, or kills it).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	mode     = flag.String("mode", "surfaced", "surfaced | plain | silent (never ready) | exit-early (exit 2 at once)")
	surfaces = flag.String("surfaces", "demo", "comma-separated agent-hosted domains")
	dup      = flag.Bool("dup", false, "declare the first domain twice")
	readyAt  = flag.Duration("ready-delay", 0, "wait before agent_ready")
	gate     = flag.String("ready-gate", "", "wait before agent_ready while this file exists (a test holds the agent in starting)")
	data     = flag.Bool("data", false, "declare every domain with a data plane (surface_fetch)")
	schemas  = flag.Bool("schemas", false, "declare args schemas: echo takes {text: string} (required), fill {text}, sleep {ms: integer}")

	protocol     = flag.String("protocol", "surfaced/1", "the protocol agent_ready announces")
	badLine      = flag.Bool("bad-line", false, "write a line that is not JSON before agent_ready")
	noAgentStart = flag.Bool("no-agent-start", false, "turns do not write agent_start")
	ignoreAbort  = flag.Bool("ignore-abort", false, "answer abort and go on with the turn")
	ignoreTerm   = flag.Bool("ignore-term", false, "ignore SIGTERM and the end of stdin")
	surfacesOnce = flag.String("surfaces-once", "", "declare domains only if this file does not exist yet (and create it)")

	outMu sync.Mutex
	out   = bufio.NewWriter(os.Stdout)

	mu       sync.Mutex
	pending  = map[string]chan json.RawMessage{}
	nextID   int
	turnStop chan struct{}
	busy     bool
)

func write(v any) {
	b, _ := json.Marshal(v)
	outMu.Lock()
	out.Write(b)
	out.WriteByte('\n')
	out.Flush()
	outMu.Unlock()
}

func writeRaw(s string) {
	outMu.Lock()
	out.WriteString(s + "\n")
	out.Flush()
	outMu.Unlock()
}

type line map[string]json.RawMessage

func (l line) str(k string) string {
	var s string
	_ = json.Unmarshal(l[k], &s)
	return s
}

func main() {
	flag.Parse()
	if *mode == "exit-early" {
		fmt.Fprintln(os.Stderr, "fakeagent: exiting early on purpose")
		os.Exit(2)
	}
	deaf := make(chan os.Signal, 1)
	if *ignoreTerm {
		signal.Notify(deaf, syscall.SIGTERM)
	}
	if *badLine {
		writeRaw("fakeagent starting (not JSON)")
	}
	if *mode == "surfaced" {
		if *readyAt > 0 {
			time.Sleep(*readyAt)
		}
		for *gate != "" && exists(*gate) {
			time.Sleep(10 * time.Millisecond)
		}
		domains := strings.Split(*surfaces, ",")
		if *surfacesOnce != "" {
			if _, err := os.Stat(*surfacesOnce); err == nil {
				domains = nil
			} else if err := os.WriteFile(*surfacesOnce, nil, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "fakeagent:", err)
			}
		}
		decls := []map[string]any{}
		for _, d := range domains {
			if d == "" {
				continue
			}
			decl := map[string]any{"domain": d, "commands": []string{"increment", "echo", "fill", "sleep", "crash", "fail", "badresult"},
				"initialState": map[string]any{"count": 0, "log": []string{}}}
			if *data {
				decl["data"] = true
			}
			if *schemas {
				text := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}},
					"required": []string{"text"}, "additionalProperties": false}
				decl["schemas"] = map[string]any{
					"echo": map[string]any{"type": "object", "description": "Append text to the log.", "properties": map[string]any{"text": map[string]any{"type": "string"}},
						"required": []string{"text"}, "additionalProperties": false},
					"fill":  text,
					"sleep": map[string]any{"type": "object", "properties": map[string]any{"ms": map[string]any{"type": "integer", "minimum": 0}}},
				}
			}
			decls = append(decls, decl)
		}
		if *dup && len(decls) > 0 {
			decls = append(decls, decls[0])
		}
		write(map[string]any{"type": "agent_ready", "protocol": *protocol, "name": "fake", "surfaces": decls})
	}
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		raw, err := r.ReadBytes('\n')
		if len(raw) > 0 {
			handle(raw)
		}
		if err != nil {
			if *ignoreTerm {
				for range deaf { // deaf to SIGTERM and the end of stdin: only SIGKILL stops it
				}
			}
			return
		}
	}
}

func handle(raw []byte) {
	var l line
	if json.Unmarshal(raw, &l) != nil {
		return
	}
	typ := l.str("type")
	id := l.str("id")
	if tp := l.str("traceparent"); tp != "" {
		// The trace context the daemon sent (tests of tracing read it in
		// the daemon's log of the agent's stderr).
		fmt.Fprintf(os.Stderr, "fakeagent: %s %s traceparent %s\n", typ, id, tp)
	}
	switch typ {
	case "get_commands":
		if *mode == "silent" {
			return
		}
		var cmds []map[string]string
		for _, d := range strings.Split(*surfaces, ",") {
			cmds = append(cmds, map[string]string{"name": "surface:" + d, "source": "extension"})
		}
		write(map[string]any{"type": "response", "id": id, "command": "get_commands", "success": true, "data": map[string]any{"commands": cmds}})
	case "prompt":
		mu.Lock()
		if busy {
			mu.Unlock()
			write(map[string]any{"type": "response", "id": id, "command": "prompt", "success": false, "error": "already streaming"})
			return
		}
		busy = true
		turnStop = make(chan struct{})
		stop := turnStop
		mu.Unlock()
		write(map[string]any{"type": "response", "id": id, "command": "prompt", "success": true})
		go turn(l.str("message"), stop)
	case "abort":
		mu.Lock()
		if turnStop != nil && !*ignoreAbort {
			select {
			case <-turnStop:
			default:
				close(turnStop)
			}
		}
		mu.Unlock()
		write(map[string]any{"type": "response", "id": id, "command": "abort", "success": true})
	case "surface_dispatch":
		go dispatch(l)
	case "surface_fetch":
		// Every domain serves data pages: {path, query, rev}, tagged by rev.
		var rev uint64
		_ = json.Unmarshal(l["rev"], &rev)
		write(map[string]any{"type": "surface_fetch_result", "id": id, "ok": true,
			"data": map[string]any{"path": l.str("path"), "query": l.str("query"), "rev": rev}, "etag": fmt.Sprintf("r%d", rev)})
	case "surface_command_result", "extension_ui_response":
		mu.Lock()
		ch := pending[id]
		delete(pending, id)
		mu.Unlock()
		if ch != nil {
			ch <- json.RawMessage(raw)
		}
	case "state_changed", "surface_register_result":
		fmt.Fprintf(os.Stderr, "fakeagent: %s\n", strings.TrimSpace(string(raw)))
	default:
		if id == "" {
			write(map[string]any{"type": "response", "command": typ, "success": false, "error": "Unknown command: " + typ})
		} else {
			write(map[string]any{"type": "response", "id": id, "command": typ, "success": false, "error": "Unknown command: " + typ})
		}
	}
}

func dispatch(l line) {
	var st struct {
		Count int      `json:"count"`
		Log   []string `json:"log"`
	}
	_ = json.Unmarshal(l["state"], &st)
	if st.Log == nil {
		st.Log = []string{}
	}
	var args struct {
		Text string `json:"text"`
		Ms   int    `json:"ms"`
	}
	_ = json.Unmarshal(l["args"], &args)
	id := l.str("id")
	res := map[string]any{"type": "surface_dispatch_result", "id": id}
	switch l.str("action") {
	case "increment":
		st.Count++
		res["result"] = map[string]any{"ok": true, "data": map[string]int{"count": st.Count}}
		res["state"] = st
	case "echo":
		st.Log = append(st.Log, args.Text)
		res["result"] = map[string]any{"ok": true, "data": map[string]any{"echoed": args.Text, "size": len(st.Log)}}
		res["state"] = st
	case "fill":
		st.Log = []string{args.Text}
		res["result"] = map[string]any{"ok": true}
		res["state"] = st
	case "sleep":
		time.Sleep(time.Duration(args.Ms) * time.Millisecond)
		res["result"] = map[string]any{"ok": true}
	case "crash":
		os.Exit(4)
	case "fail":
		res["result"] = map[string]any{"ok": false, "error": map[string]string{"code": "nope", "message": "failed on purpose"}}
	case "badresult":
		res["result"] = map[string]any{"done": true}
	default:
		res["result"] = map[string]any{"ok": false, "error": map[string]string{"code": "unknown_action", "message": "no such action"}}
	}
	write(res)
}

func request(v map[string]any) json.RawMessage {
	mu.Lock()
	nextID++
	id := fmt.Sprintf("a%d", nextID)
	ch := make(chan json.RawMessage, 1)
	pending[id] = ch
	mu.Unlock()
	v["id"] = id
	write(v)
	return <-ch
}

func text(s string) map[string]any {
	return map[string]any{"role": "assistant", "content": []map[string]string{{"type": "text", "text": s}}, "stopReason": "stop"}
}

// idle marks the agent ready for the next prompt; it runs before agent_end is
// written, so a prompt sent in answer to agent_end is accepted (as pi does).
func idle() {
	mu.Lock()
	busy = false
	mu.Unlock()
}

func turn(msg string, stop chan struct{}) {
	if !*noAgentStart {
		write(map[string]any{"type": "agent_start"})
	}
	write(map[string]any{"type": "turn_start"})
	write(map[string]any{"type": "message_start", "message": map[string]any{"role": "assistant", "content": []any{}}})
	reply := "echo: " + msg
	stopReason := "stop"
	errMsg := ""
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "crash"):
		write(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "contentIndex": 0, "delta": "about to crash"}})
		time.Sleep(20 * time.Millisecond)
		os.Exit(3)
	case strings.Contains(lower, "badline"):
		writeRaw("this is not json")
		writeRaw(`{"no":"type"}`)
	case strings.HasPrefix(lower, "burst "):
		// N text deltas as fast as the pipe takes them (fan-out benchmarks).
		var n int
		fmt.Sscanf(lower, "burst %d", &n)
		for i := 0; i < n; i++ {
			write(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "contentIndex": 0, "delta": "tok "}})
		}
		reply = ""
	case strings.HasPrefix(lower, "tools "):
		// N concurrent surface_command increments from tools.
		var n int
		fmt.Sscanf(lower, "tools %d", &n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				request(map[string]any{"type": "surface_command", "domain": "demo", "action": "increment"})
			}()
		}
		wg.Wait()
		reply = fmt.Sprintf("ran %d increments", n)
	case strings.Contains(lower, "toolfail"):
		write(map[string]any{"type": "tool_execution_start", "toolCallId": "t1", "toolName": "increment", "args": map[string]any{"by": 1}})
		write(map[string]any{"type": "tool_execution_end", "toolCallId": "t1", "toolName": "increment",
			"result": map[string]any{"content": []map[string]string{{"type": "text", "text": "secret detail: disk /dev/sda1 is full"}},
				"details": map[string]string{"code": "disk_full"}}, "isError": true})
		reply = "the tool failed"
	case strings.Contains(lower, "tool"):
		write(map[string]any{"type": "tool_execution_start", "toolCallId": "t1", "toolName": "increment", "args": map[string]any{}})
		res := request(map[string]any{"type": "surface_command", "domain": "demo", "action": "increment"})
		write(map[string]any{"type": "tool_execution_end", "toolCallId": "t1", "toolName": "increment",
			"result": map[string]any{"content": []map[string]string{{"type": "text", "text": string(res)}}}, "isError": false})
		reply = "tool said " + string(res)
	case strings.Contains(lower, "asktext"):
		res := request(map[string]any{"type": "extension_ui_request", "method": "input", "title": "Your name?"})
		reply = "dialog said " + string(res)
	case strings.Contains(lower, "ask"):
		res := request(map[string]any{"type": "extension_ui_request", "method": "confirm", "title": "Proceed?", "message": "Really?"})
		reply = "dialog said " + string(res)
	case strings.HasPrefix(lower, "state "):
		parts := strings.SplitN(msg, " ", 3)
		if len(parts) == 3 {
			write(map[string]any{"type": "state_set", "key": parts[1], "value": json.RawMessage(parts[2])})
		}
	case strings.Contains(lower, "fail"):
		stopReason, errMsg, reply = "error", "the model failed on purpose", ""
	}
	if strings.HasPrefix(lower, "hang") {
		write(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "contentIndex": 0, "delta": "thinking it over"}})
		<-stop
		write(map[string]any{"type": "message_end", "message": map[string]any{"role": "assistant", "content": []any{}, "stopReason": "aborted"}})
		idle()
		write(map[string]any{"type": "agent_end", "messages": []any{map[string]any{"role": "assistant", "stopReason": "aborted"}}})
		return
	}
	if strings.Contains(lower, "slow") {
		for i := 0; i < 40; i++ {
			select {
			case <-stop:
				write(map[string]any{"type": "message_end", "message": map[string]any{"role": "assistant", "content": []any{}, "stopReason": "aborted"}})
				idle()
				write(map[string]any{"type": "agent_end", "messages": []any{map[string]any{"role": "assistant", "stopReason": "aborted"}}})
				return
			case <-time.After(25 * time.Millisecond):
			}
			write(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "contentIndex": 0, "delta": fmt.Sprintf("chunk%d ", i)}})
		}
	}
	if reply != "" {
		write(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_start", "contentIndex": 0}})
		for _, w := range strings.SplitAfter(reply, " ") {
			write(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "contentIndex": 0, "delta": w}})
		}
		write(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_end", "contentIndex": 0}})
	}
	final := text(reply)
	final["stopReason"] = stopReason
	if errMsg != "" {
		final["errorMessage"] = errMsg
	}
	write(map[string]any{"type": "message_end", "message": final})
	write(map[string]any{"type": "turn_end"})
	idle()
	write(map[string]any{"type": "agent_end", "messages": []any{final}})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
