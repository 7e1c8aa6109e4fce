package session

import (
	"github.com/surfaced/surfaced/actors/session/internal/hub"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/store"
)

// Session statuses.
const (
	StatusStarting = "starting"
	StatusReady    = "ready"
	StatusError    = "error"
	StatusEnded    = store.StatusEnded
	// StatusIdle is stored (never streamed) for a session with no live agent.
	StatusIdle = "idle"
)

// Modes of a subscription that does not resume a client's position
// (pb.SubscribeFrom): SUBSCRIBE_FROM_NOW answers ModeLive,
// SUBSCRIBE_FROM_TURN_START ModeTurn, or ModeIdle when no turn runs (then
// nobody was subscribed).
const (
	ModeLive = hub.ModeLive
	ModeTurn = hub.ModeTurn
	ModeIdle = hub.ModeIdle
)

// StopDeleted is the reason of a Stop that deletes the session (DELETE
// ?purge=true, the retention sweep): the session ends, its clients get
// end{reason:"deleted"}, and its actor stops before its rows go.
const StopDeleted = "deleted"

// Session-level error codes (the request was refused; not a command outcome).
const (
	CodeNotFound      = "not_found"
	CodeEnded         = "session_ended"
	CodeRateLimited   = "rate_limited"
	CodeReadOnly      = "surface_read_only"
	CodeInvalidKey    = "invalid_key"
	CodeInvalidValue  = "invalid_value"
	CodeInboxFull     = "inbox_full"
	CodeUnavailable   = "agent_unavailable"
	CodeUnknownUI     = "unknown_ui_request"
	CodeInvalid       = "invalid_request"
	CodeTooLarge      = "too_large"
	CodeInternal      = "internal"
	CodeImagesRefused = "images_not_supported"
	CodeEmptyPrompt   = "empty_prompt"
	// CodeStoreUnavailable: the store could not take the write (or cannot
	// now); nothing was applied (try again).
	CodeStoreUnavailable = proc.CodeStoreUnavailable
	// CodeOutcomeUnknown: the write was sent and its outcome never came
	// back: it may or may not have been applied.
	CodeOutcomeUnknown = proc.CodeOutcomeUnknown
	// CodeTurnNotReplayable: a subscription from the running turn's start
	// was asked for, but the replay window no longer holds that start.
	CodeTurnNotReplayable = "turn_not_replayable"
	// CodeAgentFlooding: the agent kept writing lines nobody asked for and
	// was stopped (a session status and diagnostic code).
	CodeAgentFlooding = "agent_flooding"
	// CodeQueueFull: a surface domain's command queue is full (the agent is
	// behind); nothing was run, try again later.
	CodeQueueFull = "queue_full"
	// CodeTooManySessions: the node runs as many sessions as it may and
	// cannot wake this one now.
	CodeTooManySessions = "too_many_sessions"
)
