package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit"
	"github.com/surfaced/surfaced/internal/testkit"
)

// fakeDaemon plays the daemon for one canvas agent running in-process over
// pipes: it keeps the session's artifacts (in memory, files moving by path
// through the scratch directory as the real daemon's do), and it is the
// canvas domain's actor: the lone writer of the snapshot, dispatching one
// command at a time, the agent's own surface_commands included.
type fakeDaemon struct {
	t   *testing.T
	dir string
	w   io.Writer
	out chan []byte

	mu        sync.Mutex
	arts      []storedArtifact // oldest first
	state     json.RawMessage
	rev       uint64
	history   []Gallery // every committed snapshot, in order
	events    []string  // the types of the agent's lines, in order
	agentEnds int
	lines     []json.RawMessage
	frames    []int // the size of every line the agent wrote
	nextID    int
	pending   map[string]chan agentproc.SurfaceDispatchResult
	commands  chan domainCommand
	stopped   <-chan struct{} // closed when the test is over
	handlers  sync.WaitGroup  // the agent's surface_commands in flight
	pageSize  int
	failList  bool
}

type storedArtifact struct {
	art   agentproc.Artifact
	bytes []byte
}

type domainCommand struct {
	action string
	args   json.RawMessage
	answer chan agentproc.Result
}

// startCanvas runs a canvas agent with model against a fake daemon.
func startCanvas(t *testing.T, model agentkit.Model, seed ...[]byte) (*fakeDaemon, *agentkit.Agent) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv(agentproc.EnvArtifactDir, dir)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	d := &fakeDaemon{t: t, dir: dir, w: inW, pending: map[string]chan agentproc.SurfaceDispatchResult{},
		commands: make(chan domainCommand), out: make(chan []byte, 1<<14), pageSize: 3, state: json.RawMessage(`{"items":[]}`)}
	for i, b := range seed {
		d.add(b, "image/png", fmt.Sprintf("seed-%d.png", i), "", nil)
	}
	c := &Canvas{}
	agent := newAgent(model, testLogger(t), c)
	ctx, cancel := context.WithCancel(context.Background())
	d.stopped = ctx.Done()
	runDone := make(chan error, 1)
	go func() {
		err := agent.Run(ctx, inR, outW)
		outW.Close()
		runDone <- err
	}()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		d.read(outR)
	}()
	domainDone := make(chan struct{})
	go func() {
		defer close(domainDone)
		d.domain(ctx)
	}()
	writeDone := make(chan struct{})
	go func() {
		defer close(writeDone)
		d.write(ctx)
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-runDone:
		case <-time.After(10 * time.Second):
			t.Error("the agent did not stop after its input closed")
		}
		cancel()
		<-readDone
		<-domainDone
		<-writeDone
		d.handlers.Wait() // a surface_command the agent left behind ends with the test
	})
	// The hydration (the sync OnReady runs) is the first command; tests
	// start once it is committed, so that it never races their own commands.
	testkit.Eventually(t, 15*time.Second, func() bool { return len(d.snapshots()) > 0 }, "the hydration sync")
	return d, agent
}

// testLogger logs to a buffer shown when the test fails.
func testLogger(t *testing.T) *slog.Logger {
	buf := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// send queues one line for the agent. The writer is a goroutine of its
// own: the pipes have no buffer, and the reader must never wait on the
// agent's stdin while the agent waits on its stdout.
func (d *fakeDaemon) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		d.t.Errorf("encode %T: %v", v, err)
		return
	}
	select {
	case d.out <- append(b, '\n'):
	case <-d.stopped:
	}
}

func (d *fakeDaemon) write(ctx context.Context) {
	for {
		select {
		case b := <-d.out:
			_, _ = d.w.Write(b)
		case <-ctx.Done():
			return
		}
	}
}

func (d *fakeDaemon) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			d.handle(line)
		}
		if err != nil {
			return
		}
	}
}

func (d *fakeDaemon) handle(line []byte) {
	var env struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		d.t.Errorf("the agent wrote a line that is not JSON: %s", line)
		return
	}
	d.mu.Lock()
	d.events = append(d.events, env.Type)
	d.frames = append(d.frames, len(line))
	d.lines = append(d.lines, append(json.RawMessage(nil), line...))
	if env.Type == agentproc.EventAgentEnd {
		d.agentEnds++
	}
	d.mu.Unlock()
	switch env.Type {
	case agentproc.TypeArtifactPut:
		var m agentproc.ArtifactPut
		_ = json.Unmarshal(line, &m)
		d.send(d.put(m))
	case agentproc.TypeArtifactGet:
		var m agentproc.ArtifactGet
		_ = json.Unmarshal(line, &m)
		d.send(d.get(m))
	case agentproc.TypeArtifactList:
		var m agentproc.ArtifactList
		_ = json.Unmarshal(line, &m)
		d.send(d.list(m))
	case agentproc.TypeArtifactURL:
		var m agentproc.ArtifactURL
		_ = json.Unmarshal(line, &m)
		d.send(agentproc.ArtifactURLResult{Type: agentproc.TypeArtifactURLResult, ID: m.ID, OK: true,
			URL: "/api/artifacts/" + m.Artifact + "/content?exp=1&sig=00"})
	case agentproc.TypeSurfaceCommand:
		var m agentproc.SurfaceCommand
		_ = json.Unmarshal(line, &m)
		d.handlers.Go(func() {
			r := d.command(m.Action, m.Args)
			d.send(agentproc.SurfaceCommandResult{Type: agentproc.TypeSurfaceCommandResult, ID: m.ID, OK: r.OK, Data: r.Data, Error: r.Error})
		})
	case agentproc.TypeSurfaceGet:
		d.mu.Lock()
		st, rev := d.state, d.rev
		d.mu.Unlock()
		d.send(agentproc.SurfaceGetResult{Type: agentproc.TypeSurfaceGetResult, ID: env.ID, OK: true, State: st, Rev: rev})
	case agentproc.TypeSurfaceDispatchResult:
		var m agentproc.SurfaceDispatchResult
		_ = json.Unmarshal(line, &m)
		d.mu.Lock()
		ch := d.pending[m.ID]
		delete(d.pending, m.ID)
		d.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// domain is the domain actor: one command at a time.
func (d *fakeDaemon) domain(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-d.commands:
			c.answer <- d.dispatch(ctx, c.action, c.args)
		}
	}
}

func (d *fakeDaemon) dispatch(ctx context.Context, action string, args json.RawMessage) agentproc.Result {
	d.mu.Lock()
	d.nextID++
	id := "canvas#" + strconv.Itoa(d.nextID)
	ch := make(chan agentproc.SurfaceDispatchResult, 1)
	d.pending[id] = ch
	st, rev := d.state, d.rev
	d.mu.Unlock()
	d.send(agentproc.SurfaceDispatch{Type: agentproc.TypeSurfaceDispatch, ID: id, Domain: Domain, Action: action, Args: args, State: st, Rev: rev})
	select {
	case res := <-ch:
		if res.State != nil {
			var g Gallery
			if err := json.Unmarshal(res.State, &g); err != nil {
				d.t.Errorf("%s: the new state does not decode: %v", action, err)
			}
			d.mu.Lock()
			d.state, d.rev = res.State, d.rev+1
			d.history = append(d.history, g)
			d.mu.Unlock()
		}
		var r agentproc.Result
		if err := json.Unmarshal(res.Result, &r); err != nil {
			d.t.Errorf("%s: result %s: %v", action, res.Result, err)
		}
		return r
	case <-time.After(15 * time.Second):
		return agentproc.Result{Error: &agentproc.ErrorBody{Code: "timeout", Message: action + " timed out"}}
	case <-ctx.Done():
		return agentproc.Result{Error: &agentproc.ErrorBody{Code: "agent_unavailable"}}
	}
}

// command runs a command through the domain, as a client's or the agent's.
func (d *fakeDaemon) command(action string, args any) agentproc.Result {
	var raw json.RawMessage
	switch v := args.(type) {
	case nil:
	case json.RawMessage:
		raw = v
	case string:
		raw = json.RawMessage(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			d.t.Fatalf("encode args: %v", err)
		}
		raw = b
	}
	c := domainCommand{action: action, args: raw, answer: make(chan agentproc.Result, 1)}
	select {
	case d.commands <- c:
	case <-d.stopped:
		return agentproc.Result{Error: &agentproc.ErrorBody{Code: "agent_unavailable"}}
	case <-time.After(15 * time.Second):
		return agentproc.Result{Error: &agentproc.ErrorBody{Code: "timeout"}}
	}
	return <-c.answer
}

// ui runs a client's command that must succeed and returns its data.
func (d *fakeDaemon) ui(action string, args any) json.RawMessage {
	d.t.Helper()
	r := d.command(action, args)
	if !r.OK {
		d.t.Fatalf("%s %v failed: %+v", action, args, r.Error)
	}
	return r.Data
}

// uiFail runs a client's command that must fail and returns its code.
func (d *fakeDaemon) uiFail(action string, args any) string {
	d.t.Helper()
	r := d.command(action, args)
	if r.OK || r.Error == nil {
		d.t.Fatalf("%s %v succeeded, want a failure", action, args)
	}
	return r.Error.Code
}

func (d *fakeDaemon) gallery() Gallery {
	d.mu.Lock()
	defer d.mu.Unlock()
	var g Gallery
	if err := json.Unmarshal(d.state, &g); err != nil {
		d.t.Fatalf("state %s: %v", d.state, err)
	}
	return g
}

func (d *fakeDaemon) snapshots() []Gallery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.history)
}

func (d *fakeDaemon) ends() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.agentEnds
}

// waitGallery waits until the snapshot satisfies cond.
func (d *fakeDaemon) waitGallery(what string, cond func(Gallery) bool) Gallery {
	d.t.Helper()
	var g Gallery
	testkit.Eventually(d.t, 15*time.Second, func() bool {
		g = d.gallery()
		return cond(g)
	}, "gallery: %s", what)
	return g
}

// prompt sends a prompt and waits for its run's agent_end and for the
// gallery rebuild that follows it.
func (d *fakeDaemon) prompt(text string, attachments ...string) {
	d.t.Helper()
	before := d.ends()
	p := agentproc.PromptCommand{ID: "p" + strconv.Itoa(before), Type: agentproc.CmdPrompt, Message: text}
	for _, a := range attachments {
		p.Attachments = append(p.Attachments, agentproc.PromptAttachment{ID: a, MediaType: "image/png"})
	}
	d.send(p)
	if !waitUntil(20*time.Second, func() bool { return d.ends() > before }) {
		d.t.Fatalf("no agent_end after %q; the agent wrote:\n%s", text, d.dumpLines())
	}
}

// add stores an artifact as an upload would.
func (d *fakeDaemon) add(b []byte, mediaType, name, derivedFrom string, meta json.RawMessage) agentproc.Artifact {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addLocked(b, mediaType, name, derivedFrom, meta)
}

func (d *fakeDaemon) addLocked(b []byte, mediaType, name, derivedFrom string, meta json.RawMessage) agentproc.Artifact {
	n := len(d.arts) + 1
	a := agentproc.Artifact{ID: fmt.Sprintf("att_%026d", n), SessionID: "s1", MediaType: mediaType, Size: int64(len(b)),
		Name: name, CreatedAt: time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC).Format(time.RFC3339), DerivedFrom: derivedFrom, Meta: meta}
	d.arts = append(d.arts, storedArtifact{art: a, bytes: b})
	return a
}

func (d *fakeDaemon) artifact(id string) (storedArtifact, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.arts {
		if s.art.ID == id {
			return s, true
		}
	}
	return storedArtifact{}, false
}

func (d *fakeDaemon) put(m agentproc.ArtifactPut) agentproc.ArtifactPutResult {
	res := agentproc.ArtifactPutResult{Type: agentproc.TypeArtifactPutResult, ID: m.ID}
	if rel, err := filepath.Rel(d.dir, m.Path); err != nil || strings.HasPrefix(rel, "..") {
		res.Error = &agentproc.ErrorBody{Code: "path_refused", Message: m.Path + " is outside the scratch directory"}
		return res
	}
	b, err := os.ReadFile(m.Path)
	if err != nil {
		res.Error = &agentproc.ErrorBody{Code: "not_found", Message: err.Error()}
		return res
	}
	a := d.add(b, m.MediaType, m.Name, m.DerivedFrom, m.Meta)
	res.OK, res.Artifact, res.URL = true, &a, "/api/artifacts/"+a.ID+"/content?exp=1&sig=00"
	return res
}

func (d *fakeDaemon) get(m agentproc.ArtifactGet) agentproc.ArtifactGetResult {
	res := agentproc.ArtifactGetResult{Type: agentproc.TypeArtifactGetResult, ID: m.ID}
	s, ok := d.artifact(m.Artifact)
	if !ok {
		res.Error = &agentproc.ErrorBody{Code: "not_found", Message: "no artifact " + m.Artifact}
		return res
	}
	path := filepath.Join(d.dir, "get-"+m.ID)
	if err := os.WriteFile(path, s.bytes, 0o600); err != nil {
		res.Error = &agentproc.ErrorBody{Code: "io", Message: err.Error()}
		return res
	}
	res.OK, res.Path, res.Artifact = true, path, &s.art
	return res
}

func (d *fakeDaemon) list(m agentproc.ArtifactList) agentproc.ArtifactListResult {
	res := agentproc.ArtifactListResult{Type: agentproc.TypeArtifactListResult, ID: m.ID}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failList {
		res.Error = &agentproc.ErrorBody{Code: "store_unavailable", Message: "the store is down"}
		return res
	}
	var matching []agentproc.Artifact
	for i := len(d.arts) - 1; i >= 0; i-- {
		a := d.arts[i].art
		if m.MediaType == "image/*" && !strings.HasPrefix(a.MediaType, "image/") {
			continue
		}
		matching = append(matching, a)
	}
	start := 0
	if m.Cursor != "" {
		start, _ = strconv.Atoi(m.Cursor)
	}
	end := min(start+d.pageSize, len(matching))
	res.OK, res.Artifacts = true, append([]agentproc.Artifact{}, matching[start:end]...)
	if end < len(matching) {
		res.NextCursor = strconv.Itoa(end)
	}
	return res
}

// count is the number of artifacts stored, and how many of them are
// live-preview stages.
func (d *fakeDaemon) count() (all, previews int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.arts {
		all++
		if role, _ := metaOf(fromKit(s.art)); role == rolePreview {
			previews++
		}
	}
	return all, previews
}

// toolArtifacts is the artifacts named by the results of the agent's
// finished calls of tool (details.artifacts), in order.
func (d *fakeDaemon) toolArtifacts(tool string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for _, l := range d.lines {
		var ev agentproc.Event
		if json.Unmarshal(l, &ev) != nil || ev.Type != agentproc.EventToolExecutionEnd || ev.ToolName != tool {
			continue
		}
		var res struct {
			Details struct {
				Artifacts []string `json:"artifacts"`
			} `json:"details"`
		}
		if err := json.Unmarshal(ev.Result, &res); err != nil {
			d.t.Errorf("%s's result: %v", tool, err)
		}
		ids = append(ids, res.Details.Artifacts...)
	}
	return ids
}

func (d *fakeDaemon) dumpLines() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	for _, l := range d.lines {
		b.WriteString(truncate(string(l), 300))
		b.WriteByte('\n')
	}
	return b.String()
}

// waitUntil polls cond on a ticker until it holds or timeout passes (like
// testkit.Eventually, but it lets the caller say what it saw).
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}
