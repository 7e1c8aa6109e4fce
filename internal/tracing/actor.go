//go:build !notrace

package tracing

import (
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/proto"

	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// ActorOptions returns the props options that trace an actor of kind
// (session, surface, agentproc), whose spans carry kv (its node, session,
// domain): nil while tracing is off, so that an untraced daemon runs its
// actors without any middleware.
//
// The receiver middleware starts a span for each request (a message with a
// sender) whose envelope carries a traceparent, named "<kind> <message>",
// and puts that span in the envelope's header: what the actor sends while
// it handles the message (and the message itself, when it forwards it) is
// the span's child. The span ends when the actor answers the request or
// hands it on (forwards it), or when the actor stops; a request it neither
// answers nor forwards while handling it stays open until then (a domain
// actor's command, answered once its agent answered and its write is
// durable). The sender middleware copies the header of the message being
// handled onto each message the actor sends that has none.
func ActorOptions(kind string, kv ...attribute.KeyValue) []actor.PropsOption {
	if !On() {
		return nil
	}
	t := &actorTracer{kind: kind, attrs: kv, grain: true}
	for _, a := range kv {
		if a.Key == AttrSession {
			t.grain = false
		}
	}
	return []actor.PropsOption{
		actor.WithReceiverMiddleware(t.receive),
		actor.WithSenderMiddleware(t.send),
	}
}

type actorTracer struct {
	kind  string
	attrs []attribute.KeyValue
	// grain: the actor's props serve every session (a cluster kind's), so
	// its session is its cluster identity.
	grain bool
}

// grainIdentity is the identity of a grain from its PID's id, which the
// cluster's placement actor spawns as "partition-activator/<identity>$<n>".
func grainIdentity(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	if i := strings.LastIndexByte(id, '$'); i >= 0 {
		id = id[:i]
	}
	return id
}

// open are the requests being handled with their spans, by actor (its
// address and id) and by the request's sender.
var open sync.Map // actorKey -> *openSpans

type actorKey struct{ address, id string }

type openSpans struct {
	mu sync.Mutex
	m  map[actorKey]Span // by the request's sender
}

func keyOf(pid *actor.PID) actorKey { return actorKey{pid.GetAddress(), pid.GetId()} }

func (t *actorTracer) receive(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		switch env.Message.(type) {
		case *actor.Stopped:
			next(c, env)
			endOpen(c.Self())
			return
		}
		if env.Sender == nil || env.Header == nil {
			next(c, env)
			return
		}
		tp := env.Header.Get(Traceparent)
		msg, ok := env.Message.(proto.Message)
		if tp == "" || !ok {
			next(c, env)
			return
		}
		name := string(msg.ProtoReflect().Descriptor().Name())
		kv := append(append(make([]attribute.KeyValue, 0, len(t.attrs)+6), t.attrs...),
			AttrKind.String(t.kind), AttrMessage.String(name))
		if t.grain {
			kv = append(kv, AttrSession.String(grainIdentity(c.Self().GetId())))
		}
		kv = appendMessageAttrs(kv, env.Message)
		_, span := StartFrom(tp, env.Header.Get(Tracestate), t.kind+" "+name, Server, kv...)
		if !span.Valid() {
			next(c, env)
			return
		}
		h := map[string]string{Traceparent: span.Traceparent()}
		if ts := env.Header.Get(Tracestate); ts != "" {
			h[Tracestate] = ts
		}
		env.Header = h
		self := keyOf(c.Self())
		v, _ := open.LoadOrStore(self, &openSpans{m: map[actorKey]Span{}})
		os := v.(*openSpans)
		sender := keyOf(env.Sender)
		os.mu.Lock()
		if prev, dup := os.m[sender]; dup {
			prev.End()
		}
		os.m[sender] = span
		os.mu.Unlock()
		next(c, env)
	}
}

func (t *actorTracer) send(next actor.SenderFunc) actor.SenderFunc {
	return func(c actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
		if env.Header.Get(Traceparent) == "" {
			if h := c.MessageHeader(); h != nil {
				if tp := h.Get(Traceparent); tp != "" {
					nh := map[string]string{Traceparent: tp}
					if ts := h.Get(Tracestate); ts != "" {
						nh[Tracestate] = ts
					}
					env.Header = nh
				}
			}
		}
		if self := c.Self(); self != nil && target != nil {
			// An answer to a request being traced, or the request handed
			// on: its span ends.
			to := keyOf(target)
			if env.Sender != nil && !env.Sender.Equal(target) {
				to = keyOf(env.Sender) // forwarded: the sender stays the asker
			}
			if v, ok := open.Load(keyOf(self)); ok {
				os := v.(*openSpans)
				os.mu.Lock()
				span, traced := os.m[to]
				if traced {
					delete(os.m, to)
				}
				os.mu.Unlock()
				if traced {
					answered(span, env.Message)
					span.End()
				}
			}
		}
		next(c, target, env)
	}
}

// endOpen ends the spans of requests a stopped actor never answered.
func endOpen(self *actor.PID) {
	v, ok := open.LoadAndDelete(keyOf(self))
	if !ok {
		return
	}
	os := v.(*openSpans)
	os.mu.Lock()
	defer os.mu.Unlock()
	for k, s := range os.m {
		s.Fail("unanswered")
		s.End()
		delete(os.m, k)
	}
}

// appendMessageAttrs names what a request is about: its session, domain and
// action (never its arguments).
func appendMessageAttrs(kv []attribute.KeyValue, m any) []attribute.KeyValue {
	if x, ok := m.(interface{ GetSessionId() string }); ok && x.GetSessionId() != "" {
		kv = append(kv, AttrSession.String(x.GetSessionId()))
	}
	if x, ok := m.(interface{ GetDomain() string }); ok && x.GetDomain() != "" {
		kv = append(kv, AttrDomain.String(x.GetDomain()))
	}
	if x, ok := m.(interface{ GetAction() string }); ok && x.GetAction() != "" {
		kv = append(kv, AttrAction.String(x.GetAction()))
	}
	return kv
}

// answered records on a request's span what its answer says: the rev it
// made, and whether it succeeded (by its code, never its data).
func answered(s Span, m any) {
	if x, ok := m.(interface{ GetRev() uint64 }); ok && x.GetRev() != 0 {
		s.Set(AttrRev.Int64(int64(x.GetRev())))
	}
	switch r := m.(type) {
	case *pb.CommandResult:
		switch {
		case r.GetRefused() != nil:
			s.Fail(r.GetRefused().GetCode())
		case !r.GetOk():
			s.Fail(r.GetError().GetCode())
		}
	case *pb.Error:
		s.Fail(r.GetCode())
	}
}

// HeaderOf is the traceparent of the message an actor is handling ("" for
// none, or while tracing is off): after the receiver middleware, the span
// of the request being handled.
func HeaderOf(c actor.Context) string {
	if !On() {
		return ""
	}
	if h := c.MessageHeader(); h != nil {
		return h.Get(Traceparent)
	}
	return ""
}

// Envelope wraps msg for an actor to send with the trace context
// traceparent names (msg as it is for "").
func Envelope(msg any, traceparent string) any {
	if traceparent == "" {
		return msg
	}
	return &actor.MessageEnvelope{Header: map[string]string{Traceparent: traceparent}, Message: msg}
}
