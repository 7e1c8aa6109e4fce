package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
	"github.com/surfaced/surfaced/store"
	"github.com/surfaced/surfaced/store/postgres"
	"github.com/surfaced/surfaced/store/sqlite"
)

// plainServer is the baseline: a bare net/http server that serves a file
// with http.ServeContent and takes an upload as the essential work of a
// content-addressed, durable one: the bytes hashed (SHA-256) into a
// temporary file, fsynced, renamed, the directory fsynced; nothing else.
func plainServer(b *testing.B, file, dir string) string {
	b.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /file", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(file)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", time.Time{}, f)
	})
	mux.HandleFunc("POST /file", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.CreateTemp(dir, "up-*")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer os.Remove(f.Name())
		buf := make([]byte, 256<<10)
		h := sha256.New() // a content-addressed upload hashes its bytes
		_, err = io.CopyBuffer(io.MultiWriter(f, h), r.Body, buf)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err == nil {
			err = os.Rename(f.Name(), filepath.Join(dir, "uploaded"))
		}
		if err == nil {
			var d *os.File
			if d, err = os.Open(dir); err == nil {
				err = d.Sync()
				d.Close()
			}
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// timed runs one request and returns how long it took, its body read to
// the end.
func timed(b *testing.B, c *http.Client, method, u string, body []byte, h http.Header, want int) time.Duration {
	b.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, u, r)
	for k, v := range h {
		req.Header[k] = v
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d (%d bytes)", method, u, resp.StatusCode, n)
	}
	return took
}

// BenchmarkArtifactThroughput uploads and downloads a 64 MiB artifact
// through the daemon, and the same bytes through a plain net/http server
// (ServeContent of the same file; an upload made durable the same way),
// alternating in the same run. It reports both rates and their ratio.
// The SQLite store keeps the bytes as a file (sendfile out); the
// PostgreSQL store in 1 MiB rows.
func BenchmarkArtifactThroughput(b *testing.B) {
	data := make([]byte, 64<<20)
	rand.Read(data)
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			dir := b.TempDir()
			var st store.Store
			var err error
			switch backend {
			case "sqlite":
				st, err = sqlite.Open(context.Background(), dir, sqlite.WithLogger(daemon.Quiet()))
			case "postgres":
				st, err = postgres.Open(context.Background(), pgtest.Start(b), postgres.WithLogger(daemon.Quiet()))
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			d := daemon.Start(b, daemon.Config(func(c *surfaced.Config) { c.Store = st }))
			id := d.Create(nil)
			auth := http.Header{"Authorization": {"Bearer " + d.Token}, "Content-Type": {"application/octet-stream"}}
			// The file the plain server serves: these very bytes.
			file := filepath.Join(b.TempDir(), "blob")
			if err := os.WriteFile(file, data, 0o600); err != nil {
				b.Fatal(err)
			}
			plain := plainServer(b, file, b.TempDir())
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			b.Cleanup(c.CloseIdleConnections)

			upload := func() (time.Duration, string) {
				req, _ := http.NewRequest("POST", d.URL+"/api/sessions/"+id+"/artifacts", bytes.NewReader(data))
				req.Header = auth.Clone()
				start := time.Now()
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				took := time.Since(start)
				var out struct {
					Artifact struct {
						ID string `json:"id"`
					} `json:"artifact"`
				}
				if resp.StatusCode != 201 || json.Unmarshal(raw, &out) != nil {
					b.Fatalf("upload: %d %s", resp.StatusCode, raw)
				}
				return took, out.Artifact.ID
			}
			_, kept := upload()
			var up, upPlain, down, downPlain time.Duration
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := range b.N {
				// Which goes first alternates: the writeback of one
				// upload's pages must not weigh on the same side each time.
				var att string
				ups := []func(){
					func() { var t time.Duration; t, att = upload(); up += t },
					func() { upPlain += timed(b, c, "POST", plain+"/file", data, nil, 201) },
				}
				downs := []func(){
					func() { down += timed(b, c, "GET", d.URL+"/api/artifacts/"+kept+"/content", nil, auth, 200) },
					func() { downPlain += timed(b, c, "GET", plain+"/file", nil, nil, 200) },
				}
				first := i % 2
				ups[first]()
				ups[1-first]()
				downs[first]()
				downs[1-first]()
				b.StopTimer()
				// The session's quota holds 16 of them: each goes again.
				if st, out := d.JSON("DELETE", "/api/sessions/"+id+"/artifacts/"+att, nil); st != 200 {
					b.Fatalf("delete: %d %v", st, out)
				}
				b.StartTimer()
			}
			mbps := func(d time.Duration) float64 { return float64(b.N) * float64(len(data)) / (1 << 20) / d.Seconds() }
			b.ReportMetric(mbps(up), "up-MiB/s")
			b.ReportMetric(mbps(upPlain), "up-plain-MiB/s")
			b.ReportMetric(upPlain.Seconds()/up.Seconds(), "up-ratio")
			b.ReportMetric(mbps(down), "down-MiB/s")
			b.ReportMetric(mbps(downPlain), "down-plain-MiB/s")
			b.ReportMetric(downPlain.Seconds()/down.Seconds(), "down-ratio")
		})
	}
}
