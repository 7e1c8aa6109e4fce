package acpgw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/acpgw"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// The official TypeScript SDK (@agentclientprotocol/sdk, pinned in
// testdata/npm/acp-sdk; scripts/test-setup installs it) drives the mount
// through client() + createHttpStream, unmodified.

func sdkDir(t *testing.T) string {
	t.Helper()
	return testkit.NPM(t, "testdata/npm/acp-sdk", "@agentclientprotocol/sdk/package.json")
}

// runScenario runs one scenario of scenarios.mjs against d and decodes what
// it observed.
func runScenario(t *testing.T, d *daemon.Daemon, scenario string, out any, env ...string) {
	t.Helper()
	dir := sdkDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "scenarios.mjs", scenario)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ACP_URL="+d.ACPURL, "ACP_TOKEN="+d.Token, "ACP_CWD="+daemon.TempDir(t))
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node scenarios.mjs %s: %v\nstderr:\n%s\nstdout:\n%s", scenario, err, stderr.String(), stdout.String())
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out); err != nil {
		t.Fatalf("scenario %s printed %q: %v\nstderr:\n%s", scenario, stdout.String(), err, stderr.String())
	}
}

type logEntry struct {
	Session    string          `json:"session"`
	Kind       string          `json:"kind"`
	Text       string          `json:"text"`
	ToolCallID string          `json:"toolCallId"`
	Status     string          `json:"status"`
	RawInput   json.RawMessage `json:"rawInput"`
	RawOutput  json.RawMessage `json:"rawOutput"`
	Title      string          `json:"title"`
	Mark       string          `json:"mark"`
}

func textOf(log []logEntry) string {
	var b strings.Builder
	for _, e := range log {
		if e.Kind == "agent_message_chunk" {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

func TestSDKRoundTrip(t *testing.T) {
	d := daemon.Start(t)
	var out struct {
		Initialize struct {
			ProtocolVersion int `json:"protocolVersion"`
			AgentInfo       struct {
				Name, Title, Version string
			} `json:"agentInfo"`
			AgentCapabilities struct {
				LoadSession         bool `json:"loadSession"`
				SessionCapabilities map[string]any
			} `json:"agentCapabilities"`
		} `json:"initialize"`
		SessionID  string   `json:"sessionId"`
		StopReason string   `json:"stopReason"`
		Chunks     []string `json:"chunks"`
		List       struct {
			Sessions []struct {
				SessionID string `json:"sessionId"`
				Cwd       string `json:"cwd"`
				UpdatedAt string `json:"updatedAt"`
			} `json:"sessions"`
		} `json:"list"`
		ListOtherCwd struct {
			Sessions []any `json:"sessions"`
		} `json:"listOtherCwd"`
		AfterLoad  []logEntry `json:"afterLoad"`
		SecondStop string     `json:"secondStop"`
	}
	runScenario(t, d, "roundtrip", &out)

	if out.Initialize.ProtocolVersion != 1 || out.Initialize.AgentInfo.Name != "surfaced" || !out.Initialize.AgentCapabilities.LoadSession {
		t.Errorf("initialize: %+v", out.Initialize)
	}
	for _, k := range []string{"list", "resume", "close"} {
		if _, ok := out.Initialize.AgentCapabilities.SessionCapabilities[k]; !ok {
			t.Errorf("sessionCapabilities lacks %s: %v", k, out.Initialize.AgentCapabilities.SessionCapabilities)
		}
	}
	if out.StopReason != "end_turn" || strings.Join(out.Chunks, "") != "echo: hello there" || len(out.Chunks) < 2 {
		t.Errorf("prompt: stop %q chunks %q (want several chunks of %q)", out.StopReason, out.Chunks, "echo: hello there")
	}
	if len(out.List.Sessions) != 1 || out.List.Sessions[0].SessionID != out.SessionID || out.List.Sessions[0].UpdatedAt == "" {
		t.Errorf("list: %+v", out.List)
	}
	if len(out.ListOtherCwd.Sessions) != 0 {
		t.Errorf("list with another cwd: %+v", out.ListOtherCwd)
	}
	// The replay comes first on the session stream, before anything of the
	// next turn. Whether the client read it before the load answer, which
	// travels on the connection stream, is its order of reading two HTTP
	// responses: the daemon writes the replay first, but cannot order the
	// client's reads (docs/acp.md, load ordering).
	var updates []logEntry
	for _, e := range out.AfterLoad {
		if e.Mark == "" {
			updates = append(updates, e)
		}
	}
	var kinds []string
	for _, e := range updates[:min(2, len(updates))] {
		kinds = append(kinds, e.Kind+":"+e.Text)
	}
	if strings.Join(kinds, "|") != "user_message_chunk:hello there|agent_message_chunk:echo: hello there" {
		t.Errorf("the replay: %q", kinds)
	}
	if out.SecondStop != "end_turn" || len(updates) < 2 || textOf(updates[2:]) != "echo: again" {
		t.Errorf("prompt after load: %q %+v", out.SecondStop, out.AfterLoad)
	}
}

func TestSDKCancel(t *testing.T) {
	d := daemon.Start(t)
	var out struct {
		StopReason string `json:"stopReason"`
		Text       string `json:"text"`
		AfterStop  string `json:"afterStop"`
		AfterText  string `json:"afterText"`
	}
	runScenario(t, d, "cancel", &out)
	if out.StopReason != "cancelled" {
		t.Errorf("cancelled prompt answered %q", out.StopReason)
	}
	if !strings.HasPrefix(out.Text, "chunk0 ") || strings.Contains(out.Text, "chunk39") {
		t.Errorf("cancelled turn text %q", out.Text)
	}
	if out.AfterStop != "end_turn" || out.AfterText != "echo: after" {
		t.Errorf("after cancel: %q %q", out.AfterStop, out.AfterText)
	}
}

func TestSDKQueuedPrompts(t *testing.T) {
	d := daemon.Start(t)
	var out struct {
		Log []logEntry `json:"log"`
	}
	runScenario(t, d, "queued", &out)
	// The running turn answers first; the two queued messages get one reply
	// (the next turn consumes both), and both held requests answer after it,
	// in the order sent.
	var seq []string
	var text strings.Builder
	for _, e := range out.Log {
		switch {
		case e.Mark != "":
			seq = append(seq, "text="+text.String(), e.Mark)
			text.Reset()
		case e.Kind == "agent_message_chunk":
			text.WriteString(e.Text)
		}
	}
	got := strings.Join(seq, " | ")
	t.Logf("sequence: %q", got)
	if !strings.HasPrefix(got, "text=chunk0 ") || !strings.Contains(got, "echo: slow first | first:end_turn | text=echo: second\n\nthird | second:end_turn | text= | third:end_turn") {
		t.Errorf("order of replies and answers:\n%s", got)
	}
}

func TestSDKTwoClientsOneSession(t *testing.T) {
	d := daemon.Start(t)
	var out struct {
		AStop  string   `json:"aStop"`
		AText  string   `json:"aText"`
		BText  string   `json:"bText"`
		BKinds []string `json:"bKinds"`
		AKinds []string `json:"aKinds"`
	}
	runScenario(t, d, "twoClients", &out)
	if out.AStop != "end_turn" || out.AText != "echo: for both" || out.BText != "echo: for both" {
		t.Errorf("A %q %q, B %q", out.AStop, out.AText, out.BText)
	}
	// B sees A's prompt as a user message; A does not see its own echoed.
	if len(out.BKinds) == 0 || out.BKinds[0] != "user_message_chunk" {
		t.Errorf("B kinds %v", out.BKinds)
	}
	for _, k := range out.AKinds {
		if k == "user_message_chunk" {
			t.Errorf("A saw its own prompt echoed: %v", out.AKinds)
		}
	}
}

func TestSDKToolCallsAndPermission(t *testing.T) {
	for _, withhold := range []bool{false, true} {
		name := "payloads"
		if withhold {
			name = "withheld"
		}
		t.Run(name, func(t *testing.T) {
			d := daemon.Start(t, daemon.ACP(func(o *acpgw.Options) { o.WithholdToolPayloads = withhold }))
			var out struct {
				ToolStop    string           `json:"toolStop"`
				AskStop     string           `json:"askStop"`
				Permissions []map[string]any `json:"permissions"`
				Log         []logEntry       `json:"log"`
			}
			runScenario(t, d, "tools", &out)
			var calls []logEntry
			for _, e := range out.Log {
				if e.Kind == "tool_call" || e.Kind == "tool_call_update" {
					calls = append(calls, e)
				}
			}
			if len(calls) != 2 || calls[0].Kind != "tool_call" || calls[0].ToolCallID != "t1" || calls[0].Status != "in_progress" ||
				calls[0].Title != "increment" || calls[1].Status != "completed" {
				t.Fatalf("tool updates: %+v", calls)
			}
			if withhold != (calls[0].RawInput == nil) || withhold != (calls[1].RawOutput == nil) {
				t.Errorf("payloads withheld=%v but rawInput=%s rawOutput=%s", withhold, calls[0].RawInput, calls[1].RawOutput)
			}
			if out.ToolStop != "end_turn" || out.AskStop != "end_turn" {
				t.Errorf("stops %q %q", out.ToolStop, out.AskStop)
			}
			if len(out.Permissions) != 1 {
				t.Fatalf("permission requests: %v", out.Permissions)
			}
			tc := out.Permissions[0]["toolCall"].(map[string]any)
			if !strings.Contains(tc["title"].(string), "Proceed?") || len(out.Permissions[0]["options"].([]any)) != 2 {
				t.Errorf("permission request: %v", out.Permissions[0])
			}
			if txt := textOf(out.Log); !strings.Contains(txt, `"confirmed":true`) {
				t.Errorf("the agent did not get the editor's answer: %q", txt)
			}
		})
	}
}
