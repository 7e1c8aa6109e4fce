package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/surface"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/clock"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// restartPage is the web UI on a session whose agent the test kills: the
// demo domain hosted by the agent (its own panel, from the demo agent's ui/
// folder), a native domain beside it (the generic panel), and a bridge of
// /surfaced.js on the demo domain. The sessions run on a fake clock, so the
// restart back-off lasts until the test advances it.
type restartPage struct {
	t     *testing.T
	d     *daemon.Daemon
	clock *clock.Fake
	agent string // the agent's binary
	gate  string // while this file exists a starting agent does not get ready
	id    string
	ctx   context.Context
}

// pageView is what the page shows of the session's surfaces.
type pageView struct {
	Demo         string `json:"demo"`         // the demo panel's data-available
	DemoControls bool   `json:"demoControls"` // its increment button is there
	DemoNotice   string `json:"demoNotice"`   // its read-only or waiting notice
	NotesForm    bool   `json:"notesForm"`    // the native panel's command form is there
	NotesNotice  string `json:"notesNotice"`  // its read-only notice
	Bridge       string `json:"bridge"`       // the bridge's mode
	Header       string `json:"header"`       // the session's status line
}

func (v pageView) String() string { b, _ := json.Marshal(v); return string(b) }

// live: every panel takes commands and the bridge sends prompts.
func (v pageView) live() bool {
	return v.Demo == "true" && v.DemoControls && v.NotesForm && v.Bridge == "prompt"
}

// agentDown: the agent-hosted panel is read-only and the bridge
// unavailable; the native one takes commands (the session lives on).
func (v pageView) agentDown() bool {
	return v.Demo == "false" && !v.DemoControls && v.NotesForm && v.Bridge == "unavailable"
}

// ended: every panel is read-only and says why, and the bridge is
// unavailable.
func (v pageView) ended() bool {
	return v.Demo == "false" && !v.DemoControls && v.DemoNotice == "The session has ended: demo is read-only." &&
		!v.NotesForm && v.NotesNotice == "The session has ended: notes is read-only." && v.Bridge == "unavailable"
}

const jsPageView = `JSON.stringify((() => {
	const q = (id) => document.querySelector('[data-testid="' + id + '"]');
	const text = (id) => { const e = q(id); return e && e.isConnected ? e.textContent.trim() : ""; };
	const demo = q("surface-demo");
	return {
		demo: demo ? demo.dataset.available || "" : "",
		demoControls: !!q("surface-demo-increment"),
		demoNotice: text("surface-demo-degraded") || text("surface-demo-waiting"),
		notesForm: !!q("surface-notes-form"),
		notesNotice: text("surface-notes-unavailable"),
		bridge: window.__bridge ? window.__bridge.mode : "",
		header: text("session-status"),
	};
})())`

func newRestartPage(t *testing.T) *restartPage {
	t.Helper()
	m, err := config.LoadManifest(filepath.Join(testkit.RepoRoot(), "examples/surface-demo-agent"))
	if err != nil {
		t.Fatal(err)
	}
	dir, panels := m.UI()
	notes := surface.Define("notes", struct{ N int }{}, map[string]surface.Command[struct{ N int }]{
		"add": func(ctx *surface.Ctx[struct{ N int }], _ json.RawMessage) (any, error) {
			ctx.SetState(func(s struct{ N int }) struct{ N int } { s.N++; return s })
			return nil, nil
		},
	})
	p := &restartPage{t: t, clock: clock.NewFake(time.Now()), gate: filepath.Join(t.TempDir(), "gate")}
	// The fake agent hosts "demo" with the demo agent's state ({count,
	// log}), so the demo agent's own panel shows it; -ready-gate lets the
	// test hold a restarted agent in starting.
	argv := testkit.FakeAgent(t, "-ready-gate", p.gate)
	p.agent = argv[0]
	p.d = daemon.Start(t,
		daemon.Agents(surfaced.AgentSpec{Name: m.Name, Title: m.Title, Argv: argv}),
		daemon.AgentUI(m.Name, gateway.AgentUI{Dir: dir, Panels: panels}),
		daemon.Domains(surfaced.DomainBinding{Domain: notes}),
		// Three restarts, a day's window (the fake clock moves a minute per
		// restart), a back-off of a second that only the test's Advance ends.
		daemon.Limits(surfaced.Limits{RestartMax: 3, RestartWindow: 24 * time.Hour, RestartBackoff: time.Second}),
		daemon.Config(func(c *surfaced.Config) { c.SessionClock = p.clock }))
	p.id = p.d.Create(nil)
	p.ctx = testkit.Browser(t)
	if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(p.d.URL+"/?token="+p.d.Token+"#/s/"+p.id)); err != nil {
		t.Fatal(err)
	}
	// A bridge of /surfaced.js on the demo domain, with a stream of its own.
	waitFor(t, p.ctx, "the page's /surfaced.js", `typeof Surfaced`, func(s string) bool { return s == "object" })
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`(() => {
		const s = new Surfaced.Client().session(`+jsString(p.id)+`);
		s.subscribe({});
		window.__bridge = s.bridge("demo");
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	p.waitView("every panel live", pageView.live)
	return p
}

func (p *restartPage) view() pageView {
	var v pageView
	_ = json.Unmarshal([]byte(evalString(p.ctx, jsPageView)), &v)
	return v
}

// waitView waits until the page shows what ok wants (up to a deadline: the
// page follows the stream, it is not timed).
func (p *restartPage) waitView(what string, ok func(pageView) bool) pageView {
	p.t.Helper()
	last := &lastView{}
	testkit.Eventually(p.t, 10*time.Second, func() bool {
		last.v = p.view()
		return ok(last.v)
	}, "the page: %s (it shows %v)", what, last)
	return last.v
}

type lastView struct{ v pageView }

func (l *lastView) String() string { return l.v.String() }

// waitServer waits until the daemon says the session's status is status
// (and code, when given).
func (p *restartPage) waitServer(status, code string) {
	p.t.Helper()
	got := &lastValue{}
	testkit.Eventually(p.t, 20*time.Second, func() bool {
		st, out := p.d.JSON("GET", "/api/sessions/"+p.id, nil)
		if st != http.StatusOK {
			p.t.Fatalf("summary: %d %v", st, out)
		}
		got.s = fmt.Sprintf("%v", out)
		return out["status"] == status && (code == "" || out["code"] == code)
	}, "the session %s %s (it is %v)", status, code, got)
}

// kill sends SIGKILL to the agent's process (the one running).
func (p *restartPage) kill() {
	p.t.Helper()
	var pids []int
	testkit.Eventually(p.t, 20*time.Second, func() bool {
		pids = testkit.ChildPIDs(p.agent)
		return len(pids) == 1
	}, "one agent process")
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
}

// restart ends the back-off: the restart timer is armed, the clock moves past
// it.
func (p *restartPage) restart() {
	p.t.Helper()
	if !p.clock.WaitPending(1, 20*time.Second) {
		p.t.Fatal("no restart timer armed")
	}
	p.clock.Advance(time.Minute)
}

// spendRestarts kills the agent three times, each time once it is ready: the
// restart budget is spent, the fourth agent is starting. paced: the page is
// looked at in each state (live, then read-only in the back-off); otherwise
// the kills come as soon as the daemon says ready, whatever the page shows.
func (p *restartPage) spendRestarts(paced bool, beforeLast func()) {
	p.t.Helper()
	for crash := 1; crash <= 3; crash++ {
		p.waitServer("ready", "")
		if paced {
			p.waitView(fmt.Sprintf("every panel live before crash %d", crash), pageView.live)
		}
		p.kill()
		p.waitServer("error", "agent_crashed")
		if paced {
			p.waitView(fmt.Sprintf("the back-off after crash %d: the agent's panel read-only, the native one live", crash), pageView.agentDown)
		}
		if crash == 3 && beforeLast != nil {
			beforeLast()
		}
		p.restart()
	}
}

// An agent SIGKILLed past its restart budget (restart_max 3) leaves every
// panel that depends on it read-only, and the conversation bridge
// unavailable, wherever the last kill lands in the restart cycle: while the
// restarted agent is starting, right after it is ready, or while the page
// still shows the back-off of the crash before. Once the session has ended,
// the native panel is read-only too, and a reload shows the same.
func TestBrowserAgentKilledPastItsRestartBudget(t *testing.T) {
	t.Run("starting", func(t *testing.T) {
		p := newRestartPage(t)
		p.spendRestarts(true, func() {
			if err := os.WriteFile(p.gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		})
		// The fourth agent runs, held before agent_ready.
		p.waitServer("starting", "")
		p.waitView("the restarted agent starting", func(v pageView) bool {
			return v.Demo == "false" && v.DemoNotice == "Waiting for the agent…" && v.Bridge == "unavailable"
		})
		p.kill()
		// An exit before readiness does not end the session: it stays, in
		// error, its agent down (docs/agent-protocol.md).
		p.waitServer("error", "exit_before_ready")
		p.waitView("the agent's panel read-only (not waiting any more), the bridge unavailable", func(v pageView) bool {
			return v.agentDown() && v.DemoNotice == "demo surface unavailable (read-only)" && strings.HasPrefix(v.Header, "error: exit_before_ready")
		})
	})

	t.Run("ready", func(t *testing.T) {
		p := newRestartPage(t)
		p.spendRestarts(true, nil)
		p.waitServer("ready", "")
		p.waitView("every panel live again", pageView.live)
		p.kill()
		p.waitServer("ended", "restart_exhausted")
		p.waitView("every panel read-only, the bridge unavailable", pageView.ended)
		saveScreenshot(t, p.ctx, "ended-session-1400x900", 1400, 900)
		saveScreenshot(t, p.ctx, "ended-session-390x844", 390, 844)
		// On a phone the panels come after the conversation.
		if err := chromedp.Do(p.ctx, chromedp.ScrollIntoView(tid("surface-demo"))); err != nil {
			t.Fatal(err)
		}
		saveScreenshot(t, p.ctx, "ended-session-panels-390x844", 390, 844)
		if got := evalString(p.ctx, `document.querySelector('[data-testid="composer-input"]').disabled + " " + document.querySelector('[data-testid="session-end"]').hidden`); got != "true true" {
			t.Fatalf("the composer of an ended session must be disabled and End session hidden (disabled, hidden: %s)", got)
		}
		if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(1400, 900), chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`(() => {
			const s = new Surfaced.Client().session(`+jsString(p.id)+`);
			s.subscribe({});
			window.__bridge = s.bridge("demo");
			return true;
		})()`)); err != nil {
			t.Fatal(err)
		}
		v := p.waitView("the ended session opened again: every panel read-only", pageView.ended)
		if !strings.HasPrefix(v.Header, "ended") {
			t.Fatalf("the header says %q", v.Header)
		}
	})

	t.Run("backoff", func(t *testing.T) {
		p := newRestartPage(t)
		p.spendRestarts(false, nil)
		p.waitServer("ready", "")
		p.kill()
		p.waitServer("ended", "restart_exhausted")
		p.waitView("every panel read-only, the bridge unavailable", pageView.ended)
	})
}
