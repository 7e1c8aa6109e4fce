package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/surfaced/surfaced/actors/session/internal/kv"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/codes"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store"
)

// ReservedKeyPrefix starts the session KV keys the daemon keeps for itself
// (the domains' memories of applied commands): an agent may not write them.
const ReservedKeyPrefix = "surfaced:"

// PrefKey is the form of a key a client (browser or editor) may write:
// <ns>.<pref>.
var PrefKey = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$`)

// surfaceLine handles the surface lines of a surfaced/1 agent.
func (s *sessionActor) surfaceLine(ctx actor.Context, typ string, line []byte) {
	switch typ {
	case proc.TypeSurfaceCommand:
		var c proc.SurfaceCommand
		if err := json.Unmarshal(line, &c); err != nil || c.ID == "" {
			s.diagnostic(codes.InvalidLine, "surface_command needs an id, a domain and an action")
			return
		}
		d, ok := s.registered(c.Domain)
		if !ok {
			s.sendLine(ctx, proc.SurfaceCommandResult{Type: proc.TypeSurfaceCommandResult, ID: c.ID,
				Error: &proc.ErrorBody{Code: proc.CodeSurfaceNotRegistered, Message: notRegistered(c.Domain)}}, false)
			return
		}
		// The agent's id is unique within its process: the key names the
		// activation (its epoch) and the agent's incarnation too.
		key := "agent:" + s.hub.Log().Epoch() + "." + strconv.FormatUint(uint64(s.agent.incarnation), 10) + ":" + c.ID
		ctx.Request(d.pid, &pb.RunCommand{Caller: &pb.Caller{Via: "agent", System: true}, Domain: c.Domain,
			Action: c.Action, Args: c.Args, Correlation: c.ID, IdempotencyKey: key})
	case proc.TypeSurfaceGet:
		var g proc.SurfaceGet
		if err := json.Unmarshal(line, &g); err != nil || g.ID == "" {
			s.diagnostic(codes.InvalidLine, "surface_get needs an id and a domain")
			return
		}
		res := proc.SurfaceGetResult{Type: proc.TypeSurfaceGetResult, ID: g.ID}
		if _, ok := s.registered(g.Domain); ok {
			if e, ok := s.kv.Durable(proc.SurfaceKey(g.Domain)); ok && !e.Deleted {
				res.OK, res.State, res.Rev = true, e.Value, e.Rev
			} else {
				res.OK, res.State = true, json.RawMessage("null")
			}
		} else {
			res.Error = &proc.ErrorBody{Code: proc.CodeSurfaceNotRegistered, Message: notRegistered(g.Domain)}
		}
		s.sendLine(ctx, res, false)
	case proc.TypeStateSet, proc.TypeStateDelete:
		var w struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(line, &w); err != nil || w.Key == "" {
			s.diagnostic(codes.InvalidLine, typ+" needs a key")
			return
		}
		if strings.HasPrefix(w.Key, proc.SurfaceKeyPrefix) {
			s.diagnostic(codes.StateRefused, fmt.Sprintf("the agent tried to write %q: surface snapshots are written by their domain actor only", w.Key))
			return
		}
		if strings.HasPrefix(w.Key, ReservedKeyPrefix) {
			s.diagnostic(codes.StateRefused, fmt.Sprintf("the agent tried to write %q: keys starting with %q are the daemon's own", w.Key, ReservedKeyPrefix))
			return
		}
		if typ == proc.TypeStateSet && len(w.Value) == 0 {
			w.Value = json.RawMessage("null")
		}
		if len(w.Value) > s.lim.MaxKVValue {
			s.diagnostic(codes.StateRefused, fmt.Sprintf("the agent's value for %q is %d bytes, over the %d-byte limit", w.Key, len(w.Value), s.lim.MaxKVValue))
			return
		}
		if !s.deps.Writer.Available() {
			s.diagnostic(codes.StateRefused, fmt.Sprintf("the agent's write of %q was refused: the store cannot be written now", w.Key))
			return
		}
		s.writeKV(ctx, w.Key, w.Value, typ == proc.TypeStateDelete, nil, false)
	}
}

// agentCommandResult relays a domain's answer to the agent's surface_command.
func (s *sessionActor) agentCommandResult(ctx actor.Context, m *pb.CommandResult) {
	if m.GetCorrelation() == "" {
		return
	}
	r := proc.SurfaceCommandResult{Type: proc.TypeSurfaceCommandResult, ID: m.GetCorrelation(), OK: m.GetOk(), Data: m.GetData()}
	switch e := m.GetError(); {
	case m.GetRefused() != nil:
		// Refused before or after it ran (the store could not take it, the
		// session moved): not applied, or not known to be.
		r.OK, r.Data = false, nil
		r.Error = &proc.ErrorBody{Code: m.GetRefused().GetCode(), Message: m.GetRefused().GetMessage()}
	case e != nil && !m.GetOk():
		r.Error = &proc.ErrorBody{Code: e.GetCode(), Message: e.GetMessage()}
	}
	s.sendLine(ctx, r, false)
}

func (s *sessionActor) setState(ctx actor.Context, m *pb.SetState) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.SetStateResult{Error: notFound()})
		return
	}
	key := m.GetKey()
	switch {
	case strings.HasPrefix(key, proc.SurfaceKeyPrefix):
		ctx.Respond(&pb.SetStateResult{Error: pb.Err(CodeReadOnly, fmt.Sprintf("%q is a surface snapshot: only its domain writes it; run a command instead", key))})
	case !PrefKey.MatchString(key):
		ctx.Respond(&pb.SetStateResult{Error: pb.Err(CodeInvalidKey, fmt.Sprintf("the key %q is not of the form <ns>.<pref> (%s)", key, PrefKey))})
	case !m.GetDelete() && !json.Valid(m.GetValue()):
		ctx.Respond(&pb.SetStateResult{Error: pb.Err(CodeInvalidValue, "the value is missing or not JSON")})
	case len(m.GetValue()) > s.lim.MaxKVValue:
		ctx.Respond(&pb.SetStateResult{Error: pb.Err(CodeTooLarge, fmt.Sprintf("the value is %d bytes, over the %d-byte limit", len(m.GetValue()), s.lim.MaxKVValue))})
	case !s.limiter.AllowN(s.clock.Now(), 1):
		s.deps.Metrics.Limited()
		ctx.Respond(&pb.SetStateResult{Error: pb.Err(CodeRateLimited, fmt.Sprintf("more than %d writes per second on this session", s.lim.CommandsPerSecond))})
	case !s.deps.Writer.Available():
		ctx.Respond(&pb.SetStateResult{Error: storeUnavailable("the value was not saved")})
	default:
		s.writeKV(ctx, key, m.GetValue(), m.GetDelete(), ctx.Sender(), true)
	}
}

// kvReply is whom a KV write answers once it is durable (or refused).
type kvReply struct {
	sender *actor.PID // the client's request (nil: the agent wrote)
	notify bool       // tell the agent (state_changed)
}

// writeKV assigns the key's next rev and persists it; the frame, the answer
// and the agent's state_changed go out once the write is durable. The KV's
// writes are one chain in the writer: a refused write rolls back the ones
// made after it, and the writer does not write them either.
func (s *sessionActor) writeKV(ctx actor.Context, key string, value json.RawMessage, del bool, sender *actor.PID, notify bool) {
	w := s.kv.Set(key, value, del, kvReply{sender: sender, notify: notify})
	self, root, seq, rev := s.self, s.root, w.Seq, w.Rev
	s.submit(store.Op{
		KV:    []store.KV{w.KV()},
		Chain: kvChain,
		Epoch: s.kv.Epoch(),
		Done:  func(err error) { root.Send(self, &kvPersisted{seq: seq, key: key, rev: rev, err: err}) }})
}

// kvChain is the session KV's chain in the store writer (a domain's is its
// snapshot's key, which a client cannot write).
const kvChain = "kv"

// storeUnavailable is the refusal of a change the store cannot take now.
func storeUnavailable(what string) *pb.Error {
	return pb.Err(CodeStoreUnavailable, "the store cannot be written now; "+what+", try again")
}

// writeRefusal is the refusal of a change whose write failed with err.
func writeRefusal(err error, what string) *pb.Error {
	if errors.Is(err, store.ErrOutcomeUnknown) {
		return pb.Err(CodeOutcomeUnknown, "the store did not answer in time: "+what+" may or may not have been saved")
	}
	return pb.Err(CodeStoreUnavailable, "the store could not be written; "+what+" was not saved")
}

func (s *sessionActor) kvPersisted(ctx actor.Context, m *kvPersisted) {
	if errors.Is(m.err, store.ErrOutcomeUnknown) {
		s.kv.Burn(m.key, m.rev)
	}
	if errors.Is(m.err, store.ErrFenced) {
		return // lostLease answers the waiting writers
	}
	released, refused := s.kv.Persisted(m.seq, m.err)
	for _, w := range released {
		r := w.Reply.(kvReply)
		s.emit(pb.StateOf(w.Key, w.Value, w.Rev, w.Deleted), "state:"+w.Key)
		if r.sender != nil {
			ctx.Send(r.sender, &pb.SetStateResult{Ok: true, Rev: w.Rev})
		}
		if r.notify && s.agent.announced {
			s.sendLine(ctx, proc.StateChanged{Type: proc.TypeStateChanged, Key: w.Key, Value: w.Value, Rev: w.Rev, Deleted: w.Deleted}, false)
		}
	}
	if len(refused) > 0 {
		s.log.Error("KV write failed; the write and the ones made after it are refused", "err", m.err, "writes", len(refused))
	}
	for i, w := range refused {
		if i > 0 {
			// Rolled back with the first; its own answer from the writer
			// (aborted unsent, or sent with it in one call) says what to
			// tell its writer.
			s.kvRolledBack[w.Seq] = w
			continue
		}
		s.kvRefused(w, m.err)
	}
	if w, ok := s.kvRolledBack[m.seq]; ok {
		delete(s.kvRolledBack, m.seq)
		if m.err == nil {
			// Written, though rolled back: it cannot be, since the writer
			// aborts what was built on a failed write; should it be, the
			// key's next write must still go above it.
			s.kv.Burn(w.Key, w.Rev)
			m.err = store.ErrOutcomeUnknown
		}
		s.kvRefused(w, m.err)
	}
}

// kvRefused answers the writer of a KV write that was not (or may not have
// been) saved.
func (s *sessionActor) kvRefused(w *kv.Write, err error) {
	if r := w.Reply.(kvReply); r.sender != nil {
		s.root.Send(r.sender, &pb.SetStateResult{Error: writeRefusal(err, "the value")})
	} else {
		s.diagnostic(codes.StateRefused, fmt.Sprintf("the agent's write of %q was not saved: the store could not be written", w.Key))
	}
}

// stateCommitted publishes a domain actor's durable snapshot.
func (s *sessionActor) stateCommitted(ctx actor.Context, m *pb.StateCommitted) {
	key := m.GetKey()
	if !s.kv.Commit(key, m.GetValue(), m.GetRev(), m.GetDeleted()) {
		s.log.Warn("stale snapshot ignored", "key", key, "rev", m.GetRev())
		return
	}
	if d, ok := s.domains[strings.TrimPrefix(key, proc.SurfaceKeyPrefix)]; ok {
		d.rev = m.GetRev()
		if d.data != nil {
			ctx.Send(d.data, m)
		}
	}
	s.emit(pb.StateOf(key, m.GetValue(), m.GetRev(), m.GetDeleted()), "state:"+key)
}

func (s *sessionActor) getState(ctx actor.Context, m *pb.GetState) {
	if !s.allowed(m.GetCaller()) {
		ctx.Respond(&pb.StateEntries{Error: notFound()})
		return
	}
	// The domains and the head with the entries, at the same moment: an
	// AG-UI run subscribed before asking knows which frames this answer
	// already holds.
	out := &pb.StateEntries{Surfaces: s.surfaceInfos(), Head: s.hub.Log().Head()}
	for _, d := range out.Surfaces {
		d.Rev = 0 // revs are the entries'
	}
	for _, k := range s.kv.Keys() {
		e, _ := s.kv.Durable(k)
		out.Entries = append(out.Entries, &pb.KVEntry{Key: k, Value: e.Value, Rev: e.Rev, Deleted: e.Deleted})
	}
	ctx.Respond(out)
}
