package bridge

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestMountURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "http://127.0.0.1:7800/acp",
		"http://127.0.0.1:9000":       "http://127.0.0.1:9000/acp",
		"http://127.0.0.1:9000/":      "http://127.0.0.1:9000/acp",
		"https://host.example/editor": "https://host.example/editor",
	} {
		got, err := MountURL(in)
		if err != nil || got != want {
			t.Errorf("MountURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://host", "http://", "127.0.0.1:7800", "http://u:p@host", "http://host/?x=1", "::"} {
		if got, err := MountURL(bad); err == nil {
			t.Errorf("MountURL(%q) = %q, want an error", bad, got)
		}
	}
}

func TestPeek(t *testing.T) {
	p, err := peek([]byte(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","cwd":"/w"}}`))
	if err != nil || !p.isRequest() || p.sessionID != "s1" || p.cwd != "/w" || idKey(p.id) != "7" {
		t.Errorf("request: %+v %v", p, err)
	}
	p, err = peek([]byte(`{"jsonrpc":"2.0","id":"a","result":{"sessionId":"s2"}}`))
	if err != nil || !p.isResponse() || p.resultSID != "s2" || p.hasError {
		t.Errorf("response: %+v %v", p, err)
	}
	p, err = peek([]byte(`{"jsonrpc":"2.0","id":"a","result":null}`))
	if err != nil || !p.isResponse() || p.resultSID != "" {
		t.Errorf("null result: %+v %v", p, err)
	}
	p, err = peek([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"No such session."}}`))
	if err != nil || !p.hasError || p.errCode != -32002 {
		t.Errorf("error: %+v %v", p, err)
	}
	p, err = peek([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":["not","an","object"]}`))
	if err != nil || !p.isNotification() || p.sessionID != "" {
		t.Errorf("array params: %+v %v", p, err)
	}
	if _, err := peek([]byte(`not json`)); err == nil {
		t.Error("not JSON was peeked")
	}
}

func TestReadLine(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("one\r\n"+strings.Repeat("x", 100)+"\nlast"), 16)
	if l, err := readLine(r, 50); err != nil || string(l) != "one" {
		t.Fatalf("%q %v", l, err)
	}
	if _, err := readLine(r, 50); !errors.Is(err, errLineTooLong) {
		t.Fatalf("a long line: %v", err)
	}
	// The rest of the long line is still there; the caller skips it.
	for {
		if _, err := r.ReadSlice('\n'); err != bufio.ErrBufferFull {
			break
		}
	}
	if l, err := readLine(r, 50); err != nil || string(l) != "last" {
		t.Fatalf("a last line without newline: %q %v", l, err)
	}
	if _, err := readLine(r, 50); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v", err)
	}
}
