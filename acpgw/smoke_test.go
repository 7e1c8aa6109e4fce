package acpgw_test

import (
	"testing"
)

func TestSmokePromptRoundTrip(t *testing.T) {
	d := startDaemon(t)
	c := d.client()
	res := c.initialize()
	t.Logf("initialize: %v", res)
	sid := c.newSession(tempDir(t))
	id := c.prompt(sid, "hello there")
	text, kinds, resp := c.turn(sid, id)
	t.Logf("text=%q kinds=%v resp=%v", text, kinds, resp)
	if text != "echo: hello there" || stopReason(resp) != "end_turn" {
		t.Fatalf("got %q %v", text, resp)
	}
}
