package codes

import "net/http"

// Status is the HTTP status of an error answer that carries code, for the
// codes a session refuses a request with; any other code is the daemon's
// fault, 500. Every HTTP transport (the API, the chat route, AG-UI) maps a
// session's refusal here, so the same refusal has the same status on each.
func Status(code string) int {
	switch code {
	case NotFound:
		return http.StatusNotFound
	case SessionEnded, AgentUnavailable, UnknownUIRequest, TurnNotReplayable:
		return http.StatusConflict
	case RateLimited, InboxFull, QueueFull, TooManySessions:
		return http.StatusTooManyRequests
	case SurfaceReadOnly:
		return http.StatusForbidden
	case InvalidKey, InvalidValue, InvalidRequest, EmptyPrompt, ImagesNotSupported:
		return http.StatusBadRequest
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case SessionMoved, StoreUnavailable, ShuttingDown, Unavailable:
		return http.StatusServiceUnavailable
	case OutcomeUnknown:
		return http.StatusGatewayTimeout
	case IdempotencyKeyReused:
		return http.StatusUnprocessableEntity
	default:
		return http.StatusInternalServerError
	}
}
