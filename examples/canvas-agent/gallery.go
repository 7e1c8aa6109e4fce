package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Gallery is the snapshot of the domain "canvas": a materialized view of the
// session's image artifacts. It holds ids and small parameters only, never
// image bytes, data URIs or URLs (signed URLs expire; the panel asks for them).
type Gallery struct {
	// Items are the images, oldest first.
	Items []Item `json:"items"`
	// Current is the id of the image on the stage ("" when the gallery is empty).
	Current string `json:"current,omitempty"`
	// LivePreview is set while a tool works on an image.
	LivePreview *LivePreview `json:"livePreview,omitempty"`
	// Hidden are images deleted from the gallery. The artifacts themselves
	// stay (agents cannot delete artifacts, and derived images keep their
	// lineage), so sync must know not to bring them back.
	Hidden []string `json:"hidden,omitempty"`
}

// Item is one image of the gallery.
type Item struct {
	ID          string          `json:"id"`
	DerivedFrom string          `json:"derivedFrom,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
	CreatedAt   string          `json:"createdAt"`
	Name        string          `json:"name,omitempty"`
}

// LivePreview is the progress of a tool at work: a stage name, a fraction,
// and a small real artifact showing the image so far (blurry, then sharper).
type LivePreview struct {
	Stage    string  `json:"stage"`
	Progress float64 `json:"progress"`
	Artifact string  `json:"artifact,omitempty"`
	// Task says what the tool does ("brighter", "generate: a red barn").
	Task string `json:"task,omitempty"`
}

// Limits of the snapshot, so that it stays far below a frame's 64 KiB.
const (
	// MaxItems is how many images the gallery shows; sync keeps the newest.
	MaxItems = 100
	// maxHidden bounds the tombstones of deleted images.
	maxHidden = 500
	// maxParamsBytes bounds one item's params.
	maxParamsBytes = 2048
	// maxNameBytes bounds one item's name.
	maxNameBytes = 120
)

// Artifact is what the canvas needs to know of a session artifact.
type Artifact struct {
	ID          string
	MediaType   string
	Name        string
	CreatedAt   string
	DerivedFrom string
	Meta        json.RawMessage
}

// PutOptions are the optional fields of a put.
type PutOptions struct {
	Name        string
	DerivedFrom string
	Meta        any
}

// Artifacts is the part of the session's artifact store the canvas uses.
// agentkit's Artifacts satisfies it through agentArtifacts; tests use an
// in-memory store. Files move by path: Put ingests a file the canvas wrote
// in Dir; Get writes an artifact's bytes to a file the caller then owns.
type Artifacts interface {
	Dir() string
	Put(ctx context.Context, path, mediaType string, opts PutOptions) (Artifact, error)
	Get(ctx context.Context, id string) (path string, art Artifact, err error)
	// List returns a page of image artifacts, newest first, and the next
	// page's cursor ("" on the last).
	List(ctx context.Context, cursor string) ([]Artifact, string, error)
	URL(ctx context.Context, id string, ttl time.Duration) (string, error)
}

// canvasMeta is the part of an artifact's meta the canvas writes and reads:
// {"canvas": {"role": "image"|"preview", "params": {...}}}.
type canvasMeta struct {
	Canvas *struct {
		Role   string          `json:"role,omitempty"`
		Params json.RawMessage `json:"params,omitempty"`
	} `json:"canvas,omitempty"`
}

const (
	roleImage   = "image"
	rolePreview = "preview"
)

func metaOf(a Artifact) (role string, params json.RawMessage) {
	var m canvasMeta
	if len(a.Meta) == 0 || json.Unmarshal(a.Meta, &m) != nil || m.Canvas == nil {
		return "", nil
	}
	return m.Canvas.Role, m.Canvas.Params
}

func imageMeta(params json.RawMessage) map[string]any {
	c := map[string]any{"role": roleImage}
	if len(params) > 0 {
		c["params"] = params
	}
	return map[string]any{"canvas": c}
}

var previewMeta = map[string]any{"canvas": map[string]any{"role": rolePreview}}

// isGalleryImage reports whether an artifact belongs in the gallery: an image
// that is not a live-preview stage.
func isGalleryImage(a Artifact) bool {
	if !strings.HasPrefix(a.MediaType, "image/") || a.MediaType == "image/svg+xml" {
		return false
	}
	role, _ := metaOf(a)
	return role != rolePreview
}

func (g Gallery) index(id string) int {
	return slices.IndexFunc(g.Items, func(it Item) bool { return it.ID == id })
}

// clone copies the slices, so a command never writes into the state it was
// given.
func (g Gallery) clone() Gallery {
	g.Items = slices.Clone(g.Items)
	g.Hidden = slices.Clone(g.Hidden)
	if g.LivePreview != nil {
		lp := *g.LivePreview
		g.LivePreview = &lp
	}
	return g
}

// withItem adds it (or updates the item with its id), makes it current and
// forgets a tombstone of it: registering an image again brings it back.
func (g Gallery) withItem(it Item) Gallery {
	g = g.clone()
	g.Hidden = slices.DeleteFunc(g.Hidden, func(id string) bool { return id == it.ID })
	if i := g.index(it.ID); i >= 0 {
		old := g.Items[i]
		if it.Params == nil {
			it.Params = old.Params
		}
		if it.DerivedFrom == "" {
			it.DerivedFrom = old.DerivedFrom
		}
		if it.Name == "" {
			it.Name = old.Name
		}
		g.Items[i] = it
	} else {
		g.Items = append(g.Items, it)
		if n := len(g.Items); n > MaxItems {
			g.Items = slices.Clone(g.Items[n-MaxItems:])
		}
	}
	g.Current = it.ID
	return g
}

// without removes id, leaves a tombstone and moves current to a neighbour.
func (g Gallery) without(id string) Gallery {
	g = g.clone()
	i := g.index(id)
	if i < 0 {
		return g
	}
	g.Items = slices.Delete(g.Items, i, i+1)
	if !slices.Contains(g.Hidden, id) {
		g.Hidden = append(g.Hidden, id)
		if n := len(g.Hidden); n > maxHidden {
			g.Hidden = slices.Clone(g.Hidden[n-maxHidden:])
		}
	}
	if g.Current == id {
		g.Current = ""
		if len(g.Items) > 0 {
			g.Current = g.Items[min(i, len(g.Items)-1)].ID
		}
	}
	return g
}

// rebuilt is the gallery made afresh from the session's image artifacts
// (newest first, as artifact_list gives them): every image that is not a
// preview and not deleted, oldest first, the newest MaxItems of them. Params
// come from the artifact's meta, or from the old item (an upload registered
// with params). Current stays when it is still there, else the newest image.
func (g Gallery) rebuilt(newestFirst []Artifact) Gallery {
	old := g.clone()
	hidden := make(map[string]bool, len(old.Hidden))
	for _, id := range old.Hidden {
		hidden[id] = true
	}
	items := make([]Item, 0, min(len(newestFirst), MaxItems))
	seen := map[string]bool{}
	for _, a := range newestFirst {
		if len(items) == MaxItems {
			break
		}
		if !isGalleryImage(a) || hidden[a.ID] || seen[a.ID] {
			continue
		}
		seen[a.ID] = true
		it := itemOf(a, nil)
		if it.Params == nil {
			if i := old.index(a.ID); i >= 0 {
				it.Params = old.Items[i].Params
			}
		}
		items = append(items, it)
	}
	slices.Reverse(items)
	out := Gallery{Items: items, LivePreview: old.LivePreview, Hidden: old.Hidden}
	switch {
	case old.Current != "" && seen[old.Current]:
		out.Current = old.Current
	case len(items) > 0:
		out.Current = items[len(items)-1].ID
	}
	return out
}

// itemOf is the gallery item of an artifact; params, when given, win over
// the artifact's meta.
func itemOf(a Artifact, params json.RawMessage) Item {
	if params == nil {
		_, params = metaOf(a)
	}
	return Item{ID: a.ID, DerivedFrom: a.DerivedFrom, Params: params, CreatedAt: a.CreatedAt, Name: truncate(a.Name, maxNameBytes)}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
