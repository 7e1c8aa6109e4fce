package turn

import (
	"fmt"
	"slices"
	"testing"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

func TestAttachments(t *testing.T) {
	m, r := newMachine(t, Config{})
	img := &pb.Artifact{Id: "att_a", SessionId: "s", MediaType: "image/png", Name: "cat.png"}
	pdf := &pb.Artifact{Id: "att_b", SessionId: "s", MediaType: "application/pdf"}
	doc := &pb.Artifact{Id: "att_c", SessionId: "s", MediaType: "text/plain"}
	// Attachments alone make a prompt (as images do); they wait for the agent.
	for _, p := range []Prompt{
		{Attachments: []*pb.Artifact{img, pdf}, Via: "browser"},
		{Text: "and this", Attachments: []*pb.Artifact{doc}, Via: "browser"},
		{Text: "no attachments", Via: "browser"},
	} {
		id, err := m.Prompt(p)
		if err != nil {
			t.Fatalf("prompt %+v: %v", p, err)
		}
		if _, ok := m.Recorded(id); !ok {
			t.Fatalf("prompt %d not waiting for its record", id)
		}
	}
	if _, err := m.Prompt(Prompt{Text: "  ", Via: "browser"}); err == nil || err.GetCode() != CodeEmptyPrompt {
		t.Errorf("a blank prompt without attachments: %v, want %s", err, CodeEmptyPrompt)
	}
	m.AgentReady()
	want := []string{
		`chat {"type":"data-user-message","data":{"promptId":1,"text":"","via":"browser","queued":true,"attachmentIds":["att_a","att_b"]}}`,
		`chat {"type":"data-user-message","data":{"promptId":2,"text":"and this","via":"browser","queued":true,"attachmentIds":["att_c"]}}`,
		`chat {"type":"data-user-message","data":{"promptId":3,"text":"no attachments","via":"browser","queued":true}}`,
	}
	if got := only(r.lines, `chat {"type":"data-user-message"`); !slices.Equal(got, want) {
		t.Errorf("user messages\n%q\nwant\n%q", got, want)
	}
	// The turn's prompt command carries every attachment of its prompts,
	// in order, beside its line (which never carries bytes of them).
	if len(r.sent) != 1 {
		t.Fatalf("%d commands sent, want the prompt", len(r.sent))
	}
	cmd := r.sent[0]
	var ids []string
	for _, a := range cmd.Attachments {
		ids = append(ids, a.GetId())
	}
	if !slices.Equal(ids, []string{"att_a", "att_b", "att_c"}) || cmd.Attachments[0].GetMediaType() != "image/png" || cmd.Attachments[0].GetName() != "cat.png" {
		t.Errorf("the prompt command carries %v", cmd.Attachments)
	}
	if want := `{"id":"turn.prompt.1","type":"prompt","message":"\n\nand this\n\nno attachments"}`; string(cmd.Line) != want {
		t.Errorf("prompt line %s, want %s", cmd.Line, want)
	}
	// The transcript keeps the ids with each user entry: its record, and
	// the entry that names the turn that answered it.
	want2 := map[uint64][]string{1: {"att_a", "att_b"}, 2: {"att_c"}, 3: nil}
	seen := map[uint64]int{}
	for _, e := range r.entries {
		if e.Role != "user" {
			continue
		}
		seen[e.PromptID]++
		if !slices.Equal(e.AttachmentIDs, want2[e.PromptID]) {
			t.Errorf("prompt %d's entry carries %q, want %q", e.PromptID, e.AttachmentIDs, want2[e.PromptID])
		}
	}
	if len(seen) != 3 || seen[1] != 2 || seen[2] != 2 || seen[3] != 2 {
		t.Errorf("user entries per prompt: %v, want a record and a turn entry each", seen)
	}
}

// A prompt that starts a turn at once is written once, by its record,
// which names the turn and carries the ids.
func TestAttachmentsStartAtOnce(t *testing.T) {
	m, r := newMachine(t, Config{})
	m.AgentReady()
	id, err := m.Prompt(Prompt{Text: "look", Attachments: []*pb.Artifact{{Id: "att_a", SessionId: "s", MediaType: "image/png"}}, Via: "browser"})
	if err != nil {
		t.Fatal(err)
	}
	m.Recorded(id)
	var users []string
	for _, e := range r.entries {
		if e.Role == "user" {
			users = append(users, fmt.Sprintf("prompt %d turn %d %q", e.PromptID, e.TurnID, e.AttachmentIDs))
		}
	}
	if want := []string{`prompt 1 turn 1 ["att_a"]`}; !slices.Equal(users, want) {
		t.Errorf("user entries %q, want %q", users, want)
	}
	if len(r.sent) != 1 || len(r.sent[0].Attachments) != 1 || r.sent[0].Attachments[0].GetId() != "att_a" {
		t.Errorf("commands %v", r.sent)
	}
}
