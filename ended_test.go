package surfaced_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/session"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store/memstore"
)

// availability renders a session frame's surfaces as "domain:hosted:available"
// (sorted), or "none" when the frame has no surfaces field.
func availability(f testkit.Frame) string {
	list, ok := f.Data["surfaces"].([]any)
	if !ok {
		return "none"
	}
	var out []string
	for _, x := range list {
		m, _ := x.(map[string]any)
		out = append(out, fmt.Sprintf("%v:%v:%v", m["domain"], m["hosted"], m["available"]))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func summaryAvailability(sum []*pb.SurfaceInfo) string {
	var out []string
	for _, s := range sum {
		out = append(out, fmt.Sprintf("%s:%s:%v", s.GetDomain(), s.GetHosted(), s.GetAvailable()))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// Every session frame lists the session's surfaces with their availability,
// whatever the status: starting, ready, error (the agent crashed) and ended
// (the restart policy spent). Once the session has ended no domain takes
// commands, native ones included; the summary, the surface list and a
// later activation of the ended session say the same.
func TestSessionFramesListSurfacesInEveryStatus(t *testing.T) {
	notes := surface.Define("notes", struct{ N int }{}, map[string]surface.Command[struct{ N int }]{
		"add": func(ctx *surface.Ctx[struct{ N int }], _ json.RawMessage) (any, error) {
			ctx.SetState(func(s struct{ N int }) struct{ N int } { s.N++; return s })
			return nil, nil
		},
	})
	st := memstore.New()
	h := newHarness(t, st, withDomains(surfaced.DomainBinding{Domain: notes}),
		withLimits(surfaced.Limits{RestartBackoff: 10 * time.Millisecond, RestartMax: 1, RestartWindow: time.Hour}))
	id := h.create("")
	sum := h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary)
	c, _ := h.subscribe(id, sum.GetEpoch()+"-0") // every frame from the first
	isSession := func(f testkit.Frame) bool { return f.Kind == "session" }
	next := func(what string, pred func(testkit.Frame) bool) testkit.Frame {
		t.Helper()
		return c.Wait(t, 10*time.Second, what, func(f testkit.Frame) bool {
			if isSession(f) && availability(f) == "none" {
				t.Errorf("a %s session frame without surfaces: %s", f.Data["status"], f.Raw)
			}
			return pred(f)
		})
	}
	const (
		starting = "notes:native:true"
		ready    = "demo:agent:true,notes:native:true"
		crashed  = "demo:agent:false,notes:native:true"
		ended    = "demo:agent:false,notes:native:false"
	)
	for _, want := range []struct{ status, code, surfaces string }{
		{"starting", "", starting},
		{"ready", "", ready},
		{"error", "agent_crashed", crashed},
		{"starting", "", crashed},
		{"ready", "", ready},
		{"ended", "restart_exhausted", ended},
	} {
		f := next(want.status, isSession)
		if f.Data["status"] != want.status || (want.code != "" && f.Data["code"] != want.code) || availability(f) != want.surfaces {
			t.Fatalf("want a %s %s frame listing %s, got %s", want.status, want.code, want.surfaces, f.Raw)
		}
		if want.status == "ready" {
			h.cmd(id, "demo", "crash", nil)
		}
	}

	sum = h.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary)
	if sum.GetStatus() != "ended" || summaryAvailability(sum.GetSurfaces()) != ended {
		t.Fatalf("the summary of the ended session: %s %s", sum.GetStatus(), summaryAvailability(sum.GetSurfaces()))
	}
	list := h.req(id, &pb.ListSurfaces{Caller: me}).(*pb.SurfaceList)
	if summaryAvailability(list.GetSurfaces()) != ended {
		t.Fatalf("the surface list of the ended session: %s", summaryAvailability(list.GetSurfaces()))
	}
	for _, domain := range []string{"notes", "demo"} {
		res := h.req(id, &pb.RunCommand{Caller: me, Domain: domain, Action: "add"}).(*pb.CommandResult)
		if res.GetRefused().GetCode() != session.CodeEnded {
			t.Fatalf("a command for %s in the ended session: %v, want refused %s", domain, res, session.CodeEnded)
		}
	}

	// A new runtime on the same store activates the ended session from its
	// row: the same domains, none available; the agent-hosted one with its
	// rev (its commands are not known any more).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, st, withDomains(surfaced.DomainBinding{Domain: notes}))
	sum2 := h2.req(id, &pb.GetSummary{Caller: me}).(*pb.SessionSummary)
	if sum2.GetStatus() != "ended" || summaryAvailability(sum2.GetSurfaces()) != ended {
		t.Fatalf("the ended session activated again: %s %s", sum2.GetStatus(), summaryAvailability(sum2.GetSurfaces()))
	}
	for _, s := range sum2.GetSurfaces() {
		if s.GetDomain() == "demo" && s.GetRev() != 1 {
			t.Fatalf("demo listed at rev %d, want its stored rev 1", s.GetRev())
		}
		if s.GetDomain() == "notes" && !slices.Equal(s.GetCommands(), []string{"add"}) {
			t.Fatalf("notes listed with commands %v", s.GetCommands())
		}
	}
}
