package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/store/memstore"
)

// The AI SDK's own client code (the pinned "ai" package in
// testdata/npm/ai-sdk; scripts/test-setup installs it) consumes the per-turn
// chat endpoint: DefaultChatTransport, readUIMessageStream and AbstractChat
// (what useChat runs), unmodified, against a real daemon whose agent is
// examples/hello-agent on a scripted model.

func aiSDKDir(t *testing.T) string {
	t.Helper()
	return testkit.NPM(t, "testdata/npm/ai-sdk", "ai/package.json")
}

// sdkRun is a scenario of scenarios.mjs running against a daemon.
type sdkRun struct {
	t              *testing.T
	name           string
	cmd            *exec.Cmd
	cancel         context.CancelFunc
	stdout, stderr bytes.Buffer
}

// startScenario starts a scenario against session id of d; env adds to the
// scenario's environment.
func startScenario(t *testing.T, d *daemon.Daemon, id, scenario string, args []string, env ...string) *sdkRun {
	t.Helper()
	dir := aiSDKDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	r := &sdkRun{t: t, name: scenario, cancel: cancel}
	r.cmd = exec.CommandContext(ctx, "node", append([]string{"scenarios.mjs", scenario}, args...)...)
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), "SURFACED_URL="+d.URL, "SURFACED_TOKEN="+d.Token, "SURFACED_SESSION="+id)
	r.cmd.Env = append(r.cmd.Env, env...)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = r.cmd.Wait()
	})
	return r
}

// wait waits for the scenario's end and decodes what it observed.
func (r *sdkRun) wait(out any) {
	r.t.Helper()
	defer r.cancel()
	if err := r.cmd.Wait(); err != nil {
		r.t.Fatalf("node scenarios.mjs %s: %v\nstderr:\n%s\nstdout:\n%s", r.name, err, r.stderr.String(), r.stdout.String())
	}
	if err := json.Unmarshal(bytes.TrimSpace(r.stdout.Bytes()), out); err != nil {
		r.t.Fatalf("scenario %s printed %q: %v\nstderr:\n%s", r.name, r.stdout.String(), err, r.stderr.String())
	}
}

func runScenario(t *testing.T, d *daemon.Daemon, id, scenario string, out any, args ...string) {
	t.Helper()
	startScenario(t, d, id, scenario, args).wait(out)
}

// sdkChunk is a UI message chunk as the SDK parsed it.
type sdkChunk struct {
	Type            string          `json:"type"`
	ID              string          `json:"id"`
	Delta           string          `json:"delta"`
	MessageID       string          `json:"messageId"`
	MessageMetadata json.RawMessage `json:"messageMetadata"`
	ToolCallID      string          `json:"toolCallId"`
	ToolName        string          `json:"toolName"`
	InputTextDelta  string          `json:"inputTextDelta"`
	Input           json.RawMessage `json:"input"`
	Output          json.RawMessage `json:"output"`
	ErrorText       string          `json:"errorText"`
}

// sdkMessage is a UIMessage as the SDK built it.
type sdkMessage struct {
	ID       string          `json:"id"`
	Role     string          `json:"role"`
	Metadata json.RawMessage `json:"metadata"`
	Parts    []struct {
		Type       string          `json:"type"`
		Text       string          `json:"text"`
		State      string          `json:"state"`
		ToolCallID string          `json:"toolCallId"`
		Input      json.RawMessage `json:"input"`
		Output     json.RawMessage `json:"output"`
	} `json:"parts"`
}

func (m sdkMessage) text(kind string) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == kind {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

type sdkRead struct {
	Chunks  []sdkChunk `json:"chunks"`
	Message sdkMessage `json:"message"`
	Errors  []string   `json:"errors"`
}

func (r sdkRead) types() string {
	var ts []string
	for _, c := range r.Chunks {
		ts = append(ts, c.Type)
	}
	return compact(ts)
}

type sdkChat struct {
	Status   string       `json:"status"`
	Error    string       `json:"error"`
	Messages []sdkMessage `json:"messages"`
}

// scriptedModel answers by the last user message: slow text, reasoning, a
// tool call whose input streams, a failure, or an echo. Prompts with "hold"
// stop after their first text part until release is closed.
func scriptedModel(release <-chan struct{}) llmstub.Script {
	return func(r llmstub.Request) llmstub.Reply {
		if r.LastRole() == "tool" {
			return llmstub.Say("The tool answered: ", r.LastToolResult())
		}
		p := r.LastUser()
		switch {
		case strings.Contains(p, "think"):
			return llmstub.Reply{Events: llmstub.Stream(llmstub.Reasoning("Let me ", "think."), llmstub.Text("Thought ", "through."), llmstub.Finish("stop"))}
		case strings.Contains(p, "tool"):
			return llmstub.Reply{Events: llmstub.Stream(llmstub.CallToolInParts(0, "call_1", "echo",
				`{"text":`, ` "typed`, ` out, pie`, `ce by piece"}`), llmstub.Finish("tool_calls"))}
		case strings.Contains(p, "fail"):
			return llmstub.Error(400, "the model refused the request")
		case strings.Contains(p, "stall"):
			return llmstub.Reply{Events: llmstub.Text("Working on it"), Stall: true}
		case strings.Contains(p, "hold"):
			return llmstub.Reply{Events: llmstub.Stream(llmstub.Text("First, ", "then the rest."), llmstub.Finish("stop")),
				Hold: release, HoldAfter: 1}
		}
		return llmstub.Say("You said: ", p)
	}
}

// sdkDaemon is a daemon whose agent is examples/hello-agent on
// scriptedModel, with one session; release lets the held prompts go on.
func sdkDaemon(t *testing.T, opts ...daemon.Option) (d *daemon.Daemon, id string, release func()) {
	t.Helper()
	aiSDKDir(t)
	ch := make(chan struct{})
	var once sync.Once
	d, _ = helloAgent(t, scriptedModel(ch), opts...)
	t.Cleanup(func() { once.Do(func() { close(ch) }) })
	return d, d.Create(nil), func() { once.Do(func() { close(ch) }) }
}

func TestAISDKText(t *testing.T) {
	d, id, _ := sdkDaemon(t)
	var out sdkRead
	runScenario(t, d, id, "send", &out, "hello there")
	if got := out.types(); got != "start start-step text-start text-delta* text-end finish-step finish" {
		t.Fatalf("chunks: %s", got)
	}
	m := out.Message
	if m.Role != "assistant" || !strings.HasPrefix(m.ID, "turn-") || m.text("text") != "You said: hello there" || len(out.Errors) != 0 {
		t.Fatalf("message %+v errors %v", m, out.Errors)
	}
	var meta struct {
		TurnID     uint64   `json:"turnId"`
		PromptIDs  []uint64 `json:"promptIds"`
		StopReason string   `json:"stopReason"`
	}
	if err := json.Unmarshal(m.Metadata, &meta); err != nil || m.ID != fmt.Sprintf("turn-%d", meta.TurnID) || len(meta.PromptIDs) != 1 || meta.StopReason != "end_turn" {
		t.Fatalf("metadata %s: %v", m.Metadata, err)
	}
}

func TestAISDKReasoning(t *testing.T) {
	d, id, _ := sdkDaemon(t)
	var out sdkRead
	runScenario(t, d, id, "send", &out, "think first")
	if got := out.types(); got != "start start-step reasoning-start reasoning-delta* reasoning-end text-start text-delta* text-end finish-step finish" {
		t.Fatalf("chunks: %s", got)
	}
	if m := out.Message; m.text("reasoning") != "Let me think." || m.text("text") != "Thought through." {
		t.Fatalf("message %+v", m)
	}
}

// The tool's input streams (tool-input-start, a delta per fragment), the
// SDK's joined deltas parse to the input, and the output follows.
func TestAISDKToolInputAndOutput(t *testing.T) {
	d, id, _ := sdkDaemon(t)
	var out sdkRead
	runScenario(t, d, id, "send", &out, "use the tool")
	want := "start start-step tool-input-start tool-input-delta* tool-input-available tool-output-available finish-step " +
		"start-step text-start text-delta* text-end finish-step finish"
	if got := out.types(); got != want {
		t.Fatalf("chunks:\n got %s\nwant %s", got, want)
	}
	var joined strings.Builder
	var input, output json.RawMessage
	deltas := 0
	for _, c := range out.Chunks {
		switch c.Type {
		case "tool-input-delta":
			deltas++
			joined.WriteString(c.InputTextDelta)
		case "tool-input-available":
			input = c.Input
		case "tool-output-available":
			output = c.Output
		}
	}
	var a, b any
	if err := json.Unmarshal([]byte(joined.String()), &a); err != nil || json.Unmarshal(input, &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) || deltas != 4 {
		t.Fatalf("%d deltas joined %q (%v); input %s", deltas, joined.String(), err, input)
	}
	var tool *struct {
		Type       string          `json:"type"`
		Text       string          `json:"text"`
		State      string          `json:"state"`
		ToolCallID string          `json:"toolCallId"`
		Input      json.RawMessage `json:"input"`
		Output     json.RawMessage `json:"output"`
	}
	for i := range out.Message.Parts {
		if out.Message.Parts[i].Type == "tool-echo" {
			tool = &out.Message.Parts[i]
		}
	}
	if tool == nil || tool.State != "output-available" || tool.ToolCallID != "call_1" || !strings.Contains(string(tool.Output), "typed out, piece by piece") {
		t.Fatalf("the SDK's tool part: %+v (output %s)", tool, output)
	}
	if txt := out.Message.text("text"); txt != "The tool answered: typed out, piece by piece" {
		t.Fatalf("text %q", txt)
	}
}

// A turn that fails: the SDK gets the error chunk, and the stream still
// ends with finish.
func TestAISDKErrorTurn(t *testing.T) {
	d, id, _ := sdkDaemon(t)
	var out sdkRead
	runScenario(t, d, id, "send", &out, "fail please")
	if got := out.types(); !strings.HasPrefix(got, "start ") || !strings.HasSuffix(got, "error finish") {
		t.Fatalf("chunks: %s", got)
	}
	if len(out.Errors) != 1 || !strings.Contains(out.Errors[0], "the model refused the request") {
		t.Fatalf("errors the SDK reported: %q", out.Errors)
	}
}

// POST …/abort during the turn: abort, then finish.
func TestAISDKAbort(t *testing.T) {
	d, id, _ := sdkDaemon(t)
	var out struct {
		sdkRead
		Aborted struct {
			Status int            `json:"status"`
			Body   map[string]any `json:"body"`
		} `json:"aborted"`
	}
	runScenario(t, d, id, "abort", &out, "stall a while")
	if out.Aborted.Status != 200 || out.Aborted.Body["wasBusy"] != true {
		t.Fatalf("abort answered %+v", out.Aborted)
	}
	if got := out.types(); !strings.HasSuffix(got, "abort finish") {
		t.Fatalf("chunks: %s", got)
	}
	if out.Message.text("text") != "Working on it" {
		t.Fatalf("message %+v", out.Message)
	}
}

// A message sent while a turn runs waits in the inbox; its stream is the
// turn that answers it.
func TestAISDKQueuedPrompt(t *testing.T) {
	d, id, release := sdkDaemon(t)
	run := startScenario(t, d, id, "queued", []string{"hold on", "and then"})
	testkit.Eventually(t, 30*time.Second, func() bool {
		_, out := d.JSON("GET", "/api/sessions/"+id, nil)
		return out["queued"] == 1.0
	}, "the second message queued")
	release()
	var out struct {
		First  sdkRead `json:"first"`
		Second sdkRead `json:"second"`
	}
	run.wait(&out)
	if out.First.Message.text("text") != "First, then the rest." || out.Second.Message.text("text") != "You said: and then" {
		t.Fatalf("first %+v\nsecond %+v", out.First.Message, out.Second.Message)
	}
	if out.First.Message.ID == out.Second.Message.ID || !strings.HasPrefix(out.Second.Message.ID, "turn-") {
		t.Fatalf("message ids %s and %s", out.First.Message.ID, out.Second.Message.ID)
	}
	for _, r := range []sdkRead{out.First, out.Second} {
		if !strings.HasPrefix(r.types(), "start ") || !strings.HasSuffix(r.types(), " finish") {
			t.Fatalf("chunks: %s", r.types())
		}
	}
}

// turnSubscribed waits until a resume (a subscription from a turn's start)
// reached the session.
func turnSubscribed(t *testing.T, d *daemon.Daemon) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, func() bool {
		return strings.Contains(metrics(t, d), `surfaced_subscriptions_total{mode="turn"} 1`)
	}, "the resumed stream subscribed")
}

// useChat's stop() cancels the request, not the turn: resuming replays the
// turn from its start into the same message, and it runs to its end.
func TestAISDKStopThenResume(t *testing.T) {
	d, id, release := sdkDaemon(t)
	run := startScenario(t, d, id, "stop", []string{"hold on"})
	turnSubscribed(t, d)
	release()
	var out struct {
		sdkChat
		Stopped struct {
			Status string `json:"status"`
			Text   string `json:"text"`
			ID     string `json:"id"`
		} `json:"stopped"`
	}
	run.wait(&out)
	if out.Stopped.Status != "ready" || out.Stopped.Text != "First, " {
		t.Fatalf("after stop(): %+v", out.Stopped)
	}
	if out.Status != "ready" || out.Error != "" || len(out.Messages) != 2 {
		t.Fatalf("after the resume: %+v", out.sdkChat)
	}
	m := out.Messages[1]
	if m.ID != out.Stopped.ID || m.text("text") != "First, then the rest." {
		t.Fatalf("resumed message %+v (stopped %s)", m, out.Stopped.ID)
	}
	var meta struct{ StopReason string }
	if err := json.Unmarshal(m.Metadata, &meta); err != nil || meta.StopReason != "end_turn" {
		t.Fatalf("the turn ended %q (%v)", meta.StopReason, err)
	}
}

// A connection dropped mid-turn: the SDK reports a network error; resuming
// replays the turn from its start into the same message. Once the turn has
// ended, resuming finds nothing (204).
func TestAISDKDroppedConnectionResumes(t *testing.T) {
	d, id, release := sdkDaemon(t)
	run := startScenario(t, d, id, "drop", []string{"hold on"})
	turnSubscribed(t, d)
	release()
	var out struct {
		sdkChat
		Dropped struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Text   string `json:"text"`
			Count  int    `json:"count"`
		} `json:"dropped"`
		AfterEnd *json.RawMessage `json:"afterEnd"`
	}
	run.wait(&out)
	if out.Dropped.Status != "error" || !strings.Contains(out.Dropped.Error, "network") || out.Dropped.Text != "First, " || out.Dropped.Count != 2 {
		t.Fatalf("after the drop: %+v", out.Dropped)
	}
	if out.Status != "ready" || out.Error != "" || len(out.Messages) != 2 || out.Messages[1].text("text") != "First, then the rest." {
		t.Fatalf("after the resume: %+v", out.sdkChat)
	}
	if out.AfterEnd != nil && string(*out.AfterEnd) != "null" {
		t.Fatalf("resuming after the end: %s", *out.AfterEnd)
	}
}

// regenerate() asks again with the same prompt: a new turn, a new message
// id, the same question reaching the model.
func TestAISDKRegenerate(t *testing.T) {
	d, id, _ := sdkDaemon(t)
	var out struct {
		sdkChat
		First []sdkMessage `json:"first"`
	}
	runScenario(t, d, id, "regenerate", &out, "again please")
	if len(out.First) != 2 || len(out.Messages) != 2 || out.Status != "ready" {
		t.Fatalf("first %+v then %+v", out.First, out.sdkChat)
	}
	if out.First[1].ID == out.Messages[1].ID || out.Messages[1].text("text") != "You said: again please" {
		t.Fatalf("regenerated %+v after %+v", out.Messages[1], out.First[1])
	}
	_, tr := d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	var users []string
	for _, e := range tr["messages"].([]any) {
		if m := e.(map[string]any); m["role"] == "user" {
			users = append(users, m["text"].(string))
		}
	}
	if strings.Join(users, "|") != "again please|again please" {
		t.Fatalf("the session's user messages: %q", users)
	}
}

// No turn runs: the resume is 204, which the SDK reads as nothing to resume.
func TestAISDKNothingToResume(t *testing.T) {
	d, id, _ := sdkDaemon(t)
	var out struct {
		Resumed *json.RawMessage `json:"resumed"`
	}
	runScenario(t, d, id, "idle", &out)
	if out.Resumed != nil && string(*out.Resumed) != "null" {
		t.Fatalf("resumed %s", *out.Resumed)
	}
}

// Two messages with a daemon restart between them: the second answer's
// message id is new, so the SDK keeps both answers instead of replacing the
// first with the second.
func TestAISDKSessionRestartBetweenMessages(t *testing.T) {
	aiSDKDir(t)
	st := memstore.New()
	withStore := daemon.Config(func(c *surfaced.Config) { c.Store = st })
	first, id, _ := sdkDaemon(t, withStore)
	var one sdkChat
	runScenario(t, first, id, "continue", &one, "one")
	first.Stop()

	second, _, _ := sdkDaemon(t, withStore)
	msgs, _ := json.Marshal(one.Messages)
	var two sdkChat
	startScenario(t, second, id, "continue", []string{"two"}, "SURFACED_MESSAGES="+string(msgs)).wait(&two)
	if len(two.Messages) != 4 || two.Status != "ready" {
		t.Fatalf("after the restart the chat has %d messages: %+v", len(two.Messages), two)
	}
	a, b := two.Messages[1], two.Messages[3]
	if a.ID == b.ID || a.text("text") != "You said: one" || b.text("text") != "You said: two" {
		t.Fatalf("answers %s %q and %s %q", a.ID, a.text("text"), b.ID, b.text("text"))
	}
}

// The SDK's files (FileUIParts, first in the user message) reach the
// session: a data: URL, as a browser's file input makes it, is stored as an
// artifact and attached; the url of one of the session's artifacts attaches
// that one; another URL is refused, and the SDK reports the daemon's error.
func TestAISDKFiles(t *testing.T) {
	d, id, _ := sdkDaemon(t)
	doc, signed := put(t, d, id, "?name=doc.pdf", "application/pdf", []byte("%PDF-1.7"))
	img := []byte("\x89PNG\r\n\x1a\n not really an image")
	files := func(parts ...map[string]any) string {
		b, _ := json.Marshal(parts)
		return "SURFACED_FILES=" + string(b)
	}
	var out sdkChat
	startScenario(t, d, id, "files", []string{"what is this?"}, files(
		filePart(dataURL("image/png", img), "image/png", "cat.png"),
		filePart(d.URL+signed, "application/pdf", "doc.pdf"),
	)).wait(&out)
	if out.Status != "ready" || out.Error != "" || len(out.Messages) != 2 {
		t.Fatalf("chat: %+v", out)
	}
	if p := out.Messages[0].Parts; len(p) != 3 || p[0].Type != "file" || p[1].Type != "file" || p[2].Type != "text" {
		t.Fatalf("the SDK's user message: %+v", out.Messages[0])
	}
	ids := listIDs(t, d, id)
	if len(ids) != 2 || ids[1] != doc["id"] {
		t.Fatalf("artifacts %v", ids)
	}
	// The agent (agentkit) got the attachments' ids with the prompt and
	// told its model, which echoes what it was told.
	if want := "You said: what is this?Attached artifacts:\n- " + ids[0] + " (image/png, cat.png)\n- " + ids[1] + " (application/pdf, doc.pdf)"; out.Messages[1].text("text") != want {
		t.Fatalf("the answer %q, want %q", out.Messages[1].text("text"), want)
	}
	_, a := d.JSON("GET", "/api/sessions/"+id+"/artifacts/"+ids[0], nil)
	if got := a["artifact"].(map[string]any); got["name"] != "cat.png" || got["mediaType"] != "image/png" || got["sha256"] != sha(img) {
		t.Fatalf("the stored file: %v", got)
	}
	_, msgs := d.JSON("GET", "/api/sessions/"+id+"/messages", nil)
	first := msgs["messages"].([]any)[0].(map[string]any)
	if got, _ := first["attachmentIds"].([]any); len(got) != 2 || got[0] != ids[0] || got[1] != doc["id"] || first["text"] != "what is this?" {
		t.Fatalf("transcript %v", first)
	}

	// A URL the daemon would have to download: the request fails with
	// the daemon's answer, nothing reaches the session.
	var refused sdkChat
	startScenario(t, d, id, "files", []string{"and this?"}, files(
		filePart("https://example.invalid/cat.png", "image/png", "cat.png"),
	)).wait(&refused)
	if refused.Status != "error" || !strings.Contains(refused.Error, "invalid_field") || !strings.Contains(refused.Error, "does not download") {
		t.Fatalf("an https file: %+v", refused)
	}
	if _, msgs := d.JSON("GET", "/api/sessions/"+id+"/messages", nil); len(msgs["messages"].([]any)) != 2 {
		t.Fatalf("transcript after the refusal: %v", msgs)
	}
}
