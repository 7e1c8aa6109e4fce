package gateway_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// A self-checking resume storm: many clients reconnect at random points with
// Last-Event-ID while commands, preference writes and turns run. Every client
// must see every seq exactly once, in order, and revs strictly increasing per
// key; nobody may ever be told to resync (the window is large enough).
func TestResumeStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("storm skipped in -short")
	}
	d := daemon.Start(t)
	id := d.Create(nil)
	first := d.SSE(id, "")
	first.Wait(t, 10*time.Second, "ready", testkit.IsStatus("ready"))
	first.Close()

	const clients = 16
	const load = 6 * time.Second
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var commands atomic.Int64

	// Writers: surface commands, preference writes and prompts.
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				switch {
				case w == 2 && i%20 == 0:
					d.JSON("POST", "/api/sessions/"+id+"/prompt", map[string]any{"message": "storm " + strconv.Itoa(i)})
				case w == 1:
					d.JSON("POST", "/api/sessions/"+id+"/state", map[string]any{"key": "storm.k" + strconv.Itoa(i%3), "value": i})
				default:
					d.JSON("POST", "/api/sessions/"+id+"/surfaces/demo/increment", nil)
				}
				commands.Add(1)
			}
		}(w)
	}

	type result struct {
		frames, reconnects int
		err                error
	}
	results := make(chan result, clients)
	var readers sync.WaitGroup
	for c := 0; c < clients; c++ {
		readers.Add(1)
		go func(c int) {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			var last string
			var lastSeq uint64
			epoch := ""
			revs := map[string]float64{}
			res := result{}
			check := func(ev testkit.Event, fresh bool) error {
				if ev.ID == "" {
					return fmt.Errorf("frame without id: %s %s", ev.Kind, ev.Raw)
				}
				ep, seqText, _ := strings.Cut(ev.ID, "-")
				seq, err := strconv.ParseUint(seqText, 10, 64)
				if err != nil {
					return fmt.Errorf("bad id %q", ev.ID)
				}
				switch {
				case epoch == "":
					epoch, lastSeq = ep, seq
				case ep != epoch:
					return fmt.Errorf("epoch changed %s -> %s", epoch, ep)
				case fresh && seq == lastSeq:
					// sticky frames of a fresh subscription carry the head
				case seq != lastSeq+1:
					return fmt.Errorf("seq %d after %d (%s %s)", seq, lastSeq, ev.Kind, ev.Raw)
				default:
					lastSeq = seq
				}
				if ev.Kind == "state" {
					key, _ := ev.Data["key"].(string)
					rev, _ := ev.Data["rev"].(float64)
					if prev, ok := revs[key]; ok && rev <= prev && !fresh {
						return fmt.Errorf("rev of %s went %v -> %v", key, prev, rev)
					}
					revs[key] = rev
				}
				last = ev.ID
				res.frames++
				return nil
			}
			deadline := time.Now().Add(load + 5*time.Second)
			for time.Now().Before(deadline) {
				h := d.Auth()
				fresh := last == ""
				if !fresh {
					h.Set("Last-Event-ID", last)
				}
				s, status, body := testkit.TryOpenSSE(d.URL+"/api/sessions/"+id+"/events", h)
				if status != 200 {
					res.err = fmt.Errorf("reconnect: %d %s", status, body)
					break
				}
				res.reconnects++
				n := rng.IntN(200) + 1
				timeout := time.After(time.Duration(rng.IntN(300)+20) * time.Millisecond)
			read:
				for i := 0; i < n; i++ {
					select {
					case ev, ok := <-s.Events:
						if !ok {
							break read
						}
						if ev.Kind == "resync" {
							res.err = fmt.Errorf("resync inside the window: %s", ev.Raw)
							break read
						}
						if err := check(ev, fresh); err != nil {
							res.err = err
							break read
						}
					case <-timeout:
						break read
					}
				}
				s.Close()
				if res.err != nil {
					break
				}
				// After the load, drain to the head with a last long read.
				select {
				case <-stop:
					if time.Now().After(deadline.Add(-4 * time.Second)) {
						deadline = time.Now()
					}
				default:
				}
			}
			results <- res
		}(c)
	}
	time.Sleep(load)
	close(stop)
	wg.Wait()
	readers.Wait()
	close(results)
	total, reconnects := 0, 0
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		total += r.frames
		reconnects += r.reconnects
	}
	if reconnects < clients*10 {
		t.Fatalf("only %d reconnects", reconnects)
	}
	t.Logf("%d writes, %d frames checked over %d reconnects by %d clients", commands.Load(), total, reconnects, clients)
}
