package agentkit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/surfaced/surfaced/agentproc"
)

// Artifact is an artifact of the session: immutable bytes the daemon keeps,
// named by ID (docs/artifacts.md).
type Artifact = agentproc.Artifact

// Artifacts reaches the session's artifacts through the artifact lines
// (artifact_put, artifact_get, artifact_list, artifact_url). Files move by
// path, never as bytes on the pipe: Put hands the daemon a file the agent
// wrote, in Dir (or the session's working directory); Get has the daemon
// write an artifact's bytes to a file in Dir. Its calls wait for the
// daemon's answer, until the context it was made with ends (a tool's, a
// surface command's or data handler's, or the agent's).
type Artifacts struct {
	a   *Agent
	ctx context.Context
}

// PutOptions are the optional fields of a put.
type PutOptions struct {
	// Name is the file name a download is saved under.
	Name string
	// DerivedFrom is the artifact of the session this one was made from.
	DerivedFrom string
	// Meta is the writer's JSON object (at most 16 KiB once encoded): nil,
	// a json.RawMessage, or any value that encodes to an object.
	Meta any
}

// ListQuery selects a page of the session's artifacts, newest first.
type ListQuery struct {
	// MediaType is "type/subtype" or "type/*"; empty: every type.
	MediaType string `json:"mediaType,omitempty"`
	// Cursor is the previous page's next cursor.
	Cursor string `json:"cursor,omitempty"`
	// Limit is 1 to 500; 0: the daemon's default (50).
	Limit int `json:"limit,omitempty"`
}

// Artifacts returns the session's artifacts, its calls bound to the agent's
// life.
func (a *Agent) Artifacts() *Artifacts {
	ctx := a.base
	if ctx == nil {
		ctx = context.Background()
	}
	return &Artifacts{a: a, ctx: ctx}
}

// Artifacts returns the session's artifacts, its calls bound to the tool
// call (they end when the turn is aborted).
func (tc *ToolCtx) Artifacts() *Artifacts { return tc.agent.Artifacts().WithContext(tc.context()) }

// Artifacts returns the session's artifacts, its calls bound to the
// command's context.
func (c *SurfaceCtx[S]) Artifacts() *Artifacts {
	return c.agent.Artifacts().WithContext(c.ctx)
}

// WithContext returns a copy whose calls end with ctx.
func (r *Artifacts) WithContext(ctx context.Context) *Artifacts {
	if ctx == nil {
		return r
	}
	return &Artifacts{a: r.a, ctx: ctx}
}

// Dir is the session's scratch directory ($SURFACED_ARTIFACT_DIR): write
// files to put there, and Get writes the files it makes there. Empty when
// the daemon gave none (it keeps no artifacts).
func (r *Artifacts) Dir() string { return os.Getenv(agentproc.EnvArtifactDir) }

// Put has the daemon ingest the file at path (in Dir or the session's
// working directory; a relative path is the working directory's) as a new
// artifact of mediaType. It returns the artifact and a signed URL of its
// bytes. A failure the daemon reports is an *Error with its code
// (path_refused, not_found, invalid_field, too_large, quota_exceeded, ...).
func (r *Artifacts) Put(path, mediaType string, opts PutOptions) (Artifact, string, error) {
	meta, err := marshalArgs(opts.Meta)
	if err != nil {
		return Artifact{}, "", err
	}
	id := r.a.newID("ap")
	var res agentproc.ArtifactPutResult
	if err := r.call(agentproc.TypeArtifactPutResult, id, agentproc.ArtifactPut{Type: agentproc.TypeArtifactPut, ID: id,
		Path: path, MediaType: mediaType, Name: opts.Name, DerivedFrom: opts.DerivedFrom, Meta: meta}, &res); err != nil {
		return Artifact{}, "", fmt.Errorf("agentkit: artifact put %s: %w", path, err)
	}
	if err := failed(res.OK, res.Error); err != nil {
		return Artifact{}, "", fmt.Errorf("agentkit: artifact put %s: %w", path, err)
	}
	if res.Artifact == nil {
		return Artifact{}, "", fmt.Errorf("agentkit: artifact put %s: the daemon answered without the artifact", path)
	}
	return *res.Artifact, res.URL, nil
}

// Get has the daemon write the artifact's bytes to a file in Dir and
// returns its path and the artifact. The file is the agent's to read, move
// or delete; a later Get writes it afresh.
func (r *Artifacts) Get(id string) (path string, art Artifact, err error) {
	rid := r.a.newID("ag")
	var res agentproc.ArtifactGetResult
	if err := r.call(agentproc.TypeArtifactGetResult, rid, agentproc.ArtifactGet{Type: agentproc.TypeArtifactGet, ID: rid, Artifact: id}, &res); err != nil {
		return "", Artifact{}, fmt.Errorf("agentkit: artifact get %s: %w", id, err)
	}
	if err := failed(res.OK, res.Error); err != nil {
		return "", Artifact{}, fmt.Errorf("agentkit: artifact get %s: %w", id, err)
	}
	if res.Artifact != nil {
		art = *res.Artifact
	}
	return res.Path, art, nil
}

// List returns a page of the session's artifacts, newest first, and the
// cursor of the next page ("" on the last).
func (r *Artifacts) List(q ListQuery) ([]Artifact, string, error) {
	id := r.a.newID("al")
	var res agentproc.ArtifactListResult
	if err := r.call(agentproc.TypeArtifactListResult, id, agentproc.ArtifactList{Type: agentproc.TypeArtifactList, ID: id,
		MediaType: q.MediaType, Cursor: q.Cursor, Limit: q.Limit}, &res); err != nil {
		return nil, "", fmt.Errorf("agentkit: artifact list: %w", err)
	}
	if err := failed(res.OK, res.Error); err != nil {
		return nil, "", fmt.Errorf("agentkit: artifact list: %w", err)
	}
	return res.Artifacts, res.NextCursor, nil
}

// URL returns a signed URL of the artifact's bytes, relative to the daemon
// (/api/artifacts/<id>/content?exp=…&sig=…), valid for ttl (0: the daemon's
// default, one hour; whole seconds, at most 24 h).
func (r *Artifacts) URL(id string, ttl time.Duration) (string, error) {
	rid := r.a.newID("au")
	var res agentproc.ArtifactURLResult
	if err := r.call(agentproc.TypeArtifactURLResult, rid, agentproc.ArtifactURL{Type: agentproc.TypeArtifactURL, ID: rid,
		Artifact: id, TTL: int64((ttl + time.Second - 1) / time.Second)}, &res); err != nil {
		return "", fmt.Errorf("agentkit: artifact url %s: %w", id, err)
	}
	if err := failed(res.OK, res.Error); err != nil {
		return "", fmt.Errorf("agentkit: artifact url %s: %w", id, err)
	}
	return res.URL, nil
}

// call sends a request and decodes its answer into res.
func (r *Artifacts) call(answerType, id string, line, res any) error {
	ans, err := r.a.call(r.ctx, answerType, id, line)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(ans, res); err != nil {
		return fmt.Errorf("bad answer: %w", err)
	}
	return nil
}

// failed is the *Error of an answer that is not ok.
func failed(ok bool, e *agentproc.ErrorBody) error {
	if ok {
		return nil
	}
	if e == nil {
		return &Error{Code: agentproc.CodeDispatchFailed, Message: "the daemon answered ok:false without an error"}
	}
	return &Error{Code: e.Code, Message: e.Message}
}
