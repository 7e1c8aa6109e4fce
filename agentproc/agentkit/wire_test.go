package agentkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r io.Reader, max int) (lines []string, errs []error) {
	t.Helper()
	lr := newLineReader(r, max)
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			return lines, errs
		}
		if err != nil {
			var tl *lineTooLongError
			if !errors.As(err, &tl) {
				t.Fatalf("unexpected error %v", err)
			}
			errs = append(errs, err)
			lines = append(lines, "<too long>")
			continue
		}
		lines = append(lines, string(line))
	}
}

func TestLineReader(t *testing.T) {
	big := strings.Repeat("b", 100_000) // beyond bufio's buffer and a Scanner's default
	tests := []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"split on newline only", "a\nb\u2028c\u2029d\n", 0, []string{"a", "b\u2028c\u2029d"}},
		{"strip one CR", "a\r\nb\r\r\n", 0, []string{"a", "b\r"}},
		{"unterminated tail", "a\nlast", 0, []string{"a", "last"}},
		{"empty lines kept for the caller", "\n\na\n", 0, []string{"", "", "a"}},
		{"long line within the cap", big + "\nx\n", 0, []string{big, "x"}},
		{"line at the cap", "12345\n", 5, []string{"12345"}},
		{"line at the cap with CR", "12345\r\n", 5, []string{"12345"}},
		{"over the cap, rest kept", "123456\nok\n", 5, []string{"<too long>", "ok"}},
		{"huge line over the cap", big + "\nok\n", 1000, []string{"<too long>", "ok"}},
		{"over the cap at EOF", "ok\n" + big, 1000, []string{"ok", "<too long>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				got, _ := readAll(t, r, tt.max)
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("lines = %q, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestLineReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	lr := newLineReader(io.MultiReader(strings.NewReader("a\n"), iotest.ErrReader(boom)), 0)
	if line, err := lr.next(); err != nil || string(line) != "a" {
		t.Fatalf("first = %q, %v", line, err)
	}
	if _, err := lr.next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
}

// writeRecorder records every Write call separately.
type writeRecorder struct {
	mu     sync.Mutex
	writes [][]byte
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

// TestLineWriterWholeLines sends from many goroutines at once: every Write
// must be exactly one complete JSON line.
func TestLineWriterWholeLines(t *testing.T) {
	rec := &writeRecorder{}
	lw := &lineWriter{w: rec}
	var wg sync.WaitGroup
	const senders, each = 8, 200
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := lw.send(map[string]any{"type": "x", "g": g, "i": i, "pad": strings.Repeat("p", 5000),
					"html": "<a&b>", "sep": "\u2028"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(rec.writes) != senders*each {
		t.Fatalf("%d writes, want %d", len(rec.writes), senders*each)
	}
	for _, w := range rec.writes {
		if bytes.Count(w, []byte("\n")) != 1 || w[len(w)-1] != '\n' {
			t.Fatalf("write is not one line: %.80q", w)
		}
		var v map[string]any
		if err := json.Unmarshal(w, &v); err != nil {
			t.Fatalf("write is not JSON: %v", err)
		}
		if !bytes.Contains(w, []byte("<a&b>")) {
			t.Fatalf("HTML was escaped: %.200s", w)
		}
	}
	if err := lw.close(); err != nil {
		t.Fatal(err)
	}
	if err := lw.send(map[string]any{"type": "late"}); !errors.Is(err, errClosed) {
		t.Errorf("send after close = %v", err)
	}
}

func TestLineWriterKeepsFirstError(t *testing.T) {
	boom := errors.New("pipe gone")
	lw := &lineWriter{w: errWriter{boom}}
	if err := lw.send(1); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if err := lw.send(2); !errors.Is(err, boom) {
		t.Fatalf("second err = %v", err)
	}
	if err := lw.close(); !errors.Is(err, boom) {
		t.Fatalf("close err = %v", err)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }
