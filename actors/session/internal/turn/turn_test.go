package turn

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// The lines a prompt that starts turn id at once writes (request number req).
func startedAt(id, prompt uint64, text string, req int) []string {
	return []string{
		// Its record names the turn it starts: the turn does not write it
		// again.
		fmt.Sprintf(`record user %q turn=%d prompt=%d via=browser`, text, id, prompt),
		fmt.Sprintf(`chat {"type":"data-user-message","data":{"promptId":%d,"text":%q,"via":"browser","queued":false}}`, prompt, text),
		`status busy=true queued=0`,
		fmt.Sprintf(`chat {"type":"start","messageId":"turn-%d","messageMetadata":{"turnId":%d,"promptIds":[%d]}}`, id, id, prompt),
		fmt.Sprintf(`call {"id":"turn.prompt.%d","type":"prompt","message":%q}`, req, text),
		fmt.Sprintf(`prompt %d`, prompt),
	}
}

func lines(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestTurns(t *testing.T) {
	hello := assistant("stop", "", "hello")
	runScenarios(t, []scenario{{
		name: "a plain turn",
		steps: steps(ready(), prompt("hi"), accepted(),
			pi(run(hello, "hel", "lo")[:4]...), state(true), pi(run(hello, "hel", "lo")[4:]...)),
		want: lines(startedAt(1, 1, "hi", 1), []string{
			// pi answers the prompt before its run starts: the barrier asks
			// whether a run comes.
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`model replay images=false`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"hel"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"lo"}`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`transcript assistant "hello" turn=1`,
			`chat {"type":"finish-step"}`,
			`status busy=false queued=0`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		}),
	}, {
		name: "prompts queued during a turn are joined into the next one",
		steps: steps(ready(), prompt("a"), accepted(), pi(run(hello)[:1]...),
			prompt("b"), prompt("c"), pi(run(hello)[1:]...), accepted(), pi(run(assistant("stop", "", "both"), "both")...)),
		want: lines(startedAt(1, 1, "a", 1), []string{
			`call {"id":"turn.settle.2","type":"get_state"}`,
			// Recorded before they are accepted; the turn that answers them
			// is not known yet.
			`record user "b" turn=0 prompt=2 via=browser`,
			`chat {"type":"data-user-message","data":{"promptId":2,"text":"b","via":"browser","queued":true}}`,
			`status busy=true queued=1`,
			`prompt 2 queued`,
			`record user "c" turn=0 prompt=3 via=browser`,
			`chat {"type":"data-user-message","data":{"promptId":3,"text":"c","via":"browser","queued":true}}`,
			`status busy=true queued=2`,
			`prompt 3 queued`,
			`chat {"type":"start-step"}`,
			`transcript assistant "hello" turn=1`,
			`chat {"type":"finish-step"}`,
			`status busy=false queued=2`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
			// The next turn answers both, in one prompt: texts joined by a
			// blank line, every prompt id in its start and finish.
			`transcript user "b" turn=2 prompt=2 via=browser`,
			`transcript user "c" turn=2 prompt=3 via=browser`,
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-2","messageMetadata":{"turnId":2,"promptIds":[2,3]}}`,
			`call {"id":"turn.prompt.3","type":"prompt","message":"b\n\nc"}`,
			`call {"id":"turn.settle.4","type":"get_state"}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"2-1-t0"}`,
			`chat {"type":"text-delta","id":"2-1-t0","delta":"both"}`,
			`chat {"type":"text-end","id":"2-1-t0"}`,
			`transcript assistant "both" turn=2`,
			`chat {"type":"finish-step"}`,
			`status busy=false queued=0`,
			`chat {"type":"finish","messageMetadata":{"turnId":2,"promptIds":[2,3],"stopReason":"end_turn"}}`,
		}),
	}, {
		name:  "prompts wait for the agent to be ready",
		steps: steps(prompt("a"), prompt("b"), ready()),
		want: []string{
			`record user "a" turn=0 prompt=1 via=browser`,
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"a","via":"browser","queued":true}}`,
			`status busy=false queued=1`,
			`prompt 1 queued`,
			`record user "b" turn=0 prompt=2 via=browser`,
			`chat {"type":"data-user-message","data":{"promptId":2,"text":"b","via":"browser","queued":true}}`,
			`status busy=false queued=2`,
			`prompt 2 queued`,
			`transcript user "a" turn=1 prompt=1 via=browser`,
			`transcript user "b" turn=1 prompt=2 via=browser`,
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[1,2]}}`,
			`call {"id":"turn.prompt.1","type":"prompt","message":"a\n\nb"}`,
		},
	}, {
		name: "refusals change nothing",
		cfg:  Config{InboxMax: 2},
		steps: steps(prompt(" \n\t"), promptFull(Prompt{Text: "look", Images: []*pb.Image{{MimeType: "image/png", Data: "AA=="}}}),
			prompt("one"), prompt("two"), prompt("three")),
		only: []string{"prompt", "refused"},
		want: []string{`refused empty_prompt`, `refused images_not_supported`, `prompt 1 queued`, `prompt 2 queued`, `refused inbox_full`},
	}, {
		name:  "images travel with the prompt when the agent takes them",
		cfg:   Config{Images: func() bool { return true }},
		steps: steps(ready(), promptFull(Prompt{Images: []*pb.Image{{MimeType: "image/png", Data: "AA=="}}, Via: "acp", Tag: "r7"})),
		want: []string{
			`record user "" turn=1 prompt=1 via=acp`,
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"","via":"acp","tag":"r7","queued":false,"images":1}}`,
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[1]}}`,
			`call {"id":"turn.prompt.1","type":"prompt","message":"","images":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`,
			`prompt 1`,
		},
	}, {
		name:  "the agent refuses the prompt",
		steps: steps(ready(), prompt("hi"), refusedBy("No model selected"), prompt("again"), refusedBy("")),
		want: lines(startedAt(1, 1, "hi", 1), []string{
			`status busy=false queued=0`,
			`chat {"type":"error","errorText":"No model selected"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
		}, startedAt(2, 2, "again", 2), []string{
			`status busy=false queued=0`,
			`chat {"type":"error","errorText":"the agent refused the prompt"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":2,"promptIds":[2],"stopReason":"error"}}`,
		}),
	}, {
		name:  "an invalid answer to the prompt ends the turn",
		steps: steps(ready(), prompt("hi"), reply("", "{not json", false)),
		only:  []string{"chat {\"type\":\"error", "chat {\"type\":\"finish"},
		want: []string{
			`chat {"type":"error","errorText":"The agent answered the prompt with an invalid response."}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"error"}}`,
		},
	}, {
		name: "answers that do not belong to the running turn are ignored",
		steps: steps(ready(), prompt("hi"),
			reply("turn.prompt.99", `{"type":"response","command":"prompt","success":false,"error":"x"}`, false),
			reply("", ``, true), // the agent exited before answering: its exit ends the turn
			reply("turn.settle.1", `{"type":"response","command":"get_state","success":true,"data":{"isStreaming":false}}`, false)),
		want: startedAt(1, 1, "hi", 1),
	}, {
		name: "a run the agent starts on its own is a turn; prompts wait for it",
		steps: steps(ready(), pi(ev{"type": "agent_start"}, ev{"type": "turn_start"}, messageStart(), textDelta(0, "tick")),
			prompt("hi"), pi(run(assistant("stop", "", "tick"))[3:]...)),
		want: []string{
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[]}}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"tick"}`,
			`record user "hi" turn=0 prompt=1 via=browser`,
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"hi","via":"browser","queued":true}}`,
			`status busy=true queued=1`,
			`prompt 1 queued`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`transcript assistant "tick" turn=1`,
			`chat {"type":"finish-step"}`,
			`status busy=false queued=1`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[],"stopReason":"end_turn"}}`,
			`transcript user "hi" turn=2 prompt=1 via=browser`,
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-2","messageMetadata":{"turnId":2,"promptIds":[1]}}`,
			`call {"id":"turn.prompt.1","type":"prompt","message":"hi"}`,
		},
	}, {
		name:  "events before the agent is ready open no turn",
		steps: steps(pi(run(assistant("stop", "", "early"), "early")...)),
		want:  nil,
	}, {
		name:  "a run that stopped for length answers max_tokens",
		steps: steps(ready(), prompt("hi"), accepted(), pi(run(assistant("length", "", "cut"), "cut")...)),
		only:  []string{"chat {\"type\":\"finish\""},
		want:  []string{`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"max_tokens"}}`},
	}, {
		name: "the stop reason comes from message_end when agent_end has no messages",
		steps: steps(ready(), prompt("hi"), accepted(), pi(concat(run(assistant("length", "", "cut"))[:5],
			[]any{ev{"type": "agent_end", "messages": []any{}}})...)),
		only: []string{"chat {\"type\":\"finish\""},
		want: []string{`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"max_tokens"}}`},
	}})
}

// A prompt pi answers without starting a run (an extension command) ends
// its turn once get_state says nothing runs; one that is answered before its
// run starts does not.
func TestPromptWithoutRun(t *testing.T) {
	late := assistant("stop", "", "late")
	runScenarios(t, []scenario{{
		name:  "an extension command",
		steps: steps(ready(), prompt("/cmd"), accepted(), state(false)),
		want: lines(startedAt(1, 1, "/cmd", 1), []string{
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`model replay images=false`,
			`status busy=false queued=0`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		}),
	}, {
		name:  "the run starts after the answer (an extension's before_agent_start)",
		steps: steps(ready(), prompt("slow start"), accepted(), state(true), pi(run(late, "late")...)),
		only:  []string{"chat"},
		want: []string{
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"slow start","via":"browser","queued":false}}`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[1]}}`,
			`chat {"type":"start-step"}`,
			`chat {"type":"text-start","id":"1-1-t0"}`,
			`chat {"type":"text-delta","id":"1-1-t0","delta":"late"}`,
			`chat {"type":"text-end","id":"1-1-t0"}`,
			`chat {"type":"finish-step"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		},
	}, {
		name:  "the barrier answers after the run started",
		steps: steps(ready(), prompt("hi"), accepted(), pi(run(late)[:2]...), state(false), pi(run(late)[2:]...)),
		only:  []string{"chat {\"type\":\"finish\"", "call"},
		want: []string{
			`call {"id":"turn.prompt.1","type":"prompt","message":"hi"}`,
			`call {"id":"turn.settle.2","type":"get_state"}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"end_turn"}}`,
		},
	}, {
		name:  "an agent that does not know get_state: wait for the run",
		steps: steps(ready(), prompt("hi"), accepted(), stateUnknown()),
		want: lines(startedAt(1, 1, "hi", 1), []string{
			`call {"id":"turn.settle.2","type":"get_state"}`,
		}),
	}, {
		name:  "the answer comes after the run started: no barrier",
		steps: steps(ready(), prompt("hi"), pi(run(late)[:1]...), accepted()),
		want:  startedAt(1, 1, "hi", 1),
	}})
}

func TestIDsContinueAboveLastID(t *testing.T) {
	m, r := newMachine(t, Config{LastID: 41})
	if m.LastID() != 41 {
		t.Fatalf("LastID %d before any id, want 41", m.LastID())
	}
	play(m, r, steps(ready(), prompt("hi"), accepted(), pi(run(assistant("stop", "", "x"))...),
		failInbox("unused"), // nothing queued: no turn, no id
		prompt("again")))
	want := lines(startedAt(42, 42, "hi", 1), []string{
		`call {"id":"turn.settle.2","type":"get_state"}`,
		`chat {"type":"start-step"}`,
		`transcript assistant "x" turn=42`,
		`chat {"type":"finish-step"}`,
		`status busy=false queued=0`,
		`chat {"type":"finish","messageMetadata":{"turnId":42,"promptIds":[42],"stopReason":"end_turn"}}`,
	}, startedAt(43, 43, "again", 3))
	check(t, r.lines, want)
	if m.LastID() != 43 {
		t.Errorf("LastID %d, want 43", m.LastID())
	}

	// The inbox answered without the agent takes a turn id too; the two
	// sequences go on each on its own, LastID is the higher one.
	m, r = newMachine(t, Config{LastID: 7})
	play(m, r, steps(prompt("a"), prompt("b"), failInbox("the agent could not start"), prompt("c")))
	check(t, only(r.lines, "chat"), []string{
		`chat {"type":"data-user-message","data":{"promptId":8,"text":"a","via":"browser","queued":true}}`,
		`chat {"type":"data-user-message","data":{"promptId":9,"text":"b","via":"browser","queued":true}}`,
		`chat {"type":"start","messageId":"turn-8","messageMetadata":{"turnId":8,"promptIds":[8,9]}}`,
		`chat {"type":"error","errorText":"The message was not answered: the agent could not start."}`,
		`chat {"type":"finish","messageMetadata":{"turnId":8,"promptIds":[8,9],"stopReason":"cancelled"}}`,
		`chat {"type":"data-user-message","data":{"promptId":10,"text":"c","via":"browser","queued":true}}`,
	})
	if m.LastID() != 10 {
		t.Errorf("LastID %d, want 10", m.LastID())
	}
}

func TestIDsStayWithinTheReservation(t *testing.T) {
	var reserved uint64
	var asked []string
	cfg := Config{LastID: 10, Reserve: func(need uint64) uint64 {
		asked = append(asked, fmt.Sprint(need))
		if need <= reserved {
			t.Errorf("Reserve(%d) with %d reserved already", need, reserved)
		}
		reserved = need + 2 // a block of three
		return reserved
	}}
	reserved = cfg.LastID
	m, r := newMachine(t, cfg)
	// Every id handed out (prompt and turn alike) is reserved before the
	// machine says it.
	r.hook = func(l string) {
		for _, id := range idsIn(l) {
			if id > reserved {
				t.Errorf("id %d handed out beyond the reservation %d: %s", id, reserved, l)
			}
		}
	}
	m.AgentReady()
	for range 5 {
		id, err := m.Prompt(Prompt{Text: "p", Via: "browser"})
		if err != nil {
			t.Fatal(err)
		}
		m.Recorded(id)
		m.Reply(m.cur.promptReq, []byte(`{"type":"response","command":"prompt","success":false,"error":"no"}`), false)
	}
	if got := strings.Join(asked, ","); got != "11,14" {
		t.Errorf("Reserve asked for %s, want 11,14", got)
	}
	if m.LastID() != 15 {
		t.Errorf("LastID %d, want 15", m.LastID())
	}
}

func TestReserveMustCoverTheID(t *testing.T) {
	m, _ := newMachine(t, Config{Reserve: func(need uint64) uint64 { return need - 1 }})
	defer func() {
		if recover() == nil {
			t.Fatal("no panic when Reserve does not cover the id")
		}
	}()
	m.Prompt(Prompt{Text: "p"})
}

// idsIn finds the turn and prompt ids a line carries.
func idsIn(l string) []uint64 {
	var out []uint64
	for _, key := range []string{`"promptId":`, `"turnId":`, `turn=`, `prompt=`} {
		s := l
		for {
			i := strings.Index(s, key)
			if i < 0 {
				break
			}
			s = strings.TrimPrefix(s[i+len(key):], "[")
			var n uint64
			for len(s) > 0 && s[0] >= '0' && s[0] <= '9' {
				n = n*10 + uint64(s[0]-'0')
				s = s[1:]
			}
			out = append(out, n)
		}
	}
	return out
}

func TestClockAndDefaults(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	m, r := newMachine(t, Config{Now: func() time.Time { return at }})
	play(m, r, steps(ready(), prompt("hi"), accepted(), pi(run(assistant("stop", "", "x"), "x")...),
		pi(toolEnd("c1", "bash", `{}`, false))))
	if len(r.entries) != 3 {
		t.Fatalf("%d entries", len(r.entries))
	}
	for _, e := range r.entries {
		if !e.At.Equal(at) {
			t.Errorf("%s entry at %v, want the clock's %v", e.Role, e.At, at)
		}
	}

	// Without a clock entries carry no time (the store stamps them); without
	// Images no prompt carries images; InboxMax 0 is DefaultInboxMax.
	m = New(Config{Out: &countOut{}})
	m.AgentReady()
	if _, err := m.Prompt(Prompt{Text: "x", Images: []*pb.Image{{}}}); err.GetCode() != CodeImagesRefused {
		t.Fatalf("images without Config.Images: %v", err)
	}
	m.AgentStopped()
	for i := range DefaultInboxMax {
		if _, err := m.Prompt(Prompt{Text: "x"}); err != nil {
			t.Fatalf("prompt %d: %v", i, err)
		}
	}
	if _, err := m.Prompt(Prompt{Text: "x"}); err.GetCode() != CodeInboxFull {
		t.Fatalf("prompt %d: %v", DefaultInboxMax+1, err)
	}
	m2, r2 := newMachine(t, Config{})
	play(m2, r2, steps(ready(), prompt("hi")))
	if len(r2.entries) != 1 || !r2.entries[0].At.IsZero() {
		t.Fatalf("entries %+v", r2.entries)
	}
}

func TestNewNeedsOut(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New without Out did not panic")
		}
	}()
	New(Config{})
}

// A prompt is recorded (its user entry written) before it is accepted:
// nothing of it shows, and no turn starts, until the record is durable; a
// prompt whose record failed never happened.
func TestPromptRecords(t *testing.T) {
	runScenarios(t, []scenario{{
		name:  "nothing happens until the record is durable",
		steps: steps(ready(), promptRecording("hi"), forget(), recordedStep(1)),
		want: []string{
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"hi","via":"browser","queued":false}}`,
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[1]}}`,
			`call {"id":"turn.prompt.1","type":"prompt","message":"hi"}`,
			`prompt 1`,
		},
	}, {
		name:  "while it is recorded, only the record",
		steps: steps(ready(), promptRecording("hi")),
		want:  []string{`record user "hi" turn=1 prompt=1 via=browser`, `recording 1`},
	}, {
		name:  "a prompt whose record failed never happened; its ids are not handed out again",
		steps: steps(ready(), promptRecording("lost"), unrecorded(1), recordedStep(1), prompt("next")),
		want: lines([]string{
			`record user "lost" turn=1 prompt=1 via=browser`,
			`recording 1`,
			`dropped 1`,
			`not waiting 1`,
		}, startedAt(2, 2, "next", 1)),
	}, {
		name:  "prompts are accepted in the order of their records",
		steps: steps(ready(), promptRecording("a"), promptRecording("b"), recordedStep(1), recordedStep(2)),
		want: []string{
			`record user "a" turn=1 prompt=1 via=browser`,
			`recording 1`,
			// b waits behind a: its turn is not known.
			`record user "b" turn=0 prompt=2 via=browser`,
			`recording 2`,
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"a","via":"browser","queued":false}}`,
			`status busy=true queued=0`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[1]}}`,
			`call {"id":"turn.prompt.1","type":"prompt","message":"a"}`,
			`prompt 1`,
			`chat {"type":"data-user-message","data":{"promptId":2,"text":"b","via":"browser","queued":true}}`,
			`status busy=true queued=1`,
			`prompt 2 queued`,
		},
	}, {
		name:  "prompts being recorded count toward the inbox bound",
		cfg:   Config{InboxMax: 1},
		steps: steps(promptRecording("a"), prompt("b")),
		only:  []string{"recording", "refused", "prompt"},
		want:  []string{`recording 1`, `refused inbox_full`},
	}, {
		// FailInbox (the agent did not start) while a record is in flight:
		// the prompt is accepted once recorded (it is in the transcript) and
		// answered as not answered at once.
		name:  "the inbox fails while a record is in flight",
		steps: steps(promptRecording("a"), failInbox("the agent did not become ready"), recordedStep(1)),
		want: []string{
			`record user "a" turn=0 prompt=1 via=browser`,
			`recording 1`,
			`chat {"type":"data-user-message","data":{"promptId":1,"text":"a","via":"browser","queued":true}}`,
			`chat {"type":"start","messageId":"turn-1","messageMetadata":{"turnId":1,"promptIds":[1]}}`,
			`chat {"type":"error","errorText":"The message was not answered: the agent did not become ready."}`,
			`chat {"type":"finish","messageMetadata":{"turnId":1,"promptIds":[1],"stopReason":"cancelled"}}`,
			`status busy=false queued=0`,
			`prompt 1 queued`,
		},
	}, {
		// The turn its record named went to a run the agent started
		// meanwhile: the prompt waits, and the turn that answers it writes
		// its entry again with its own id (readers keep the last one).
		name: "a run the agent starts while a record is in flight",
		steps: steps(ready(), promptRecording("hi"), pi(ev{"type": "agent_start"}), recordedStep(1),
			pi(run(assistant("stop", "", "tick"))[1:]...)),
		only: []string{"record", "transcript user", "prompt", `chat {"type":"start"`},
		want: []string{
			`record user "hi" turn=1 prompt=1 via=browser`,
			`recording 1`,
			`chat {"type":"start","messageId":"turn-2","messageMetadata":{"turnId":2,"promptIds":[]}}`,
			`prompt 1 queued`,
			`transcript user "hi" turn=3 prompt=1 via=browser`,
			`chat {"type":"start","messageId":"turn-3","messageMetadata":{"turnId":3,"promptIds":[1]}}`,
		},
	}})
}
