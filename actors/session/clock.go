package session

import "time"

// Clock is the time a session runs on: its timers (readiness, restart
// back-off, abort grace, lease renewal) and its rate limit. Tests pass a
// clock they advance themselves.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer a Clock made.
type Timer interface {
	Stop() bool
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
