package surface

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/conc/panics"

	"github.com/surfaced/surfaced/actors/dispatch"
	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/plainjson"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
)

// DefaultFetchTimeout is how long a data page may take (504 timeout after).
const DefaultFetchTimeout = 15 * time.Second

// maxCachedTags bounds the ETags a fetcher remembers for one rev.
const maxCachedTags = 4096

// FetcherConfig configures a domain's data plane actor.
type FetcherConfig struct {
	SessionID string
	Domain    string
	Hosted    string // HostedNative or HostedAgent
	// Native is a native domain's definition (HasData).
	Native DataDomain
	// Timeout bounds a page (0: DefaultFetchTimeout).
	Timeout time.Duration
	Logger  *slog.Logger
	// Clock runs the timeouts (nil: the wall clock).
	Clock clock.Clock
}

// FetcherProps returns the props of a domain's data plane actor: a sibling
// of the domain actor, so that pages never wait behind commands. The
// session forwards it the fetches (*pb.SurfaceFetch, answered to their
// sender with *pb.SurfaceFetchResult), every committed snapshot of the
// domain (*pb.StateCommitted) and where the agent is (*pb.AgentAvailable).
//
// Pages are asked at the domain's latest committed rev: a native handler
// gets that snapshot's state (decoded once per rev), an agent its rev on the
// surface_fetch line. Several run at once. An ETag a page gave is kept for
// its path, query and rev, so a client that revalidates with it is answered
// 304 without asking the handler again.
func FetcherProps(cfg FetcherConfig, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return newFetcher(cfg) }, append([]actor.PropsOption{dispatch.Option()}, opts...)...)
}

type fetcher struct {
	cfg FetcherConfig
	log *slog.Logger

	rev      uint64
	snapshot json.RawMessage
	view     View // native: the view of rev, made on the first fetch
	agent    *actor.PID

	// tags: page (path?query) → its ETag and max age, at rev.
	tags map[string]cachedTag

	pending map[string]*fetch
	nextID  uint64
	ctx     context.Context
	cancel  context.CancelFunc
}

type cachedTag struct {
	etag   string
	maxAge int64
}

type fetch struct {
	sender      *actor.PID
	page        string
	rev         uint64
	ifNoneMatch string
	timer       clock.Timer
	cancel      context.CancelFunc
}

// Local messages of the fetcher's own timers and handlers.
type fetchTimeout struct{ id string }
type nativeFetched struct {
	id  string
	res PageResult
}

func newFetcher(cfg FetcherConfig) *fetcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultFetchTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &fetcher{cfg: cfg, log: log.With("session", cfg.SessionID, "domain", cfg.Domain, "plane", "data"),
		tags: map[string]cachedTag{}, pending: map[string]*fetch{}, ctx: ctx, cancel: cancel}
}

func (f *fetcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pb.SurfaceFetch:
		f.fetch(ctx, m)
	case *pb.StateCommitted:
		f.committed(m)
	case *pb.AgentAvailable:
		f.agentAvailable(ctx, m)
	case *pb.AgentReply:
		f.agentAnswered(ctx, m)
	case *nativeFetched:
		f.finish(ctx, m.id, m.res)
	case *fetchTimeout:
		f.timedOut(ctx, m)
	case *actor.Stopping:
		f.stopping(ctx)
	}
}

func (f *fetcher) clock() clock.Clock {
	if f.cfg.Clock != nil {
		return f.cfg.Clock
	}
	return clock.Real{}
}

// committed: the domain has a new snapshot; the ETags of the old rev are
// stale.
func (f *fetcher) committed(m *pb.StateCommitted) {
	if m.GetRev() <= f.rev && f.snapshot != nil {
		return
	}
	f.rev, f.snapshot, f.view = m.GetRev(), m.GetValue(), nil
	clear(f.tags)
}

func (f *fetcher) agentAvailable(ctx actor.Context, m *pb.AgentAvailable) {
	f.agent = m.GetAgent().Actor()
	if f.agent != nil || f.cfg.Hosted != HostedAgent {
		return
	}
	for id := range f.pending {
		f.finish(ctx, id, PageResult{Err: &Error{Code: agentproc.CodeAgentUnavailable, Message: "the agent stopped before answering"}})
	}
}

func (f *fetcher) fetch(ctx actor.Context, m *pb.SurfaceFetch) {
	page := m.GetPath() + "?" + m.GetQuery()
	if t, ok := f.tags[page]; ok && ETagMatch(m.GetIfNoneMatch(), t.etag) {
		ctx.Respond(&pb.SurfaceFetchResult{NotModified: true, Etag: t.etag, MaxAge: t.maxAge, Rev: f.rev})
		return
	}
	query, err := url.ParseQuery(m.GetQuery())
	if err != nil {
		ctx.Respond(&pb.SurfaceFetchResult{Error: pb.Err(agentproc.CodeInvalidArgs, "the query is not valid: "+err.Error())})
		return
	}
	f.nextID++
	id := "fetch-" + f.cfg.Domain + "-" + strconv.FormatUint(f.nextID, 10)
	p := &fetch{sender: ctx.Sender(), page: page, rev: f.rev, ifNoneMatch: m.GetIfNoneMatch()}
	switch f.cfg.Hosted {
	case HostedAgent:
		if f.agent == nil {
			ctx.Respond(&pb.SurfaceFetchResult{Error: pb.Err(agentproc.CodeAgentUnavailable, "the agent that hosts this surface is not running")})
			return
		}
		line, err := plainjson.Marshal(agentproc.SurfaceFetch{Type: agentproc.TypeSurfaceFetch, ID: id, Domain: f.cfg.Domain,
			Path: m.GetPath(), Query: m.GetQuery(), Rev: f.rev})
		if err != nil {
			ctx.Respond(&pb.SurfaceFetchResult{Error: pb.Err(agentproc.CodeInvalidArgs, "the request cannot be written: "+err.Error())})
			return
		}
		ctx.Send(f.agent, &pb.AgentSend{Line: line, ExpectId: id, ReplyTo: pb.PidOf(ctx.Self())})
	default:
		view, err := f.nativeView()
		if err != nil {
			ctx.Respond(&pb.SurfaceFetchResult{Error: pb.Err(agentproc.CodeDispatchFailed, err.Error())})
			return
		}
		fctx, cancel := context.WithTimeout(f.ctx, f.cfg.Timeout)
		p.cancel = cancel
		req := DataRequest{Path: m.GetPath(), Query: query, Rev: f.rev}
		self, root, log := ctx.Self(), ctx.ActorSystem().Root, f.log
		go func() {
			// A handler that panics fails its page, with the stack in the
			// log, instead of the daemon.
			var res PageResult
			if r := panics.Try(func() { res = nativePage(view.Fetch(fctx, req)) }); r != nil {
				log.Error("a data handler panicked", "path", req.Path, "panic", fmt.Sprint(r.Value), "stack", string(r.Stack))
				res = PageResult{Err: &Error{Code: agentproc.CodeDispatchFailed, Message: fmt.Sprintf("the data handler panicked: %v", r.Value)}}
			}
			root.Send(self, &nativeFetched{id: id, res: res})
		}()
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	p.timer = f.clock().AfterFunc(f.cfg.Timeout, func() { root.Send(self, &fetchTimeout{id: id}) })
	f.pending[id] = p
}

// nativeView is the view of the current rev, made once.
func (f *fetcher) nativeView() (View, error) {
	if f.view != nil {
		return f.view, nil
	}
	if f.cfg.Native == nil || f.snapshot == nil {
		return nil, fmt.Errorf("the domain has no state yet")
	}
	v, err := f.cfg.Native.View(f.snapshot, f.rev)
	if err != nil {
		return nil, err
	}
	f.view = v
	return v, nil
}

func (f *fetcher) agentAnswered(ctx actor.Context, m *pb.AgentReply) {
	if _, ok := f.pending[m.GetId()]; !ok {
		f.log.Debug("late surface_fetch_result ignored", "id", m.GetId())
		return
	}
	if m.GetFailed() {
		f.finish(ctx, m.GetId(), PageResult{Err: &Error{Code: agentproc.CodeAgentUnavailable, Message: "the agent stopped before answering"}})
		return
	}
	f.finish(ctx, m.GetId(), agentPage(m.GetLine()))
}

func (f *fetcher) timedOut(ctx actor.Context, m *fetchTimeout) {
	f.finish(ctx, m.id, PageResult{Err: &Error{Code: agentproc.CodeTimeout,
		Message: fmt.Sprintf("the page was not made within %s", f.cfg.Timeout)}})
}

// finish answers a fetch once (the first of its answer, its timeout, the
// agent's exit), remembering the page's ETag for its rev.
func (f *fetcher) finish(ctx actor.Context, id string, res PageResult) {
	p, ok := f.pending[id]
	if !ok {
		return
	}
	delete(f.pending, id)
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.cancel != nil {
		p.cancel()
	}
	out := &pb.SurfaceFetchResult{Rev: p.rev}
	switch {
	case res.Err != nil:
		out.Error = pb.Err(res.Err.Code, res.Err.Message)
	default:
		out.Etag, out.MaxAge = res.ETag, res.MaxAge
		if res.ETag != "" && p.rev == f.rev {
			if len(f.tags) >= maxCachedTags {
				clear(f.tags)
			}
			f.tags[p.page] = cachedTag{etag: res.ETag, maxAge: res.MaxAge}
		}
		if ETagMatch(p.ifNoneMatch, res.ETag) {
			out.NotModified = true
		} else {
			out.Data, out.Artifact = res.Data, res.Artifact
		}
	}
	ctx.Send(p.sender, out)
}

// stopping answers every fetch still waiting: the session is going.
func (f *fetcher) stopping(ctx actor.Context) {
	f.cancel()
	for id := range f.pending {
		f.finish(ctx, id, PageResult{Err: &Error{Code: agentproc.CodeAgentUnavailable, Message: "the session is stopping"}})
	}
}
