// Package lograte keeps one noisy source (an agent's stderr, the invalid
// lines it writes) from flooding the daemon's log: the first Lines records
// of each interval are logged, the rest are counted, and one summary record
// says how many were suppressed when the interval ends. Whoever needs the
// detail has it elsewhere (the agent's stderr ring, the diagnostic frames).
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/surfaced/surfaced/internal/clock"
)

// Defaults of Config.
const (
	DefaultLines    = 100
	DefaultInterval = 10 * time.Second
)

// Config says how much of a source reaches the log.
type Config struct {
	// Lines is how many records of an interval are logged (0: DefaultLines).
	Lines int
	// Interval is the window Lines counts in (0: DefaultInterval).
	Interval time.Duration
	// Clock runs the interval (nil: the wall clock).
	Clock clock.Clock
}

// Limiter logs a source's records within its rate. It is safe for
// concurrent use. The zero value is not usable; use New.
type Limiter struct {
	log      *slog.Logger
	what     string
	lines    int
	interval time.Duration
	clock    clock.Clock

	mu         sync.Mutex
	start      time.Time // the current interval began
	logged     int       // records logged in it
	suppressed int       // records suppressed since the last summary
	timer      clock.Timer
	closed     bool
}

// New returns a Limiter that logs to log; what names the source in the
// summary ("agent stderr").
func New(log *slog.Logger, what string, cfg Config) *Limiter {
	if cfg.Lines <= 0 {
		cfg.Lines = DefaultLines
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Limiter{log: log, what: what, lines: cfg.Lines, interval: cfg.Interval, clock: cfg.Clock}
}

// Log logs one record of the source unless the interval's share is used up;
// then it counts it for the summary. It reports whether it logged.
func (l *Limiter) Log(level slog.Level, msg string, args ...any) bool {
	l.mu.Lock()
	now := l.clock.Now()
	if l.start.IsZero() || now.Sub(l.start) >= l.interval {
		l.start, l.logged = now, 0
	}
	if l.logged >= l.lines || l.closed {
		l.suppressed++
		if l.timer == nil && !l.closed {
			// The summary comes when the interval ends, whether or not the
			// source says anything more.
			l.timer = l.clock.AfterFunc(l.start.Add(l.interval).Sub(now), l.summarize)
		}
		l.mu.Unlock()
		return false
	}
	l.logged++
	l.mu.Unlock()
	l.log.Log(context.Background(), level, msg, args...)
	return true
}

// Suppressed is the number of records suppressed since the last summary.
func (l *Limiter) Suppressed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.suppressed
}

// summarize logs how many records the interval suppressed.
func (l *Limiter) summarize() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed, l.timer = 0, nil
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(l.what+": records suppressed", "suppressed", n, "limit", l.lines, "interval", l.interval)
	}
}

// Close logs the summary of what was suppressed so far (the source ended)
// and suppresses whatever comes later without a summary.
func (l *Limiter) Close() {
	l.mu.Lock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	l.summarize()
}
