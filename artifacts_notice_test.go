package surfaced_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// isArtifact matches the artifact frame of artifact id.
func isArtifact(event, id string) func(testkit.Frame) bool {
	return func(f testkit.Frame) bool {
		a, _ := f.Data["artifact"].(map[string]any)
		return f.Kind == "artifact" && f.Data["event"] == event && a["id"] == id
	}
}

// The artifact frame reaches the clients watching when the artifact is
// put or deleted, and is not sticky: a client that subscribes later gets
// no frame of the earlier artifacts. Only the daemon tells a session of an
// artifact, and only of its own; a prompt may not attach another
// session's.
func TestArtifactNotice(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	id, other := h.create(""), h.create("")
	early, _ := h.subscribe(id, "")
	h.waitReady(early)
	put := func(session, text string) artifact.Artifact {
		t.Helper()
		a, err := h.rt.Artifacts().Put(ctx, session, strings.NewReader(text), artifact.PutOptions{MediaType: "text/plain", Size: -1})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := put(id, "first")
	early.Wait(t, 10*time.Second, "the first artifact's frame", isArtifact("added", first.ID))

	late, _ := h.subscribe(id, "")
	h.waitReady(late)
	second := put(id, "second")
	got := late.Wait(t, 10*time.Second, "an artifact frame", func(f testkit.Frame) bool { return f.Kind == "artifact" })
	if !isArtifact("added", second.ID)(got) {
		t.Fatalf("a later subscriber's first artifact frame is %s, want the second artifact's", got.Raw)
	}
	if _, err := h.rt.Artifacts().Delete(ctx, id, first.ID); err != nil {
		t.Fatal(err)
	}
	late.Wait(t, 10*time.Second, "the deleted frame", isArtifact("deleted", first.ID))

	// Only the daemon tells, and only of the session's own artifacts.
	foreign := put(other, "another session's")
	ev := &pb.ArtifactEvent{Event: "added", Artifact: artifact.ToProto(second)}
	if r := h.req(id, &pb.ArtifactNotice{Caller: me, Event: ev}).(*pb.ArtifactNoticeResult); r.GetError().GetCode() != "not_found" {
		t.Errorf("a notice from a client: %v", r)
	}
	ev = &pb.ArtifactEvent{Event: "added", Artifact: artifact.ToProto(foreign)}
	if r := h.req(id, &pb.ArtifactNotice{Caller: &pb.Caller{System: true}, Event: ev}).(*pb.ArtifactNoticeResult); r.GetOk() || r.GetError() == nil {
		t.Errorf("a notice of another session's artifact: %v", r)
	}
	r := h.req(id, &pb.Prompt{Caller: me, Message: "look", Attachments: []*pb.Artifact{artifact.ToProto(foreign)}}).(*pb.PromptResult)
	if r.GetAccepted() || !strings.Contains(r.GetError().GetMessage(), "not an artifact of this session") {
		t.Errorf("a prompt attaching another session's artifact: %v", r)
	}
}
