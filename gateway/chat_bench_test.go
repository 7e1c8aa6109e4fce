package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// postLines opens a per-turn chat stream (POST …/chat) to read it line by
// line, as openLines does a GET stream.
func postLines(b testing.TB, url string, h http.Header, body any) *sseLines {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("open %s: %v %v", url, err, resp)
	}
	return &sseLines{resp: resp, r: bufio.NewReaderSize(resp.Body, 64<<10)}
}

// firstDelta reads s until the first text-delta and returns when it was
// read, then reads on until marker (the end of the turn).
func firstDelta(s *sseLines, marker []byte) (time.Time, error) {
	if _, err := s.until([]byte(`"type":"text-delta"`)); err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	_, err := s.until(marker)
	return at, err
}

// Time to the first text-delta on POST …/chat against the same turn seen on
// the session's SSE stream, in the same run: both streams are open while
// the turn runs and are read by the same plain line reader, each in its
// own goroutine, timed from just before the POST. The agent (the fake
// agent's "slow" turn) writes its first delta 25 ms in and goes on for a
// second, so a stream that held chunks back until the turn ended would show
// a second's delay. The bound holds when the ratio of the medians is at most
// 1.2 or the median of the paired differences (chat minus session stream,
// turn by turn) is at most 1 ms.
func BenchmarkChatFirstDelta(b *testing.B) {
	const turnsPerOp = 10
	d := daemon.Start(b)
	id := d.Create(nil)
	events := openLines(b, d.URL+"/api/sessions/"+id+"/events", d.Auth())
	defer events.close()
	if _, err := events.until([]byte(`"status":"ready"`)); err != nil {
		b.Fatal(err)
	}
	var chat, sse, diff []time.Duration
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
		s := postLines(b, d.URL+"/api/sessions/"+id+"/chat", d.Auth(), daemon.ChatBody("slow"))
		chatAt, err := firstDelta(s, []byte("data: [DONE]"))
		s.close()
		if err != nil {
			b.Fatalf("chat stream: %v", err)
		}
		o := <-onSSE
		if o.err != nil {
			b.Fatalf("session stream: %v", o.err)
		}
		chat = append(chat, chatAt.Sub(t0))
		sse = append(sse, o.at.Sub(t0))
		diff = append(diff, chatAt.Sub(o.at))
	}
	b.StopTimer()
	median := func(xs []time.Duration) time.Duration {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	mc, ms, md := median(chat), median(sse), median(diff)
	b.ReportMetric(float64(mc.Microseconds())/1000, "chat-first-delta-ms")
	b.ReportMetric(float64(ms.Microseconds())/1000, "sse-first-delta-ms")
	b.ReportMetric(float64(mc)/float64(ms), "ratio")
	b.ReportMetric(float64(md.Microseconds()), "paired-diff-µs")
	b.ReportMetric(float64(len(chat)), "turns")
}
