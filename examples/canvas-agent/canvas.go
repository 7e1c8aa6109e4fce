package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/disintegration/imaging"
	_ "golang.org/x/image/webp" // uploads may be WebP; imaging decodes what image.Decode knows

	"github.com/surfaced/surfaced/agentproc/agentkit"
	"github.com/surfaced/surfaced/internal/clock"
)

// Domain is the canvas's surface domain.
const Domain = "canvas"

// maxPixels bounds the images the canvas decodes (a 64 MiB upload of a
// highly compressible PNG could otherwise take gigabytes once decoded).
const maxPixels = 40_000_000

// codeNotFound is the code of a command naming an image the gallery does
// not have (the daemon uses the same code for a missing artifact).
const codeNotFound = "not_found"

// Canvas is the canvas's logic: the commands against a gallery and the
// tools' work. It keeps no gallery of its own: commands get the domain
// actor's snapshot and return the next one, and tools go through the domain
// (Surface) like any client.
type Canvas struct {
	Arts Artifacts
	// Clock paces the live-preview stages; nil means the wall clock.
	Clock clock.Clock
	// StagePace is the pause between live-preview stages, so that people see
	// the image sharpen; 0 means none.
	StagePace time.Duration
	Log       *slog.Logger

	busy atomic.Int32 // tools at work; sync leaves their live preview alone
}

// Surface is the canvas domain as a tool reaches it: through the domain
// actor, like any client (agentkit's SurfaceCommand and SurfaceGet).
type Surface interface {
	Command(ctx context.Context, action string, args any) (json.RawMessage, error)
	Get(ctx context.Context) (Gallery, error)
}

func (c *Canvas) clock() clock.Clock {
	if c.Clock == nil {
		return clock.Real{}
	}
	return c.Clock
}

func (c *Canvas) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// ---------------------------------------------------------------- commands

// RegisterArgs are the args of register.
type RegisterArgs struct {
	AttachmentID string          `json:"attachmentId"`
	DerivedFrom  string          `json:"derivedFrom,omitempty"`
	Params       json.RawMessage `json:"params,omitempty"`
}

// ItemArgs name one image of the gallery (select, delete).
type ItemArgs struct {
	AttachmentID string `json:"attachmentId"`
}

// PreviewArgs are the args of preview: a stage of a tool's live preview, or
// Clear to end it.
type PreviewArgs struct {
	Stage    string  `json:"stage"`
	Progress float64 `json:"progress"`
	Artifact string  `json:"artifact,omitempty"`
	Task     string  `json:"task,omitempty"`
	Clear    bool    `json:"clear,omitempty"`
}

// ItemResult is the answer of register and of the edits.
type ItemResult struct {
	ID          string          `json:"id"`
	DerivedFrom string          `json:"derivedFrom,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
}

func checkID(what, id string) error {
	if !strings.HasPrefix(id, "att_") || len(id) > 200 {
		return invalidArgs("%s: attachmentId must be an artifact id (att_…), not %q", what, truncate(id, 60))
	}
	return nil
}

func checkParams(what string, p json.RawMessage) (json.RawMessage, error) {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || bytes.Equal(p, []byte("null")) {
		return nil, nil
	}
	if p[0] != '{' || !json.Valid(p) {
		return nil, invalidArgs("%s: params must be a JSON object", what)
	}
	if len(p) > maxParamsBytes {
		return nil, invalidArgs("%s: params are %d bytes, more than %d", what, len(p), maxParamsBytes)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, p); err != nil {
		return nil, invalidArgs("%s: params: %v", what, err)
	}
	return buf.Bytes(), nil
}

// Register adds an artifact of the session to the gallery (an upload, or a
// tool's result) and puts it on the stage. The artifact must be an image the
// canvas can read. Registering an image again updates it and brings it back
// if it was deleted.
func (c *Canvas) Register(ctx context.Context, g Gallery, args RegisterArgs) (Gallery, ItemResult, error) {
	if err := checkID("register", args.AttachmentID); err != nil {
		return g, ItemResult{}, err
	}
	if args.DerivedFrom != "" {
		if err := checkID("register: derivedFrom", args.DerivedFrom); err != nil {
			return g, ItemResult{}, err
		}
	}
	params, err := checkParams("register", args.Params)
	if err != nil {
		return g, ItemResult{}, err
	}
	art, err := c.probe(ctx, args.AttachmentID)
	if err != nil {
		return g, ItemResult{}, err
	}
	it := itemOf(art, params)
	if args.DerivedFrom != "" {
		it.DerivedFrom = args.DerivedFrom
	}
	g = g.withItem(it)
	return g, ItemResult{ID: it.ID, DerivedFrom: it.DerivedFrom, Params: it.Params}, nil
}

// Select puts an image of the gallery on the stage.
func (c *Canvas) Select(g Gallery, args ItemArgs) (Gallery, any, error) {
	if err := checkID("select", args.AttachmentID); err != nil {
		return g, nil, err
	}
	if g.index(args.AttachmentID) < 0 {
		return g, nil, agentkit.Errorf(codeNotFound, "select: %s is not in the gallery", args.AttachmentID)
	}
	g = g.clone()
	g.Current = args.AttachmentID
	return g, map[string]string{"current": g.Current}, nil
}

// Delete removes an image from the gallery. Its artifact stays (images
// derived from it keep their lineage); sync will not bring it back.
func (c *Canvas) Delete(g Gallery, args ItemArgs) (Gallery, any, error) {
	if err := checkID("delete", args.AttachmentID); err != nil {
		return g, nil, err
	}
	if g.index(args.AttachmentID) < 0 {
		return g, nil, agentkit.Errorf(codeNotFound, "delete: %s is not in the gallery", args.AttachmentID)
	}
	g = g.without(args.AttachmentID)
	return g, map[string]any{"deleted": args.AttachmentID, "current": g.Current}, nil
}

// maxListPages bounds the pages sync reads (of the daemon's default size).
const maxListPages = 40

// Sync rebuilds the gallery wholesale from the session's image artifacts
// and, unless a tool is at work in this process, clears the live preview (a
// preview left by a tool that ended, or by a process that crashed).
func (c *Canvas) Sync(ctx context.Context, g Gallery) (Gallery, any, error) {
	var all []Artifact
	cursor := ""
	for range maxListPages {
		page, next, err := c.Arts.List(ctx, cursor)
		if err != nil {
			return g, nil, fmt.Errorf("sync: %w", err)
		}
		all = append(all, page...)
		if next == "" || len(all) >= 4*MaxItems+len(g.Hidden) {
			break
		}
		cursor = next
	}
	g = g.rebuilt(all)
	if c.busy.Load() == 0 {
		g.LivePreview = nil
	}
	return g, map[string]any{"items": len(g.Items), "current": g.Current}, nil
}

// Preview sets or clears the live preview.
func (c *Canvas) Preview(g Gallery, args PreviewArgs) (Gallery, any, error) {
	g = g.clone()
	if args.Clear {
		g.LivePreview = nil
		return g, nil, nil
	}
	if args.Stage == "" || len(args.Stage) > 40 || !finite(args.Progress) || args.Progress < 0 || args.Progress > 1 {
		return g, nil, invalidArgs("preview: needs a stage (at most 40 bytes) and a progress from 0 to 1, or clear")
	}
	if args.Artifact != "" {
		if err := checkID("preview: artifact", args.Artifact); err != nil {
			return g, nil, err
		}
	}
	g.LivePreview = &LivePreview{Stage: args.Stage, Progress: args.Progress, Artifact: args.Artifact, Task: truncate(args.Task, 120)}
	return g, nil, nil
}

// Edit applies e to an image of the gallery (target, or the current one),
// writes the result as a new artifact derived from it, and puts it on the
// stage.
func (c *Canvas) Edit(ctx context.Context, g Gallery, target string, e edit) (Gallery, ItemResult, error) {
	if err := e.check(); err != nil {
		return g, ItemResult{}, err
	}
	src, err := c.target(g, target)
	if err != nil {
		return g, ItemResult{}, err
	}
	res, params, err := c.applyEdits(ctx, src, []edit{e})
	if err != nil {
		return g, ItemResult{}, err
	}
	it := Item{ID: res.ID, DerivedFrom: src, Params: params, CreatedAt: res.CreatedAt, Name: truncate(res.Name, maxNameBytes)}
	g = g.withItem(it)
	return g, ItemResult{ID: it.ID, DerivedFrom: src, Params: params}, nil
}

// target resolves the image a command works on: the one named, which must be
// in the gallery, or the current one.
func (c *Canvas) target(g Gallery, id string) (string, error) {
	if id == "" {
		if g.Current == "" {
			return "", agentkit.Errorf(codeNotFound, "the gallery is empty: upload or generate an image first")
		}
		return g.Current, nil
	}
	if err := checkID("edit", id); err != nil {
		return "", err
	}
	if g.index(id) < 0 {
		return "", agentkit.Errorf(codeNotFound, "%s is not in the gallery", id)
	}
	return id, nil
}

// applyEdits reads src, applies edits in order and stores the result. The
// params record the edits: one edit's params, or {"op":"edit","steps":[…]}.
func (c *Canvas) applyEdits(ctx context.Context, src string, edits []edit) (Artifact, json.RawMessage, error) {
	img, art, err := c.load(ctx, src)
	if err != nil {
		return Artifact{}, nil, err
	}
	out, params, alpha, err := runEdits(img, edits)
	if err != nil {
		return Artifact{}, nil, err
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return Artifact{}, nil, fmt.Errorf("encode params: %w", err)
	}
	mediaType := "image/png"
	if art.MediaType == "image/jpeg" && !alpha {
		mediaType = "image/jpeg"
	}
	res, err := c.store(ctx, out, mediaType, PutOptions{Name: derivedName(art.Name, describeSteps(params), mediaType), DerivedFrom: src, Meta: imageMeta(raw)})
	if err != nil {
		return Artifact{}, nil, err
	}
	return res, raw, nil
}

// runEdits applies edits in order; params are the single edit's params or
// {"op":"edit","steps":[…]}.
func runEdits(img image.Image, edits []edit) (image.Image, map[string]any, bool, error) {
	var steps []map[string]any
	alpha := false
	for _, e := range edits {
		next, p, err := e.apply(img)
		if err != nil {
			return nil, nil, false, err
		}
		img, alpha = next, alpha || addsAlpha(e)
		steps = append(steps, p)
	}
	if len(steps) == 1 {
		return img, steps[0], alpha, nil
	}
	return img, map[string]any{"op": "edit", "steps": steps}, alpha, nil
}

// derivedName names an edited image after its source: "cat (rotate 90°).png".
func derivedName(src, what, mediaType string) string {
	base := strings.TrimSuffix(src, extOf(src))
	if base == "" {
		base = "image"
	}
	if i := strings.Index(base, " ("); i > 0 {
		base = base[:i]
	}
	ext := ".png"
	if mediaType == "image/jpeg" {
		ext = ".jpg"
	}
	return truncate(base+" ("+what+")", maxNameBytes-len(ext)) + ext
}

func extOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 && len(name)-i <= 5 {
		return name[i:]
	}
	return ""
}

// ---------------------------------------------------------------- image files

// probe checks that an artifact is an image the canvas can read, without
// decoding its pixels.
func (c *Canvas) probe(ctx context.Context, id string) (Artifact, error) {
	path, art, err := c.Arts.Get(ctx, id)
	if err != nil {
		return Artifact{}, err
	}
	defer removeQuietly(path)
	if !isGalleryImage(art) {
		return Artifact{}, invalidArgs("%s is %s, not an image the canvas shows", id, art.MediaType)
	}
	f, err := os.Open(path)
	if err != nil {
		return Artifact{}, fmt.Errorf("open %s: %w", id, err)
	}
	defer f.Close()
	if _, err := decodeConfig(f, id); err != nil {
		return Artifact{}, err
	}
	return art, nil
}

func decodeConfig(r io.Reader, id string) (image.Config, error) {
	cfg, format, err := image.DecodeConfig(r)
	if err != nil {
		return cfg, invalidArgs("%s is not an image the canvas can read (png, jpeg, gif, webp, bmp, tiff): %v", id, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width*cfg.Height > maxPixels {
		return cfg, agentkit.Errorf("too_large", "%s is a %d×%d %s, more than %d pixels", id, cfg.Width, cfg.Height, format, maxPixels)
	}
	return cfg, nil
}

// load reads and decodes an artifact, honouring its EXIF orientation.
func (c *Canvas) load(ctx context.Context, id string) (image.Image, Artifact, error) {
	path, art, err := c.Arts.Get(ctx, id)
	if err != nil {
		return nil, Artifact{}, err
	}
	defer removeQuietly(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Artifact{}, fmt.Errorf("read %s: %w", id, err)
	}
	if _, err := decodeConfig(bytes.NewReader(data), id); err != nil {
		return nil, Artifact{}, err
	}
	img, err := imaging.Decode(bytes.NewReader(data), imaging.AutoOrientation(true))
	if err != nil {
		return nil, Artifact{}, invalidArgs("%s does not decode: %v", id, err)
	}
	return img, art, nil
}

// store encodes img into a file in the scratch directory, has the daemon
// ingest it, and removes the file.
func (c *Canvas) store(ctx context.Context, img image.Image, mediaType string, opts PutOptions) (Artifact, error) {
	dir := c.Arts.Dir()
	if dir == "" {
		return Artifact{}, errors.New("this session keeps no artifacts (no SURFACED_ARTIFACT_DIR)")
	}
	pattern := "canvas-*.png"
	if mediaType == "image/jpeg" {
		pattern = "canvas-*.jpg"
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return Artifact{}, fmt.Errorf("create a file for the image: %w", err)
	}
	path := f.Name()
	defer removeQuietly(path)
	if mediaType == "image/jpeg" {
		err = jpeg.Encode(f, img, &jpeg.Options{Quality: 90})
	} else {
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(f, img)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("encode the image: %w", err)
	}
	art, err := c.Arts.Put(ctx, path, mediaType, opts)
	if err != nil {
		return Artifact{}, err
	}
	return art, nil
}

func removeQuietly(path string) {
	if path != "" {
		_ = os.Remove(path)
	}
}

// ---------------------------------------------------------------- tools

// EditArgs are the args of the tool image_edit.
type EditArgs struct {
	AttachmentID string `json:"attachmentId"`
	Instruction  string `json:"instruction"`
}

// GenerateArgs are the args of the tool image_generate.
type GenerateArgs struct {
	Prompt string `json:"prompt"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// stages are the live preview's steps: a small copy of the result, blurred
// less at each step.
var stages = []struct {
	name     string
	progress float64
	sigma    float64
}{
	{"sketching", 0.25, 9},
	{"refining", 0.55, 3.5},
	{"detailing", 0.85, 1},
}

// previewSide bounds the preview images.
const previewSide = 320

// ToolResult is what a tool tells the model, and the artifacts it names:
// the tool's result carries them (details.artifacts), so an editor over ACP
// sees each as a resource link of the call.
type ToolResult struct {
	Text      string
	Artifacts []string
}

// ToolEdit is image_edit: it maps the instruction to edits, shows the live
// preview, writes the result derived from the image and registers it.
func (c *Canvas) ToolEdit(ctx context.Context, sf Surface, args EditArgs) (ToolResult, error) {
	instruction := strings.TrimSpace(args.Instruction)
	if instruction == "" {
		return ToolResult{}, errors.New("image_edit needs an instruction, e.g. \"make it brighter\"")
	}
	edits := parseInstruction(instruction)
	if len(edits) == 0 {
		return ToolResult{}, fmt.Errorf("cannot do %q on the canvas; what it can do: %s", truncate(instruction, 100), instructionHelp)
	}
	c.busy.Add(1)
	defer c.busy.Add(-1)
	src := args.AttachmentID
	if src == "" {
		g, err := sf.Get(ctx)
		if err != nil {
			return ToolResult{}, fmt.Errorf("read the gallery: %w", err)
		}
		if src, err = c.target(g, ""); err != nil {
			return ToolResult{}, err
		}
	} else if err := checkID("image_edit", src); err != nil {
		return ToolResult{}, err
	}
	task := truncate(instruction, 80)
	img, art, err := c.load(ctx, src)
	if err != nil {
		return ToolResult{}, err
	}
	out, params, alpha, err := runEdits(img, edits)
	if err != nil {
		return ToolResult{}, err
	}
	params["instruction"] = truncate(instruction, maxPromptBytes)
	mediaType := "image/png"
	if art.MediaType == "image/jpeg" && !alpha {
		mediaType = "image/jpeg"
	}
	res, err := c.finish(ctx, sf, out, task, mediaType, params, PutOptions{Name: derivedName(art.Name, describeSteps(params), mediaType), DerivedFrom: src})
	if err != nil {
		return ToolResult{}, err
	}
	return ToolResult{
		Text:      fmt.Sprintf("Edited %s (%s): the new image %s is derived from it and is now on the canvas.", src, describeSteps(params), res.ID),
		Artifacts: []string{res.ID},
	}, nil
}

// ToolGenerate is image_generate: it paints a procedural image for the
// prompt, shows the live preview and registers the result.
func (c *Canvas) ToolGenerate(ctx context.Context, sf Surface, args GenerateArgs) (ToolResult, error) {
	prompt := strings.TrimSpace(args.Prompt)
	if prompt == "" {
		return ToolResult{}, errors.New("image_generate needs a prompt")
	}
	w, h := args.Width, args.Height
	if w == 0 {
		w = defaultGenW
	}
	if h == 0 {
		h = defaultGenH
	}
	if w < minGenSide || h < minGenSide || w > maxGenSide || h > maxGenSide {
		return ToolResult{}, fmt.Errorf("image_generate: width and height must be from %d to %d", minGenSide, maxGenSide)
	}
	c.busy.Add(1)
	defer c.busy.Add(-1)
	prompt = truncate(prompt, maxPromptBytes)
	if err := c.stage(ctx, sf, "composing", 0.1, "", "generate: "+truncate(prompt, 60)); err != nil {
		return ToolResult{}, err
	}
	img := generateImage(prompt, w, h)
	params := map[string]any{"op": "generate", "prompt": prompt, "width": w, "height": h}
	res, err := c.finish(ctx, sf, img, "generate: "+truncate(prompt, 60), "image/png", params, PutOptions{Name: truncate(prompt, 60) + ".png"})
	if err != nil {
		return ToolResult{}, err
	}
	return ToolResult{
		Text:      fmt.Sprintf("Generated %s (%d×%d) for %q; it is now on the canvas.", res.ID, w, h, prompt),
		Artifacts: []string{res.ID},
	}, nil
}

// finish shows the preview stages of out, stores it, registers it and ends
// the preview. On failure the preview is ended too.
func (c *Canvas) finish(ctx context.Context, sf Surface, out image.Image, task, mediaType string, params map[string]any, opts PutOptions) (res Artifact, err error) {
	defer func() {
		if err != nil {
			// The tool's context may be over (an abort): end the preview anyway.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, cerr := sf.Command(cctx, "preview", PreviewArgs{Clear: true}); cerr != nil {
				c.log().Warn("canvas: clear the live preview", "err", cerr)
			}
		}
	}()
	small := imaging.Fit(out, previewSide, previewSide, imaging.Box)
	for _, st := range stages {
		if err := c.pause(ctx); err != nil {
			return Artifact{}, err
		}
		pv, err := c.store(ctx, imaging.Blur(small, st.sigma), "image/jpeg", PutOptions{Name: "preview-" + st.name + ".jpg", Meta: previewMeta})
		if err != nil {
			return Artifact{}, fmt.Errorf("store the %s preview: %w", st.name, err)
		}
		if err := c.stage(ctx, sf, st.name, st.progress, pv.ID, task); err != nil {
			return Artifact{}, err
		}
	}
	if err := c.pause(ctx); err != nil {
		return Artifact{}, err
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return Artifact{}, fmt.Errorf("encode params: %w", err)
	}
	opts.Meta = imageMeta(raw)
	res, err = c.store(ctx, out, mediaType, opts)
	if err != nil {
		return Artifact{}, err
	}
	if _, err := sf.Command(ctx, "register", RegisterArgs{AttachmentID: res.ID, DerivedFrom: opts.DerivedFrom, Params: raw}); err != nil {
		return Artifact{}, fmt.Errorf("register %s: %w", res.ID, err)
	}
	if _, err := sf.Command(ctx, "preview", PreviewArgs{Clear: true}); err != nil {
		c.log().Warn("canvas: clear the live preview", "err", err)
	}
	return res, nil
}

func (c *Canvas) stage(ctx context.Context, sf Surface, name string, progress float64, artifact, task string) error {
	if _, err := sf.Command(ctx, "preview", PreviewArgs{Stage: name, Progress: progress, Artifact: artifact, Task: task}); err != nil {
		return fmt.Errorf("live preview %s: %w", name, err)
	}
	return nil
}

// pause waits StagePace on the clock, or until ctx ends.
func (c *Canvas) pause(ctx context.Context) error {
	if c.StagePace <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := c.clock().AfterFunc(c.StagePace, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// describeSteps describes recorded params: one edit or its steps.
func describeSteps(p map[string]any) string {
	if steps, ok := p["steps"].([]map[string]any); ok {
		parts := make([]string, len(steps))
		for i, s := range steps {
			parts[i] = describe(s)
		}
		return strings.Join(parts, ", then ")
	}
	return describe(p)
}
