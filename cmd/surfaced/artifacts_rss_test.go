package main_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/surfaced/surfaced/internal/pgtest"
	"github.com/surfaced/surfaced/internal/testkit"
)

// procKiB reads a field (VmRSS, VmHWM) of /proc/<pid>/status, in KiB.
func procKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// uploadPeak starts the daemon on the given store (empty: SQLite in a data
// directory), uploads n artifacts of size bytes at once, and returns how
// far the daemon's peak RSS rose above its RSS before, in MiB.
func uploadPeak(t *testing.T, storeURL string, n, size int) float64 {
	t.Helper()
	args := []string{"run", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "warn"}
	if storeURL != "" {
		args = append(args, "--store", storeURL)
	}
	p := startBinary(t, append(append(args, "--"), testkit.FakeAgent(t)...)...)
	post := func(path, ct string, body io.Reader) (int, []byte) {
		req, _ := http.NewRequest("POST", p.base+path, body)
		req.Header.Set("Authorization", "Bearer "+p.token)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	st, b := post("/api/sessions", "application/json", strings.NewReader("{}"))
	var created struct{ SessionID string }
	if st != 201 || json.Unmarshal(b, &created) != nil {
		t.Fatalf("create: %d %s", st, b)
	}
	path := "/api/sessions/" + created.SessionID + "/artifacts"
	data := make([]byte, size)
	rand.Read(data)
	// Warm: the code paths, the pools, the first store writes.
	if st, b := post(path, "application/octet-stream", bytes.NewReader(data[:1<<20])); st != 201 {
		t.Fatalf("warm-up upload: %d %s", st, b)
	}
	pid := p.cmd.Process.Pid
	// Reset the peak to now (Linux: 5 to clear_refs).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		testkit.Missing(t, "cannot reset the daemon's peak RSS: %v", err)
	}
	base := procKiB(t, pid, "VmRSS")
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, b := post(path, "application/octet-stream", bytes.NewReader(data)); st != 201 {
				t.Errorf("upload: %d %s", st, b)
			}
		}()
	}
	wg.Wait()
	peak := procKiB(t, pid, "VmHWM")
	return float64(peak-base) / 1024
}

// The daemon never holds an upload whole: eight uploads of 64 MiB at once
// raise its peak RSS by less than one of them, on either store.
func TestUploadMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads 1 GiB")
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var dsn string
			if backend == "postgres" {
				dsn = pgtest.Start(t)
			}
			growth := uploadPeak(t, dsn, 8, 64<<20)
			t.Logf("%s: peak RSS %.1f MiB above the RSS before 8 concurrent 64 MiB uploads", backend, growth)
			if growth >= 64 {
				t.Errorf("%s: the daemon's peak RSS rose by %.1f MiB during 8 concurrent 64 MiB uploads, want < 64 MiB", backend, growth)
			}
		})
	}
}
