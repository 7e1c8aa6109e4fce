// Command dataagent is an agentkit agent for the tests of the artifact lines
// and the data plane: a real agent process whose surface "table" drives
// agentkit's Artifacts from commands and serves data pages.
//
// Commands of "table" (state {rows}):
//
//	put {text, name?, mediaType?, path?}  write text to a file in the scratch
//	                                      dir (or use path as given) and put it
//	putsize {bytes}                       put a file of that many bytes ("x")
//	get {id}                              get an artifact; answers its path, text, artifact
//	list {mediaType?, cursor?, limit?}    list artifacts
//	url {id, ttl?}                        a signed URL (ttl in seconds)
//	fetches                               how many data pages the agent made
//	block                                 waits until the page "release" is fetched (or 10 s)
//	                                      (release answers true when it released a block)
//	setrows {n}                           rows = n (a new rev)
//
// Tool increment (the scripted model calls it on a prompt saying
// "increment"): puts chart.png and links it, and an artifact that does not
// exist, to its result.
//
// Data pages: rows?from&n (JSON rows, ETag per from/n/rev, max age 60 s),
// big (a page put as an artifact), missing (not_found), release (ends a
// waiting block).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/surfaced/surfaced/agentproc/agentkit"
)

type table struct {
	Rows int `json:"rows"`
}

var (
	fetches atomic.Int64
	release = make(chan struct{})
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	agent := agentkit.New(agentkit.Options{Name: "dataagent"})
	type putArgs struct {
		Text      string `json:"text,omitempty"`
		Name      string `json:"name,omitempty"`
		MediaType string `json:"mediaType,omitempty"`
		Path      string `json:"path,omitempty"`
	}
	agentkit.AddSurface(agent, agentkit.Surface[table]{
		Domain:  "table",
		Initial: table{Rows: 100},
		Commands: map[string]agentkit.Command[table]{
			"put": agentkit.Typed(func(c *agentkit.SurfaceCtx[table], a putArgs) (any, error) {
				arts := c.Artifacts()
				path := a.Path
				if path == "" {
					path = filepath.Join(arts.Dir(), "out.txt")
					if err := os.WriteFile(path, []byte(a.Text), 0o600); err != nil {
						return nil, err
					}
				}
				mt := a.MediaType
				if mt == "" {
					mt = "text/plain"
				}
				art, url, err := arts.Put(path, mt, agentkit.PutOptions{Name: a.Name, Meta: map[string]string{"by": "dataagent"}})
				if err != nil {
					return nil, err
				}
				return map[string]any{"artifact": art, "url": url}, nil
			}),
			"putsize": agentkit.Typed(func(c *agentkit.SurfaceCtx[table], a struct {
				Bytes int64 `json:"bytes"`
			}) (any, error) {
				arts := c.Artifacts()
				path := filepath.Join(arts.Dir(), "big.bin")
				f, err := os.Create(path)
				if err != nil {
					return nil, err
				}
				chunk := []byte(strings.Repeat("x", 1<<16))
				for left := a.Bytes; left > 0; left -= int64(len(chunk)) {
					if _, err := f.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
						return nil, err
					}
				}
				if err := f.Close(); err != nil {
					return nil, err
				}
				art, _, err := arts.Put(path, "application/octet-stream", agentkit.PutOptions{})
				if err != nil {
					return nil, err
				}
				return map[string]any{"artifact": art}, nil
			}),
			"get": agentkit.Typed(func(c *agentkit.SurfaceCtx[table], a struct {
				ID string `json:"id"`
			}) (any, error) {
				path, art, err := c.Artifacts().Get(a.ID)
				if err != nil {
					return nil, err
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return nil, err
				}
				sum := sha256.Sum256(b)
				return map[string]any{"path": path, "text": string(b), "sha256": hex.EncodeToString(sum[:]), "artifact": art}, nil
			}),
			"list": agentkit.Typed(func(c *agentkit.SurfaceCtx[table], q agentkit.ListQuery) (any, error) {
				page, next, err := c.Artifacts().List(q)
				if err != nil {
					return nil, err
				}
				return map[string]any{"artifacts": page, "nextCursor": next}, nil
			}),
			"url": agentkit.Typed(func(c *agentkit.SurfaceCtx[table], a struct {
				ID  string `json:"id"`
				TTL int    `json:"ttl,omitempty"`
			}) (any, error) {
				u, err := c.Artifacts().URL(a.ID, time.Duration(a.TTL)*time.Second)
				if err != nil {
					return nil, err
				}
				return map[string]string{"url": u}, nil
			}),
			"fetches": agentkit.Func[table](func(*agentkit.SurfaceCtx[table], json.RawMessage) (any, error) { return fetches.Load(), nil }),
			"block": agentkit.Func[table](func(c *agentkit.SurfaceCtx[table], _ json.RawMessage) (any, error) {
				select {
				case <-release:
					return "released", nil
				case <-time.After(10 * time.Second):
					return "not released", nil
				}
			}),
			"setrows": agentkit.Typed(func(c *agentkit.SurfaceCtx[table], a struct {
				N int `json:"n"`
			}) (any, error) {
				c.SetState(func(t table) table { t.Rows = a.N; return t })
				return nil, nil
			}),
		},
		Data: func(c *agentkit.DataCtx, req agentkit.DataRequest) (agentkit.Page, error) {
			fetches.Add(1)
			switch req.Path {
			case "rows":
				from, _ := strconv.Atoi(req.Query.Get("from"))
				n, _ := strconv.Atoi(req.Query.Get("n"))
				rows := make([]string, 0, n)
				for i := from; i < from+n; i++ {
					rows = append(rows, "row "+strconv.Itoa(i))
				}
				return agentkit.Page{Data: map[string]any{"rows": rows, "rev": req.Rev},
					ETag: fmt.Sprintf("rows-%d-%d-%d", from, n, req.Rev), MaxAge: time.Minute}, nil
			case "big":
				arts := c.Artifacts()
				path := filepath.Join(arts.Dir(), "page.json")
				if err := os.WriteFile(path, []byte(`{"rows":["a lot"]}`), 0o600); err != nil {
					return agentkit.Page{}, err
				}
				art, _, err := arts.Put(path, "application/json", agentkit.PutOptions{Name: "page.json"})
				if err != nil {
					return agentkit.Page{}, err
				}
				return agentkit.Page{Artifact: art.ID, ETag: art.SHA256}, nil
			case "release":
				// Only a block waiting now is released: a page that waited
				// behind the command could not release it.
				select {
				case release <- struct{}{}:
					return agentkit.Page{Data: true}, nil
				default:
					return agentkit.Page{Data: false}, nil
				}
			}
			return agentkit.Page{}, agentkit.Errorf("not_found", "no page %q", req.Path)
		},
	})
	// The scripted model calls "increment" on a prompt that says so: here it
	// puts a file and links the artifact to its result.
	agent.AddTool(agentkit.Tool{Name: "increment", Run: func(ctx context.Context, tc *agentkit.ToolCtx, _ json.RawMessage) (string, error) {
		arts := tc.Artifacts()
		path := filepath.Join(arts.Dir(), "chart.png")
		if err := os.WriteFile(path, []byte("not really a png"), 0o600); err != nil {
			return "", err
		}
		art, _, err := arts.Put(path, "image/png", agentkit.PutOptions{Name: "chart.png"})
		if err != nil {
			return "", err
		}
		tc.LinkArtifact(art.ID, "att_aaaaaaaaaaaaaaaaaaaaaaaaaa")
		return "made " + art.ID, nil
	}})
	if err := agent.Run(ctx, os.Stdin, os.Stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
