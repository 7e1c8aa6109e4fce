package gateway_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// sunsetPNG writes a w×h gradient picture (sky, sun, sea) named name and
// returns its path.
func sunsetPNG(t *testing.T, name string, w, h int) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	horizon := h * 3 / 5
	for y := range h {
		for x := range w {
			var c color.NRGBA
			if y < horizon {
				f := float64(y) / float64(horizon)
				c = color.NRGBA{uint8(40 + 215*f), uint8(60 + 90*f), uint8(140 - 60*f), 255}
			} else {
				f := float64(y-horizon) / float64(h-horizon)
				c = color.NRGBA{uint8(30 + 20*f), uint8(70 + 30*f), uint8(120 + 40*f), 255}
			}
			dx, dy := float64(x-w/2), float64(y-horizon+h/10)
			if d := math.Hypot(dx, dy); d < float64(h)/7 && y < horizon {
				c = color.NRGBA{255, 214, 120, 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// bytesFile writes n bytes to a file named name and returns its path.
func bytesFile(t *testing.T, name string, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, bytes.Repeat([]byte("surfaced "), n/9+1)[:n], 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	// The composer's chips: name state progress, one a line.
	jsDrafts = `Array.from(document.querySelectorAll('[data-testid="composer-attachment"]')).map(e => e.dataset.name + " " + e.dataset.state + " " + e.dataset.progress).join("\n")`
	// The user messages' attachments: kind (image loaded or file name), one a message.
	jsChatAttachments = `Array.from(document.querySelectorAll('[data-testid="chat-message-user"]')).map(m =>
		Array.from(m.querySelectorAll('[data-testid="chat-attachment"]')).map(a => a.dataset.kind === "image"
			? "image:" + (a.querySelector("img").complete && a.querySelector("img").naturalWidth > 0 ? "loaded" : "loading")
			: a.dataset.kind + ":" + a.textContent).join(",")).join("\n")`
)

// Attachments in the web UI, in chromium on a real daemon and fakeagent: a
// picture by the file input and one by a dropped file (with a text file),
// each uploading with its progress; a file over the limit and one over the
// session's quota refused with the daemon's reason, and removable; a removed
// upload deleted; the prompt sent with the attachments, shown as thumbnails
// and a file chip, a thumbnail opening the image; all of it again after a
// reload; and the generic panel showing the att_ id of its snapshot as a
// thumbnail. At a desktop and a phone size.
func TestBrowserAttachments(t *testing.T) {
	ctx := testkit.Browser(t)
	errs := consoleErrors(ctx)
	d := daemon.Start(t,
		daemon.Agents(surfaced.AgentSpec{Name: "fake", Title: "Fake", Argv: testkit.FakeAgent(t, "-surfaces", "gallery")}),
		daemon.Config(func(c *surfaced.Config) {
			c.Artifacts = artifact.Limits{MaxBytes: 3 << 20, SessionBytes: 5 << 20}
		}))
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(d.URL+"/?token="+d.Token),
		chromedp.WaitVisible(tid("composer-input")),
	); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the session's generic panel", `document.querySelector('[data-testid="surface-gallery"]') ? "yes" : ""`, equals("yes"))
	// Every state a chip goes through, as the page showed it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.__draftStates = [];
		new MutationObserver(() => {
			for (const e of document.querySelectorAll('[data-testid="composer-attachment"]')) {
				const s = e.dataset.name + " " + e.dataset.state + " " + e.dataset.progress;
				if (!window.__draftStates.includes(s)) window.__draftStates.push(s);
			}
		}).observe(document.querySelector('[data-testid="composer-attachments"]'), { attributes: true, subtree: true, childList: true });
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}

	// A picture by the paperclip's file input.
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(tid("composer-file"), []string{sunsetPNG(t, "sunset.png", 960, 600)})); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the picture uploaded", jsDrafts, equals("sunset.png done 100"))
	canvasWait(t, ctx, "its preview on the chip", `document.querySelector('[data-name="sunset.png"] img').naturalWidth`, equals("960"))
	canvasWait(t, ctx, "its upload's progress shown", `window.__draftStates.filter(s => s.startsWith("sunset.png uploading")).length > 0`, equals("true"))

	// A drawn picture and a text file dropped on the chat.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(async () => {
		const c = document.createElement("canvas");
		c.width = 640; c.height = 480;
		const g = c.getContext("2d");
		const grad = g.createLinearGradient(0, 0, 640, 480);
		grad.addColorStop(0, "#1d4ed8"); grad.addColorStop(1, "#a855f7");
		g.fillStyle = grad; g.fillRect(0, 0, 640, 480);
		g.fillStyle = "#fde68a"; g.beginPath(); g.arc(420, 200, 90, 0, 2 * Math.PI); g.fill();
		g.fillStyle = "#0f172a"; g.fillRect(80, 320, 480, 60);
		const blob = await new Promise(r => c.toBlob(r, "image/png"));
		const dt = new DataTransfer();
		dt.items.add(new File([blob], "sketch.png", { type: "image/png" }));
		dt.items.add(new File(["# Notes\nthe sun sets at 21:04\n"], "notes.md", { type: "text/markdown" }));
		const target = document.querySelector('[data-testid="chat-log"]');
		target.dispatchEvent(new DragEvent("dragenter", { dataTransfer: dt, bubbles: true, cancelable: true }));
		target.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
		window.__dropZone = !document.querySelector('[data-testid="drop-zone"]').hidden;
		target.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
		return true;
	})()`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	if got := canvasEval(ctx, `window.__dropZone + " " + document.querySelector('[data-testid="drop-zone"]').hidden`); got != "true true" {
		t.Errorf("drop zone shown while dragging, hidden after the drop = %s", got)
	}
	canvasWait(t, ctx, "the dropped files uploaded", jsDrafts, equals("sunset.png done 100\nsketch.png done 100\nnotes.md done 100"))

	// Too large for one artifact (3 MiB here), then over the session's quota
	// (5 MiB): each chip says why, and the daemon's reason is in a toast.
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(tid("composer-file"), []string{bytesFile(t, "recording.wav", 4<<20)})); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the file over the limit refused", `document.querySelector('[data-name="recording.wav"]').dataset.state`, equals("error"))
	canvasWait(t, ctx, "the reason on its chip", `document.querySelector('[data-name="recording.wav"] .draft-status').textContent`, equals("The file is too large"))
	canvasWait(t, ctx, "the reason in a toast", `Array.from(document.querySelectorAll('[data-testid="toast-error"]')).map(e => e.textContent).join("|")`,
		func(s string) bool {
			return strings.Contains(s, "recording.wav was not attached: the file is too large")
		})
	shot(t, ctx, "attachments-composer-1400x900", false)
	// Sending with a failed chip is refused until it is removed.
	if err := chromedp.Do(ctx, chromedp.Click(tid("composer-send"))); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the refusal to send", `Array.from(document.querySelectorAll('[data-testid="toast-error"]')).map(e => e.textContent).join("|")`,
		func(s string) bool { return strings.Contains(s, "Remove the attachments that failed to upload") })
	if n := canvasEval(ctx, `document.querySelectorAll('[data-testid="chat-message-user"]').length`); n != "0" {
		t.Fatalf("a message was sent with a failed attachment (%s in the chat)", n)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`[data-name="recording.wav"] [data-testid="composer-attachment-remove"]`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(tid("composer-file"), []string{bytesFile(t, "dataset.csv", 2<<20+512<<10)})); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the first big file uploaded", `document.querySelector('[data-name="dataset.csv"]').dataset.state`, equals("done"))
	dataset := canvasEval(ctx, `document.querySelector('[data-name="dataset.csv"]').dataset.artifactId`)
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(tid("composer-file"), []string{bytesFile(t, "dataset-2.csv", 2<<20+512<<10)})); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the quota's refusal on the chip", `document.querySelector('[data-name="dataset-2.csv"] .draft-status').textContent`, equals("This session's storage is full"))
	// Removing an uploaded file deletes its artifact.
	if err := chromedp.Do(ctx,
		chromedp.Click(`[data-name="dataset-2.csv"] [data-testid="composer-attachment-remove"]`),
		chromedp.Click(`[data-name="dataset.csv"] [data-testid="composer-attachment-remove"]`),
	); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the removed chips gone", jsDrafts, equals("sunset.png done 100\nsketch.png done 100\nnotes.md done 100"))
	sid := canvasEval(ctx, `decodeURIComponent(location.hash.slice(4))`)
	testkit.Eventually(t, 10*time.Second, func() bool {
		st, _ := d.Do("GET", "/api/sessions/"+sid+"/artifacts/"+dataset, nil)
		return st == http.StatusNotFound
	}, "the removed upload %s deleted", dataset)

	// Send: the prompt carries the three attachments; the chat shows two
	// thumbnails and a file chip, and the composer is empty again.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(tid("composer-input"), "what do you see in these?"),
		chromedp.Click(tid("composer-send")),
	); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the attachments in the chat", jsChatAttachments, equals("image:loaded,image:loaded,file:MDnotes.md30 B"))
	canvasWait(t, ctx, "the composer emptied", jsDrafts+` + "|" + document.querySelector('[data-testid="composer-attachments"]').hidden`, equals("|true"))
	canvasWait(t, ctx, "the agent's answer", `Array.from(document.querySelectorAll('[data-testid="chat-text"]')).map(e => e.textContent).join("|")`,
		equals("echo: what do you see in these?"))
	ids := canvasEval(ctx, `Array.from(document.querySelectorAll('[data-testid="chat-attachment"]')).map(a => a.dataset.artifactId).join(",")`)
	att := strings.Split(ids, ",")
	if len(att) != 3 || !strings.HasPrefix(att[0], "att_") {
		t.Fatalf("attachment ids in the chat: %q", ids)
	}
	// The transcript names them.
	if st, b := d.Do("GET", "/api/sessions/"+sid+"/messages", nil); st != 200 || !strings.Contains(string(b), `"attachmentIds":["`+att[0]+`","`+att[1]+`","`+att[2]+`"]`) {
		t.Fatalf("transcript %d %s", st, b)
	}

	// A thumbnail opens the image.
	if err := chromedp.Do(ctx, chromedp.Click(`[data-testid="chat-attachment"][data-kind="image"]`)); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the lightbox with the picture", `(() => { const b = document.querySelector('[data-testid="lightbox"]'); const i = b.querySelector("img");
		return b.open + " " + b.dataset.artifactId + " " + (i.complete ? i.naturalWidth + "x" + i.naturalHeight : "") + " " + document.querySelector('[data-testid="lightbox-name"]').textContent })()`,
		equals("true "+att[0]+" 960x600 sunset.png"))
	shot(t, ctx, "attachments-lightbox-1400x900", false)
	if err := chromedp.Do(ctx, chromedp.Click(tid("lightbox-close"))); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the lightbox closed", `document.querySelector('[data-testid="lightbox"]').open`, equals("false"))

	// The generic panel: a snapshot naming an artifact shows it as a thumbnail.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(tid("surface-gallery-action"), "fill"),
		chromedp.SetValue(tid("surface-gallery-args"), `{"text":"`+att[1]+`"}`),
		chromedp.Click(tid("surface-gallery-run")),
	); err != nil {
		t.Fatal(err)
	}
	jsPanel := `Array.from(document.querySelectorAll('[data-testid="surface-gallery-artifact"]')).map(a => a.dataset.artifactId + " " + a.dataset.kind + " " +
		(a.querySelector("img") && a.querySelector("img").complete ? a.querySelector("img").naturalWidth : 0)).join(",")`
	canvasWait(t, ctx, "the snapshot's artifact as a thumbnail", jsPanel, equals(att[1]+" image 640"))
	shot(t, ctx, "attachments-1400x900", false)

	// After a reload: the history's message with its thumbnails, the panel's.
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(tid("composer-input"))); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "the attachments in the history", `document.querySelector('[data-testid="chat-history"] [data-testid="chat-message-user"]') ? `+jsChatAttachments+` : ""`,
		equals("image:loaded,image:loaded,file:MDnotes.md30 B"))
	canvasWait(t, ctx, "the panel's thumbnail after the reload", jsPanel, equals(att[1]+" image 640"))

	// At a phone's size.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(tid("composer-file"), []string{sunsetPNG(t, "evening sky over the harbour.png", 600, 400)})); err != nil {
		t.Fatal(err)
	}
	canvasWait(t, ctx, "an upload on the phone", jsDrafts, equals("evening sky over the harbour.png done 100"))
	shot(t, ctx, "attachments-390x844", true)
	if e := errs(); len(e) != 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}
