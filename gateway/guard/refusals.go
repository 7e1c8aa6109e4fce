package guard

import (
	"log/slog"
	"net/http"

	"github.com/surfaced/surfaced/internal/lograte"
)

// refusalLog logs why JWTs are refused, and that a provider's keys are
// unavailable, within a rate: an operator sees a wrong audience or issuer
// at once, a flood of bad tokens does not flood the log.
type refusalLog struct {
	refused, down *lograte.Limiter
}

func newRefusalLog(log *slog.Logger) *refusalLog {
	return &refusalLog{
		refused: lograte.New(log, "bearer JWT refusals", lograte.Config{Lines: 20}),
		down:    lograte.New(log, "identity provider unavailable", lograte.Config{Lines: 5}),
	}
}

func (l *refusalLog) jwt(r *http.Request, reason string) {
	l.refused.Log(slog.LevelInfo, "refused: bearer JWT", "reason", reason, "remote", r.RemoteAddr, "method", r.Method, "path", clip(r.URL.Path))
}

func (l *refusalLog) unavailable(err error) {
	l.down.Log(slog.LevelWarn, "a bearer JWT cannot be checked: the identity provider's keys are unavailable", "err", err)
}
