package surfaced

// JanitorRan returns a channel closed when the runtime's sweeps next finish
// a run: tests advance the runtime's clock, then wait on it.
func (r *Runtime) JanitorRan() <-chan struct{} { return r.janitor.ran() }
