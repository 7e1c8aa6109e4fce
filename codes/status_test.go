package codes

import (
	"net/http"
	"testing"
)

func TestStatus(t *testing.T) {
	for code, want := range map[string]int{
		NotFound: http.StatusNotFound, SessionEnded: http.StatusConflict, QueueFull: http.StatusTooManyRequests,
		SurfaceReadOnly: http.StatusForbidden, EmptyPrompt: http.StatusBadRequest, TooLarge: http.StatusRequestEntityTooLarge,
		ShuttingDown: http.StatusServiceUnavailable, StoreUnavailable: http.StatusServiceUnavailable,
		OutcomeUnknown: http.StatusGatewayTimeout, IdempotencyKeyReused: http.StatusUnprocessableEntity,
		"no_such_code": http.StatusInternalServerError,
	} {
		if got := Status(code); got != want {
			t.Errorf("Status(%q) = %d, want %d", code, got, want)
		}
	}
}
