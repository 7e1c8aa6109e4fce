package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"time"

	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/artifact"
	"github.com/surfaced/surfaced/store"
)

// maxArtifactOps bounds the artifact lines of one session that run at once;
// more wait for a turn (each holds a file and a store connection).
const maxArtifactOps = 4

// getDir is the directory of the scratch dir where artifact_get writes the
// bytes it makes readable.
const getDir = "artifacts"

// agentArtifacts carries out a session's artifact lines (artifact_put, _get,
// _list, _url). Each runs on a goroutine of its own, off the session actor
// (it streams files and waits on the store), and answers the agent itself:
// the lines are correlated by id, so their order does not matter. The
// session's clients hear of a put through artifact.Config.Notify, like any
// other.
type agentArtifacts struct {
	svc       *artifact.Service
	sessionID string
	// scratch is the session's scratch directory (SURFACED_ARTIFACT_DIR)
	// and cwd the agent's working directory: the only places a put reads.
	scratch, cwd string
	ctx          context.Context
	cancel       context.CancelFunc
	sem          chan struct{}
	// running counts the lines in progress (tests wait for them).
	running func(delta int)
}

func newAgentArtifacts(svc *artifact.Service, sessionID, scratch, cwd string) *agentArtifacts {
	ctx, cancel := context.WithCancel(context.Background())
	return &agentArtifacts{svc: svc, sessionID: sessionID, scratch: scratch, cwd: cwd, ctx: ctx, cancel: cancel,
		sem: make(chan struct{}, maxArtifactOps)}
}

// close cancels the lines still running: the session is going.
func (a *agentArtifacts) close() { a.cancel() }

// handle starts one line; reply writes the answer to the agent. A line that
// does not decode, or has no id, is reported through invalid (nothing can be
// answered without an id).
func (a *agentArtifacts) handle(typ string, line []byte, reply func(any), invalid func(string)) {
	var id struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(line, &id); err != nil || id.ID == "" {
		invalid(typ + " needs an id")
		return
	}
	var run func() any
	switch typ {
	case proc.TypeArtifactPut:
		var m proc.ArtifactPut
		if err := json.Unmarshal(line, &m); err != nil {
			reply(proc.ArtifactPutResult{Type: proc.TypeArtifactPutResult, ID: id.ID, Error: lineInvalid(err)})
			return
		}
		run = func() any { return a.put(m) }
	case proc.TypeArtifactGet:
		var m proc.ArtifactGet
		if err := json.Unmarshal(line, &m); err != nil {
			reply(proc.ArtifactGetResult{Type: proc.TypeArtifactGetResult, ID: id.ID, Error: lineInvalid(err)})
			return
		}
		run = func() any { return a.get(m) }
	case proc.TypeArtifactList:
		var m proc.ArtifactList
		if err := json.Unmarshal(line, &m); err != nil {
			reply(proc.ArtifactListResult{Type: proc.TypeArtifactListResult, ID: id.ID, Error: lineInvalid(err)})
			return
		}
		run = func() any { return a.list(m) }
	case proc.TypeArtifactURL:
		var m proc.ArtifactURL
		if err := json.Unmarshal(line, &m); err != nil {
			reply(proc.ArtifactURLResult{Type: proc.TypeArtifactURLResult, ID: id.ID, Error: lineInvalid(err)})
			return
		}
		run = func() any { return a.url(m) }
	default:
		return
	}
	if a.running != nil {
		a.running(1)
	}
	go func() {
		if a.running != nil {
			defer a.running(-1)
		}
		select {
		case a.sem <- struct{}{}:
		case <-a.ctx.Done():
			return
		}
		defer func() { <-a.sem }()
		reply(run())
	}()
}

func lineInvalid(err error) *proc.ErrorBody {
	return &proc.ErrorBody{Code: proc.CodeInvalidField, Message: "the line's fields do not fit: " + err.Error()}
}

func (a *agentArtifacts) put(m proc.ArtifactPut) proc.ArtifactPutResult {
	res := proc.ArtifactPutResult{Type: proc.TypeArtifactPutResult, ID: m.ID}
	if m.Path == "" {
		res.Error = &proc.ErrorBody{Code: proc.CodeInvalidField, Message: "path: the file to put is required"}
		return res
	}
	f, err := a.open(m.Path)
	if err != nil {
		res.Error = pathError(m.Path, err)
		return res
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		res.Error = pathError(m.Path, err)
		return res
	}
	if !fi.Mode().IsRegular() {
		res.Error = &proc.ErrorBody{Code: proc.CodeInvalidField, Message: fmt.Sprintf("path: %s is not a regular file", m.Path)}
		return res
	}
	art, err := a.svc.Put(a.ctx, a.sessionID, f, artifact.PutOptions{MediaType: m.MediaType, Name: m.Name,
		DerivedFrom: m.DerivedFrom, Meta: m.Meta, Size: fi.Size()})
	if err != nil {
		res.Error = artifactError(err)
		return res
	}
	la := lineArtifact(art)
	res.OK, res.Artifact = true, &la
	res.URL, _ = a.svc.URL(art.ID, 0)
	return res
}

func (a *agentArtifacts) get(m proc.ArtifactGet) proc.ArtifactGetResult {
	res := proc.ArtifactGetResult{Type: proc.TypeArtifactGetResult, ID: m.ID}
	art, err := a.svc.Get(a.ctx, a.sessionID, m.Artifact)
	if err != nil {
		res.Error = artifactError(err)
		return res
	}
	path, err := a.materialize(art)
	if err != nil {
		res.Error = artifactError(err)
		return res
	}
	la := lineArtifact(art)
	res.OK, res.Path, res.Artifact = true, path, &la
	return res
}

// materialize writes the artifact's bytes to <scratch>/artifacts/<id><ext>
// (streamed through a temporary file renamed into place, so that the path
// only ever holds all of them) and returns that path.
func (a *agentArtifacts) materialize(art artifact.Artifact) (string, error) {
	dir := filepath.Join(a.scratch, getDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("the scratch directory: %w", err)
	}
	_, r, err := a.svc.Open(a.ctx, art.ID)
	if err != nil {
		return "", err
	}
	defer r.Close()
	tmp, err := os.CreateTemp(dir, ".get-*")
	if err != nil {
		return "", fmt.Errorf("the scratch directory: %w", err)
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	dst := filepath.Join(dir, art.ID+extension(art))
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("writing %s: %w", dst, err)
	}
	return dst, nil
}

// extension is the file name extension of an artifact's copy: its name's,
// else its media type's, so that tools that go by extension read it right.
func extension(art artifact.Artifact) string {
	if ext := filepath.Ext(art.Name); ext != "" && len(ext) <= 16 && !strings.ContainsAny(ext, `/\`) {
		return ext
	}
	if exts, _ := mime.ExtensionsByType(art.MediaType); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

func (a *agentArtifacts) list(m proc.ArtifactList) proc.ArtifactListResult {
	res := proc.ArtifactListResult{Type: proc.TypeArtifactListResult, ID: m.ID}
	page, next, err := a.svc.List(a.ctx, a.sessionID, artifact.Query{MediaType: m.MediaType, Cursor: m.Cursor, Limit: m.Limit})
	if err != nil {
		res.Error = artifactError(err)
		return res
	}
	res.OK, res.NextCursor = true, next
	res.Artifacts = make([]proc.Artifact, len(page))
	for i, art := range page {
		res.Artifacts[i] = lineArtifact(art)
	}
	return res
}

func (a *agentArtifacts) url(m proc.ArtifactURL) proc.ArtifactURLResult {
	res := proc.ArtifactURLResult{Type: proc.TypeArtifactURLResult, ID: m.ID}
	if m.TTL < 0 || m.TTL > int64(artifact.MaxURLTTL/time.Second) {
		res.Error = &proc.ErrorBody{Code: proc.CodeInvalidField, Message: fmt.Sprintf("ttl: %d is not between 0 and %d seconds", m.TTL, int64(artifact.MaxURLTTL/time.Second))}
		return res
	}
	if _, err := a.svc.Get(a.ctx, a.sessionID, m.Artifact); err != nil {
		res.Error = artifactError(err)
		return res
	}
	res.OK = true
	res.URL, _ = a.svc.URL(m.Artifact, time.Duration(m.TTL)*time.Second)
	return res
}

// errPathRefused: the path leads outside the scratch directory and the
// session's working directory.
var errPathRefused = errors.New("outside the scratch directory and the session's working directory")

// open opens a file the agent names for a put: a path relative to the
// agent's working directory, or absolute, that is inside the scratch
// directory or the working directory once every symbolic link is followed.
// The file is opened through os.Root, so no link (even one swapped in after
// the check) leads it out.
func (a *agentArtifacts) open(path string) (*os.File, error) {
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(a.cwd, abs)
	}
	abs = filepath.Clean(abs)
	// The path as given, and with its links resolved (the agent may name a
	// file through a link to a directory, or a root may be one).
	cands := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		cands = append(cands, real)
	}
	for _, dir := range a.roots() {
		for _, c := range cands {
			rel, err := filepath.Rel(dir, c)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				continue
			}
			f, err := openIn(dir, rel)
			if err == nil {
				return f, nil
			}
			if !errors.Is(err, errPathRefused) {
				return nil, err
			}
		}
	}
	return nil, errPathRefused
}

// roots are the directories a put may read from, as configured and with
// their links resolved.
func (a *agentArtifacts) roots() []string {
	var out []string
	for _, d := range []string{a.scratch, a.cwd} {
		if d == "" {
			continue
		}
		out = append(out, filepath.Clean(d))
		if real, err := filepath.EvalSymlinks(d); err == nil && real != filepath.Clean(d) {
			out = append(out, real)
		}
	}
	return out
}

func openIn(dir, rel string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
			return nil, errPathRefused
		}
		return nil, err
	}
	return f, nil
}

func pathError(path string, err error) *proc.ErrorBody {
	switch {
	case errors.Is(err, errPathRefused):
		return &proc.ErrorBody{Code: proc.CodePathRefused, Message: fmt.Sprintf("path: %s is %s; write the file under %s first", path, errPathRefused, proc.EnvArtifactDir)}
	case errors.Is(err, fs.ErrNotExist):
		return &proc.ErrorBody{Code: proc.CodeNotFound, Message: fmt.Sprintf("path: there is no file %s", path)}
	}
	return &proc.ErrorBody{Code: proc.CodeInvalidField, Message: fmt.Sprintf("path: %s cannot be read: %v", path, err)}
}

// artifactError is the answer's error for a failure of artifact.Service, in
// the codes of the HTTP API.
func artifactError(err error) *proc.ErrorBody {
	var fe *artifact.FieldError
	switch {
	case errors.As(err, &fe):
		return &proc.ErrorBody{Code: proc.CodeInvalidField, Message: fe.Field + ": " + fe.Message}
	case errors.Is(err, artifact.ErrNotFound):
		return &proc.ErrorBody{Code: proc.CodeNotFound, Message: "no such artifact in this session"}
	case errors.Is(err, artifact.ErrTooLarge):
		return &proc.ErrorBody{Code: proc.CodeTooLarge, Message: err.Error()}
	case errors.Is(err, artifact.ErrQuotaExceeded):
		return &proc.ErrorBody{Code: proc.CodeQuotaExceeded, Message: err.Error()}
	case errors.Is(err, artifact.ErrSessionEnded):
		return &proc.ErrorBody{Code: proc.CodeSessionEnded, Message: "the session has ended"}
	case errors.Is(err, store.ErrOutcomeUnknown):
		return &proc.ErrorBody{Code: proc.CodeOutcomeUnknown, Message: "the store did not answer in time: the change may or may not have been made"}
	case errors.Is(err, store.ErrUnavailable):
		return &proc.ErrorBody{Code: proc.CodeStoreUnavailable, Message: "the store cannot be used now; nothing was changed, try again"}
	case errors.Is(err, context.Canceled):
		return &proc.ErrorBody{Code: proc.CodeUnavailable, Message: "the session is stopping"}
	}
	return &proc.ErrorBody{Code: proc.CodeUnavailable, Message: "the artifact store failed: " + err.Error()}
}

// lineArtifact is an artifact as the agent lines write it.
func lineArtifact(a artifact.Artifact) proc.Artifact {
	return proc.Artifact{ID: a.ID, SessionID: a.SessionID, MediaType: a.MediaType, Size: a.Size, SHA256: a.SHA256,
		Name: a.Name, CreatedAt: a.Created.UTC().Format(time.RFC3339Nano), DerivedFrom: a.DerivedFrom, Meta: a.Meta}
}
