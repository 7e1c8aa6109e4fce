package session

import (
	"github.com/surfaced/surfaced/actors/session/internal/hub"
	"github.com/surfaced/surfaced/codes"
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

// Session-level error codes (the request was refused; not a command
// outcome): the session's names for codes of package codes, which defines
// and documents every code a client can meet.
const (
	CodeNotFound      = codes.NotFound
	CodeEnded         = codes.SessionEnded
	CodeRateLimited   = codes.RateLimited
	CodeReadOnly      = codes.SurfaceReadOnly
	CodeInvalidKey    = codes.InvalidKey
	CodeInvalidValue  = codes.InvalidValue
	CodeInboxFull     = codes.InboxFull
	CodeUnavailable   = codes.AgentUnavailable
	CodeUnknownUI     = codes.UnknownUIRequest
	CodeInvalid       = codes.InvalidRequest
	CodeTooLarge      = codes.TooLarge
	CodeInternal      = codes.Internal
	CodeImagesRefused = codes.ImagesNotSupported
	CodeEmptyPrompt   = codes.EmptyPrompt
	// CodeStoreUnavailable: the store could not take the write (or cannot
	// now); nothing was applied (try again).
	CodeStoreUnavailable = codes.StoreUnavailable
	// CodeOutcomeUnknown: the write was sent and its outcome never came
	// back: it may or may not have been applied.
	CodeOutcomeUnknown = codes.OutcomeUnknown
	// CodeTurnNotReplayable: a subscription from the running turn's start
	// was asked for, but the replay window no longer holds that start.
	CodeTurnNotReplayable = codes.TurnNotReplayable
	// CodeAgentFlooding: the agent kept writing lines nobody asked for and
	// was stopped (a session status and diagnostic code).
	CodeAgentFlooding = codes.AgentFlooding
	// CodeQueueFull: a surface domain's command queue is full (the agent is
	// behind); nothing was run, try again later.
	CodeQueueFull = codes.QueueFull
	// CodeTooManySessions: the node runs as many sessions as it may and
	// cannot wake this one now.
	CodeTooManySessions = codes.TooManySessions
)
