package pitest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
)

// The real pi, through the browser gateway (HTTP + SSE), against the
// scripted model server.

func TestPiStreamsTextAndThinking(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		return llmstub.Reply{Events: llmstub.Stream(
			llmstub.Reasoning("Let me ", "think."),
			llmstub.Text("Hello", ", ", "world", "!"),
			llmstub.Finish("stop"), llmstub.Usage(12, 4))}
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL})))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)

	if queued := d.prompt(id, "say hello"); queued {
		t.Fatal("the first prompt of an idle session was queued")
	}
	tr := nextTurn(t, s)
	if got := tr.text(); got != "Hello, world!" {
		t.Errorf("text = %q", got)
	}
	if got := tr.reasoning(); got != "Let me think." {
		t.Errorf("reasoning = %q", got)
	}
	if tr.stopReason() != "end_turn" {
		t.Errorf("stopReason = %q", tr.stopReason())
	}
	// Every part that starts ends, with the same id, and deltas come between.
	checkParts(t, tr, "text")
	checkParts(t, tr, "reasoning")
	if n := len(tr.of("start-step")); n != 1 {
		t.Errorf("%d start-step chunks, want 1", n)
	}
	if len(tr.of("error")) != 0 || len(tr.of("abort")) != 0 {
		t.Errorf("error/abort in a good turn: %v", tr.chunks)
	}
	// The model saw the prompt, and pi sent its tools.
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].LastUser() != "say hello" || !reqs[0].HasTool("bash") {
		t.Fatalf("model requests: %d, last user %q", len(reqs), reqs[0].LastUser())
	}
	// The transcript keeps what was said, thinking apart.
	st, out := d.do("GET", "/api/sessions/"+id+"/messages", nil)
	if st != http.StatusOK {
		t.Fatal(st, out)
	}
	roles := map[string]string{}
	for _, m := range out["messages"].([]any) {
		e := m.(map[string]any)
		roles[e["role"].(string)], _ = e["text"].(string)
	}
	if roles["user"] != "say hello" || roles["assistant"] != "Hello, world!" || roles["thinking"] != "Let me think." {
		t.Errorf("transcript: %v", out["messages"])
	}
	// A text-only model: the session refuses images.
	_, sum := d.do("GET", "/api/sessions/"+id, nil)
	if sum["images"] != false {
		t.Errorf("summary images = %v for a text-only model", sum["images"])
	}
}

// checkParts checks the start/delta/end discipline of one part kind.
func checkParts(t *testing.T, tr *turn, kind string) {
	t.Helper()
	open := map[string]bool{}
	seen := 0
	for _, c := range tr.chunks {
		id, _ := c.Data["id"].(string)
		switch c.Data["type"] {
		case kind + "-start":
			if open[id] {
				t.Errorf("%s part %s started twice", kind, id)
			}
			open[id] = true
			seen++
		case kind + "-delta":
			if !open[id] {
				t.Errorf("%s delta for part %s that is not open", kind, id)
			}
		case kind + "-end":
			if !open[id] {
				t.Errorf("%s end for part %s that is not open", kind, id)
			}
			delete(open, id)
		}
	}
	if seen == 0 {
		t.Errorf("no %s part", kind)
	}
	if len(open) > 0 {
		t.Errorf("%s parts never ended: %v", kind, open)
	}
}

func TestPiRunsARealToolCall(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		if r.LastRole() == "tool" {
			return llmstub.Say("The directory holds: ", r.LastToolResult())
		}
		return llmstub.Reply{Events: llmstub.Stream(
			llmstub.Text("Let me look."),
			llmstub.CallTool(0, "call_ls", "bash", map[string]any{"command": "ls; sleep 0.3; echo done-listing"}),
			llmstub.Finish("tool_calls"))}
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL})))
	cwd := t.TempDir()
	for _, f := range []string{"alpha.txt", "beta.go"} {
		if err := os.WriteFile(filepath.Join(cwd, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := d.create(cwd)
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "what is here?")
	tr := nextTurn(t, s)

	in := tr.of("tool-input-available")
	if len(in) != 1 || in[0].Data["toolCallId"] != "call_ls" || in[0].Data["toolName"] != "bash" {
		t.Fatalf("tool-input-available: %v", in)
	}
	if cmd := in[0].Data["input"].(map[string]any)["command"]; cmd != "ls; sleep 0.3; echo done-listing" {
		t.Errorf("tool input command = %v", cmd)
	}
	// Updates carry the output accumulated so far: each replaces the last,
	// so each one's text extends the previous one's.
	var prev string
	var final string
	var prelim int
	for _, c := range tr.of("tool-output-available") {
		text := resultText(c.Data["output"])
		if c.Data["preliminary"] == true {
			prelim++
			if !strings.HasPrefix(text, prev) {
				t.Errorf("preliminary output %q does not extend %q (replace, not append)", text, prev)
			}
			prev = text
			continue
		}
		final = text
	}
	if prelim == 0 {
		t.Error("no preliminary tool output (tool_execution_update)")
	}
	if final != "alpha.txt\nbeta.go\ndone-listing\n" {
		t.Errorf("final tool output = %q, want the real ls output", final)
	}
	if prev != "" && !strings.HasPrefix(final, prev) {
		t.Errorf("final output %q does not extend the last preliminary %q", final, prev)
	}
	// Order: input before any output; two steps (tool call, then answer).
	if idx(tr, "tool-input-available") > idx(tr, "tool-output-available") {
		t.Error("tool output before its input")
	}
	if n := len(tr.of("start-step")); n != 2 {
		t.Errorf("%d steps, want 2", n)
	}
	if !strings.Contains(tr.text(), "Let me look.") || !strings.Contains(tr.text(), "alpha.txt") {
		t.Errorf("text = %q", tr.text())
	}
	if tr.stopReason() != "end_turn" {
		t.Errorf("stopReason = %q", tr.stopReason())
	}
	// The transcript has the tool call with its args and result.
	_, out := d.do("GET", "/api/sessions/"+id+"/messages", nil)
	var tool map[string]any
	for _, m := range out["messages"].([]any) {
		if e := m.(map[string]any); e["role"] == "tool" {
			tool = e
		}
	}
	if tool == nil || tool["toolName"] != "bash" || tool["toolCallId"] != "call_ls" || resultText(tool["result"]) != final {
		t.Errorf("transcript tool entry: %v", tool)
	}
}

func resultText(v any) string {
	m, _ := v.(map[string]any)
	parts, _ := m["content"].([]any)
	var b strings.Builder
	for _, p := range parts {
		if pm, _ := p.(map[string]any); pm["type"] == "text" {
			b.WriteString(pm["text"].(string))
		}
	}
	return b.String()
}

func idx(tr *turn, typ string) int {
	for i, c := range tr.chunks {
		if c.Data["type"] == typ {
			return i
		}
	}
	return -1
}

func TestPiAbortMidStreamThenGoesOn(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		if r.LastUser() == "stall" {
			return llmstub.Reply{Events: llmstub.Text("partial ", "answer "), Stall: true}
		}
		return llmstub.Say("fresh answer to ", r.LastUser())
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL})))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "stall")
	s.Wait(t, wait, "streaming text", testkit.IsChat("text-delta"))
	start := time.Now()
	if st, out := d.do("POST", "/api/sessions/"+id+"/abort", nil); st != http.StatusOK || out["wasBusy"] == false {
		t.Fatalf("abort: %d %v", st, out)
	}
	s.Wait(t, wait, "abort chunk", testkit.IsChat("abort"))
	fin := s.Wait(t, wait, "finish", testkit.IsChat("finish"))
	if sr := fin.Data["messageMetadata"].(map[string]any)["stopReason"]; sr != "cancelled" {
		t.Fatalf("stopReason after abort = %v", sr)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the abort took %s (pi should stop the stream at once)", el)
	}
	// The session is usable: the next prompt is answered.
	d.prompt(id, "again")
	tr := nextTurn(t, s)
	if tr.stopReason() != "end_turn" || tr.text() != "fresh answer to again" {
		t.Fatalf("after abort: %q %q", tr.stopReason(), tr.text())
	}
}

func TestPiQueuesASecondPrompt(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		rep := llmstub.Say("answer to ", r.LastUser())
		if r.LastUser() == "first" {
			rep.Delay = 150 * time.Millisecond
		}
		return rep
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL})))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "first")
	s.Wait(t, wait, "first text", testkit.IsChat("text-delta"))
	if queued := d.prompt(id, "second"); !queued {
		t.Fatal("a prompt during a turn was not queued")
	}
	u := s.Wait(t, wait, "queued user message", testkit.IsChat("data-user-message"))
	if data := u.Data["data"].(map[string]any); data["queued"] != true || data["text"] != "second" {
		t.Fatalf("data-user-message: %v", u.Data)
	}
	fin := s.Wait(t, wait, "first finish", testkit.IsChat("finish"))
	if sr := fin.Data["messageMetadata"].(map[string]any)["stopReason"]; sr != "end_turn" {
		t.Fatalf("first turn: %v", sr)
	}
	tr := nextTurn(t, s)
	if tr.text() != "answer to second" || tr.stopReason() != "end_turn" {
		t.Fatalf("second turn: %q %q", tr.text(), tr.stopReason())
	}
	ids := tr.start.Data["messageMetadata"].(map[string]any)["promptIds"].([]any)
	if len(ids) != 1 || ids[0] != float64(2) {
		t.Errorf("second turn answers prompts %v, want [2]", ids)
	}
	// pi saw the two prompts in order, in one conversation.
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].LastUser() != "second" || !strings.Contains(string(reqs[1].Body), "answer to first") {
		t.Errorf("model requests: %d", len(reqs))
	}
}

func TestPiKilledMidTurnRestartsAndGoesOn(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		if r.LastUser() == "crash" && r.LastRole() == "user" {
			// pi's bash tool runs in a shell whose parent is pi itself.
			return llmstub.Reply{Events: llmstub.Stream(
				llmstub.Text("Stopping myself."),
				llmstub.CallTool(0, "call_kill", "bash", map[string]any{"command": "kill -9 $PPID"}),
				llmstub.Finish("tool_calls"))}
		}
		return llmstub.Say("still here: ", r.LastUser())
	})
	home := Home(t, Config{BaseURL: srv.URL})
	sessions := t.TempDir()
	// pi keeps its conversation in a session directory per surfaced session
	// and continues it when it starts again.
	agent := Agent(t, "pi", home)
	agent.Argv = []string{"/bin/sh", "-c", `exec "$0" --mode rpc --continue --session-dir "$PI_SESSIONS/$SURFACED_SESSION_ID"`, Bin(t)}
	agent.Env = append(agent.Env, "PI_SESSIONS="+sessions)
	d := startDaemon(t, surfaced.Limits{RestartBackoff: 50 * time.Millisecond}, agent)
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "remember the word zebra")
	if tr := nextTurn(t, s); tr.stopReason() != "end_turn" {
		t.Fatalf("first turn: %s", tr.stopReason())
	}

	d.prompt(id, "crash")
	tr := nextTurn(t, s)
	if tr.stopReason() != "error" {
		t.Errorf("stopReason of the crashed turn = %q", tr.stopReason())
	}
	errs := tr.of("error")
	if len(errs) != 1 || !strings.Contains(errs[0].Data["errorText"].(string), "agent stopped") {
		t.Errorf("error chunks of the crashed turn: %v", errs)
	}
	crashed := false
	for _, ev := range tr.other {
		if ev.Kind == "session" && ev.Data["code"] == "agent_crashed" {
			crashed = true
		}
	}
	if !crashed {
		s.Wait(t, wait, "agent_crashed", func(e testkit.Event) bool { return e.Kind == "session" && e.Data["code"] == "agent_crashed" })
	}
	ready(t, s) // the restart policy brings pi back

	d.prompt(id, "are you there?")
	tr = nextTurn(t, s)
	if tr.stopReason() != "end_turn" || tr.text() != "still here: are you there?" {
		t.Fatalf("after the restart: %q %q", tr.stopReason(), tr.text())
	}
	// pi continued its conversation: the model sees the turn before the crash.
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(string(last.Body), "remember the word zebra") {
		t.Errorf("after the restart pi forgot the conversation: %s", last.Body)
	}
}

func TestPiModelServer500IsOneClearError(t *testing.T) {
	for _, retries := range []int{0, 2} {
		t.Run(fmt.Sprintf("retries=%d", retries), func(t *testing.T) {
			srv := model(t, func(r llmstub.Request) llmstub.Reply {
				if r.LastUser() == "ok now" {
					return llmstub.Say("recovered")
				}
				return llmstub.Error(500, "the model server is down")
			})
			d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL, Retries: retries, RetryDelay: 20 * time.Millisecond})))
			id := d.create("")
			s := d.sse(id)
			ready(t, s)
			d.prompt(id, "hello?")
			tr := nextTurn(t, s)
			errs := tr.of("error")
			if len(errs) != 1 {
				t.Fatalf("%d error chunks, want exactly 1: %v", len(errs), errs)
			}
			msg := errs[0].Data["errorText"].(string)
			want := "The model request failed: 500 the model server is down"
			if retries > 0 {
				want += fmt.Sprintf(" (after %d retries)", retries)
			}
			if msg != want {
				t.Errorf("error text = %q, want %q", msg, want)
			}
			if tr.stopReason() != "error" {
				t.Errorf("stopReason = %q", tr.stopReason())
			}
			if n := len(srv.Requests()); n != retries+1 {
				t.Errorf("%d model requests, want %d", n, retries+1)
			}
			var retryEvents int
			for _, c := range tr.of("data-agent-event") {
				if c.Data["data"].(map[string]any)["type"] == "auto_retry_start" {
					retryEvents++
				}
			}
			if retryEvents != retries {
				t.Errorf("%d auto_retry_start events, want %d", retryEvents, retries)
			}
			// One turn, one finish: the retries stayed inside it.
			d.prompt(id, "ok now")
			tr = nextTurn(t, s)
			if tr.text() != "recovered" || tr.stopReason() != "end_turn" {
				t.Fatalf("after the error: %q %q", tr.text(), tr.stopReason())
			}
		})
	}
}

// A retry that succeeds is one turn with the answer and no error.
func TestPiRetryThatSucceedsIsOneTurn(t *testing.T) {
	srv := model(t, llmstub.Sequence(llmstub.Error(503, "overloaded, try again"), llmstub.Say("second time lucky")))
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL, Retries: 3, RetryDelay: 20 * time.Millisecond})))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "hello?")
	tr := nextTurn(t, s)
	if tr.stopReason() != "end_turn" || tr.text() != "second time lucky" || len(tr.of("error")) != 0 {
		t.Fatalf("turn: %q %q errors %v", tr.stopReason(), tr.text(), tr.of("error"))
	}
	var kinds []string
	for _, c := range tr.of("data-agent-event") {
		kinds = append(kinds, c.Data["data"].(map[string]any)["type"].(string))
	}
	if strings.Join(kinds, ",") != "auto_retry_start,auto_retry_end" {
		t.Errorf("agent events: %v", kinds)
	}
}

func TestPiLengthStopIsMaxTokens(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		return llmstub.Reply{Events: llmstub.Stream(llmstub.Text("cut sho"), llmstub.Finish("length"))}
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL})))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "write a novel")
	tr := nextTurn(t, s)
	if tr.stopReason() != "max_tokens" || tr.text() != "cut sho" {
		t.Fatalf("turn: %q %q", tr.stopReason(), tr.text())
	}
}

// A 1x1 PNG.
const pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

func TestPiImagesWhenTheModelTakesThem(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		n := 0
		for _, m := range r.Messages {
			n += m.Images()
		}
		return llmstub.Say(fmt.Sprintf("I see %d image(s)", n))
	})
	withImages := Agent(t, "vision", Home(t, Config{BaseURL: srv.URL, Images: true}))
	textOnly := Agent(t, "text", Home(t, Config{BaseURL: srv.URL}))
	d := startDaemon(t, surfaced.Limits{}, withImages, textOnly)

	st, out := d.do("POST", "/api/sessions", map[string]any{"agent": "vision", "cwd": t.TempDir()})
	if st != http.StatusCreated {
		t.Fatal(st, out)
	}
	id := out["sessionId"].(string)
	s := d.sse(id)
	ready(t, s)
	// The model is learnt right after readiness.
	testkit.Eventually(t, wait, func() bool {
		_, sum := d.do("GET", "/api/sessions/"+id, nil)
		return sum["images"] == true
	}, "a session of a model with image input to report images")
	d.prompt(id, "what is this?", map[string]string{"mimeType": "image/png", "data": pngBase64})
	tr := nextTurn(t, s)
	if tr.text() != "I see 1 image(s)" {
		t.Fatalf("text = %q", tr.text())
	}
	body := string(srv.Requests()[0].Body)
	if !strings.Contains(body, "data:image/png;base64,"+pngBase64) {
		t.Errorf("the model request has no image: %.400s", body)
	}

	st, out = d.do("POST", "/api/sessions", map[string]any{"agent": "text", "cwd": t.TempDir()})
	if st != http.StatusCreated {
		t.Fatal(st, out)
	}
	id2 := out["sessionId"].(string)
	s2 := d.sse(id2)
	ready(t, s2)
	// The barrier: the model probe (get_state) goes to pi before readiness
	// and pi answers its commands in order, so once a turn has run the
	// session knows the model; it would take images by now if it could.
	d.prompt(id2, "hello")
	if tr := nextTurn(t, s2); tr.stopReason() != "end_turn" {
		t.Fatalf("the text-only session's first turn: %q %q", tr.stopReason(), tr.text())
	}
	if _, sum := d.do("GET", "/api/sessions/"+id2, nil); sum["images"] != false {
		t.Fatalf("a text-only model's session says images %v", sum["images"])
	}
	st, out = d.do("POST", "/api/sessions/"+id2+"/prompt", map[string]any{"message": "what is this?",
		"images": []map[string]string{{"mimeType": "image/png", "data": pngBase64}}})
	if st != http.StatusBadRequest || out["error"].(map[string]any)["code"] != "images_not_supported" {
		t.Fatalf("an image for a text-only model: %d %v", st, out)
	}
}

// An image attachment (an artifact uploaded to the session) reaches a plain
// pi agent as pi's own images, in base64, and so the model; the transcript
// keeps its id. A non-image attachment is not given to pi: a diagnostic says
// so.
func TestPiImageAttachment(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		n := 0
		for _, m := range r.Messages {
			n += m.Images()
		}
		return llmstub.Say(fmt.Sprintf("I see %d image(s)", n))
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "vision", Home(t, Config{BaseURL: srv.URL, Images: true})))
	st, out := d.do("POST", "/api/sessions", map[string]any{"agent": "vision", "cwd": t.TempDir()})
	if st != http.StatusCreated {
		t.Fatal(st, out)
	}
	id := out["sessionId"].(string)
	s := d.sse(id)
	ready(t, s)
	testkit.Eventually(t, wait, func() bool {
		_, sum := d.do("GET", "/api/sessions/"+id, nil)
		return sum["images"] == true
	}, "a session of a model with image input to report images")
	png, err := base64.StdEncoding.DecodeString(pngBase64)
	if err != nil {
		t.Fatal(err)
	}
	upload := func(body []byte, mediaType string) string {
		req, _ := http.NewRequest("POST", d.url+"/api/sessions/"+id+"/artifacts", bytes.NewReader(body))
		req.Header.Set("Content-Type", mediaType)
		for k, v := range d.auth() {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Artifact struct{ ID string } `json:"artifact"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload: %d %v", resp.StatusCode, err)
		}
		return out.Artifact.ID
	}
	img := upload(png, "image/png")
	doc := upload([]byte("notes"), "text/plain")
	st, out = d.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "what is this?", "attachmentIds": []string{img, doc}})
	if st != http.StatusAccepted {
		t.Fatal(st, out)
	}
	tr := nextTurn(t, s)
	if tr.text() != "I see 1 image(s)" {
		t.Fatalf("text = %q", tr.text())
	}
	diagnosed := false
	for _, e := range s.All() {
		diagnosed = diagnosed || e.Kind == "diagnostic" && strings.Contains(e.Raw, doc) && strings.Contains(e.Raw, "attachment_not_delivered")
	}
	if !diagnosed {
		t.Errorf("no diagnostic says the text attachment was not given to pi")
	}
	body := string(srv.Requests()[0].Body)
	if !strings.Contains(body, "data:image/png;base64,"+pngBase64) {
		t.Errorf("the model request has no image: %.400s", body)
	}
	_, msgs := d.do("GET", "/api/sessions/"+id+"/messages", nil)
	user := msgs["messages"].([]any)[0].(map[string]any)
	if ids, _ := user["attachmentIds"].([]any); len(ids) != 2 || ids[0] != img || ids[1] != doc {
		t.Errorf("the transcript's user entry: %v", user)
	}
}

// Dialogs of a pi extension answered from the browser: a tool the model
// calls opens select, confirm, input and editor in turn; the answers reach
// the model as the tool's result.
func TestPiDialogsAnsweredFromTheBrowser(t *testing.T) {
	type step struct {
		args   map[string]any
		answer map[string]any // the ui-response body, without id
		want   string         // the tool's result
	}
	steps := []step{
		{map[string]any{"method": "select", "title": "Pick a color", "options": []string{"red", "green"}}, map[string]any{"value": "green"}, `answer: "green"`},
		{map[string]any{"method": "confirm", "title": "Delete it?", "message": "It cannot be undone."}, map[string]any{"confirmed": true}, `answer: true`},
		{map[string]any{"method": "input", "title": "Your name", "placeholder": "name"}, map[string]any{"value": "Ada"}, `answer: "Ada"`},
		{map[string]any{"method": "editor", "title": "Edit", "prefill": "draft"}, map[string]any{"value": "final text"}, `answer: "final text"`},
		{map[string]any{"method": "select", "title": "Pick again", "options": []string{"a", "b"}}, map[string]any{"cancelled": true}, `answer: null`},
	}
	var calls int
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		// One tool call per model request until the steps are done.
		n := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				n++
			}
		}
		calls++
		if n >= len(steps) {
			return llmstub.Say("all answered")
		}
		return llmstub.Reply{Events: llmstub.Stream(
			llmstub.CallTool(0, fmt.Sprintf("call_%d", n), "ask_user", steps[n].args), llmstub.Finish("tool_calls"))}
	})
	home := Home(t, Config{BaseURL: srv.URL, Extensions: []string{filepath.Join(ExtensionsDir(), "dialogs.ts")}})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", home))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "ask me things")
	for i, st := range steps {
		req := s.Wait(t, wait, "dialog "+st.args["method"].(string), func(e testkit.Event) bool {
			return e.Kind == "ui-request" && e.Data["method"] == st.args["method"] && e.Data["resolved"] == nil
		})
		if req.Data["title"] != st.args["title"] {
			t.Errorf("step %d: dialog %v", i, req.Data)
		}
		if o, ok := st.args["options"]; ok && fmt.Sprint(req.Data["options"]) != fmt.Sprint(o) {
			t.Errorf("step %d: options %v", i, req.Data["options"])
		}
		body := map[string]any{"id": req.Data["id"]}
		for k, v := range st.answer {
			body[k] = v
		}
		if code, out := d.do("POST", "/api/sessions/"+id+"/ui-response", body); code != http.StatusOK {
			t.Fatalf("step %d: ui-response %d %v", i, code, out)
		}
		s.Wait(t, wait, "dialog resolved", func(e testkit.Event) bool {
			return e.Kind == "ui-request" && e.Data["id"] == req.Data["id"] && e.Data["resolved"] == true
		})
		out := s.Wait(t, wait, "tool output", func(e testkit.Event) bool {
			return e.Kind == "chat" && e.Data["type"] == "tool-output-available" && e.Data["preliminary"] == nil
		})
		if got := resultText(out.Data["output"]); got != st.want {
			t.Errorf("step %d (%s): tool result %q, want %q", i, st.args["method"], got, st.want)
		}
		// A second answer to the same dialog is refused.
		if code, _ := d.do("POST", "/api/sessions/"+id+"/ui-response", body); code != http.StatusConflict {
			t.Errorf("step %d: a second answer got %d, want 409", i, code)
		}
	}
	fin := s.Wait(t, wait, "finish", testkit.IsChat("finish"))
	if sr := fin.Data["messageMetadata"].(map[string]any)["stopReason"]; sr != "end_turn" {
		t.Errorf("stopReason %v", sr)
	}
	// The extension's status (set at pi's start) is sticky for new clients.
	s2 := d.sse(id)
	s2.Wait(t, wait, "sticky status", func(e testkit.Event) bool {
		return e.Kind == "ui-request" && e.Data["method"] == "setStatus" && e.Data["statusText"] == "loaded"
	})
}

// An extension command (/ask) runs without a model run: pi answers the
// prompt and never starts a run. The turn still ends, after the dialog.
func TestPiExtensionCommandWithoutARun(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply { return llmstub.Say("unused") })
	home := Home(t, Config{BaseURL: srv.URL, Extensions: []string{filepath.Join(ExtensionsDir(), "dialogs.ts")}})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", home))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "/ask confirm Really?")
	req := s.Wait(t, wait, "confirm dialog", func(e testkit.Event) bool { return e.Kind == "ui-request" && e.Data["method"] == "confirm" })
	if req.Data["title"] != "Really?" {
		t.Errorf("dialog: %v", req.Data)
	}
	if code, out := d.do("POST", "/api/sessions/"+id+"/ui-response", map[string]any{"id": req.Data["id"], "confirmed": true}); code != http.StatusOK {
		t.Fatal(code, out)
	}
	note := s.Wait(t, wait, "notify", func(e testkit.Event) bool { return e.Kind == "ui-request" && e.Data["method"] == "notify" })
	if note.Data["message"] != "answer: true" {
		t.Errorf("notify: %v", note.Data)
	}
	fin := s.Wait(t, wait, "finish", testkit.IsChat("finish"))
	if sr := fin.Data["messageMetadata"].(map[string]any)["stopReason"]; sr != "end_turn" {
		t.Errorf("stopReason %v", sr)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the command called the model %d times", n)
	}
	// The session is free again.
	_, sum := d.do("GET", "/api/sessions/"+id, nil)
	if sum["busy"] != false {
		t.Errorf("busy after the command: %v", sum)
	}
}

// Cancelling a turn cancels its open dialog: pi gets cancelled, the dialog
// leaves the clients, the turn answers cancelled.
func TestPiAbortCancelsAnOpenDialog(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		if r.LastRole() == "tool" {
			return llmstub.Say("after: ", r.LastToolResult())
		}
		return llmstub.Reply{Events: llmstub.Stream(
			llmstub.CallTool(0, "call_q", "ask_user", map[string]any{"method": "input", "title": "Wait for me"}), llmstub.Finish("tool_calls"))}
	})
	home := Home(t, Config{BaseURL: srv.URL, Extensions: []string{filepath.Join(ExtensionsDir(), "dialogs.ts")}})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", home))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "ask")
	req := s.Wait(t, wait, "input dialog", func(e testkit.Event) bool { return e.Kind == "ui-request" && e.Data["method"] == "input" })
	d.do("POST", "/api/sessions/"+id+"/abort", nil)
	s.Wait(t, wait, "dialog resolved", func(e testkit.Event) bool {
		return e.Kind == "ui-request" && e.Data["id"] == req.Data["id"] && e.Data["resolved"] == true
	})
	fin := s.Wait(t, wait, "finish", testkit.IsChat("finish"))
	if sr := fin.Data["messageMetadata"].(map[string]any)["stopReason"]; sr != "cancelled" {
		t.Errorf("stopReason %v", sr)
	}
	if code, _ := d.do("POST", "/api/sessions/"+id+"/ui-response", map[string]any{"id": req.Data["id"], "value": "late"}); code != http.StatusConflict {
		t.Errorf("answering a cancelled dialog got %d, want 409", code)
	}
}

// surfaced never writes surface lines to a plain pi agent, and pi's id-less
// "Unknown command" answers never reach a client. The agent is pi behind a
// shell that records its stdin and first feeds it a line pi does not know.
func TestPiGetsOnlyPiLinesAndItsRefusalsStayInside(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply { return llmstub.Say("hi") })
	log := filepath.Join(t.TempDir(), "stdin.jsonl")
	agent := Agent(t, "pi", Home(t, Config{BaseURL: srv.URL}))
	agent.Argv = []string{"/bin/sh", "-c",
		`{ printf '%s\n' '{"type":"surface_bogus","id":"x1"}' '{"type":"bogus_no_id"}'; tee "$STDIN_LOG"; } | exec "$0" --mode rpc --no-session`, Bin(t)}
	agent.Env = append(agent.Env, "STDIN_LOG="+log)
	d := startDaemon(t, surfaced.Limits{}, agent)
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	// A UI preference write: a surfaced/1 agent would get state_changed.
	if code, out := d.do("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "ui.theme", "value": "dark"}); code != http.StatusOK {
		t.Fatal(code, out)
	}
	// A surface command: there is no domain, and nothing goes to pi.
	if code, _ := d.do("POST", "/api/sessions/"+id+"/surfaces/demo/increment", map[string]any{}); code == http.StatusOK {
		t.Log("surface command on a plain agent answered 200 (a result, not sent to pi)")
	}
	d.prompt(id, "hello")
	tr := nextTurn(t, s)
	if tr.text() != "hi" {
		t.Fatalf("text %q", tr.text())
	}
	d.do("POST", "/api/sessions/"+id+"/abort", nil) // idle: nothing to cancel
	// The barrier: a prompt after the abort. The session writes to pi in
	// the order it handled the requests and tee records stdin in order, so
	// once the log holds this prompt it holds whatever the abort wrote.
	const after = "after the abort"
	d.prompt(id, after)
	if tr := nextTurn(t, s); tr.text() != "hi" {
		t.Fatalf("text after the abort %q", tr.text())
	}
	testkit.Eventually(t, wait, func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), after)
	}, "the prompt after the abort in pi's stdin log")

	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	piCommands := map[string]bool{"prompt": true, "abort": true, "get_state": true, "get_messages": true,
		"get_commands": true, "extension_ui_response": true}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || !piCommands[l.Type] {
			t.Errorf("surfaced wrote a line pi does not know: %s", line)
		}
	}
	for _, ev := range s.All() {
		if strings.Contains(ev.Raw, "Unknown command") || strings.Contains(ev.Raw, "bogus") {
			t.Errorf("pi's refusal reached a client: %s %s", ev.Kind, ev.Raw)
		}
	}
}

// A run pi starts on its own (an extension sends a user message) is shown as
// a turn of its own, and prompts wait for it.
func TestPiRunStartedByAnExtensionIsATurn(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		rep := llmstub.Say("answer to ", r.LastUser())
		rep.Delay = 100 * time.Millisecond
		return rep
	})
	home := Home(t, Config{BaseURL: srv.URL, Extensions: []string{filepath.Join(ExtensionsDir(), "dialogs.ts")}})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", home))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "/later from the extension")
	tr := nextTurn(t, s)
	if tr.stopReason() != "end_turn" || tr.text() != "" {
		t.Fatalf("the command's turn: %q %q", tr.stopReason(), tr.text())
	}
	tr = nextTurn(t, s)
	if ids := tr.start.Data["messageMetadata"].(map[string]any)["promptIds"].([]any); len(ids) != 0 {
		t.Errorf("the extension's turn answers prompts %v", ids)
	}
	if tr.text() != "answer to from the extension" || tr.stopReason() != "end_turn" {
		t.Fatalf("the extension's turn: %q %q", tr.text(), tr.stopReason())
	}
}

// Cancelling while pi waits to retry: pi drops the retry, the turn answers
// cancelled at once, and the session goes on.
func TestPiAbortDuringRetryWait(t *testing.T) {
	srv := model(t, func(r llmstub.Request) llmstub.Reply {
		if r.LastUser() == "fine" {
			return llmstub.Say("fine")
		}
		return llmstub.Error(502, "bad gateway")
	})
	d := startDaemon(t, surfaced.Limits{}, Agent(t, "pi", Home(t, Config{BaseURL: srv.URL, Retries: 3, RetryDelay: 5 * time.Second})))
	id := d.create("")
	s := d.sse(id)
	ready(t, s)
	d.prompt(id, "hello?")
	s.Wait(t, wait, "auto_retry_start", func(e testkit.Event) bool {
		dd, _ := e.Data["data"].(map[string]any)
		return e.Kind == "chat" && dd["type"] == "auto_retry_start"
	})
	start := time.Now()
	d.do("POST", "/api/sessions/"+id+"/abort", nil)
	fin := s.Wait(t, wait, "finish", testkit.IsChat("finish"))
	if sr := fin.Data["messageMetadata"].(map[string]any)["stopReason"]; sr != "cancelled" {
		t.Errorf("stopReason %v", sr)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("the cancel took %s; pi was waiting 5 s to retry", el)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d model requests; the retry should have been dropped", n)
	}
	d.prompt(id, "fine")
	if tr := nextTurn(t, s); tr.text() != "fine" {
		t.Fatalf("after: %q %q", tr.text(), tr.stopReason())
	}
}
