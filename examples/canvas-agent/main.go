// Command canvas-agent is the Canvas workbench agent: it hosts the domain
// "canvas", a gallery of the session's images that a person and the model
// edit together. The gallery is a materialized view of the session's image
// artifacts (ids and lineage only, never bytes). Deterministic edits (rotate,
// flip, crop, resize, grayscale, adjust, blur, sharpen, invert) are commands;
// the model reaches the canvas through the tools image_edit and
// image_generate, which show a live preview that sharpens while they work.
// It rebuilds the gallery from the artifacts when it starts and at the end of
// every run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/surfaced/surfaced/agentproc/agentkit"
)

// agentArtifacts binds the canvas's Artifacts to agentkit's artifact lines.
type agentArtifacts struct{ a *agentkit.Agent }

func (r agentArtifacts) Dir() string { return r.a.Artifacts().Dir() }

func (r agentArtifacts) Put(ctx context.Context, path, mediaType string, opts PutOptions) (Artifact, error) {
	art, _, err := r.a.Artifacts().WithContext(ctx).Put(path, mediaType, agentkit.PutOptions{Name: opts.Name, DerivedFrom: opts.DerivedFrom, Meta: opts.Meta})
	return fromKit(art), err
}

func (r agentArtifacts) Get(ctx context.Context, id string) (string, Artifact, error) {
	path, art, err := r.a.Artifacts().WithContext(ctx).Get(id)
	return path, fromKit(art), err
}

func (r agentArtifacts) List(ctx context.Context, cursor string) ([]Artifact, string, error) {
	arts, next, err := r.a.Artifacts().WithContext(ctx).List(agentkit.ListQuery{MediaType: "image/*", Cursor: cursor, Limit: 200})
	out := make([]Artifact, len(arts))
	for i, a := range arts {
		out[i] = fromKit(a)
	}
	return out, next, err
}

func (r agentArtifacts) URL(ctx context.Context, id string, ttl time.Duration) (string, error) {
	return r.a.Artifacts().WithContext(ctx).URL(id, ttl)
}

func fromKit(a agentkit.Artifact) Artifact {
	return Artifact{ID: a.ID, MediaType: a.MediaType, Name: a.Name, CreatedAt: a.CreatedAt, DerivedFrom: a.DerivedFrom, Meta: a.Meta}
}

// agentSurface is the canvas domain reached through the daemon.
type agentSurface struct{ a *agentkit.Agent }

func (s agentSurface) Command(ctx context.Context, action string, args any) (json.RawMessage, error) {
	return s.a.SurfaceCommand(ctx, Domain, action, args)
}

func (s agentSurface) Get(ctx context.Context) (Gallery, error) {
	raw, _, err := s.a.SurfaceGet(ctx, Domain)
	if err != nil {
		return Gallery{}, err
	}
	var g Gallery
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &g); err != nil {
			return Gallery{}, fmt.Errorf("the canvas snapshot does not decode: %w", err)
		}
	}
	return g, nil
}

const system = `You are the Canvas agent. The user works on a gallery of images beside this chat.
Images are artifacts named by ids like att_…; never ask for image bytes.
- To change an image, call image_edit with its attachmentId (leave it empty for the image on the stage)
  and a plain instruction such as "brighter", "rotate left", "black and white", "blur", "crop", "smaller".
- To make a new image, call image_generate with a short prompt and a width and height (64 to 1536).
After a tool, tell the user in one sentence what changed and the new image's id.`

// newAgent builds the canvas agent around model; canvas holds its settings
// (clock, stage pace), and its Arts is bound to the agent here.
func newAgent(model agentkit.Model, log *slog.Logger, canvas *Canvas) *agentkit.Agent {
	var agent *agentkit.Agent
	rebuild := func(ctx context.Context, why string) {
		if _, err := agent.SurfaceCommand(ctx, Domain, "sync", nil); err != nil && ctx.Err() == nil {
			log.Warn("canvas: rebuild the gallery", "when", why, "err", err)
		}
	}
	agent = agentkit.New(agentkit.Options{
		Name:   "canvas",
		Model:  model,
		Logger: log,
		System: system,
		// Hydrate: after a (re)start the gallery is rebuilt from the
		// artifacts, without holding up readiness.
		OnReady: func(ctx context.Context) { rebuild(ctx, "ready") },
		// Turn-end convergence: whatever the run's tools did, the gallery is
		// rebuilt wholesale and the live preview cleared.
		OnAgentEnd: func(ctx context.Context) { rebuild(ctx, "agent_end") },
	})
	canvas.Arts = agentArtifacts{agent}
	canvas.Log = log
	addCanvas(agent, canvas)
	sf := agentSurface{agent}
	agent.AddTool(agentkit.Tool{
		Name: "image_edit",
		Description: "Edit an image of the canvas by a plain instruction (brighter, darker, more contrast, rotate left/right/N degrees, " +
			"flip, black and white, blur, sharpen, invert, crop, smaller, larger). The result is a new image derived from it.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"attachmentId":{"type":"string","description":"the image's id (att_…); empty: the image on the stage"},` +
			`"instruction":{"type":"string","description":"what to do, in plain words"}},"required":["instruction"]}`),
		Run: func(ctx context.Context, tc *agentkit.ToolCtx, raw json.RawMessage) (string, error) {
			var args EditArgs
			if err := json.Unmarshal(raw, &args); err != nil {
				return "", fmt.Errorf("image_edit: args: %w", err)
			}
			return linked(tc)(canvas.ToolEdit(ctx, sf, args))
		},
	})
	agent.AddTool(agentkit.Tool{
		Name:        "image_generate",
		Description: "Generate a new image from a prompt and put it on the canvas.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"prompt":{"type":"string"},"width":{"type":"integer","minimum":64,"maximum":1536},` +
			`"height":{"type":"integer","minimum":64,"maximum":1536}},"required":["prompt"]}`),
		Run: func(ctx context.Context, tc *agentkit.ToolCtx, raw json.RawMessage) (string, error) {
			var args GenerateArgs
			if err := json.Unmarshal(raw, &args); err != nil {
				return "", fmt.Errorf("image_generate: args: %w", err)
			}
			return linked(tc)(canvas.ToolGenerate(ctx, sf, args))
		},
	})
	return agent
}

// linked hands a tool's text to the model and names its artifacts on the
// call, which an editor over ACP shows as resource links.
func linked(tc *agentkit.ToolCtx) func(ToolResult, error) (string, error) {
	return func(r ToolResult, err error) (string, error) {
		if err != nil {
			return "", err
		}
		tc.LinkArtifact(r.Artifacts...)
		return r.Text, nil
	}
}

// addCanvas registers the domain "canvas" and its commands.
func addCanvas(agent *agentkit.Agent, c *Canvas) {
	editCmd := func(decode func(json.RawMessage) (string, edit, error)) agentkit.Command[Gallery] {
		return agentkit.Func[Gallery](func(ctx *agentkit.SurfaceCtx[Gallery], raw json.RawMessage) (any, error) {
			target, e, err := decode(raw)
			if err != nil {
				return nil, err
			}
			g, res, err := c.Edit(ctx.Context(), ctx.Get(), target, e)
			if err != nil {
				return nil, err
			}
			ctx.SetState(func(Gallery) Gallery { return g })
			return res, nil
		})
	}
	cmds := map[string]agentkit.Command[Gallery]{
		"register": agentkit.Typed(func(ctx *agentkit.SurfaceCtx[Gallery], args RegisterArgs) (any, error) {
			g, res, err := c.Register(ctx.Context(), ctx.Get(), args)
			if err != nil {
				return nil, err
			}
			ctx.SetState(func(Gallery) Gallery { return g })
			return res, nil
		}),
		"select": agentkit.Typed(func(ctx *agentkit.SurfaceCtx[Gallery], args ItemArgs) (any, error) {
			return commit(ctx)(c.Select(ctx.Get(), args))
		}),
		"delete": agentkit.Typed(func(ctx *agentkit.SurfaceCtx[Gallery], args ItemArgs) (any, error) {
			return commit(ctx)(c.Delete(ctx.Get(), args))
		}),
		"sync": agentkit.Func[Gallery](func(ctx *agentkit.SurfaceCtx[Gallery], _ json.RawMessage) (any, error) {
			return commit(ctx)(c.Sync(ctx.Context(), ctx.Get()))
		}),
		"preview": agentkit.Typed(func(ctx *agentkit.SurfaceCtx[Gallery], args PreviewArgs) (any, error) {
			return commit(ctx)(c.Preview(ctx.Get(), args))
		}),
		"rotate":    editCmd(decodeEdit[rotateEdit]),
		"flip":      editCmd(decodeEdit[flipEdit]),
		"crop":      editCmd(decodeEdit[cropEdit]),
		"resize":    editCmd(decodeEdit[resizeEdit]),
		"grayscale": editCmd(decodeEdit[grayscaleEdit]),
		"adjust":    editCmd(decodeEdit[adjustEdit]),
		"blur":      editCmd(decodeEdit[blurEdit]),
		"sharpen":   editCmd(decodeEdit[sharpenEdit]),
		"invert":    editCmd(decodeEdit[invertEdit]),
	}
	// Every command declares its args schema (schemas.go).
	for name, cmd := range cmds {
		sch, ok := commandSchemas[name]
		if !ok {
			panic("canvas: the command " + name + " has no args schema")
		}
		cmds[name] = agentkit.WithSchema(cmd, json.RawMessage(sch))
	}
	agentkit.AddSurface(agent, agentkit.Surface[Gallery]{Domain: Domain, Initial: Gallery{Items: []Item{}}, Commands: cmds})
}

// commit stores a command's new gallery and passes its result on.
func commit(ctx *agentkit.SurfaceCtx[Gallery]) func(Gallery, any, error) (any, error) {
	return func(g Gallery, res any, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		ctx.SetState(func(Gallery) Gallery { return g })
		return res, nil
	}
}

// decodeEdit reads an edit command's args: the edit's own fields and an
// optional attachmentId (the current image when absent).
func decodeEdit[E edit](raw json.RawMessage) (string, edit, error) {
	var target struct {
		AttachmentID string `json:"attachmentId"`
	}
	var e E
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &target); err != nil {
			return "", nil, invalidArgs("args must be a JSON object: %v", err)
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return "", nil, invalidArgs("args do not fit: %v", err)
		}
	}
	return target.AttachmentID, e, nil
}

// stagePace reads SURFACED_CANVAS_STAGE_MS, the pause between live-preview
// stages (default 400 ms, so a person sees the image sharpen).
func stagePace() time.Duration {
	if v := os.Getenv("SURFACED_CANVAS_STAGE_MS"); v != "" {
		if ms, err := strconv.Atoi(v); err == nil && ms >= 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return 400 * time.Millisecond
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var model agentkit.Model = scriptedModel{}
	if os.Getenv(agentkit.EnvLLMBaseURL) != "" {
		model = agentkit.ModelFromEnv()
	}
	agent := newAgent(model, log, &Canvas{StagePace: stagePace()})
	if err := agent.Run(ctx, os.Stdin, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("canvas-agent stopped", "err", err)
		os.Exit(1)
	}
}
