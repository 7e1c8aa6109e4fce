package surface

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/agentproc"
)

func TestQuoteETag(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"v1", `"v1"`, true},
		{`"v1"`, `"v1"`, true},
		{`W/"v1"`, `W/"v1"`, true},
		{`W/v1`, "", false},
		{`a"b`, "", false},
		{"a b", "", false},
		{"a\x01", "", false},
	} {
		got, ok := QuoteETag(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("QuoteETag(%q) = %q %v, want %q %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestETagMatch(t *testing.T) {
	for _, c := range []struct {
		header, etag string
		want         bool
	}{
		{`"a"`, `"a"`, true},
		{`"b", "a"`, `"a"`, true},
		{`W/"a"`, `"a"`, true},
		{`"a"`, `W/"a"`, true},
		{`*`, `"a"`, true},
		{`"a"`, ``, false},
		{``, `"a"`, false},
		{`"ab"`, `"a"`, false},
	} {
		if got := ETagMatch(c.header, c.etag); got != c.want {
			t.Errorf("ETagMatch(%q, %q) = %v", c.header, c.etag, got)
		}
	}
}

// Every malformed surface_fetch_result is dispatch_failed with a reason;
// the agent's own code is kept.
func TestAgentPage(t *testing.T) {
	big := `{"type":"surface_fetch_result","id":"x","ok":true,"data":"` + strings.Repeat("a", MaxPage) + `"}`
	for _, c := range []struct {
		line, code, contains string
	}{
		{`not json`, agentproc.CodeDispatchFailed, "not valid"},
		{`{"id":"x","ok":false}`, agentproc.CodeDispatchFailed, "without a valid error code"},
		{`{"id":"x","ok":false,"error":{"code":"Bad Code"}}`, agentproc.CodeDispatchFailed, "without a valid error code"},
		{`{"id":"x","ok":false,"error":{"code":"not_found","message":"gone"}}`, "not_found", "gone"},
		{`{"id":"x","ok":true}`, agentproc.CodeDispatchFailed, "needs data or an artifact"},
		{`{"id":"x","ok":true,"data":null}`, agentproc.CodeDispatchFailed, "needs data or an artifact"},
		{`{"id":"x","ok":true,"data":1,"artifact":"att_a"}`, agentproc.CodeDispatchFailed, "not both"},
		{`{"id":"x","ok":true,"data":1,"maxAge":-1}`, agentproc.CodeDispatchFailed, "negative"},
		{`{"id":"x","ok":true,"data":1,"etag":"a\"b"}`, agentproc.CodeDispatchFailed, "etag"},
		{big, agentproc.CodeDispatchFailed, "over the 1048576-byte limit"},
	} {
		r := agentPage([]byte(c.line))
		if r.Err == nil || r.Err.Code != c.code || !strings.Contains(r.Err.Message, c.contains) {
			t.Errorf("%.80s: %+v, want %s (%s)", c.line, r.Err, c.code, c.contains)
		}
	}
	r := agentPage([]byte(`{"id":"x","ok":true,"data":{"a":1},"etag":"t","maxAge":9}`))
	if r.Err != nil || string(r.Data) != `{"a":1}` || r.ETag != `"t"` || r.MaxAge != 9 {
		t.Errorf("a page: %+v", r)
	}
}

// A native view decodes the snapshot once and serves its state (a panic is
// the fetcher's: panic_test.go).
func TestNativeView(t *testing.T) {
	type st struct{ N int }
	d := Define("d", st{}, nil, Data(func(ctx *DataCtx[st], req DataRequest) (Page, error) {
		return Page{Data: ctx.State.N * 10, ETag: "n"}, nil
	}))
	if !HasData(d) || HasData(Define("e", st{}, nil)) {
		t.Fatal("HasData")
	}
	v, err := d.(DataDomain).View(json.RawMessage(`{"N":4}`), 3)
	if err != nil {
		t.Fatal(err)
	}
	r := nativePage(v.Fetch(t.Context(), DataRequest{Path: "x"}))
	if r.Err != nil || string(r.Data) != "40" || r.ETag != `"n"` {
		t.Fatalf("page %+v", r)
	}
	if _, err := d.(DataDomain).View(json.RawMessage(`[]`), 1); err == nil {
		t.Fatal("a snapshot that does not fit")
	}
}
