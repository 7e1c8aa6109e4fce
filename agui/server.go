package agui

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/codes"
	"github.com/surfaced/surfaced/identity"
	"github.com/surfaced/surfaced/internal/delivery"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// The AG-UI mount serves two routes, behind the gateway's gates and
// authentication (its Handler expects the caller's identity in the request
// context, as the guard puts it):
//
//	POST {Path}/{agent}             a run on the caller's thread (threadId) of agent:
//	                                its first run creates the thread's session
//	POST /api/sessions/{id}/ag-ui   a run on an existing session (the gateway's
//	                                session mount: the id is the path value "id")
//
// The body is AG-UI's RunAgentInput; everything that can be refused is
// refused with the API's JSON error before the stream starts. The answer is
// the run's AG-UI event stream.

// Defaults of Options.
const (
	DefaultPath              = "/ag-ui"
	DefaultBodyBytes         = 32 << 20
	DefaultQueueBytes        = 1 << 20
	DefaultQueueAge          = 10 * time.Second
	DefaultKeepAlive         = 15 * time.Second
	DefaultRequestTimeout    = session.DefaultRequestTimeout
	DefaultStreamsPerSubject = 100
)

// HeaderSessionID names the session a run drives (also in RUN_STARTED's
// metadata.surfaced.sessionId).
const HeaderSessionID = "Surfaced-Session-Id"

// Options configure a Server. Only Runtime is required; the zero value of
// every other field takes its default.
type Options struct {
	Runtime *surfaced.Runtime
	Logger  *slog.Logger
	// Path is where the threads' route is mounted ("/ag-ui").
	Path string
	// BodyBytes bounds a run's input, media included (32 MiB:
	// limits.prompt_body_bytes).
	BodyBytes int64
	// QueueBytes and QueueAge bound what waits for a run's client (1 MiB,
	// 10 s: limits.client_queue_bytes, client_queue_age).
	QueueBytes int
	QueueAge   time.Duration
	// KeepAlive is the interval of the SSE comment (15 s).
	KeepAlive time.Duration
	// RequestTimeout bounds each request to the session before the stream
	// starts (30 s).
	RequestTimeout time.Duration
	// Slots count a subject's streams against its cap: the gateway's, so
	// that runs, event streams and chat streams share
	// limits.sse_streams_per_subject. Nil: the mount's own, 100.
	Slots *delivery.Slots
	// Revoker, when set, ends the streams of a revoked credential.
	Revoker identity.Revoker
	// Props adds props options to the runs' subscribers (the inspector).
	Props func(kind, sessionID string) []actor.PropsOption
}

// Server is the AG-UI mount.
type Server struct {
	rt     *surfaced.Runtime
	log    *slog.Logger
	opts   Options
	path   string
	writer *delivery.Writer

	mu           sync.Mutex
	closing      bool
	shutdown     chan struct{}
	shutdownOnce sync.Once
	runs         sync.WaitGroup
}

// New builds the mount.
func New(o Options) *Server {
	if o.Runtime == nil {
		panic("agui: Options.Runtime is required")
	}
	log := o.Logger
	if log == nil {
		log = o.Runtime.Logger()
	}
	s := &Server{rt: o.Runtime, log: log.With("component", "ag-ui"), opts: o, shutdown: make(chan struct{})}
	s.path = strings.TrimSuffix(o.Path, "/")
	if s.path == "" {
		s.path = DefaultPath
	}
	if s.opts.BodyBytes <= 0 {
		s.opts.BodyBytes = DefaultBodyBytes
	}
	if s.opts.QueueBytes <= 0 {
		s.opts.QueueBytes = DefaultQueueBytes
	}
	if s.opts.QueueAge <= 0 {
		s.opts.QueueAge = DefaultQueueAge
	}
	if s.opts.KeepAlive <= 0 {
		s.opts.KeepAlive = DefaultKeepAlive
	}
	if s.opts.RequestTimeout <= 0 {
		s.opts.RequestTimeout = DefaultRequestTimeout
	}
	if s.opts.Slots == nil {
		s.opts.Slots = delivery.NewSlots(func(string) int { return DefaultStreamsPerSubject })
	}
	reason := delivery.EndShutdown
	if o.Runtime.Clustered() {
		// Another node serves the session: the client runs again there.
		reason = delivery.EndMoved
	}
	s.writer = &delivery.Writer{
		KeepAlive:      s.opts.KeepAlive,
		Shutdown:       s.shutdown,
		ShutdownReason: reason,
		OnSlow:         func() { s.rt.Metrics().SlowConsumer("agui") },
	}
	return s
}

// Path is the threads' route's mount.
func (s *Server) Path() string { return s.path }

// Handler serves both routes.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Shutdown refuses new runs and ends the streams of the runs under way
// after the writer's shutdown grace (sooner when their sessions end them):
// RUN_ERROR with the code shutdown (moved in a cluster). Close waits for
// them.
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.shutdownOnce.Do(func() { close(s.shutdown) })
}

// Close shuts down and waits, within ctx, for the runs' streams to end.
func (s *Server) Close(ctx context.Context) {
	s.Shutdown()
	done := make(chan struct{})
	go func() {
		s.runs.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.serve(w, r); err != nil {
		var e *Error
		if !errors.As(err, &e) {
			s.log.Error("ag-ui: a run failed", "path", r.URL.Path, "err", err)
			e = refuse(http.StatusInternalServerError, codes.Internal, "internal error")
		}
		e.write(w)
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) error {
	id, ok := identity.FromContext(r.Context())
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		return refuse(http.StatusUnauthorized, codes.Unauthorized, "send Authorization: Bearer <token>")
	}
	sessionID, agent := r.PathValue("id"), ""
	if sessionID == "" {
		rest, ok := strings.CutPrefix(r.URL.Path, s.path+"/")
		if !ok || rest == "" || strings.Contains(rest, "/") {
			return refuse(http.StatusNotFound, codes.NoRoute, "no such route: runs are POST "+s.path+"/{agent}")
		}
		agent = rest
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return refuse(http.StatusMethodNotAllowed, codes.MethodNotAllowed, "a run is a POST of AG-UI's RunAgentInput")
	}
	if s.isClosing() {
		return shuttingDown()
	}
	in, err := s.input(w, r)
	if err != nil {
		return err
	}
	run := &run{s: s, w: w, r: r, in: in, who: id, sessionID: sessionID}
	if agent != "" {
		a, err := s.rt.ResolveAgentFor(id, agent)
		if err != nil {
			return refuse(http.StatusNotFound, codes.UnknownAgent, fmt.Sprintf("no agent is named %q here: GET /api/agents lists them", clip(agent)))
		}
		run.thread = a.Name
		run.sessionID = SessionID(id.Subject, a.Name, in.ThreadID)
	}
	return run.start()
}

// input reads and checks the body: one JSON RunAgentInput within
// BodyBytes, as @ag-ui/core's schema has it.
func (s *Server) input(w http.ResponseWriter, r *http.Request) (*Input, error) {
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, refuse(http.StatusUnsupportedMediaType, codes.UnsupportedMediaType, "send the body as application/json")
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.BodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, refuse(http.StatusRequestEntityTooLarge, codes.TooLarge, fmt.Sprintf("the request body is over the %d-byte limit", s.opts.BodyBytes))
		case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			w.Header().Set("Connection", "close")
			return nil, refuse(http.StatusRequestTimeout, codes.BodyTimeout, "the request body did not arrive in time")
		}
		return nil, refuse(http.StatusBadRequest, codes.BadBody, "the request body could not be read")
	}
	if !json.Valid(data) {
		return nil, refuse(http.StatusBadRequest, codes.InvalidJSON, "the body is not valid JSON: send one RunAgentInput object")
	}
	in, err := Decode(data)
	if err != nil {
		return nil, fieldRefusal(err)
	}
	return in, nil
}

// requestContext bounds a request to the session.
func (s *Server) requestContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.opts.RequestTimeout)
}

// ask sends a request to the run's session.
func (s *Server) ask(ctx context.Context, sessionID string, msg proto.Message) (proto.Message, error) {
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	res, err := s.rt.Request(ctx, sessionID, msg)
	if err != nil {
		if s.isClosing() && !errors.Is(err, session.ErrNotFound) {
			return nil, shuttingDown()
		}
		if e := fromRequestErr(err); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("ag-ui: %T to %s: %w", msg, sessionID, err)
	}
	return res, nil
}

// stream is a run's subscriber and the queue it fills.
type stream struct {
	s         *Server
	q         *delivery.Queue
	pid       *actor.PID
	sys       *actor.ActorSystem
	subject   string
	head      uint64 // the session's frame head when it subscribed
	closeOnce sync.Once
}

// subscribe spawns the run's subscriber with sink and subscribes it to the
// session from req's position. A subscription from the running turn's
// start that finds no turn running registers nothing: a nil stream and no
// error.
func (s *Server) subscribe(ctx context.Context, sessionID, subject string, req *pb.Subscribe, sinkOf func(*delivery.Queue) delivery.Sink) (*stream, error) {
	limit, ok := s.opts.Slots.Take(subject, delivery.CapEventStreams)
	if !ok {
		s.log.Warn("run refused: too many streams open", "subject", subject, "limit", limit)
		return nil, refuse(http.StatusTooManyRequests, codes.TooManyStreams,
			fmt.Sprintf("you already have %d event streams open (the limit); close one first", limit))
	}
	opened := false
	defer func() {
		if !opened {
			s.opts.Slots.Give(subject, delivery.CapEventStreams)
		}
	}()
	q := delivery.NewQueue(delivery.Limits{MaxBytes: s.opts.QueueBytes, MaxAge: s.opts.QueueAge}, nil)
	var opts []actor.PropsOption
	if s.opts.Props != nil {
		opts = s.opts.Props("agui", sessionID)
	}
	sys := s.rt.System()
	pid := sys.Root.SpawnPrefix(delivery.Props(sinkOf(q), q, opts...), "agui-")
	rctx, cancel := s.requestContext(ctx)
	defer cancel()
	req.ClientKind, req.Subject = "agui", subject
	res, err := delivery.Subscribe(rctx, s.rt, sessionID, pid, req)
	if err == nil && res.GetError() != nil {
		err = fromPB(res.GetError())
	}
	if err != nil {
		sys.Root.Stop(pid)
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		if s.isClosing() && !errors.Is(err, session.ErrNotFound) {
			return nil, shuttingDown()
		}
		if e := fromRequestErr(err); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("ag-ui: subscribe to %s: %w", sessionID, err)
	}
	if res.GetMode() == session.ModeIdle {
		sys.Root.Stop(pid)
		return nil, nil
	}
	opened = true
	s.rt.Metrics().ClientUp("agui")
	return &stream{s: s, q: q, pid: pid, sys: sys, subject: subject, head: res.GetHead()}, nil
}

func (st *stream) close() {
	st.closeOnce.Do(func() {
		st.sys.Root.Stop(st.pid)
		st.s.opts.Slots.Give(st.subject, delivery.CapEventStreams)
		st.s.rt.Metrics().ClientDown("agui")
	})
}

// run is one AG-UI run being set up, then served.
type run struct {
	s         *Server
	w         http.ResponseWriter
	r         *http.Request
	in        *Input
	who       identity.Identity
	sessionID string
	thread    string // the agent of a thread's run (its session is created on its first run)
	st        *stream
	made      []string // artifacts the run stored for its prompt
}

// caller says who asks: the transcript records its prompts as via "ag-ui".
func (r *run) caller() *pb.Caller { return &pb.Caller{Subject: r.who.Subject, Via: "ag-ui"} }

func (r *run) start() error {
	p, prompting, err := r.in.Prompt()
	if err != nil {
		return fieldRefusal(err)
	}
	var answers []Answer
	for _, e := range r.in.Resume {
		a, err := AnswerOf(e)
		if err != nil {
			return fieldRefusal(err)
		}
		answers = append(answers, a)
	}
	switch {
	case len(r.in.Resume) > 0:
		return r.resume(answers)
	case prompting:
		return r.prompt(p)
	}
	return r.stateOnly()
}

// onThread runs fn; on a thread's route, a session that does not exist yet
// is created (the thread's first run) and fn runs again.
func (r *run) onThread(fn func() error) error {
	err := fn()
	var e *Error
	if r.thread == "" || !errors.As(err, &e) || e.Status != http.StatusNotFound {
		return err
	}
	if err := r.createThread(); err != nil {
		return err
	}
	return fn()
}

// createThread creates the thread's session, owned by the caller. Another
// run creating it at the same moment is fine: both continue the one
// session.
func (r *run) createThread() error {
	title := "AG-UI thread " + r.in.ThreadID
	if len(title) > 200 {
		title = title[:199] + "…"
	}
	_, err := r.s.rt.CreateSession(r.r.Context(), surfaced.CreateOptions{
		ID: r.sessionID, Owner: r.who.Subject, Agent: r.thread, Title: title})
	switch {
	case err == nil, errors.Is(err, surfaced.ErrSessionExists):
		r.s.log.Info("thread started", "session", r.sessionID, "agent", r.thread)
		return nil
	case errors.Is(err, surfaced.ErrBadCwd):
		return refuse(http.StatusConflict, codes.InvalidCwd, sentence(err.Error()))
	}
	if e := fromRequestErr(err); e != nil {
		return e
	}
	return fmt.Errorf("ag-ui: create the thread's session %s: %w", r.sessionID, err)
}

// subscribe opens the run's stream: its subscriber, with a RunSink.
func (r *run) subscribe(from pb.SubscribeFrom, tag string, answering []string) error {
	return r.onThread(func() error {
		st, err := r.s.subscribe(r.r.Context(), r.sessionID, r.who.Subject, &pb.Subscribe{From: from},
			func(q *delivery.Queue) delivery.Sink { return NewRunSink(q, tag, answering) })
		r.st = st
		return err
	})
}

// state asks the session for its state (entries, domains, frame head).
func (r *run) state() (*pb.StateEntries, error) {
	var out *pb.StateEntries
	err := r.onThread(func() error {
		res, err := r.s.ask(r.r.Context(), r.sessionID, &pb.GetState{Caller: r.caller()})
		if err != nil {
			return err
		}
		out = res.(*pb.StateEntries)
		if out.GetError() != nil {
			return fromPB(out.GetError())
		}
		return nil
	})
	return out, err
}

// fail undoes what the run set up before it was refused.
func (r *run) fail(err error) error {
	if r.st != nil {
		r.st.close()
		r.st = nil
	}
	r.discard()
	return err
}

// prompt: the run sends its user message and streams the turn that answers
// it.
func (r *run) prompt(p Prompt) error {
	tag := newTag()
	if err := r.subscribe(pb.SubscribeFrom_SUBSCRIBE_FROM_NOW, tag, nil); err != nil {
		return r.fail(err)
	}
	msg := &pb.Prompt{Caller: r.caller(), Message: p.Text, ClientTag: tag}
	if len(p.Media) > 0 {
		atts, err := r.attach(p.Media)
		if err != nil {
			return r.fail(err)
		}
		msg.Attachments = atts
	}
	st, err := r.state()
	if err != nil {
		return r.fail(err)
	}
	res, err := r.s.ask(r.r.Context(), r.sessionID, msg)
	if err != nil {
		// Whether the session took the prompt is not known (a timeout):
		// its attachments stay.
		r.made = nil
		return r.fail(err)
	}
	if pe := res.(*pb.PromptResult).GetError(); pe != nil {
		e := fromPB(pe)
		if e.Code == codes.EmptyPrompt {
			e.Fields = []string{fmt.Sprintf("messages[%d].content", len(r.in.Messages)-1)}
		}
		return r.fail(e)
	}
	r.serve(st, 0)
	return nil
}

// resume: the run answers the interrupts of the thread's last run (the
// agent's dialogs) and streams the rest of the running turn. A resume entry
// whose dialog no longer waits (answered in a browser, withdrawn, its turn
// over) is passed over: its thread goes on.
func (r *run) resume(answers []Answer) error {
	ids := make([]string, len(answers))
	for i, a := range answers {
		ids[i] = a.ID
	}
	if err := r.subscribe(pb.SubscribeFrom_SUBSCRIBE_FROM_TURN_START, "", ids); err != nil {
		return r.fail(err)
	}
	st, err := r.state()
	if err != nil {
		return r.fail(err)
	}
	for _, a := range answers {
		res, err := r.s.ask(r.r.Context(), r.sessionID, &pb.UIResponse{Caller: r.caller(), Id: a.ID, Which: a.Which, Value: a.Value, Confirmed: a.Confirmed})
		if err != nil {
			return r.fail(err)
		}
		if e := res.(*pb.UIResponseResult).GetError(); e != nil {
			if e.GetCode() == codes.UnknownUIRequest {
				r.s.log.Info("ag-ui: a resume entry's dialog no longer waits", "session", r.sessionID, "interrupt", a.ID)
				continue
			}
			return r.fail(fromPB(e))
		}
	}
	if r.st == nil {
		// No turn runs: the run reports the state and ends.
		return r.finishAt(st)
	}
	r.serve(st, r.st.head)
	return nil
}

// stateOnly: a run whose messages do not end with a user message prompts
// nothing; it reports the state and ends.
func (r *run) stateOnly() error {
	st, err := r.state()
	if err != nil {
		return err
	}
	return r.finishAt(st)
}

func (r *run) renderer(st *pb.StateEntries, replayedTo uint64) *Renderer {
	return NewRenderer(RunOptions{ThreadID: r.in.ThreadID, RunID: r.in.RunID, SessionID: r.sessionID,
		State: st, ReplayedTo: replayedTo, Logger: r.s.log})
}

// finishAt answers a run without a turn: RUN_STARTED, STATE_SNAPSHOT,
// RUN_FINISHED.
func (r *run) finishAt(st *pb.StateEntries) error {
	rd := r.renderer(st, 0)
	r.w.Header().Set(HeaderSessionID, r.sessionID)
	sse := delivery.OpenSSE(r.w)
	sse.Buffer().Write(rd.Finish(rd.Start(nil)))
	_ = sse.Flush()
	return nil
}

// serve answers with the run's event stream and writes it until the run
// ends (or the stream is cut), on the request's goroutine. A client that
// goes away does not cancel the turn (POST …/abort does).
func (r *run) serve(st *pb.StateEntries, replayedTo uint64) {
	s := r.s
	s.runs.Add(1)
	defer s.runs.Done()
	defer r.st.close()
	rd := r.renderer(st, replayedTo)
	r.w.Header().Set(HeaderSessionID, r.sessionID)
	sse := delivery.OpenSSE(r.w)
	sse.Buffer().Write(rd.Start(nil))
	if err := sse.Flush(); err != nil {
		return
	}
	ctx := r.r.Context()
	if s.opts.Revoker != nil {
		var cancel context.CancelFunc
		ctx, cancel = s.opts.Revoker.Context(ctx, r.who)
		defer cancel()
	}
	if s.writer.Run(ctx, r.st.q, Transport{SSE: sse, R: rd}) == delivery.EndSlowConsumer {
		n, bytes, age := r.st.q.Waiting()
		s.log.Warn("run cut: its client is too far behind", "session", r.sessionID, "items", n, "bytes", bytes, "age", age)
	}
}

// attach makes the prompt's media parts attachments of the session: a data
// source's bytes become a new artifact (through artifact.Service, as an
// upload does), a url source (the URL of one of the session's artifacts)
// or a file source (a handle surfaced issued: an artifact id) names one it
// has. Every reference is checked before any bytes are stored; a failed
// store deletes what this run stored. The daemon fetches nothing on a
// client's word.
func (r *run) attach(parts []Part) ([]*pb.Artifact, error) {
	const maxAttachments = 16
	if len(parts) > maxAttachments {
		return nil, refuse(http.StatusBadRequest, codes.InvalidField, fmt.Sprintf("a prompt takes at most %d media parts", maxAttachments), parts[maxAttachments].Field)
	}
	ctx := r.r.Context()
	arts := r.s.rt.Artifacts()
	out := make([]*pb.Artifact, len(parts))
	seen := map[string]bool{}
	for i, p := range parts {
		if p.Source == "data" {
			continue
		}
		field := p.Field + ".source.value"
		att, err := artifactOf(p, r.sessionID)
		if err != nil {
			return nil, err
		}
		if seen[att] {
			return nil, refuse(http.StatusBadRequest, codes.InvalidField, fmt.Sprintf("%s repeats the artifact %q", field, clip(att)), field)
		}
		seen[att] = true
		a, err := arts.Get(ctx, r.sessionID, att)
		if errors.Is(err, artifact.ErrNotFound) {
			return nil, refuse(http.StatusBadRequest, codes.InvalidField, fmt.Sprintf("%s names %q, which is not an artifact of this session", field, clip(att)), field)
		}
		if err != nil {
			return nil, fmt.Errorf("ag-ui: look up attachment %s: %w", att, err)
		}
		out[i] = artifact.ToProto(a)
	}
	for i, p := range parts {
		if p.Source != "data" {
			continue
		}
		data, err := p.Bytes()
		if err != nil {
			return nil, fieldRefusal(err)
		}
		a, err := arts.Put(ctx, r.sessionID, bytes.NewReader(data), artifact.PutOptions{MediaType: p.MimeType, Name: p.Filename, Size: int64(len(data))})
		if err != nil {
			r.discard()
			if e := artifactRefusal(err, p.Field); e != nil {
				return nil, e
			}
			return nil, fmt.Errorf("ag-ui: store %s as an artifact: %w", p.Field, err)
		}
		r.made = append(r.made, a.ID)
		out[i] = artifact.ToProto(a)
	}
	return out, nil
}

// artifactOf is the artifact a url or file source names.
func artifactOf(p Part, sessionID string) (string, error) {
	field := p.Field + ".source.value"
	switch p.Source {
	case "file":
		if p.Provider != "" && !strings.EqualFold(p.Provider, "surfaced") {
			return "", refuse(http.StatusBadRequest, codes.InvalidField, fmt.Sprintf(
				"%s names a file of provider %q, which surfaced cannot read: a file source here is one of this session's artifacts (att_…)", field, clip(p.Provider)), field)
		}
		if att, ok := artifact.Reference(p.Value); ok {
			return att, nil
		}
		return "", refuse(http.StatusBadRequest, codes.InvalidField, field+" must be the id of one of this session's artifacts (att_…)", field)
	default:
		if att, ok := artifact.IDOfURL(p.Value, sessionID); ok {
			return att, nil
		}
		return "", refuse(http.StatusBadRequest, codes.InvalidField, field+
			" must be the URL of one of this session's artifacts: the daemon does not download files; send the bytes (a data source) or upload them (POST /api/sessions/{id}/artifacts)", field)
	}
}

// discard deletes the artifacts a run stored for a prompt that did not go
// out, past the request's end (the client may be gone); a failure is
// logged.
func (r *run) discard() {
	if len(r.made) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.r.Context()), 10*time.Second)
	defer cancel()
	for _, id := range r.made {
		if _, err := r.s.rt.Artifacts().Delete(ctx, r.sessionID, id); err != nil && !errors.Is(err, artifact.ErrNotFound) {
			r.s.log.Warn("ag-ui: delete an attachment of a refused prompt", "session", r.sessionID, "artifact", id, "err", err)
		}
	}
	r.made = nil
}

// newTag tags a run's prompt, so that its sink recognises the user message
// the session echoes and learns the prompt's id from it.
func newTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "agui-" + hex.EncodeToString(b[:])
}
