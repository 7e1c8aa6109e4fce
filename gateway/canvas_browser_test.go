package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// canvasAgent runs examples/canvas-agent as `surfaced run ./examples/canvas-agent`
// does: named by its manifest, its panel served from its ui/ folder, its
// scripted model (no SURFACED_LLM_BASE_URL). It returns the binary's path too,
// to find the agent's process.
func canvasAgent(t *testing.T) ([]daemon.Option, string) {
	t.Helper()
	m, err := config.LoadManifest(filepath.Join(testkit.RepoRoot(), "examples/canvas-agent"))
	if err != nil {
		t.Fatal(err)
	}
	dir, panels := m.UI()
	if panels["canvas"] == "" {
		t.Fatalf("the canvas agent's manifest names no canvas panel: %v", panels)
	}
	bin := testkit.Build(t, "./examples/canvas-agent")
	return []daemon.Option{
		daemon.Agents(surfaced.AgentSpec{Name: m.Name, Title: m.Title, Argv: []string{bin},
			// Slow enough stages that the page shows each; no real model.
			Env: []string{"SURFACED_CANVAS_STAGE_MS=500", "SURFACED_LLM_BASE_URL="}}),
		daemon.AgentUI(m.Name, gateway.AgentUI{Dir: dir, Panels: panels}),
		// A crashed agent stays down long enough for the page to show it.
		daemon.Limits(surfaced.Limits{RestartBackoff: 1500 * time.Millisecond}),
	}, bin
}

// agentPID is the pid of the one running process of the binary bin that is
// a child of this test process (the daemon runs in it).
func agentPID(t *testing.T, bin string) int {
	t.Helper()
	var pid int
	testkit.Eventually(t, 20*time.Second, func() bool {
		pids := testkit.ChildPIDs(bin)
		pid = 0
		if len(pids) > 0 {
			pid = pids[len(pids)-1]
		}
		return pid > 0
	}, "the canvas agent's process")
	return pid
}

// quadrantsPNG is a w×h PNG whose four quadrants are red, green, blue and
// white, so that a rotation shows.
func quadrantsPNG(t *testing.T, w, h int) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.NRGBA{200, 60, 50, 255}
			switch {
			case x >= w/2 && y < h/2:
				c = color.NRGBA{60, 170, 90, 255}
			case x < w/2 && y >= h/2:
				c = color.NRGBA{50, 90, 200, 255}
			case x >= w/2 && y >= h/2:
				c = color.NRGBA{235, 225, 200, 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "quadrants.png")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// canvasEval evaluates a JavaScript expression to a string ("" on error).
func canvasEval(ctx context.Context, expr string) string {
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { try { return String(`+expr+`) } catch (e) { return "" } })()`))
	if err != nil {
		return ""
	}
	return got
}

// canvasWait waits until the expression's value satisfies ok.
func canvasWait(t *testing.T, ctx context.Context, what, expr string, ok func(string) bool) string {
	t.Helper()
	var last string
	testkit.Eventually(t, 30*time.Second, func() bool {
		last = canvasEval(ctx, expr)
		return ok(last)
	}, "%s (last: %v)", what, &last)
	return last
}

func equals(want string) func(string) bool { return func(s string) bool { return s == want } }

// The canvas page's view of itself, one line to compare.
const (
	jsThumbs    = `Array.from(document.querySelectorAll('[data-testid="canvas-thumb"]')).map(b => b.dataset.id).reverse().join(",")`
	jsCurrent   = `document.querySelector('[data-testid="canvas-stage"]').dataset.current`
	jsAvailable = `document.querySelector('[data-testid="canvas-root"]').dataset.available`
	// The stage's image has loaded (from its signed URL) and its size.
	jsStageImage = `(() => { const i = document.querySelector('[data-testid="canvas-stage-image"]');
		return i && i.complete && i.naturalWidth ? i.naturalWidth + "x" + i.naturalHeight + " " + i.dataset.att : "" })()`
	jsLoadedThumbs = `Array.from(document.querySelectorAll('[data-testid="canvas-thumb"] img')).filter(i => i.complete && i.naturalWidth > 0).length`
)

// The Canvas workbench end to end in chromium, on a real daemon running
// examples/canvas-agent with its scripted model, with an editor on the same
// session over ACP: upload an image; rotate it (a derived version with its
// lineage); ask the chat to make it brighter (the live preview's stages,
// then a new version; the edit in the chat, and in the editor as a tool call
// with the new image as a resource link); restart the agent (the gallery
// rebuilt, the same items); kill it (read-only, then back); reload (all as
// it was). No frame of the session's stream carries image bytes or comes
// near 64 KiB.
func TestBrowserCanvasWorkbench(t *testing.T) {
	opts, bin := canvasAgent(t)
	d := daemon.Start(t, opts...)
	ctx := testkit.Browser(t)
	errs := consoleErrors(ctx)

	// The editor opens the session; the browser and a plain SSE client watch it.
	ed := d.ACPClient()
	ed.Initialize()
	sid := ed.NewSession(daemon.TempDir(t))
	stream := testkit.OpenSSE(t, d.URL+"/api/sessions/"+sid+"/events", http.Header{"Authorization": {"Bearer " + d.Token}})
	stream.Wait(t, 20*time.Second, "the session ready", testkit.IsStatus("ready"))

	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(d.URL+"/?token="+d.Token+"#/s/"+sid),
	); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the canvas panel, live", jsAvailable, equals("true"))
	if got := canvasEval(ctx, `document.querySelector('[data-testid="canvas-empty"]').hidden`); got != "false" {
		t.Fatalf("an empty canvas shows no empty state (hidden=%s)", got)
	}
	shot(t, ctx, "canvas-empty-1400x900", false)

	// Upload: the image is stored as an artifact, registered, and on the stage.
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(tid("canvas-file"), []string{quadrantsPNG(t, 640, 400)})); err != nil {
		t.Fatal(err)
	}
	original := canvasWait(t, ctx, "the uploaded image in the gallery", jsThumbs, func(s string) bool { return strings.HasPrefix(s, "att_") })
	canvasWait(t, ctx, "the upload on the stage", jsStageImage, equals("640x400 "+original))
	canvasWait(t, ctx, "the original's lineage", elemTextCanvas("canvas-lineage"), equals("Original"))

	// Rotate: a new version derived from the upload, on the stage, its lineage shown.
	if err := chromedp.Do(ctx, chromedp.Click(tid("canvas-edit-rotr"))); err != nil {
		t.Fatal(err)
	}
	thumbs := canvasWait(t, ctx, "the rotated version", jsThumbs, func(s string) bool { return len(strings.Split(s, ",")) == 2 })
	rotated := strings.Split(thumbs, ",")[1]
	canvasWait(t, ctx, "the rotated image on the stage", jsStageImage, equals("400x640 "+rotated))
	canvasWait(t, ctx, "the rotation's title", elemTextCanvas("canvas-stage-title"), equals("Rotated 90°"))
	canvasWait(t, ctx, "the rotation's lineage", `Array.from(document.querySelectorAll('[data-testid="canvas-lineage-link"]')).map(e => e.dataset.id + " " + e.textContent).join("|")`,
		equals(original+" quadrants.png"))
	canvasWait(t, ctx, "the rotation's params", elemTextCanvas("canvas-params"), equals("degrees90"))

	// The chat: "make it brighter" goes through the model; the page shows the
	// live preview's stages (each a real image), then the new version.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.__canvasStages = [];
		const p = document.querySelector('[data-testid="canvas-live-preview"]');
		const seen = () => {
			const img = p.querySelector('[data-testid="canvas-preview-image"]');
			const st = p.dataset.stage;
			if (!p.hidden && st && !window.__canvasStages.includes(st) && img.dataset.att) window.__canvasStages.push(st);
		};
		new MutationObserver(seen).observe(p, { attributes: true, subtree: true });
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(tid("composer-input"), "make it brighter"),
		chromedp.Click(tid("composer-send")),
	); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the live preview", `(() => { const p = document.querySelector('[data-testid="canvas-live-preview"]'); return !p.hidden })()`, equals("true"))
	shot(t, ctx, "canvas-live-preview-1400x900", false)
	thumbs = canvasWait(t, ctx, "the brighter version", jsThumbs, func(s string) bool { return len(strings.Split(s, ",")) == 3 })
	brighter := strings.Split(thumbs, ",")[2]
	canvasWait(t, ctx, "the live preview gone", `document.querySelector('[data-testid="canvas-live-preview"]').hidden`, equals("true"))
	canvasWait(t, ctx, "the stages the page showed", `window.__canvasStages.join(",")`, equals("sketching,refining,detailing"))
	canvasWait(t, ctx, "the brighter image on the stage", jsCurrent, equals(brighter))
	canvasWait(t, ctx, "the brighter image's lineage", `Array.from(document.querySelectorAll('[data-testid="canvas-lineage-link"]')).map(e => e.dataset.id).join(",")`,
		equals(rotated+","+original))
	canvasWait(t, ctx, "the edit in the chat history", allTextCanvas("chat-tool")+` + " " + `+allTextCanvas("chat-message-assistant"),
		func(s string) bool { return strings.Contains(s, "image_edit") && strings.Contains(s, brighter) })
	canvasWait(t, ctx, "the request in the chat history", allTextCanvas("chat-message-user"), func(s string) bool { return strings.Contains(s, "make it brighter") })
	canvasWait(t, ctx, "every thumbnail loaded", jsLoadedThumbs, equals("3"))
	shot(t, ctx, "canvas-1400x900", false)

	// The editor saw the same turn: the tool call, its result naming the new
	// image as a resource link whose URL serves it.
	link := canvasToolLink(t, ed.Stream(sid), "image_edit")
	if uri, _ := link["uri"].(string); link["mimeType"] != "image/png" || !strings.HasPrefix(uri, d.URL+"/api/artifacts/"+brighter) {
		t.Fatalf("the editor's resource link %v, want %s", link, brighter)
	} else if res, err := http.Get(uri); err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("the link serves %v %v", res, err)
	} else {
		res.Body.Close()
	}

	// Restart the agent (the daemon restarts a crashed agent): the new
	// process hydrates the canvas from the session's artifacts (a new
	// snapshot: the same items, the same image on the stage).
	before := canvasEval(ctx, jsThumbs)
	mark := len(stream.All())
	pid := agentPID(t, bin)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return agentPID(t, bin) != pid }, "the agent restarted")
	canvasWait(t, ctx, "the canvas live again", jsAvailable, equals("true"))
	canvasWait(t, ctx, "the gallery rebuilt", jsThumbs, equals(before))
	canvasWait(t, ctx, "the stage after the restart", jsCurrent, equals(brighter))
	var counts []int // the canvas snapshots' item counts since the restart
	testkit.Eventually(t, 10*time.Second, func() bool {
		counts = counts[:0]
		for _, f := range stream.All()[mark:] {
			if v, _ := f.Data["value"].(map[string]any); f.Kind == "state" && f.Data["key"] == "surface:canvas" {
				items, _ := v["items"].([]any)
				counts = append(counts, len(items))
			}
		}
		return len(counts) > 0
	}, "the hydrated snapshot on the stream")
	if slices.ContainsFunc(counts, func(n int) bool { return n != 3 }) {
		t.Fatalf("after the restart the canvas snapshots had %v items, want the 3 rebuilt", counts)
	}

	// Kill it: the panel turns read-only and says so, keeping the gallery;
	// then the daemon restarts it and the panel is live again.
	if err := syscall.Kill(agentPID(t, bin), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the read-only notice", `(() => { const n = document.querySelector('[data-testid="canvas-unavailable"]'); return n.hidden ? "" : n.textContent })()`,
		func(s string) bool { return strings.Contains(s, "surface unavailable: read-only") })
	if got := canvasEval(ctx, `[...document.querySelectorAll('[data-testid^="canvas-edit-"], [data-testid="canvas-upload"], [data-testid="canvas-ask"]')].every(b => b.disabled)`); got != "true" {
		t.Fatal("the edit buttons are enabled while the canvas is read-only")
	}
	if got := canvasEval(ctx, jsThumbs); got != before {
		t.Fatalf("the read-only gallery shows %s, was %s", got, before)
	}
	shot(t, ctx, "canvas-readonly-1400x900", false)
	canvasWait(t, ctx, "the canvas live after the crash", jsAvailable, equals("true"))
	canvasWait(t, ctx, "the gallery after the crash", jsThumbs, equals(before))

	// Reload: everything as it was, the chat history too.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the canvas after the reload", jsAvailable, equals("true"))
	canvasWait(t, ctx, "the gallery after the reload", jsThumbs, equals(before))
	canvasWait(t, ctx, "the stage after the reload", jsStageImage, func(s string) bool { return strings.HasSuffix(s, " "+brighter) && strings.HasPrefix(s, "400x640") })
	canvasWait(t, ctx, "the lineage after the reload", `Array.from(document.querySelectorAll('[data-testid="canvas-lineage-link"]')).map(e => e.dataset.id).join(",")`,
		equals(rotated+","+original))
	canvasWait(t, ctx, "the chat after the reload", allTextCanvas("chat-message-user"), func(s string) bool { return strings.Contains(s, "make it brighter") })
	canvasWait(t, ctx, "the thumbnails after the reload", jsLoadedThumbs, equals("3"))

	// A picture from the chat: image_generate, a new image with no source.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(tid("composer-input"), "draw a sunset over the sea"),
		chromedp.Click(tid("composer-send")),
	); err != nil {
		t.Fatal(err)
	}
	thumbs = canvasWait(t, ctx, "the generated image", jsThumbs, func(s string) bool { return len(strings.Split(s, ",")) == 4 })
	generated := strings.Split(thumbs, ",")[3]
	canvasWait(t, ctx, "the generated image on the stage", jsStageImage, func(s string) bool { return strings.HasSuffix(s, " "+generated) })
	canvasWait(t, ctx, "its lineage", elemTextCanvas("canvas-lineage"), func(s string) bool { return strings.HasPrefix(s, "Generated from a prompt") })
	canvasWait(t, ctx, "the live preview gone", `document.querySelector('[data-testid="canvas-live-preview"]').hidden`, equals("true"))
	canvasWait(t, ctx, "every thumbnail loaded", jsLoadedThumbs, equals("4"))
	shot(t, ctx, "canvas-workbench-1400x900", false)

	// "Ask about it" on an older version: the conversation bridge sends it to
	// the chat as a user message with the image attached, and the next
	// request ("that last one") edits that image.
	if err := chromedp.Do(ctx, chromedp.Click(`[data-testid="canvas-thumb"][data-id="`+rotated+`"]`)); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the rotated version selected", jsCurrent, equals(rotated))
	if err := chromedp.Do(ctx, chromedp.Click(tid("canvas-ask"))); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the image in the chat", allTextCanvas("chat-message-user"), func(s string) bool { return strings.Contains(s, "Let's talk about this image") })
	canvasWait(t, ctx, "the model's answer", allTextCanvas("chat-message-assistant"), func(s string) bool { return strings.Contains(s, "I have "+rotated+" in view now") })
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(tid("composer-input"), "make that last one black and white"),
		chromedp.Click(tid("composer-send")),
	); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the black and white version", jsThumbs, func(s string) bool { return len(strings.Split(s, ",")) == 5 })
	canvasWait(t, ctx, "it derives from the image asked about", `Array.from(document.querySelectorAll('[data-testid="canvas-lineage-link"]')).map(e => e.dataset.id).join(",")`,
		equals(rotated+","+original))

	// The phone size.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(tid("canvas-root"))); err != nil {
		t.Fatal(err)
	}
	shot(t, ctx, "canvas-390x844", false)

	checkCanvasFrames(t, stream.All())
	if e := errs(); len(e) != 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}

// canvasToolLink waits on an editor's session stream for the finished call
// of tool and returns its one resource_link block.
func canvasToolLink(t *testing.T, s *testkit.SSE, tool string) map[string]any {
	t.Helper()
	var calls = map[string]bool{} // toolCallId of tool
	var link map[string]any
	s.Wait(t, 20*time.Second, "the editor's "+tool+" call, finished", func(e testkit.Event) bool {
		p, _ := e.Data["params"].(map[string]any)
		u, _ := p["update"].(map[string]any)
		id, _ := u["toolCallId"].(string)
		if u["sessionUpdate"] == "tool_call" && strings.Contains(fmt.Sprint(u["title"], u["rawInput"]), tool) {
			calls[id] = true
		}
		if u["sessionUpdate"] != "tool_call_update" || u["status"] != "completed" || !calls[id] {
			return false
		}
		content, _ := u["content"].([]any)
		for _, c := range content {
			if b, _ := c.(map[string]any)["content"].(map[string]any); b["type"] == "resource_link" {
				if link != nil {
					t.Fatalf("more than one resource link: %v", u)
				}
				link = b
			}
		}
		if link == nil {
			t.Fatalf("the finished %s call has no resource link: %v", tool, u)
		}
		return true
	})
	return link
}

// checkCanvasFrames: no frame of the stream comes near 64 KiB or carries an
// image's bytes (a data: URL, base64 PNG or JPEG); the canvas snapshots
// carry ids only.
func checkCanvasFrames(t *testing.T, frames []testkit.Event) {
	t.Helper()
	snapshots := 0
	for _, f := range frames {
		if len(f.Raw) > 64<<10 {
			t.Errorf("a %s frame of %d bytes", f.Kind, len(f.Raw))
		}
		for _, sig := range []string{"data:image", "iVBORw0KGgo", "/9j/", ";base64,"} {
			if strings.Contains(f.Raw, sig) {
				t.Errorf("a %s frame carries %q: %.200s", f.Kind, sig, f.Raw)
			}
		}
		if f.Kind == "state" && f.Data["key"] == "surface:canvas" {
			snapshots++
			raw, _ := json.Marshal(f.Data["value"])
			var g struct {
				Items []map[string]any `json:"items"`
			}
			if err := json.Unmarshal(raw, &g); err != nil {
				t.Errorf("a canvas snapshot that does not decode: %s", raw)
			}
			for _, it := range g.Items {
				for k := range it {
					if !slices.Contains([]string{"id", "derivedFrom", "params", "createdAt", "name"}, k) {
						t.Errorf("a gallery item with %q: %v", k, it)
					}
				}
			}
		}
	}
	if snapshots < 5 {
		t.Errorf("the stream carried %d canvas snapshots; the test made more", snapshots)
	}
}

func elemTextCanvas(id string) string {
	return `(document.querySelector(` + jsString(tid(id)) + `)?.textContent ?? "").trim()`
}

func allTextCanvas(id string) string {
	return `Array.from(document.querySelectorAll(` + jsString(tid(id)) + `)).map(e => e.textContent).join("\n")`
}
