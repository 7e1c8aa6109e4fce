package cluster_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// The artifact writes under the same promise as every other write: an
// upload answered 201 is in the store and survives a crash; an upload,
// delete or purge answered 503 store_unavailable (with Retry-After) did
// not happen; 504 outcome_unknown may have. Nothing is ever answered 500.
// The streams and checks here join the durability tests' faults
// (durable_test.go).

// upload is one upload's bytes and what the daemon answered.
type upload struct {
	name   string
	sha256 string
	id     string // the artifact's id, when acknowledged
}

// uploadStream puts a small artifact into the session through nd() every
// pause, each named up-<n>, and records what each got.
type uploadStream struct {
	*stream
	ups        map[string]*upload // by name
	unexpected []string           // answers the promise does not allow (a 500)
}

func uploads(t testing.TB, nd func() *node, id string, pause time.Duration) *uploadStream {
	u := &uploadStream{stream: &stream{name: "uploads", stop: make(chan struct{}), done: make(chan struct{})}, ups: map[string]*upload{}}
	go func() {
		defer close(u.done)
		for i := 0; ; i++ {
			select {
			case <-u.stop:
				return
			case <-time.After(pause):
			}
			n := nd()
			if n == nil || n.dead() {
				continue
			}
			data := make([]byte, 16<<10+i)
			rand.Read(data)
			sum := sha256.Sum256(data)
			up := &upload{name: fmt.Sprintf("up-%d", i), sha256: hex.EncodeToString(sum[:])}
			st, out, h, err := rawCall(n, "POST", "/api/sessions/"+id+"/artifacts?name="+up.name, data, "application/octet-stream")
			u.mu.Lock()
			u.ups[up.name] = up
			u.mu.Unlock()
			switch {
			case err == nil && st == http.StatusCreated:
				a, _ := out["artifact"].(map[string]any)
				up.id, _ = a["id"].(string)
				u.add(result{outcome: acked, text: up.name})
			case err == nil && st == http.StatusServiceUnavailable && errorCode(out) == "store_unavailable":
				if h.Get("Retry-After") != "" {
					u.mu.Lock()
					u.retry = true
					u.mu.Unlock()
				}
				u.add(result{outcome: refused, text: up.name, code: "store_unavailable"})
			case err == nil && st == http.StatusGatewayTimeout && errorCode(out) == "outcome_unknown":
				u.add(result{outcome: unknown, text: up.name, code: "outcome_unknown"})
			case err != nil:
				u.add(result{outcome: unknown, text: up.name, code: "no answer: " + err.Error()}) // the daemon was killed
			default:
				u.mu.Lock()
				u.unexpected = append(u.unexpected, fmt.Sprintf("%s: %d %v", up.name, st, out))
				u.mu.Unlock()
				u.add(result{outcome: unknown, text: up.name, code: fmt.Sprintf("%d %s", st, errorCode(out))})
			}
		}
	}()
	return u
}

// rawCall is call with a raw body of contentType.
func rawCall(nd *node, method, path string, body []byte, contentType string) (int, map[string]any, http.Header, error) {
	req, _ := http.NewRequest(method, nd.base+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	resp, err := (&http.Client{Timeout: 45 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out, resp.Header, nil
}

// sessionArtifacts lists every artifact of the session, by name.
func sessionArtifacts(t testing.TB, nd *node, id string) map[string]map[string]any {
	t.Helper()
	all := map[string]map[string]any{}
	cursor := ""
	for {
		var page struct {
			Artifacts  []map[string]any `json:"artifacts"`
			NextCursor string           `json:"nextCursor"`
		}
		path := "/api/sessions/" + id + "/artifacts?limit=500"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if st, err := nd.get(path, &page); st != 200 || err != nil {
			t.Fatalf("list artifacts: %d %v", st, err)
		}
		for _, a := range page.Artifacts {
			name, _ := a["name"].(string)
			all[name] = a
		}
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// checkUploads holds the uploads against the artifacts the restored daemon
// has: every upload answered 201 is there with its bytes; none answered
// 503 is; nothing was answered outside the promise.
func checkUploads(t testing.TB, u *uploadStream, nd *node, id string) {
	t.Helper()
	u.mu.Lock()
	unexpected := append([]string(nil), u.unexpected...)
	u.mu.Unlock()
	if len(unexpected) > 0 {
		t.Errorf("uploads answered outside the promise (only 201, 503 store_unavailable, 504 outcome_unknown): %v", unexpected)
	}
	have := sessionArtifacts(t, nd, id)
	var missing, present []string
	for _, r := range u.results() {
		u.mu.Lock()
		up := u.ups[r.text]
		u.mu.Unlock()
		a, ok := have[r.text]
		switch {
		case r.outcome == acked && (!ok || a["id"] != up.id || a["sha256"] != up.sha256):
			missing = append(missing, r.text)
		case r.outcome == acked:
			resp, body := nd.raw(t, "GET", "/api/artifacts/"+up.id+"/content", nil, nil, true)
			if sum := sha256.Sum256(body); resp.StatusCode != 200 || hex.EncodeToString(sum[:]) != up.sha256 {
				t.Errorf("upload %s (%s): content %d, %d bytes, not the bytes uploaded", r.text, up.id, resp.StatusCode, len(body))
			}
		case r.outcome == refused && ok:
			present = append(present, r.text)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d uploads answered 201 are not kept: %v", len(missing), missing)
	}
	if len(present) > 0 {
		t.Errorf("%d uploads answered 503 are there: %v", len(present), present)
	}
	t.Logf("uploads: %d acknowledged, %d refused, %d unknown; %d artifacts kept", u.count(acked), u.count(refused), u.count(unknown), len(have))
	if u.count(acked) == 0 || u.count(refused) == 0 {
		t.Errorf("uploads: %d acknowledged and %d refused: the test did not see both", u.count(acked), u.count(refused))
	}
	if !u.retry {
		t.Errorf("uploads: no refusal carried Retry-After")
	}
}

// putArtifact uploads one artifact and returns its id.
func putArtifact(t testing.TB, nd *node, id, name string) string {
	t.Helper()
	st, out, _, err := rawCall(nd, "POST", "/api/sessions/"+id+"/artifacts?name="+name, []byte("kept: "+name), "text/plain")
	if err != nil || st != http.StatusCreated {
		t.Fatalf("upload %s: %d %v %v", name, st, out, err)
	}
	a, _ := out["artifact"].(map[string]any)
	att, _ := a["id"].(string)
	return att
}

// refusedWhileDown asks, while the store cannot be written, to delete the
// artifact att of session id and to purge the session other: both are
// refused (503 store_unavailable with Retry-After) and did not happen
// (stillThere checks once the store is back).
func refusedWhileDown(t testing.TB, nd *node, id, att, other string) {
	t.Helper()
	for _, r := range []struct{ what, path string }{
		{"delete an artifact", "/api/sessions/" + id + "/artifacts/" + att},
		{"purge a session", "/api/sessions/" + other + "?purge=true"},
	} {
		st, out, h, err := call(nd, "DELETE", r.path, nil)
		if err != nil || st != http.StatusServiceUnavailable || errorCode(out) != "store_unavailable" || h.Get("Retry-After") == "" {
			t.Errorf("%s while the store cannot be written: %d %v (Retry-After %q) %v, want 503 store_unavailable with Retry-After",
				r.what, st, out, h.Get("Retry-After"), err)
		}
	}
}

// stillThere checks that what refusedWhileDown asked did not happen.
func stillThere(t testing.TB, nd *node, id, att, other string) {
	t.Helper()
	if resp, _ := nd.raw(t, "GET", "/api/sessions/"+id+"/artifacts/"+att, nil, nil, true); resp.StatusCode != 200 {
		t.Errorf("the artifact whose delete was refused: %d, want it still there", resp.StatusCode)
	}
	if st, err := nd.get("/api/sessions/"+other, nil); st != 200 || err != nil {
		t.Errorf("the session whose purge was refused: %d %v, want it still there", st, err)
	}
	// And they work now.
	if st, out, _, err := call(nd, "DELETE", "/api/sessions/"+id+"/artifacts/"+att, nil); st != 200 || err != nil {
		t.Errorf("the delete once the store is back: %d %v %v", st, out, err)
	}
	if st, out, _, err := call(nd, "DELETE", "/api/sessions/"+other+"?purge=true", nil); st != 200 || err != nil {
		t.Errorf("the purge once the store is back: %d %v %v", st, out, err)
	}
}
