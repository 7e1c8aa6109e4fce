package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/agentproc/agentkit"
	"github.com/surfaced/surfaced/agentproc/agentkit/agentkittest"
)

// quadrants is a w×h image whose four quadrants are red (top left), green
// (top right), blue (bottom left) and white (bottom right), so that a test can
// tell where each corner went.
func quadrants(w, h int) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.NRGBA{A: 255}
			switch {
			case x < w/2 && y < h/2:
				c.R = 200
			case y < h/2:
				c.G = 200
			case x < w/2:
				c.B = 200
			default:
				c = color.NRGBA{R: 200, G: 200, B: 200, A: 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// decoded is the image an artifact holds.
func (d *fakeDaemon) decoded(id string) (image.Image, string) {
	d.t.Helper()
	s, ok := d.artifact(id)
	if !ok {
		d.t.Fatalf("no artifact %s", id)
	}
	img, format, err := image.Decode(bytes.NewReader(s.bytes))
	if err != nil {
		d.t.Fatalf("artifact %s does not decode: %v", id, err)
	}
	return img, format
}

func rgbAt(img image.Image, x, y int) [3]uint8 {
	c := color.NRGBAModel.Convert(img.At(img.Bounds().Min.X+x, img.Bounds().Min.Y+y)).(color.NRGBA)
	return [3]uint8{c.R, c.G, c.B}
}

func near(a, b [3]uint8) bool {
	for i := range a {
		if d := int(a[i]) - int(b[i]); d > 12 || d < -12 {
			return false
		}
	}
	return true
}

var (
	red   = [3]uint8{200, 0, 0}
	green = [3]uint8{0, 200, 0}
	blue  = [3]uint8{0, 0, 200}
	white = [3]uint8{200, 200, 200}
)

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func itemIDs(g Gallery) []string {
	ids := make([]string, len(g.Items))
	for i, it := range g.Items {
		ids[i] = it.ID
	}
	return ids
}

func decodeData[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

// uploaded stores an image as the panel's upload would, and registers it.
func uploaded(t *testing.T, d *fakeDaemon, b []byte, name string) string {
	t.Helper()
	a := d.add(b, "image/png", name, "", nil)
	d.ui("register", RegisterArgs{AttachmentID: a.ID})
	return a.ID
}

// At start the agent rebuilds the gallery from the session's image
// artifacts (every page), without previews or other media types.
func TestHydrateAtStart(t *testing.T) {
	img := encodePNG(t, quadrants(8, 8))
	d, _ := startCanvas(t, scriptedModel{})
	// The seeds are stored before the agent lists them: added under the
	// lock, before the first command can run. Add them now and sync again
	// to be independent of the order.
	a1 := d.add(img, "image/png", "one.png", "", nil)
	d.add([]byte("hello"), "text/plain", "notes.txt", "", nil)
	a2 := d.add(img, "image/png", "two.png", a1.ID, json.RawMessage(`{"canvas":{"role":"image","params":{"op":"rotate","degrees":90}}}`))
	d.add(img, "image/jpeg", "p.jpg", "", json.RawMessage(`{"canvas":{"role":"preview"}}`))
	d.add([]byte("<svg/>"), "image/svg+xml", "x.svg", "", nil)
	a3 := d.add(img, "image/png", "three.png", "", nil)
	a4 := d.add(img, "image/png", "four.png", "", nil)
	d.ui("sync", nil)
	g := d.gallery()
	if want := []string{a1.ID, a2.ID, a3.ID, a4.ID}; !slices.Equal(itemIDs(g), want) {
		t.Fatalf("items %v, want %v", itemIDs(g), want)
	}
	if g.Current != a4.ID || g.LivePreview != nil {
		t.Errorf("current %q livePreview %+v", g.Current, g.LivePreview)
	}
	if it := g.Items[1]; it.DerivedFrom != a1.ID || !sameJSON(string(it.Params), `{"op":"rotate","degrees":90}`) || it.Name != "two.png" || it.CreatedAt == "" {
		t.Errorf("item 2 %+v", it)
	}
}

func TestHydrateRunsOnReady(t *testing.T) {
	img := encodePNG(t, quadrants(8, 8))
	d, _ := startCanvas(t, scriptedModel{}, img, img)
	g := d.waitGallery("hydrated with the two seeds", func(g Gallery) bool { return len(g.Items) == 2 })
	if g.Current != g.Items[1].ID {
		t.Errorf("current %q", g.Current)
	}
}

func TestRegisterSelectDelete(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	img := encodePNG(t, quadrants(8, 8))
	a := d.add(img, "image/png", "a.png", "", nil)
	b := d.add(img, "image/png", "b.png", "", nil)
	c := d.add(img, "image/png", "c.png", "", nil)
	txt := d.add([]byte("not an image"), "text/plain", "t.txt", "", nil)
	fake := d.add([]byte("not a png at all"), "image/png", "fake.png", "", nil)

	res := decodeData[ItemResult](t, d.ui("register", RegisterArgs{AttachmentID: a.ID, Params: json.RawMessage(`{ "source": "upload" }`)}))
	if res.ID != a.ID || string(res.Params) != `{"source":"upload"}` {
		t.Errorf("register answered %+v", res)
	}
	d.ui("register", RegisterArgs{AttachmentID: b.ID, DerivedFrom: a.ID})
	d.ui("register", map[string]string{"attachmentId": c.ID})
	g := d.gallery()
	if !slices.Equal(itemIDs(g), []string{a.ID, b.ID, c.ID}) || g.Current != c.ID || g.Items[1].DerivedFrom != a.ID {
		t.Fatalf("gallery %+v", g)
	}

	for _, tc := range []struct {
		name, action string
		args         any
		code         string
	}{
		{"register a text", "register", RegisterArgs{AttachmentID: txt.ID}, agentproc.CodeInvalidArgs},
		{"register bytes that are no image", "register", RegisterArgs{AttachmentID: fake.ID}, agentproc.CodeInvalidArgs},
		{"register a missing artifact", "register", RegisterArgs{AttachmentID: "att_missing0000"}, "not_found"},
		{"register without an id", "register", `{}`, agentproc.CodeInvalidArgs},
		{"register with params that are no object", "register", `{"attachmentId":"` + a.ID + `","params":[1]}`, agentproc.CodeInvalidArgs},
		{"register with a bad derivedFrom", "register", RegisterArgs{AttachmentID: a.ID, DerivedFrom: "x"}, agentproc.CodeInvalidArgs},
		{"register with args of the wrong type", "register", `{"attachmentId":7}`, agentproc.CodeInvalidArgs},
		{"select an image not in the gallery", "select", ItemArgs{AttachmentID: txt.ID}, "not_found"},
		{"select without an id", "select", nil, agentproc.CodeInvalidArgs},
		{"delete an image not in the gallery", "delete", ItemArgs{AttachmentID: "att_nothere000"}, "not_found"},
		{"preview without a stage", "preview", PreviewArgs{Progress: 0.5}, agentproc.CodeInvalidArgs},
		{"preview with progress above 1", "preview", PreviewArgs{Stage: "x", Progress: 2}, agentproc.CodeInvalidArgs},
		{"an unknown action", "explode", nil, agentproc.CodeUnknownAction},
	} {
		if code := d.uiFail(tc.action, tc.args); code != tc.code {
			t.Errorf("%s: code %q, want %q", tc.name, code, tc.code)
		}
	}
	if g2 := d.gallery(); !slices.Equal(itemIDs(g2), itemIDs(g)) || g2.Current != g.Current {
		t.Errorf("failed commands changed the gallery: %+v", g2)
	}

	d.ui("select", ItemArgs{AttachmentID: a.ID})
	if g := d.gallery(); g.Current != a.ID {
		t.Errorf("current after select %q", g.Current)
	}
	// Deleting the current image moves the stage to its neighbour; sync
	// does not bring it back; registering it again does.
	d.ui("select", ItemArgs{AttachmentID: b.ID})
	d.ui("delete", ItemArgs{AttachmentID: b.ID})
	g = d.gallery()
	if !slices.Equal(itemIDs(g), []string{a.ID, c.ID}) || g.Current != c.ID || !slices.Contains(g.Hidden, b.ID) {
		t.Fatalf("after delete %+v", g)
	}
	d.ui("sync", nil)
	if g := d.gallery(); slices.Contains(itemIDs(g), b.ID) {
		t.Errorf("sync brought back a deleted image: %v", itemIDs(g))
	}
	// sync shows every image artifact but the deleted ones, even one whose
	// bytes register refused (it cannot read every upload); not the text.
	if g := d.gallery(); !slices.Equal(itemIDs(g), []string{a.ID, c.ID, fake.ID}) {
		t.Errorf("after sync %v", itemIDs(g))
	}
	d.ui("delete", ItemArgs{AttachmentID: fake.ID})
	d.ui("register", RegisterArgs{AttachmentID: b.ID})
	if g := d.gallery(); !slices.Contains(itemIDs(g), b.ID) || slices.Contains(g.Hidden, b.ID) || g.Current != b.ID {
		t.Errorf("register after delete %+v", g)
	}
	// register keeps params given at upload across a sync.
	d.ui("sync", nil)
	if g := d.gallery(); string(g.Items[0].Params) != `{"source":"upload"}` {
		t.Errorf("params after sync %s", g.Items[0].Params)
	}
	d.ui("delete", ItemArgs{AttachmentID: a.ID})
	d.ui("delete", ItemArgs{AttachmentID: b.ID})
	d.ui("delete", ItemArgs{AttachmentID: c.ID})
	if g := d.gallery(); len(g.Items) != 0 || g.Current != "" {
		t.Errorf("empty gallery %+v", g)
	}
}

// Every deterministic edit writes a new artifact derived from its source,
// with its params, and puts it on the stage.
func TestEdits(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	src := uploaded(t, d, encodePNG(t, quadrants(40, 20)), "quad.png")
	jpg := d.add(encodeJPEG(t, quadrants(40, 20)), "image/jpeg", "photo.jpg", "", nil)
	d.ui("register", RegisterArgs{AttachmentID: jpg.ID})

	type check func(t *testing.T, img image.Image)
	corners := func(tl, tr, bl, br [3]uint8) check {
		return func(t *testing.T, img image.Image) {
			b := img.Bounds()
			got := [4][3]uint8{rgbAt(img, 1, 1), rgbAt(img, b.Dx()-2, 1), rgbAt(img, 1, b.Dy()-2), rgbAt(img, b.Dx()-2, b.Dy()-2)}
			want := [4][3]uint8{tl, tr, bl, br}
			for i := range got {
				if !near(got[i], want[i]) {
					t.Errorf("corners %v, want %v", got, want)
					return
				}
			}
		}
	}
	size := func(w, h int) check {
		return func(t *testing.T, img image.Image) {
			if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
				t.Errorf("size %d×%d, want %d×%d", b.Dx(), b.Dy(), w, h)
			}
		}
	}
	for _, tc := range []struct {
		action string
		args   string
		params string
		checks []check
	}{
		{"rotate", `{"degrees":90}`, `{"op":"rotate","degrees":90}`, []check{size(20, 40), corners(blue, red, white, green)}},
		{"rotate", `{"degrees":-90}`, `{"op":"rotate","degrees":-90}`, []check{size(20, 40), corners(green, white, red, blue)}},
		{"rotate", `{"degrees":180}`, `{"op":"rotate","degrees":180}`, []check{size(40, 20), corners(white, blue, green, red)}},
		{"flip", `{"axis":"horizontal"}`, `{"op":"flip","axis":"horizontal"}`, []check{corners(green, red, white, blue)}},
		{"flip", `{"axis":"vertical"}`, `{"op":"flip","axis":"vertical"}`, []check{corners(blue, white, red, green)}},
		{"crop", `{"x":20,"y":0,"w":20,"h":10}`, `{"op":"crop","x":20,"y":0,"w":20,"h":10}`, []check{size(20, 10), corners(green, green, green, green)}},
		{"crop", `{"x":30,"y":10,"w":100,"h":100}`, `{"op":"crop","x":30,"y":10,"w":10,"h":10}`, []check{size(10, 10), corners(white, white, white, white)}},
		{"resize", `{"width":20}`, `{"op":"resize","width":20,"height":10}`, []check{size(20, 10)}},
		{"resize", `{"width":10,"height":30}`, `{"op":"resize","width":10,"height":30}`, []check{size(10, 30)}},
		{"grayscale", `{}`, `{"op":"grayscale"}`, []check{func(t *testing.T, img image.Image) {
			if c := rgbAt(img, 1, 1); c[0] != c[1] || c[1] != c[2] {
				t.Errorf("grayscale pixel %v", c)
			}
		}}},
		{"adjust", `{"brightness":30,"contrast":10}`, `{"op":"adjust","brightness":30,"contrast":10}`, []check{func(t *testing.T, img image.Image) {
			if c := rgbAt(img, 1, 1); c[0] <= 200 || c[1] == 0 {
				t.Errorf("brighter red is %v", c)
			}
		}}},
		{"blur", `{"sigma":4}`, `{"op":"blur","sigma":4}`, []check{func(t *testing.T, img image.Image) {
			if c := rgbAt(img, 19, 5); c[0] == 200 || c[1] == 0 {
				t.Errorf("the edge between red and green is still sharp: %v", c)
			}
		}}},
		{"sharpen", `{"sigma":1}`, `{"op":"sharpen","sigma":1}`, []check{size(40, 20)}},
		{"invert", `null`, `{"op":"invert"}`, []check{corners([3]uint8{55, 255, 255}, [3]uint8{255, 55, 255}, [3]uint8{255, 255, 55}, [3]uint8{55, 55, 55})}},
	} {
		t.Run(tc.action+tc.args, func(t *testing.T) {
			args := json.RawMessage(tc.args)
			if tc.args != "null" {
				// Name the source explicitly: the stage moves with every edit.
				var m map[string]any
				_ = json.Unmarshal(args, &m)
				m["attachmentId"] = src
				args, _ = json.Marshal(m)
			}
			if tc.args == "null" {
				d.ui("select", ItemArgs{AttachmentID: src})
			}
			res := decodeData[ItemResult](t, d.ui(tc.action, args))
			if res.DerivedFrom != src || !sameJSON(string(res.Params), tc.params) {
				t.Errorf("answer %+v, want derived from %s with %s", res, src, tc.params)
			}
			g := d.gallery()
			it := g.Items[len(g.Items)-1]
			if g.Current != res.ID || it.ID != res.ID || it.DerivedFrom != src || !sameJSON(string(it.Params), tc.params) {
				t.Errorf("gallery %+v", g)
			}
			s, _ := d.artifact(res.ID)
			if s.art.DerivedFrom != src || s.art.MediaType != "image/png" || !strings.HasPrefix(s.art.Name, "quad (") {
				t.Errorf("artifact %+v", s.art)
			}
			if role, p := metaOf(fromKit(s.art)); role != roleImage || !sameJSON(string(p), tc.params) {
				t.Errorf("artifact meta %s", s.art.Meta)
			}
			img, _ := d.decoded(res.ID)
			for _, c := range tc.checks {
				c(t, img)
			}
		})
	}

	// A JPEG stays a JPEG, unless the edit leaves transparent corners.
	res := decodeData[ItemResult](t, d.ui("grayscale", map[string]string{"attachmentId": jpg.ID}))
	if _, format := d.decoded(res.ID); format != "jpeg" {
		t.Errorf("grayscale of a JPEG is %s", format)
	}
	res = decodeData[ItemResult](t, d.ui("rotate", map[string]any{"attachmentId": jpg.ID, "degrees": 30}))
	img, format := d.decoded(res.ID)
	if format != "png" {
		t.Errorf("a 30° rotation of a JPEG is %s", format)
	}
	if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
		t.Errorf("the corner of a 30° rotation is not transparent")
	}
	// Without attachmentId an edit takes the current image.
	d.ui("select", ItemArgs{AttachmentID: src})
	res = decodeData[ItemResult](t, d.ui("invert", nil))
	if res.DerivedFrom != src {
		t.Errorf("invert of the current image derived from %s", res.DerivedFrom)
	}

	n := len(d.gallery().Items)
	for _, tc := range []struct{ action, args, code string }{
		{"rotate", `{"degrees":0}`, agentproc.CodeInvalidArgs},
		{"rotate", `{"degrees":720}`, agentproc.CodeInvalidArgs},
		{"rotate", `{"degrees":"ninety"}`, agentproc.CodeInvalidArgs},
		{"flip", `{"axis":"diagonal"}`, agentproc.CodeInvalidArgs},
		{"crop", `{"x":0,"y":0,"w":0,"h":5}`, agentproc.CodeInvalidArgs},
		{"crop", `{"x":500,"y":500,"w":5,"h":5}`, agentproc.CodeInvalidArgs},
		{"resize", `{}`, agentproc.CodeInvalidArgs},
		{"resize", `{"width":9000}`, agentproc.CodeInvalidArgs},
		{"adjust", `{}`, agentproc.CodeInvalidArgs},
		{"adjust", `{"brightness":150}`, agentproc.CodeInvalidArgs},
		{"blur", `{"sigma":0}`, agentproc.CodeInvalidArgs},
		{"grayscale", `{"attachmentId":"att_notinthegallery"}`, "not_found"},
		{"grayscale", `[1,2]`, agentproc.CodeInvalidArgs},
	} {
		if code := d.uiFail(tc.action, json.RawMessage(tc.args)); code != tc.code {
			t.Errorf("%s %s: code %q, want %q", tc.action, tc.args, code, tc.code)
		}
	}
	if len(d.gallery().Items) != n {
		t.Errorf("failed edits added images")
	}
}

func TestEditOnAnEmptyGallery(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	if code := d.uiFail("rotate", map[string]int{"degrees": 90}); code != "not_found" {
		t.Errorf("rotate with no image: %q", code)
	}
}

// stagesSeen are the live-preview stages of the snapshots in order (a
// stage repeated in consecutive snapshots counts once).
func stagesSeen(hist []Gallery) []LivePreview {
	var out []LivePreview
	for _, g := range hist {
		if g.LivePreview != nil && (len(out) == 0 || out[len(out)-1] != *g.LivePreview) {
			out = append(out, *g.LivePreview)
		}
	}
	return out
}

func checkLivePreview(t *testing.T, d *fakeDaemon, from int) {
	t.Helper()
	stages := stagesSeen(d.snapshots()[from:])
	withArtifact := 0
	for i, s := range stages {
		if i > 0 && s.Progress <= stages[i-1].Progress {
			t.Errorf("progress went back: %+v", stages)
		}
		if s.Artifact != "" {
			withArtifact++
			a, ok := d.artifact(s.Artifact)
			if role, _ := metaOf(fromKit(a.art)); !ok || role != rolePreview || a.art.MediaType != "image/jpeg" || len(a.bytes) > 64<<10 {
				t.Errorf("preview artifact %+v (%d bytes)", a.art, len(a.bytes))
			}
		}
	}
	if withArtifact < 3 {
		t.Errorf("live preview showed %d stages with an image, want at least 3: %+v", withArtifact, stages)
	}
}

// The chat edits through the model: "make it brighter" calls image_edit,
// the live preview sharpens through three stages, the result is derived
// from the image on the stage, and at agent_end the gallery is rebuilt and
// the preview cleared.
func TestChatEdits(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	first := uploaded(t, d, encodePNG(t, quadrants(40, 20)), "quad.png")
	second := uploaded(t, d, encodePNG(t, quadrants(20, 20)), "small.png")

	from := len(d.snapshots())
	d.prompt("make it brighter")
	g := d.waitGallery("the edit and the rebuild", func(g Gallery) bool { return len(g.Items) == 3 && g.LivePreview == nil })
	checkLivePreview(t, d, from)
	it := g.Items[2]
	var p map[string]any
	_ = json.Unmarshal(it.Params, &p)
	if it.DerivedFrom != second || g.Current != it.ID || p["op"] != "adjust" || p["brightness"] != 20.0 || p["instruction"] != "make it brighter" {
		t.Errorf("edited item %+v params %v", it, p)
	}
	if got := d.toolArtifacts("image_edit"); !slices.Equal(got, []string{it.ID}) {
		t.Errorf("image_edit's result names %v, want the new image %s", got, it.ID)
	}
	if all, previews := d.count(); previews < 3 || len(g.Items) != all-previews {
		t.Errorf("%d artifacts, %d previews, %d items", all, previews, len(g.Items))
	}

	// "that last one" is the image the conversation named last: the result.
	d.prompt("now make that last one black and white and rotate it left")
	g = d.waitGallery("the second edit", func(g Gallery) bool { return len(g.Items) == 4 && g.LivePreview == nil })
	it = g.Items[3]
	_ = json.Unmarshal(it.Params, &p)
	steps, _ := p["steps"].([]any)
	if it.DerivedFrom != g.Items[2].ID || p["op"] != "edit" || len(steps) != 2 {
		t.Errorf("second edit %+v", it)
	}
	if img, _ := d.decoded(it.ID); img.Bounds().Dx() != 20 {
		t.Errorf("rotated image is %v", img.Bounds())
	}

	// An attachment names the image to edit.
	d.prompt("blur this", first)
	g = d.waitGallery("the blur", func(g Gallery) bool { return len(g.Items) == 5 })
	if it := g.Items[4]; it.DerivedFrom != first {
		t.Errorf("blur derived from %s, want the attachment %s", it.DerivedFrom, first)
	}

	// A message that names no edit gets the help text, and nothing changes.
	d.prompt("make it sing")
	if got := d.gallery(); len(got.Items) != 5 {
		t.Errorf("a chat without an edit changed the gallery: %v", itemIDs(got))
	}
}

func TestChatGenerates(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	from := len(d.snapshots())
	d.prompt("Please draw a sunset over the sea 320x200")
	g := d.waitGallery("the generated image", func(g Gallery) bool { return len(g.Items) == 1 && g.LivePreview == nil })
	checkLivePreview(t, d, from)
	it := g.Items[0]
	if string(it.Params) != `{"height":200,"op":"generate","prompt":"a sunset over the sea","width":320}` || it.DerivedFrom != "" {
		t.Errorf("generated item %+v", it)
	}
	if got := d.toolArtifacts("image_generate"); !slices.Equal(got, []string{it.ID}) {
		t.Errorf("image_generate's result names %v, want the new image %s", got, it.ID)
	}
	img, format := d.decoded(it.ID)
	if format != "png" || img.Bounds().Dx() != 320 || img.Bounds().Dy() != 200 {
		t.Errorf("generated %s %v", format, img.Bounds())
	}
	// Then edit it by chat.
	d.prompt("rotate it")
	g = d.waitGallery("the rotation", func(g Gallery) bool { return len(g.Items) == 2 })
	if g.Items[1].DerivedFrom != it.ID {
		t.Errorf("rotation derived from %s", g.Items[1].DerivedFrom)
	}
}

func TestToolArgumentErrors(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	_ = d
	c := &Canvas{} // every call fails before it reads or writes an artifact
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"edit without instruction", func() error { _, err := c.ToolEdit(t.Context(), nil, EditArgs{}); return err }, "needs an instruction"},
		{"edit it cannot do", func() error {
			_, err := c.ToolEdit(t.Context(), nil, EditArgs{Instruction: "sing"})
			return err
		}, "what it can do"},
		{"edit a bad id", func() error {
			_, err := c.ToolEdit(t.Context(), nil, EditArgs{AttachmentID: "nope", Instruction: "blur"})
			return err
		}, "att_"},
		{"generate without prompt", func() error { _, err := c.ToolGenerate(t.Context(), nil, GenerateArgs{}); return err }, "needs a prompt"},
		{"generate too large", func() error {
			_, err := c.ToolGenerate(t.Context(), nil, GenerateArgs{Prompt: "x", Width: 5000, Height: 10})
			return err
		}, "from 64 to 1536"},
	} {
		err := tc.run()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// Turn-end convergence: an image stored during the run without being
// registered (an upload), and a stale live preview, are both settled when
// the run ends.
func TestAgentEndRebuilds(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	d.waitGallery("hydrated", func(g Gallery) bool { return true })
	d.ui("preview", PreviewArgs{Stage: "stale", Progress: 0.5})
	a := d.add(encodePNG(t, quadrants(8, 8)), "image/png", "late.png", "", nil)
	d.prompt("hello")
	g := d.waitGallery("rebuilt at agent_end", func(g Gallery) bool { return g.LivePreview == nil && len(g.Items) == 1 })
	if g.Items[0].ID != a.ID || g.Current != a.ID {
		t.Errorf("gallery %+v", g)
	}
}

func TestSyncFailureChangesNothing(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	id := uploaded(t, d, encodePNG(t, quadrants(8, 8)), "a.png")
	d.mu.Lock()
	d.failList = true
	d.mu.Unlock()
	if code := d.uiFail("sync", nil); code != "store_unavailable" {
		t.Errorf("sync with the store down: %q", code)
	}
	if g := d.gallery(); !slices.Equal(itemIDs(g), []string{id}) {
		t.Errorf("gallery after a failed sync %v", itemIDs(g))
	}
}

// No line the agent writes carries image bytes or comes near a frame's
// 64 KiB, however many images the gallery holds.
func TestNoBytesInLines(t *testing.T) {
	d, _ := startCanvas(t, scriptedModel{})
	img := encodePNG(t, quadrants(64, 64))
	for range MaxItems + 20 {
		d.add(img, "image/png", strings.Repeat("long name ", 30)+".png", "att_00000000000000000000000001",
			json.RawMessage(`{"canvas":{"role":"image","params":{"op":"generate","prompt":"`+strings.Repeat("p", 280)+`"}}}`))
	}
	d.ui("sync", nil)
	d.prompt("draw a forest at night")
	d.prompt("make it brighter")
	if g := d.gallery(); len(g.Items) != MaxItems {
		t.Errorf("%d items, want the newest %d", len(g.Items), MaxItems)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, line := range d.lines {
		if len(line) > 64<<10 {
			t.Errorf("a %d-byte line: %.200s", len(line), line)
		}
		for _, sig := range []string{"data:image", "iVBORw0KGgo", "/9j/", "UklGR"} {
			if bytes.Contains(line, []byte(sig)) {
				t.Errorf("a line carries image data (%s): %.200s", sig, line)
			}
		}
	}
}

// With an OpenAI-compatible model configured, the model chooses the tool
// and its arguments.
func TestRealModelChoosesTool(t *testing.T) {
	srv := agentkittest.NewOpenAIServer(t, func(r agentkittest.ChatRequest) agentkittest.Reply {
		if r.LastRole() == "tool" {
			return agentkittest.Reply{Events: agentkittest.TextEvents("Done.")}
		}
		return agentkittest.Reply{Events: agentkittest.ToolCallEvents("call_1", "image_generate", `{"prompt":"a desert`, ` dune","width":128,"height":96}`)}
	})
	d, _ := startCanvas(t, &agentkit.OpenAIModel{BaseURL: srv.URL, Model: "m"})
	d.prompt("something nice")
	g := d.waitGallery("the model's image", func(g Gallery) bool { return len(g.Items) == 1 })
	if string(g.Items[0].Params) != `{"height":96,"op":"generate","prompt":"a desert dune","width":128}` {
		t.Errorf("item %+v", g.Items[0])
	}
	reqs := srv.Requests()
	var names []string
	for _, tl := range reqs[0].Tools {
		names = append(names, tl.Function.Name)
	}
	if !slices.Equal(names, []string{"image_edit", "image_generate"}) {
		t.Errorf("tools offered %v", names)
	}
}

func TestManifest(t *testing.T) {
	b, err := os.ReadFile("agent.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name, Title, Description string
		Command                  []string
		GoBuild                  string            `json:"go_build"`
		Panels                   map[string]string `json:"panels"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Name != "canvas" || m.GoBuild != "." || m.Panels["canvas"] != "ui/canvas.js" {
		t.Errorf("manifest %+v", m)
	}
	if _, err := os.Stat(m.Panels["canvas"]); err != nil {
		t.Errorf("panel module: %v", err)
	}
}
