package agentproc

import (
	"encoding/json"
	"time"

	"github.com/surfaced/surfaced/codes"
)

// Protocol is the surface extension's protocol name, announced in agent_ready.
const Protocol = "surfaced/1"

// Line types of the surface extension (docs/agent-protocol.md).
const (
	TypeAgentReady            = "agent_ready"
	TypeSurfaceCommand        = "surface_command"
	TypeSurfaceGet            = "surface_get"
	TypeStateSet              = "state_set"
	TypeStateDelete           = "state_delete"
	TypeSurfaceDispatchResult = "surface_dispatch_result"
	TypeSurfaceFetchResult    = "surface_fetch_result"
	TypeArtifactPut           = "artifact_put"
	TypeArtifactGet           = "artifact_get"
	TypeArtifactList          = "artifact_list"
	TypeArtifactURL           = "artifact_url"

	TypeSurfaceDispatch       = "surface_dispatch"
	TypeSurfaceCommandResult  = "surface_command_result"
	TypeSurfaceGetResult      = "surface_get_result"
	TypeStateChanged          = "state_changed"
	TypeSurfaceRegisterResult = "surface_register_result"
	TypeSurfaceFetch          = "surface_fetch"
	TypeArtifactPutResult     = "artifact_put_result"
	TypeArtifactGetResult     = "artifact_get_result"
	TypeArtifactListResult    = "artifact_list_result"
	TypeArtifactURLResult     = "artifact_url_result"
)

// DaemonSurfaceLine reports whether typ is a line type of the surface
// extension that the daemon writes to an agent. pi does not know them: a pi
// with a surfaced/1 extension inside answers each with an id-less
// "Unknown command" failure (UnknownCommand), which the daemon expects.
func DaemonSurfaceLine(typ string) bool {
	switch typ {
	case TypeSurfaceDispatch, TypeSurfaceCommandResult, TypeSurfaceGetResult, TypeStateChanged,
		TypeSurfaceRegisterResult, TypeSurfaceFetch, TypeArtifactPutResult, TypeArtifactGetResult,
		TypeArtifactListResult, TypeArtifactURLResult:
		return true
	}
	return false
}

// UnknownCommand is the error pi answers a line of type typ with when it does
// not know the type (with success false and no id).
func UnknownCommand(typ string) string { return "Unknown command: " + typ }

// EnvArtifactDir names the agent's environment variable that holds the
// session's scratch directory: the files an agent puts are read from there
// (or from the session's cwd), and artifact_get writes the bytes there.
const EnvArtifactDir = "SURFACED_ARTIFACT_DIR"

// Reserved command result codes: the agent protocol's names for codes of
// package codes, which defines and documents every code a client can meet.
const (
	CodeUnknownAction        = codes.UnknownAction
	CodeSurfaceNotRegistered = codes.SurfaceNotRegistered
	CodeDispatchFailed       = codes.DispatchFailed
	CodeTimeout              = codes.Timeout
	CodeInvalidArgs          = codes.InvalidArgs
	CodeAgentUnavailable     = codes.AgentUnavailable
	CodeDuplicateDomain      = codes.DuplicateDomain
	// CodeStoreUnavailable: the store could not take the change, so it was
	// not applied (try again).
	CodeStoreUnavailable = codes.StoreUnavailable
	// CodeOutcomeUnknown: the change was sent to the store and its answer
	// never came: it may or may not have been applied.
	CodeOutcomeUnknown = codes.OutcomeUnknown
	// CodeLineTooLong: the agent's answer was over the line cap (it was
	// dropped); the command did not change the state.
	CodeLineTooLong = codes.LineTooLong
	// CodeQueueFull: the domain's command queue is full; try again later.
	CodeQueueFull = codes.QueueFull
	// CodeCancelled: the caller stopped waiting before the command ran; it
	// was not run (an outcome in metrics; nobody is left to read it).
	CodeCancelled = codes.Cancelled
	// Codes of the artifact lines and the data plane.
	CodeNotFound      = codes.NotFound
	CodeInvalidField  = codes.InvalidField
	CodePathRefused   = codes.PathRefused
	CodeTooLarge      = codes.TooLarge
	CodeQuotaExceeded = codes.QuotaExceeded
	CodeSessionEnded  = codes.SessionEnded
	CodeUnavailable   = codes.Unavailable
	CodeNoDataPlane   = codes.NoDataPlane
)

// SurfaceKeyPrefix prefixes the session KV key of a domain's snapshot.
const SurfaceKeyPrefix = "surface:"

// SurfaceKey is the KV key (and probe command name) of a domain.
func SurfaceKey(domain string) string { return SurfaceKeyPrefix + domain }

// ErrorBody is {code, message}.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Result is a command result: {ok:true,data} or {ok:false,error}.
type Result struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data,omitempty"`
	Error *ErrorBody      `json:"error,omitempty"`
}

// SurfaceDecl declares one agent-hosted domain in agent_ready.
type SurfaceDecl struct {
	Domain       string          `json:"domain"`
	Commands     []string        `json:"commands"`
	InitialState json.RawMessage `json:"initialState,omitempty"`
	// Data: the domain serves data pages (surface_fetch).
	Data bool `json:"data,omitempty"`
	// Schemas maps an action to the JSON Schema of its args (an object
	// schema; its top-level description is the command's). An action
	// without one takes any object.
	Schemas map[string]json.RawMessage `json:"schemas,omitempty"`
}

// AgentReady is the first line of a surfaced/1 agent.
type AgentReady struct {
	Type     string        `json:"type"` // agent_ready
	Protocol string        `json:"protocol"`
	Name     string        `json:"name,omitempty"`
	Surfaces []SurfaceDecl `json:"surfaces,omitempty"`
	// Images tells clients whether prompts may carry images.
	Images bool `json:"images,omitempty"`
}

// SurfaceCommand: the conversation client runs a command on a domain.
type SurfaceCommand struct {
	Type   string          `json:"type"` // surface_command
	ID     string          `json:"id"`
	Domain string          `json:"domain"`
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args,omitempty"`
}

// SurfaceGet reads a domain's current snapshot.
type SurfaceGet struct {
	Type   string `json:"type"` // surface_get
	ID     string `json:"id"`
	Domain string `json:"domain"`
}

// StateSet writes a session KV key from the agent.
type StateSet struct {
	Type  string          `json:"type"` // state_set
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// StateDelete deletes a session KV key from the agent.
type StateDelete struct {
	Type string `json:"type"` // state_delete
	Key  string `json:"key"`
}

// SurfaceDispatch asks the agent to compute a command against state.
type SurfaceDispatch struct {
	Type   string          `json:"type"` // surface_dispatch
	ID     string          `json:"id"`
	Domain string          `json:"domain"`
	Action string          `json:"action"`
	Args   json.RawMessage `json:"args"`
	State  json.RawMessage `json:"state"`
	Rev    uint64          `json:"rev"`
	// Deadline is when the daemon stops waiting for the answer (RFC 3339,
	// UTC, milliseconds): the end of the settle window, or earlier when the
	// command's caller stops waiting first. An answer after it is ignored
	// (the command failed with timeout and its state change is not applied),
	// so an agent may skip work it cannot finish by then. Absent when there
	// is none.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// SurfaceDispatchResult answers a dispatch. State absent means unchanged.
type SurfaceDispatchResult struct {
	Type   string          `json:"type"` // surface_dispatch_result
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result"`
	State  json.RawMessage `json:"state,omitempty"`
}

// SurfaceCommandResult answers surface_command.
type SurfaceCommandResult struct {
	Type  string          `json:"type"` // surface_command_result
	ID    string          `json:"id"`
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data,omitempty"`
	Error *ErrorBody      `json:"error,omitempty"`
}

// SurfaceGetResult answers surface_get.
type SurfaceGetResult struct {
	Type  string          `json:"type"` // surface_get_result
	ID    string          `json:"id"`
	OK    bool            `json:"ok"`
	State json.RawMessage `json:"state,omitempty"`
	Rev   uint64          `json:"rev,omitempty"`
	Error *ErrorBody      `json:"error,omitempty"`
}

// StateChanged tells the agent that a KV key (not surface:*) changed.
type StateChanged struct {
	Type    string          `json:"type"` // state_changed
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value,omitempty"`
	Rev     uint64          `json:"rev"`
	Deleted bool            `json:"deleted,omitempty"`
}

// SurfaceRegisterResult rejects a domain declaration.
type SurfaceRegisterResult struct {
	Type   string     `json:"type"` // surface_register_result
	Domain string     `json:"domain"`
	OK     bool       `json:"ok"`
	Error  *ErrorBody `json:"error,omitempty"`
}

// ValidCode reports whether code is a machine-readable error code as the
// protocol writes them: 1 to 64 bytes of lower-case letters, digits and
// underscores, starting with a letter (e.g. surface_not_registered).
func ValidCode(code string) bool {
	if code == "" || len(code) > 64 || code[0] < 'a' || code[0] > 'z' {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// SurfaceFetch asks the agent for one data page of a domain it hosts.
type SurfaceFetch struct {
	Type   string `json:"type"` // surface_fetch
	ID     string `json:"id"`
	Domain string `json:"domain"`
	Path   string `json:"path"`
	Query  string `json:"query"`
	Rev    uint64 `json:"rev"`
}

// SurfaceFetchResult answers surface_fetch: a JSON page (Data), or an
// artifact holding a larger one, with an optional ETag and max age
// (seconds).
type SurfaceFetchResult struct {
	Type     string          `json:"type"` // surface_fetch_result
	ID       string          `json:"id"`
	OK       bool            `json:"ok"`
	Data     json.RawMessage `json:"data,omitempty"`
	Artifact string          `json:"artifact,omitempty"`
	ETag     string          `json:"etag,omitempty"`
	MaxAge   int64           `json:"maxAge,omitempty"`
	Error    *ErrorBody      `json:"error,omitempty"`
}

// Artifact is an artifact as the agent lines carry it.
type Artifact struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"sessionId"`
	MediaType   string          `json:"mediaType"`
	Size        int64           `json:"size"`
	SHA256      string          `json:"sha256"`
	Name        string          `json:"name,omitempty"`
	CreatedAt   string          `json:"createdAt"`
	DerivedFrom string          `json:"derivedFrom,omitempty"`
	Meta        json.RawMessage `json:"meta,omitempty"`
}

// ArtifactPut asks the daemon to ingest the file at Path as an artifact.
type ArtifactPut struct {
	Type        string          `json:"type"` // artifact_put
	ID          string          `json:"id"`
	Path        string          `json:"path"`
	MediaType   string          `json:"mediaType"`
	Name        string          `json:"name,omitempty"`
	DerivedFrom string          `json:"derivedFrom,omitempty"`
	Meta        json.RawMessage `json:"meta,omitempty"`
}

// ArtifactPutResult answers artifact_put.
type ArtifactPutResult struct {
	Type     string     `json:"type"` // artifact_put_result
	ID       string     `json:"id"`
	OK       bool       `json:"ok"`
	Artifact *Artifact  `json:"artifact,omitempty"`
	URL      string     `json:"url,omitempty"`
	Error    *ErrorBody `json:"error,omitempty"`
}

// ArtifactGet asks the daemon to make an artifact's bytes readable.
type ArtifactGet struct {
	Type     string `json:"type"` // artifact_get
	ID       string `json:"id"`
	Artifact string `json:"artifact"`
}

// ArtifactGetResult answers artifact_get: Path is a file inside the scratch
// directory holding the bytes.
type ArtifactGetResult struct {
	Type     string     `json:"type"` // artifact_get_result
	ID       string     `json:"id"`
	OK       bool       `json:"ok"`
	Path     string     `json:"path,omitempty"`
	Artifact *Artifact  `json:"artifact,omitempty"`
	Error    *ErrorBody `json:"error,omitempty"`
}

// ArtifactList lists the session's artifacts, newest first.
type ArtifactList struct {
	Type      string `json:"type"` // artifact_list
	ID        string `json:"id"`
	MediaType string `json:"mediaType,omitempty"`
	Cursor    string `json:"cursor,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// ArtifactListResult answers artifact_list. Artifacts is [] (never absent)
// on success.
type ArtifactListResult struct {
	Type       string     `json:"type"` // artifact_list_result
	ID         string     `json:"id"`
	OK         bool       `json:"ok"`
	Artifacts  []Artifact `json:"artifacts"`
	NextCursor string     `json:"nextCursor,omitempty"`
	Error      *ErrorBody `json:"error,omitempty"`
}

// ArtifactURL asks for a signed URL of an artifact; TTL in seconds (0: the
// daemon's default).
type ArtifactURL struct {
	Type     string `json:"type"` // artifact_url
	ID       string `json:"id"`
	Artifact string `json:"artifact"`
	TTL      int64  `json:"ttl,omitempty"`
}

// ArtifactURLResult answers artifact_url.
type ArtifactURLResult struct {
	Type  string     `json:"type"` // artifact_url_result
	ID    string     `json:"id"`
	OK    bool       `json:"ok"`
	URL   string     `json:"url,omitempty"`
	Error *ErrorBody `json:"error,omitempty"`
}

// PromptAttachment is one attachment of a prompt to a surfaced/1 agent.
type PromptAttachment struct {
	ID        string `json:"id"`
	MediaType string `json:"mediaType"`
	Name      string `json:"name,omitempty"`
}
