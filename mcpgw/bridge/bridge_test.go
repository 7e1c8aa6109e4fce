package bridge

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestMountURL(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"", "http://127.0.0.1:7800/mcp", ""},
		{"http://127.0.0.1:9000", "http://127.0.0.1:9000/mcp", ""},
		{"https://host/", "https://host/mcp", ""},
		{"http://h/mcp/sessions/abc", "http://h/mcp/sessions/abc", ""},
		{"ftp://h", "", "must start with http"},
		{"http://", "", "no host"},
		{"http://h/mcp?x=1", "", "query"},
		{"http://u:p@h", "", "credentials"},
	} {
		got, err := MountURL(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

// unreachable is an address nothing listens on.
func unreachable(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestExitCodes: stdin closed is 0, a daemon that never answers the first
// message is 3 (its initialize answered -32000), usage is 2; a line that is
// not JSON is answered -32700 and the bridge goes on.
func TestExitCodes(t *testing.T) {
	var out, errw bytes.Buffer
	if code := Run(context.Background(), Options{URL: "ftp://x", Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errw}); code != ExitUsage {
		t.Errorf("a bad URL: %d", code)
	}
	out.Reset()
	in := strings.NewReader("not json\n")
	if code := Run(context.Background(), Options{URL: unreachable(t), Stdin: in, Stdout: &out, Stderr: &errw}); code != ExitOK {
		t.Errorf("stdin closed: %d", code)
	}
	if !strings.Contains(out.String(), `"code":-32700`) {
		t.Errorf("a line that is not JSON: %q", out.String())
	}
	out.Reset()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n"
	code := Run(context.Background(), Options{URL: unreachable(t), Stdin: strings.NewReader(init), Stdout: &out, Stderr: &errw,
		MinDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond, HandshakeTimeout: 200 * time.Millisecond})
	if code != ExitUnreachable {
		t.Errorf("an unreachable daemon: %d (stderr %s)", code, errw.String())
	}
	if !strings.Contains(out.String(), `"id":1`) || !strings.Contains(out.String(), `"code":-32000`) {
		t.Errorf("initialize not answered: %q", out.String())
	}
}
