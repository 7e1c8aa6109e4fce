package agentkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"testing"

	"github.com/surfaced/surfaced/agentproc"
)

const benchDispatch = `{"type":"surface_dispatch","id":"d","domain":"counter","action":"increment","args":null,"state":{"count":41,"log":["a","b"]},"rev":7}` + "\n"

// roundTrips sends benchDispatch b.N times through in and waits each time for
// one line from out.
func roundTrips(b *testing.B, in io.Writer, out *bufio.Reader) {
	b.Helper()
	for b.Loop() {
		if _, err := io.WriteString(in, benchDispatch); err != nil {
			b.Fatal(err)
		}
		line, err := out.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Contains(line, []byte(`"ok":true`)) {
			b.Fatalf("answer %s", line)
		}
	}
}

// BenchmarkPipeRoundTrip is the baseline of BenchmarkDispatchRoundTrip: the
// same lines over the same pipes, answered by a loop that only reads a line
// and writes a fixed answer (no decoding, no dispatch).
func BenchmarkPipeRoundTrip(b *testing.B) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	answer := []byte(`{"type":"surface_dispatch_result","id":"d","result":{"ok":true,"data":{"count":42}},"state":{"count":42,"log":["a","b"]}}` + "\n")
	go func() {
		rd := agentproc.NewReader(inR, 0)
		for {
			if _, err := rd.Next(); err != nil {
				outW.Close()
				return
			}
			if _, err := outW.Write(answer); err != nil {
				return
			}
		}
	}()
	roundTrips(b, inW, bufio.NewReader(outR))
	inW.Close()
}

// BenchmarkDispatchRoundTrip measures one surface_dispatch through a running
// agent: read, route, decode state, run the command, encode, write.
func BenchmarkDispatchRoundTrip(b *testing.B) {
	a := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	AddSurface(a, counterSurface())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		_ = a.Run(context.Background(), inR, outW)
		outW.Close()
		close(done)
	}()
	out := bufio.NewReader(outR)
	if _, err := out.ReadBytes('\n'); err != nil { // agent_ready
		b.Fatal(err)
	}
	roundTrips(b, inW, out)
	inW.Close()
	go io.Copy(io.Discard, outR)
	<-done
}

// deltaModel yields n text deltas of 8 bytes.
type deltaModel int

func (n deltaModel) Stream(context.Context, Request) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		for range int(n) {
			if !yield(Delta{Kind: DeltaText, Text: "abcdefg "}, nil) {
				return
			}
		}
		yield(Delta{Kind: DeltaFinish, Reason: StopStop}, nil)
	}
}

// BenchmarkReplyDeltas measures the cost per streamed delta of one reply.
// Each message_update carries the partial message, as pi's does, so the cost
// per delta grows with the reply's length: compare the sizes.
func BenchmarkReplyDeltas(b *testing.B) {
	for _, n := range []int{100, 1000, 4000} {
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			a := New(Options{Model: deltaModel(n), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			a.base = context.Background()
			cw := &countingWriter{}
			a.out.Store(&lineWriter{w: cw})
			for b.Loop() {
				a.streamAssistant(context.Background())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delta")
			b.ReportMetric(float64(cw.n)/float64(b.N*n), "bytes/delta")
		})
	}
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
