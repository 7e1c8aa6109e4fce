package mcpgw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/internal/testkit"
	"github.com/surfaced/surfaced/internal/testkit/daemon"
)

// TestCanvasSessionTools: a client attached to a Canvas session sees the
// canvas commands as typed tools (canvas_rotate takes degrees, a number),
// and canvas_rotate makes a new derived version that a browser sees, linked
// as a resource the client reads.
func TestCanvasSessionTools(t *testing.T) {
	bin := testkit.Build(t, "./examples/canvas-agent")
	d := daemon.Start(t, daemon.Agents(surfaced.AgentSpec{Name: "canvas", Title: "Canvas", Argv: []string{bin},
		Env: []string{"SURFACED_CANVAS_STAGE_MS=0", "SURFACED_LLM_BASE_URL="}}))
	id := d.Create(nil)
	ready(t, d, id)
	att := uploadPNG(t, d, id)
	if st, out := d.JSON("POST", "/api/sessions/"+id+"/surfaces/canvas/register", map[string]any{"args": map[string]any{"attachmentId": att}}); st != 200 || out["ok"] != true {
		t.Fatalf("register: %d %v", st, out)
	}
	browser := d.SSE(id, "")
	defer browser.Close()

	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			c := connect(t, d, d.Token, "/mcp/sessions/"+id, v)
			tools, err := c.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var rotate *mcp.Tool
			for _, tl := range tools.Tools {
				if tl.Name == "canvas_rotate" {
					rotate = tl
				}
			}
			if rotate == nil {
				t.Fatalf("no canvas_rotate: %v", names(tools.Tools))
			}
			var sch struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
				Required []string `json:"required"`
			}
			b, _ := json.Marshal(rotate.InputSchema)
			if err := json.Unmarshal(b, &sch); err != nil || sch.Properties["degrees"].Type != "number" || len(sch.Required) != 1 || sch.Required[0] != "degrees" {
				t.Errorf("canvas_rotate's schema: %s", b)
			}
			if !strings.HasPrefix(rotate.Description, "Rotate an image") {
				t.Errorf("canvas_rotate's description: %q", rotate.Description)
			}

			out, res := c.call(t, "canvas_rotate", map[string]any{"degrees": "ninety"})
			if !res.IsError || errCode(out) != "invalid_args" {
				t.Errorf("canvas_rotate with a string: %v", out)
			}
			out, res = c.call(t, "canvas_rotate", map[string]any{"degrees": 90})
			if res.IsError {
				t.Fatalf("canvas_rotate: %v", out)
			}
			var link *mcp.ResourceLink
			for _, ct := range res.Content {
				if l, ok := ct.(*mcp.ResourceLink); ok {
					link = l
				}
			}
			if link == nil || !strings.HasPrefix(link.URI, "surfaced://sessions/"+id+"/artifacts/att_") || link.MIMEType != "image/png" {
				t.Fatalf("no resource link to the new version: %v", res.Content)
			}
			newID := link.URI[strings.LastIndex(link.URI, "/")+1:]
			// The browser sees the derived version in the gallery.
			browser.Wait(t, 15*time.Second, "the browser sees the new version", func(e testkit.Event) bool {
				if e.Kind != "state" || e.Data["key"] != "surface:canvas" {
					return false
				}
				v, _ := json.Marshal(e.Data["value"])
				return strings.Contains(string(v), `"id":"`+newID+`"`) && strings.Contains(string(v), `"derivedFrom":"`+att+`"`)
			})
			// The link reads as the image's bytes.
			rr, err := c.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: link.URI})
			if err != nil {
				t.Fatal(err)
			}
			if got := rr.Contents[0]; got.MIMEType != "image/png" || len(got.Blob) == 0 {
				t.Errorf("read %s: %s, %d bytes", link.URI, got.MIMEType, len(got.Blob))
			} else if _, err := png.Decode(bytes.NewReader(got.Blob)); err != nil {
				t.Errorf("the blob is not a PNG: %v", err)
			}
			att = newID // the next version derives from this one
		})
	}
}

func uploadPNG(t *testing.T, d *daemon.Daemon, session string) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 20))
	for x := 0; x < 40; x++ {
		for y := 0; y < 20; y++ {
			img.Set(x, y, color.RGBA{uint8(x * 6), uint8(y * 12), 200, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", d.URL+"/api/sessions/"+session+"/artifacts?name=bars.png", bytes.NewReader(b.Bytes()))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "image/png")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Artifact struct {
			ID string `json:"id"`
		} `json:"artifact"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %v", resp.StatusCode, err)
	}
	return out.Artifact.ID
}
