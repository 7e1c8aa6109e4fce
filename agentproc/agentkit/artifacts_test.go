package agentkit

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit/agentkittest"
)

type tableState struct {
	Rows int `json:"rows"`
}

// The typed artifact calls write the artifact lines and read their answers;
// a surface command reaches them through its context; an answer that is
// not ok is an *Error with its code.
func TestArtifactsCalls(t *testing.T) {
	a := New(Options{Logger: testLogger(&logBuffer{})})
	type result struct {
		art  Artifact
		url  string
		path string
		list []Artifact
		next string
		err  error
	}
	got := make(chan result, 1)
	AddSurface(a, Surface[tableState]{Domain: "t", Commands: map[string]Command[tableState]{
		"put": Func[tableState](func(c *SurfaceCtx[tableState], _ json.RawMessage) (any, error) {
			art, url, err := c.Artifacts().Put("out.png", "image/png", PutOptions{Name: "out.png", Meta: map[string]int{"seed": 7}})
			got <- result{art: art, url: url, err: err}
			return nil, err
		}),
	}})
	h := start(t, a, nil)
	h.Send(agentproc.SurfaceDispatch{Type: agentproc.TypeSurfaceDispatch, ID: "d1", Domain: "t", Action: "put", Args: json.RawMessage("{}"), State: json.RawMessage(`{"rows":1}`), Rev: 1})
	put := h.Await(agentproc.TypeArtifactPut, nil)
	var p agentproc.ArtifactPut
	put.Decode(t, &p)
	if p.Path != "out.png" || p.MediaType != "image/png" || p.Name != "out.png" || string(p.Meta) != `{"seed":7}` || p.ID == "" {
		t.Fatalf("artifact_put %s", put)
	}
	h.Send(agentproc.ArtifactPutResult{Type: agentproc.TypeArtifactPutResult, ID: p.ID, OK: true,
		Artifact: &agentproc.Artifact{ID: "att_x", MediaType: "image/png", Size: 3}, URL: "/api/artifacts/att_x/content?exp=1&sig=ab"})
	r := <-got
	if r.err != nil || r.art.ID != "att_x" || r.url != "/api/artifacts/att_x/content?exp=1&sig=ab" {
		t.Fatalf("Put: %+v", r)
	}
	h.Await(agentproc.TypeSurfaceDispatchResult, nil)

	// From the agent: Get, List, URL, and a failure.
	arts := a.Artifacts()
	go func() {
		path, art, err := arts.Get("att_x")
		got <- result{path: path, art: art, err: err}
	}()
	var g agentproc.ArtifactGet
	h.Await(agentproc.TypeArtifactGet, nil).Decode(t, &g)
	h.Send(agentproc.ArtifactGetResult{Type: agentproc.TypeArtifactGetResult, ID: g.ID, OK: true, Path: "/scratch/artifacts/att_x.png",
		Artifact: &agentproc.Artifact{ID: "att_x"}})
	if r := <-got; r.err != nil || r.path != "/scratch/artifacts/att_x.png" || r.art.ID != "att_x" || g.Artifact != "att_x" {
		t.Fatalf("Get: %+v (%+v)", r, g)
	}
	go func() {
		list, next, err := arts.List(ListQuery{MediaType: "image/*", Limit: 2})
		got <- result{list: list, next: next, err: err}
	}()
	var l agentproc.ArtifactList
	h.Await(agentproc.TypeArtifactList, nil).Decode(t, &l)
	h.Send(agentproc.ArtifactListResult{Type: agentproc.TypeArtifactListResult, ID: l.ID, OK: true,
		Artifacts: []agentproc.Artifact{{ID: "att_a"}, {ID: "att_b"}}, NextCursor: "c2"})
	if r := <-got; r.err != nil || len(r.list) != 2 || r.next != "c2" || l.MediaType != "image/*" || l.Limit != 2 {
		t.Fatalf("List: %+v (%+v)", r, l)
	}
	go func() {
		u, err := arts.URL("att_x", 90*time.Second+time.Millisecond)
		got <- result{url: u, err: err}
	}()
	var u agentproc.ArtifactURL
	h.Await(agentproc.TypeArtifactURL, nil).Decode(t, &u)
	h.Send(agentproc.ArtifactURLResult{Type: agentproc.TypeArtifactURLResult, ID: u.ID, OK: false,
		Error: &agentproc.ErrorBody{Code: "not_found", Message: "no such artifact in this session"}})
	r = <-got
	var e *Error
	if !errors.As(r.err, &e) || e.Code != "not_found" || u.TTL != 91 {
		t.Fatalf("URL: %+v (ttl %d)", r, u.TTL)
	}

	// A call whose context ends stops waiting.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _, err := arts.WithContext(ctx).Get("att_y")
		got <- result{err: err}
	}()
	h.Await(agentproc.TypeArtifactGet, nil)
	cancel()
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a cancelled Get: %v", r.err)
	}
}

// Surface.Data answers surface_fetch: a page, an artifact page, the
// handler's code, a panic; a domain without one says no_data_plane, and
// agent_ready declares which have one.
func TestSurfaceData(t *testing.T) {
	a := New(Options{Logger: testLogger(&logBuffer{})})
	AddSurface(a, Surface[tableState]{Domain: "t", Data: func(c *DataCtx, req DataRequest) (Page, error) {
		switch req.Path {
		case "rows":
			return Page{Data: map[string]any{"from": req.Query.Get("from"), "rev": req.Rev}, ETag: "r1", MaxAge: time.Minute}, nil
		case "big":
			return Page{Artifact: "att_big"}, nil
		case "boom":
			panic("boom")
		}
		return Page{}, Errorf("not_found", "no page %s", req.Path)
	}})
	AddSurface(a, Surface[tableState]{Domain: "plain"})
	h := start(t, a, nil)
	if len(h.ready.Surfaces) != 2 || !h.ready.Surfaces[0].Data || h.ready.Surfaces[1].Data {
		t.Fatalf("agent_ready %+v", h.ready.Surfaces)
	}
	fetch := func(domain, path, query string) agentproc.SurfaceFetchResult {
		t.Helper()
		id := domain + "/" + path
		h.Send(agentproc.SurfaceFetch{Type: agentproc.TypeSurfaceFetch, ID: id, Domain: domain, Path: path, Query: query, Rev: 4})
		var r agentproc.SurfaceFetchResult
		h.Await(agentproc.TypeSurfaceFetchResult, func(l agentkittest.Line) bool { return l.Map()["id"] == id }).Decode(t, &r)
		return r
	}
	if r := fetch("t", "rows", "from=10"); !r.OK || string(r.Data) != `{"from":"10","rev":4}` || r.ETag != "r1" || r.MaxAge != 60 {
		t.Fatalf("rows: %+v", r)
	}
	if r := fetch("t", "big", ""); !r.OK || r.Artifact != "att_big" || r.Data != nil {
		t.Fatalf("big: %+v", r)
	}
	if r := fetch("t", "nope", ""); r.OK || r.Error.Code != "not_found" {
		t.Fatalf("nope: %+v", r)
	}
	if r := fetch("t", "boom", ""); r.OK || r.Error.Code != agentproc.CodeDispatchFailed {
		t.Fatalf("boom: %+v", r)
	}
	if r := fetch("plain", "x", ""); r.OK || r.Error.Code != agentproc.CodeNoDataPlane {
		t.Fatalf("plain: %+v", r)
	}
	if r := fetch("other", "x", ""); r.OK || r.Error.Code != agentproc.CodeSurfaceNotRegistered {
		t.Fatalf("other: %+v", r)
	}
	if r := fetch("t", "rows", "%zz"); r.OK || r.Error.Code != agentproc.CodeInvalidArgs {
		t.Fatalf("a bad query: %+v", r)
	}
}
