// Command replayagent stands in for pi in the daemon's translation tests: it
// answers get_commands and get_state like pi, and answers each prompt by
// replaying the lines a script file gives for that prompt's message. It
// covers what the real pi does only under conditions a test cannot make
// cheaply (a context overflow and its compaction, a newer pi's willRetry).
//
// The script (REPLAY_SCRIPT, a JSON file) is
//
//	{"images": false, "prompts": {"<message>": [<step>, ...]}}
//
// where a step is a JSON object written as one line, an array of them
// written in one go (pi writes what follows agent_end together with it), or
// a directive: {"$respond": true} answers the prompt (else it is answered
// with the first lines), {"$sleep": ms} waits, {"$streaming": bool} sets what
// get_state reports (else a run streams from agent_start to agent_end).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// out is pi's stdout; streaming is what get_state reports. Both change
// under outMu, so that, as with pi, a get_state read after a line was
// written is answered with the state that line left.
var (
	outMu     sync.Mutex
	out       = bufio.NewWriter(os.Stdout)
	streaming bool
)

// writeLines writes lines in one go, updating streaming as pi would: a run
// streams from agent_start to agent_end.
func writeLines(lines ...[]byte) {
	outMu.Lock()
	defer outMu.Unlock()
	for _, l := range lines {
		var env struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(l, &env)
		switch env.Type {
		case "agent_start":
			streaming = true
		case "agent_end":
			streaming = false
		}
		out.Write(l)
		out.WriteByte('\n')
	}
	out.Flush()
}

func write(v any) {
	b, _ := json.Marshal(v)
	writeLines(b)
}

type script struct {
	Images  bool                         `json:"images"`
	Prompts map[string][]json.RawMessage `json:"prompts"`
}

func main() {
	raw, err := os.ReadFile(os.Getenv("REPLAY_SCRIPT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "replayagent:", err)
		os.Exit(2)
	}
	var sc script
	if err := json.Unmarshal(raw, &sc); err != nil {
		fmt.Fprintln(os.Stderr, "replayagent: script:", err)
		os.Exit(2)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			handle(sc, line)
		}
		if err != nil {
			return
		}
	}
}

func handle(sc script, line []byte) {
	var c struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(line, &c) != nil {
		write(map[string]any{"type": "response", "command": "parse", "success": false, "error": "Failed to parse command"})
		return
	}
	response := func(data any) []byte {
		r := map[string]any{"type": "response", "command": c.Type, "success": true}
		if c.ID != "" {
			r["id"] = c.ID
		}
		if data != nil {
			r["data"] = data
		}
		b, _ := json.Marshal(r)
		return b
	}
	switch c.Type {
	case "get_commands":
		writeLines(response(map[string]any{"commands": []any{}}))
	case "get_state":
		input := []string{"text"}
		if sc.Images {
			input = append(input, "image")
		}
		outMu.Lock()
		b, _ := json.Marshal(map[string]any{"type": "response", "id": c.ID, "command": "get_state", "success": true,
			"data": map[string]any{"model": map[string]any{"id": "replay", "provider": "replay", "input": input},
				"isStreaming": streaming, "isCompacting": false, "messageCount": 0}})
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
		outMu.Unlock()
	case "abort":
		writeLines(response(nil))
	case "prompt":
		steps, found := sc.Prompts[c.Message]
		if !found {
			write(map[string]any{"type": "response", "id": c.ID, "command": "prompt", "success": false, "error": "no script for " + c.Message})
			return
		}
		go replay(steps, response(nil))
	default:
		write(map[string]any{"type": "response", "command": c.Type, "success": false, "error": "Unknown command: " + c.Type})
	}
}

// replay plays a prompt's steps. A step that is an array is written in one
// go (pi writes the events that follow agent_end with it, for example).
func replay(steps []json.RawMessage, response []byte) {
	responded := false
	respond := func(with ...[]byte) {
		writeLines(append([][]byte{response}, with...)...)
		responded = true
	}
	for _, st := range steps {
		var d struct {
			Respond   *bool `json:"$respond"`
			Sleep     *int  `json:"$sleep"`
			Streaming *bool `json:"$streaming"`
		}
		_ = json.Unmarshal(st, &d)
		switch {
		case d.Respond != nil:
			respond()
		case d.Sleep != nil:
			time.Sleep(time.Duration(*d.Sleep) * time.Millisecond)
		case d.Streaming != nil:
			outMu.Lock()
			streaming = *d.Streaming
			outMu.Unlock()
		default:
			var batch []json.RawMessage
			if json.Unmarshal(st, &batch) != nil {
				batch = []json.RawMessage{st}
			}
			lines := make([][]byte, 0, len(batch))
			for _, l := range batch {
				var b bytes.Buffer
				_ = json.Compact(&b, l) // one line, whatever the script's layout
				lines = append(lines, b.Bytes())
			}
			if !responded {
				// pi answers a prompt and starts its run in one go.
				respond(lines...)
				continue
			}
			writeLines(lines...)
		}
	}
	if !responded {
		respond()
	}
}
