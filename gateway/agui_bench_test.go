package gateway_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// firstContent reads an AG-UI run until its first TEXT_MESSAGE_CONTENT and
// returns when it was read, then reads on until the run ends.
func firstContent(s *sseLines) (time.Time, error) {
	if _, err := s.until([]byte(`"type":"TEXT_MESSAGE_CONTENT"`)); err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	_, err := s.until([]byte(`"type":"RUN_FINISHED"`))
	return at, err
}

// Time to the first TEXT_MESSAGE_CONTENT on the AG-UI route against the
// first text delta of the same turn on the session's SSE stream, in the same
// run, measured as BenchmarkChatFirstDelta measures the chat route: both
// streams open while the turn runs, read by the same plain line reader each
// in its own goroutine, timed from just before the POST. The agent (the fake
// agent's "slow" turn) writes its first delta 25 ms in and goes on for a
// second. The bound holds when the ratio of the medians is at most 1.2 and
// the median of the paired differences (AG-UI minus session stream, turn by
// turn) is at most 1 ms.
func BenchmarkAGUIFirstContent(b *testing.B) {
	const turnsPerOp = 10
	d := daemon.Start(b)
	id := d.Create(nil)
	events := openLines(b, d.URL+"/api/sessions/"+id+"/events", d.Auth())
	defer events.close()
	if _, err := events.until([]byte(`"status":"ready"`)); err != nil {
		b.Fatal(err)
	}
	var agui, sse, diff []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N*turnsPerOp; i++ {
		type seen struct {
			at  time.Time
			err error
		}
		onSSE := make(chan seen, 1)
		t0 := time.Now()
		go func() {
			at, err := firstDelta(events, []byte(`"type":"finish"`))
			onSSE <- seen{at, err}
		}()
		body := map[string]any{"threadId": "bench", "runId": fmt.Sprint("run-", i),
			"messages": []any{map[string]any{"id": fmt.Sprint("m", i), "role": "user", "content": "slow"}}}
		s := postLines(b, d.URL+"/api/sessions/"+id+"/ag-ui", d.Auth(), body)
		at, err := firstContent(s)
		s.close()
		if err != nil {
			b.Fatalf("AG-UI stream: %v", err)
		}
		o := <-onSSE
		if o.err != nil {
			b.Fatalf("session stream: %v", o.err)
		}
		agui = append(agui, at.Sub(t0))
		sse = append(sse, o.at.Sub(t0))
		diff = append(diff, at.Sub(o.at))
	}
	b.StopTimer()
	median := func(xs []time.Duration) time.Duration {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	ma, ms, md := median(agui), median(sse), median(diff)
	b.ReportMetric(float64(ma.Microseconds())/1000, "agui-first-content-ms")
	b.ReportMetric(float64(ms.Microseconds())/1000, "sse-first-delta-ms")
	b.ReportMetric(float64(ma)/float64(ms), "ratio")
	b.ReportMetric(float64(md.Microseconds()), "paired-diff-µs")
	b.ReportMetric(float64(len(agui)), "turns")
}
