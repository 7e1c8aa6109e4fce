package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/store/sqlite"
)

// rangedDownload is what the page reports of its downloads.
type rangedDownload struct {
	Statuses []int    `json:"statuses"`
	Ranges   []string `json:"ranges"`
	Types    []string `json:"types"`
	Size     int      `json:"size"`
	SHA256   string   `json:"sha256"`
	Signed   struct {
		Status int    `json:"status"`
		Range  string `json:"range"`
		Size   int    `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"signed"`
}

// A real browser downloads a 20 MiB artifact in Range requests, signed in
// by its cookie, and the second half again through the signed URL without
// any credential; the pieces make the bytes the agent would have put.
func TestBrowserRangedDownload(t *testing.T) {
	ctx := testkit.Browser(t)
	st, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.WithLogger(daemon.Quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d := daemon.Start(t, daemon.Config(func(c *surfaced.Config) { c.Store = st }))
	id := d.Create(nil)
	data := make([]byte, 20<<20)
	rand.Read(data)
	_, u := put(t, d, id, "?name=big.bin", "application/octet-stream", data)
	att := u[len("/api/artifacts/") : len("/api/artifacts/")+30]

	if err := chromedp.Do(ctx, chromedp.Navigate(d.URL+"/?token="+d.Token)); err != nil {
		t.Fatal(err)
	}
	script := `(async () => {
		const hex = b => Array.from(new Uint8Array(b), x => x.toString(16).padStart(2, "0")).join("");
		const url = ` + jsString("/api/artifacts/"+att+"/content") + `;
		const piece = 5 << 20, out = {statuses: [], ranges: [], types: [], signed: {}};
		const parts = [];
		for (let from = 0; from < 20 << 20; from += piece) {
			const r = await fetch(url, {headers: {Range: "bytes=" + from + "-" + (from + piece - 1)}});
			out.statuses.push(r.status);
			out.ranges.push(r.headers.get("Content-Range"));
			out.types.push(r.headers.get("Content-Type"));
			parts.push(new Uint8Array(await r.arrayBuffer()));
		}
		const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
		let at = 0;
		for (const p of parts) { all.set(p, at); at += p.length; }
		out.size = all.length;
		out.sha256 = hex(await crypto.subtle.digest("SHA-256", all));
		// The signed URL, without the cookie: the second half.
		const s = await fetch(` + jsString(u) + `, {credentials: "omit", headers: {Range: "bytes=10485760-"}});
		const half = await s.arrayBuffer();
		out.signed = {status: s.status, range: s.headers.get("Content-Range"), size: half.byteLength,
			sha256: hex(await crypto.subtle.digest("SHA-256", half))};
		return JSON.stringify(out);
	})()`
	res, err := chromedp.Run(ctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var got rangedDownload
	if err := json.Unmarshal([]byte(res), &got); err != nil {
		t.Fatalf("%v: %s", err, res)
	}
	for i, st := range got.Statuses {
		from := i * 5 << 20
		if st != 206 || got.Ranges[i] != "bytes "+itoa(from)+"-"+itoa(from+5<<20-1)+"/"+itoa(20<<20) || got.Types[i] != "application/octet-stream" {
			t.Errorf("piece %d: %d %q %q", i, st, got.Ranges[i], got.Types[i])
		}
	}
	if got.Size != len(data) || got.SHA256 != sha(data) {
		t.Errorf("the browser assembled %d bytes (sha256 %s), want %d (%s)", got.Size, got.SHA256, len(data), sha(data))
	}
	if got.Signed.Status != 206 || got.Signed.Size != 10<<20 || got.Signed.SHA256 != sha(data[10<<20:]) ||
		got.Signed.Range != "bytes 10485760-20971519/20971520" {
		t.Errorf("the signed URL's second half: %+v", got.Signed)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
