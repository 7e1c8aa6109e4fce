package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/store/sqlite"
)

// rotate runs `surfaced admin rotate-artifact-key` with args and returns its
// exit code and output.
func rotate(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(testkit.Build(t, "./cmd/surfaced"), append([]string{"admin", "rotate-artifact-key"}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// The key rotates in the store a running daemon uses; URLs it signed
// before keep working through the grace; --grace 0 drops the key it
// replaces.
func TestRotateArtifactKey(t *testing.T) {
	data := t.TempDir()
	p := startBinary(t, "run", "--addr", "127.0.0.1:0", "--data-dir", data, "./examples/hello-agent")
	do := func(method, path, ct string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, p.base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.token)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	st, b := do("POST", "/api/sessions", "application/json", []byte("{}"))
	if st != 201 {
		t.Fatalf("create: %d %s", st, b)
	}
	var created struct{ SessionID string }
	json.Unmarshal(b, &created)
	st, b = do("POST", "/api/sessions/"+created.SessionID+"/artifacts", "text/plain", []byte("signed before"))
	if st != 201 {
		t.Fatalf("upload: %d %s", st, b)
	}
	var up struct{ URL string }
	json.Unmarshal(b, &up)
	signed := func() int {
		t.Helper()
		resp, err := http.Get(p.base + up.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := signed(); got != 200 {
		t.Fatalf("signed URL: %d", got)
	}

	start := time.Now()
	code, out := rotate(t, "--data-dir", data)
	if code != 0 || !strings.Contains(out, "artifact signing key 2 made") || !strings.Contains(out, "keep working until") {
		t.Fatalf("rotate: exit %d\n%s", code, out)
	}
	if got := signed(); got != 200 {
		t.Errorf("a URL signed before the rotation: %d", got)
	}
	keys := func() []int64 {
		t.Helper()
		s, err := sqlite.Open(context.Background(), data)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ks, err := s.SigningKeys(context.Background(), bytes.Repeat([]byte{1}, 32))
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for i, k := range ks {
			ids = append(ids, k.ID)
			if i > 0 {
				if grace := k.VerifyUntil.Sub(start); k.Current() || grace < 24*time.Hour || grace > 24*time.Hour+2*time.Minute {
					t.Errorf("key %d verifies until %v, a grace of %v", k.ID, k.VerifyUntil, grace)
				}
			}
		}
		return ids
	}
	if got := keys(); len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Errorf("keys after a rotation: %v, want [2 1] (the new one current)", got)
	}
	code, out = rotate(t, "--data-dir", data, "--grace", "0")
	if code != 0 || !strings.Contains(out, "key 3 made") || !strings.Contains(out, "stop working") {
		t.Fatalf("rotate --grace 0: exit %d\n%s", code, out)
	}
	if got := keys(); len(got) != 2 || got[0] != 3 || got[1] != 1 {
		t.Errorf("keys after a rotation without grace: %v, want [3 1] (key 2 dropped, key 1 in its grace)", got)
	}
	if code, out := rotate(t, "--data-dir", data, "--grace", "-1s"); code != 2 || !strings.Contains(out, "--grace") {
		t.Errorf("a negative grace: exit %d\n%s", code, out)
	}
	if code, out := rotate(t, "--store", "mysql://x"); code != 2 || !strings.Contains(out, "store") {
		t.Errorf("a bad store: exit %d\n%s", code, out)
	}
}
