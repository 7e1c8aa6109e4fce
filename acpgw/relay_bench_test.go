package acpgw_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"

	"github.com/surfaced/surfaced/internal/testkit"
)

// plainRelay is the baseline of the ACP rows: a minimal Streamable HTTP relay
// written plainly, as a hand-made gateway would be, for one session of one
// agent (the fake agent, as behind the daemon). A POST of session/prompt
// writes the prompt onto the agent's stdin and is answered 202; the agent's
// text deltas go out as session/update notifications on the GET stream
// (SSE), and its agent_end as the prompt's answer (end_turn). net/http,
// encoding/json, one goroutine reading the agent, one stream.
type plainRelay struct {
	srv *httptest.Server

	mu      sync.Mutex
	in      io.WriteCloser
	pending json.RawMessage // the id of the prompt the agent runs
	prompt  []byte          // its line, sent again if the agent was busy
	stream  chan []byte
}

func startPlainRelay(b *testing.B) *plainRelay {
	argv := testkit.FakeAgent(b)
	cmd := exec.Command(argv[0], argv[1:]...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r := &plainRelay{in: in, stream: make(chan []byte, 4096)}
	agent := bufio.NewReaderSize(out, 1<<20)
	for {
		line, err := agent.ReadBytes('\n')
		if err != nil {
			b.Fatalf("relay agent: %v", err)
		}
		var m struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &m) == nil && m.Type == "agent_ready" {
			break
		}
	}
	go r.readAgent(agent)
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	b.Cleanup(func() {
		r.srv.Close()
		in.Close()
		_ = cmd.Wait()
	})
	return r
}

func (r *plainRelay) serve(w http.ResponseWriter, req *http.Request) {
	switch req.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		f.Flush()
		for {
			select {
			case ev := <-r.stream:
				fmt.Fprintf(w, "data: %s\n\n", ev)
				f.Flush()
			case <-req.Context().Done():
				return
			}
		}
	case http.MethodPost:
		var call struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				Prompt    []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if err := json.NewDecoder(req.Body).Decode(&call); err != nil || call.Method != "session/prompt" || len(call.Params.Prompt) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		line, _ := json.Marshal(map[string]string{"type": "prompt", "id": string(call.ID), "message": call.Params.Prompt[0].Text})
		line = append(line, '\n')
		r.mu.Lock()
		r.pending, r.prompt = call.ID, line
		_, err := r.in.Write(line)
		r.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// readAgent turns the agent's lines into the stream's events.
func (r *plainRelay) readAgent(agent *bufio.Reader) {
	for {
		line, err := agent.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			Type    string `json:"type"`
			Success *bool  `json:"success"`
			AME     *struct {
				Type  string `json:"type"`
				Delta string `json:"delta"`
			} `json:"assistantMessageEvent"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		switch {
		case m.Type == "response" && m.Success != nil && !*m.Success:
			// The agent was still finishing the last turn: ask again.
			r.mu.Lock()
			_, _ = r.in.Write(r.prompt)
			r.mu.Unlock()
		case m.Type == "message_update" && m.AME != nil && m.AME.Type == "text_delta":
			ev, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{
				"sessionId": "relay", "update": map[string]any{"sessionUpdate": "agent_message_chunk",
					"content": map[string]string{"type": "text", "text": m.AME.Delta}}}})
			r.stream <- ev
		case m.Type == "agent_end":
			r.mu.Lock()
			id := r.pending
			r.mu.Unlock()
			ev, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]string{"stopReason": "end_turn"}})
			r.stream <- ev
		}
	}
}
