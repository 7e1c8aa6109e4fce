package session

import (
	"encoding/json"
	"os"

	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// scratch makes the session's scratch directory (once) and returns it; ""
// when the daemon has no artifacts or the directory cannot be made (the
// agent then runs without SURFACED_ARTIFACT_DIR, and its artifact lines
// are refused).
func (s *sessionActor) scratch(cwd string) string {
	if s.deps.Artifacts == nil {
		return ""
	}
	if s.arts == nil {
		dir := s.deps.scratchDir(s.rec.ID)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			s.log.Error("the session's scratch directory cannot be made; artifact lines are refused", "dir", dir, "err", err)
			return ""
		}
		if cwd == "" {
			cwd, _ = os.Getwd()
		}
		s.arts = newAgentArtifacts(s.deps.Artifacts, s.rec.ID, dir, cwd)
	}
	return s.arts.scratch
}

// artifactLine starts an artifact line of the agent; its answer goes to the
// agent incarnation that asked.
func (s *sessionActor) artifactLine(typ string, line []byte) {
	agent, root := s.agent.pid, s.root
	reply := func(v any) {
		b, err := plainjson.Marshal(v)
		if err != nil {
			s.log.Error("artifact answer not marshalable", "err", err)
			return
		}
		root.Send(agent, &pb.AgentSend{Line: b})
	}
	if s.arts == nil {
		var id struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(line, &id)
		reply(map[string]any{"type": typ + "_result", "id": id.ID, "ok": false,
			"error": proc.ErrorBody{Code: proc.CodeUnavailable, Message: "this daemon keeps no artifacts for the session"}})
		return
	}
	s.arts.handle(typ, line, reply, func(msg string) { s.diagnostic(codes.InvalidLine, msg) })
}

// dropScratch stops the artifact lines in progress, removes the scratch
// directory when it is empty and, when the session
// has ended, deletes its scratch directory.
func (s *sessionActor) dropScratch(ended bool) {
	if s.arts == nil {
		return
	}
	s.arts.close()
	if ended {
		if err := os.RemoveAll(s.arts.scratch); err != nil {
			s.log.Warn("the session's scratch directory could not be deleted", "dir", s.arts.scratch, "err", err)
		}
	} else {
		// A sleeping session keeps what its agent left there; an empty
		// directory goes (os.Remove takes only an empty one), so that ten
		// thousand sleeping sessions are not ten thousand directories. The
		// next activation makes it again.
		_ = os.Remove(s.arts.scratch)
	}
	s.arts = nil
}
