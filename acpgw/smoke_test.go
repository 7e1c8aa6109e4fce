package acpgw_test

import (
	"testing"

	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

func TestSmokePromptRoundTrip(t *testing.T) {
	d := daemon.Start(t)
	c := d.ACPClient()
	res := c.Initialize()
	t.Logf("initialize: %v", res)
	sid := c.NewSession(daemon.TempDir(t))
	id := c.Prompt(sid, "hello there")
	text, kinds, resp := c.Turn(sid, id)
	t.Logf("text=%q kinds=%v resp=%v", text, kinds, resp)
	if text != "echo: hello there" || daemon.StopReason(resp) != "end_turn" {
		t.Fatalf("got %q %v", text, resp)
	}
}
