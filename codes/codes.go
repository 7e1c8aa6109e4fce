// Package codes is the one list of the codes a client can be given: the
// code of an error answer (HTTP API, WebSocket reply, the data of an ACP
// error), of a command's result, of a session's status, and of a
// diagnostic frame. Every transport reads its codes here, and so do the
// actors and the agent protocol (agentproc's reserved codes are these), so
// the same failure has the same name wherever a client meets it.
//
// A code is snake_case and stable: clients branch on it; the message next
// to it is for people and may change. The HTTP status an error answer
// takes is given per code (the data plane answers some codes with another,
// docs/http-api.md says which). docs/http-api.md, docs/agent-protocol.md
// and docs/acp.md describe where each code appears; a test keeps this list
// and those documents in step.
package codes

// The request itself is wrong: 400 unless said otherwise. Nothing was
// done.
const (
	// InvalidJSON: the body (or a WebSocket request) is not one JSON value.
	InvalidJSON = "invalid_json"
	// InvalidField: a field has the wrong type or a value out of range
	// (the answer names it in fields).
	InvalidField = "invalid_field"
	// UnknownField: the body has a field the request does not take.
	UnknownField = "unknown_field"
	// BadBody: the body could not be read (a connection that broke, a
	// multipart upload that does not parse).
	BadBody = "bad_body"
	// InvalidAgent: a new session names an agent that is not configured.
	InvalidAgent = "invalid_agent"
	// InvalidCwd: a new session's working directory is not one it may
	// have.
	InvalidCwd = "invalid_cwd"
	// InvalidKey: a client's KV key is not of the form <ns>.<pref>.
	InvalidKey = "invalid_key"
	// InvalidValue: a client's KV value is missing or not JSON.
	InvalidValue = "invalid_value"
	// InvalidRequest: the session refused the request as malformed (an
	// attachment that is not the session's).
	InvalidRequest = "invalid_request"
	// EmptyPrompt: a prompt with neither text nor images.
	EmptyPrompt = "empty_prompt"
	// ImagesNotSupported: a prompt carries images and the agent takes
	// none.
	ImagesNotSupported = "images_not_supported"
	// NoUserMessage: a chat request (the AI SDK's transport) whose last
	// message is not the user's.
	NoUserMessage = "no_user_message"
	// NotWebSocket: a WebSocket route reached without an upgrade.
	NotWebSocket = "not_websocket"
	// InvalidFrame: a WebSocket frame that is not a text frame of JSON.
	InvalidFrame = "invalid_frame"
	// UnknownType: a WebSocket request of a type the socket does not take.
	UnknownType = "unknown_type"
	// InvalidIdempotencyKey: more than one Idempotency-Key, or one that is
	// empty, too long or not printable ASCII.
	InvalidIdempotencyKey = "invalid_idempotency_key"
	// TokenNotCookieSafe: the start URL's token cannot be stored in a
	// cookie.
	TokenNotCookieSafe = "token_not_cookie_safe"
)

// Who may ask: 401 and 403.
const (
	// Unauthorized (401, with WWW-Authenticate: Bearer): no credential, or
	// one that is not valid (or no longer).
	Unauthorized = "unauthorized"
	// HostNotAllowed (403): the Host is not this daemon's (DNS rebinding).
	HostNotAllowed = "host_not_allowed"
	// OriginNotAllowed (403): a browser page of another origin.
	OriginNotAllowed = "origin_not_allowed"
	// CrossSiteSignin (403): another site sent the browser to the start
	// URL.
	CrossSiteSignin = "cross_site_signin"
	// SignatureExpired (403): a signed artifact URL past its expiry.
	SignatureExpired = "signature_expired"
	// SurfaceReadOnly (403): a client wrote a surface's snapshot key,
	// which only its domain writes.
	SurfaceReadOnly = "surface_read_only"
	// SigninFailed (400, 403 or 503): a browser sign-in through the
	// identity provider did not complete (a callback of an attempt this
	// browser did not start, or that expired; the provider's refusal; an
	// ID token that does not verify; 503 when the provider cannot be
	// reached).
	SigninFailed = "signin_failed"
)

// What was asked for is not there, or not in that way.
const (
	// NotFound (404): no such session, or not the caller's (the same
	// answer, so a session of someone else looks missing); no such
	// artifact or file.
	NotFound = "not_found"
	// NoRoute (404): no such route.
	NoRoute = "no_route"
	// MethodNotAllowed (405): the route does not take the method.
	MethodNotAllowed = "method_not_allowed"
	// BodyTimeout (408): the body did not arrive within
	// limits.read_timeout.
	BodyTimeout = "body_timeout"
	// UnsupportedMediaType (415): a body of a type the route does not
	// take.
	UnsupportedMediaType = "unsupported_media_type"
	// IdempotencyKeyReused (422): the idempotency key came with another
	// action or other args; nothing was run.
	IdempotencyKeyReused = "idempotency_key_reused"
)

// The session cannot do it in the state it is in: 409.
const (
	// SessionEnded: the session has ended; it is read-only.
	SessionEnded = "session_ended"
	// AgentUnavailable: the agent (that hosts the domain) is not running.
	AgentUnavailable = "agent_unavailable"
	// UnknownUIRequest: an answer to a dialog that is not open.
	UnknownUIRequest = "unknown_ui_request"
	// TurnNotReplayable: a subscription from the running turn's start, and
	// the replay window no longer holds that start.
	TurnNotReplayable = "turn_not_replayable"
	// SigninNeedsConfirmation: the browser is signed in as another
	// subject; switching needs the confirmation page.
	SigninNeedsConfirmation = "signin_needs_confirmation"
)

// Too much: 413 and 429. Nothing was done.
const (
	// TooLarge (413): a body, prompt, value or upload over its limit.
	TooLarge = "too_large"
	// QuotaExceeded (413): the session's or the daemon's artifact quota
	// would be passed.
	QuotaExceeded = "quota_exceeded"
	// TooManySessions (429): the caller, or the node, runs as many
	// sessions as it may.
	TooManySessions = "too_many_sessions"
	// RateLimited (429): over limits.commands_per_second.
	RateLimited = "rate_limited"
	// InboxFull (429): the session holds as many queued prompts as it may.
	InboxFull = "inbox_full"
	// QueueFull (429): a domain's command queue is full (its agent is
	// behind); try again later.
	QueueFull = "queue_full"
	// TooManyStreams (429): the caller has as many streams open as it may.
	TooManyStreams = "too_many_streams"
	// TooManyRequests (429): a WebSocket has as many requests waiting for
	// their replies as it may.
	TooManyRequests = "too_many_requests"
	// TooManyConnections (ACP, 429): the subject holds as many ACP
	// connections as it may (acp.connections_per_subject).
	TooManyConnections = "too_many_connections"
	// TooManySessionsOnConnection (ACP): the connection has streams for as
	// many sessions as it may (acp.sessions_per_connection).
	TooManySessionsOnConnection = "too_many_sessions_on_connection"
)

// The daemon could not: 5xx. Unless said otherwise, nothing was done; try
// again.
const (
	// Internal (500): a failure of the daemon itself; its text is logged
	// with the request id, never sent.
	Internal = "internal"
	// BadPage (502): a data plane page names an artifact the session does
	// not have.
	BadPage = "bad_page"
	// ShuttingDown (503): the daemon is stopping.
	ShuttingDown = "shutting_down"
	// NotReady (503): the node is out of step with its cluster (rejoining
	// or leaving).
	NotReady = "not_ready"
	// Unavailable (503): the session did not answer in time, or a service
	// it needs (the artifact store) is not there.
	Unavailable = "unavailable"
	// SessionMoved (503): in a cluster, the session is moving between
	// nodes; send it again.
	SessionMoved = "session_moved"
	// IdentityUnavailable (503, Retry-After): a JWT cannot be checked
	// because its identity provider's keys cannot be fetched and the
	// cached ones are past jwks_max_age (or were never fetched).
	IdentityUnavailable = "identity_unavailable"
	// StoreUnavailable (503, Retry-After): the store could not take the
	// change, so it was not applied.
	StoreUnavailable = "store_unavailable"
	// OutcomeUnknown (504): the change was sent to the store and its
	// answer never came: it may or may not have been applied.
	OutcomeUnknown = "outcome_unknown"
)

// ACP only: the data.code of a -32603 answer, whose text is logged and
// not sent.
const (
	// TurnFailed: the prompt's turn failed (a model error, the agent
	// stopping mid-turn or refusing the prompt).
	TurnFailed = "turn_failed"
	// ConnectionClosed: the ACP connection closed before the session was
	// attached.
	ConnectionClosed = "connection_closed"
	// CreateFailed: session/new could not create the session.
	CreateFailed = "create_failed"
	// StoreFailed: the store failed a read (a listing, a session lookup).
	StoreFailed = "store_failed"
	// TranscriptFailed: session/load could not read the transcript.
	TranscriptFailed = "transcript_failed"
)

// Command results ({ok:false, error:{code}}) the agent protocol reserves:
// the daemon answers them, and an agent may answer some itself
// (docs/agent-protocol.md). The data plane and the agent's artifact lines
// use them too.
const (
	// UnknownAction: the domain has no such command.
	UnknownAction = "unknown_action"
	// SurfaceNotRegistered: no such domain in the session.
	SurfaceNotRegistered = "surface_not_registered"
	// DispatchFailed: the handler failed (a Go handler's error or panic,
	// an agent's invalid result, a snapshot over the limit).
	DispatchFailed = "dispatch_failed"
	// Timeout: the agent did not answer in time; nothing changed.
	Timeout = "timeout"
	// InvalidArgs: the args do not fit the command.
	InvalidArgs = "invalid_args"
	// LineTooLong: the agent's line was over the line cap and was dropped
	// (also a diagnostic).
	LineTooLong = "line_too_long"
	// DuplicateDomain: a domain declared twice, or one the daemon hosts
	// natively (also a diagnostic).
	DuplicateDomain = "duplicate_domain"
	// Cancelled: the caller stopped waiting before the command ran; it was
	// not run.
	Cancelled = "cancelled"
	// WriteFailed: the command could not be written to the agent's stdin.
	WriteFailed = "write_failed"
	// NoDataPlane (501 on the data plane): the domain serves no data.
	NoDataPlane = "no_data_plane"
	// PathRefused: an agent's artifact line names a file outside its
	// scratch directory and working directory.
	PathRefused = "path_refused"
)

// A session's status code (the session frame's code, with its detail).
const (
	// ReadyTimeout: the agent did not become ready in time.
	ReadyTimeout = "ready_timeout"
	// ExitBeforeReady: the agent exited before it was ready.
	ExitBeforeReady = "exit_before_ready"
	// SpawnFailed: the agent could not be started.
	SpawnFailed = "spawn_failed"
	// AgentCrashed: the agent exited; it is being restarted.
	AgentCrashed = "agent_crashed"
	// RestartExhausted: the agent crashed more often than restart_max
	// allows; the session ended.
	RestartExhausted = "restart_exhausted"
	// UnknownAgent: the session's agent is no longer configured; also
	// (404) an AG-UI thread's run naming an agent that is not configured.
	UnknownAgent = "unknown_agent"
	// AgentFlooding: the agent kept writing lines nobody asked for and was
	// stopped (also a diagnostic).
	AgentFlooding = "agent_flooding"
)

// A turn's failure: the code of its chat error (TurnError), which AG-UI
// clients get as RUN_ERROR's code.
const (
	// AgentExited: the agent process stopped during the turn.
	AgentExited = "agent_exited"
	// NotAnswered: a queued prompt that nothing will run (the agent did
	// not start, or will not be restarted).
	NotAnswered = "not_answered"
	// AgentError: the agent's own turn failed (its model, its loop).
	AgentError = "agent_error"
)

// Diagnostics: something an agent did wrong that the session survived
// (besides LineTooLong, DuplicateDomain and AgentFlooding above).
const (
	// InvalidLine: a line that is not a valid message of the protocol.
	InvalidLine = "invalid_line"
	// StateRefused: the agent's KV write was refused or not saved.
	StateRefused = "state_refused"
	// AttachmentNotDelivered: a prompt's attachment was not given to the
	// agent (a type or size it does not take).
	AttachmentNotDelivered = "attachment_not_delivered"
)
