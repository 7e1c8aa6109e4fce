package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
)

// docs/deploy.md's backup of a single node's SQLite store, as it says: the
// sqlite3 shell's .backup while the daemon runs and writes, then a restore
// into a stopped daemon's data directory. The restored daemon continues
// from every write acknowledged before the backup.
func TestSQLiteBackupWhileServing(t *testing.T) {
	sqlite3, err := exec.LookPath("sqlite3")
	if err != nil {
		testkit.Missing(t, "the sqlite3 shell is needed (apt-get install sqlite3): %v", err)
	}
	data := t.TempDir()
	args := []string{"run", "--addr", "127.0.0.1:0", "--data-dir", data, "--token", "backup-test-token", "./examples/surface-demo-agent"}
	p := startBinary(t, args...)
	// With --token the start URL carries none: it is the base URL and a slash.
	base := func(p *daemonProc) string { return strings.TrimSuffix(p.base, "/") }

	increment := func(p *daemonProc, id string) float64 {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base(p)+"/api/sessions/"+id+"/surfaces/demo/increment", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer backup-test-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			OK   bool `json:"ok"`
			Data struct {
				Count float64 `json:"count"`
			} `json:"data"`
		}
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &out); err != nil || !out.OK {
			t.Fatalf("increment: %d %s", resp.StatusCode, b)
		}
		return out.Data.Count
	}
	req, _ := http.NewRequest(http.MethodPost, base(p)+"/api/sessions", strings.NewReader(`{"agent":"demo"}`))
	req.Header.Set("Authorization", "Bearer backup-test-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if created.SessionID == "" {
		t.Fatalf("creating a session: %d", resp.StatusCode)
	}
	for range 3 {
		increment(p, created.SessionID)
	}

	// The backup, as docs/deploy.md gives it, while the daemon runs.
	backup := filepath.Join(t.TempDir(), "surfaced.db")
	if out, err := exec.Command(sqlite3, filepath.Join(data, "surfaced.db"), ".backup '"+backup+"'").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 .backup: %v\n%s", err, out)
	}
	// A write after the backup is not in it.
	if n := increment(p, created.SessionID); n != 4 {
		t.Fatalf("count %v after the backup, want 4", n)
	}
	stop := func(p *daemonProc) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit: %v; stderr:\n%s", err, p.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no exit after SIGTERM; stderr:\n%s", p.stderr.String())
		}
	}
	stop(p)

	// The restore: the copy in place of the database and its WAL.
	for _, name := range []string{"surfaced.db", "surfaced.db-wal", "surfaced.db-shm"} {
		if err := os.Remove(filepath.Join(data, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "surfaced.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	p = startBinary(t, args...)
	if n := increment(p, created.SessionID); n != 4 {
		t.Fatalf("the restored session counts %v after one more increment, want 4 (3 in the backup)", n)
	}
	stop(p)
}
