package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/gateway/debug"
)

// Actors fetches /debug/actors with the query (e.g. "?session=...") and
// fails the test unless it answers 200 with a report (Dev only).
func (d *Daemon) Actors(query string) inspect.Report {
	d.t.Helper()
	st, raw := d.Do("GET", debug.Prefix+"/actors"+query, nil)
	if st != http.StatusOK {
		d.t.Fatalf("GET /debug/actors%s: %d %s", query, st, raw)
	}
	var rep inspect.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		d.t.Fatalf("GET /debug/actors%s: %v: %s", query, err, raw)
	}
	return rep
}

// Find returns the actor of the report with kind (and domain, when not
// empty), or nil.
func Find(rep inspect.Report, kind, domain string) *inspect.Actor {
	for i := range rep.Actors {
		a := &rep.Actors[i]
		if a.Kind == kind && (domain == "" || a.Domain == domain) {
			return a
		}
	}
	return nil
}

// Flood sends n "work" commands to the slow domain of a session at once
// (SlowDomain), over HTTP, and returns a function that waits for all their
// answers and returns how many succeeded.
func (d *Daemon) Flood(session string, n int) (wait func() int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	client := &http.Client{Timeout: 60 * time.Second}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", d.URL+"/api/sessions/"+session+"/surfaces/"+SlowDomainName+"/work", strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+d.Token)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"ok":true`)) {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	return func() int {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return ok
	}
}
