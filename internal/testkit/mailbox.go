package testkit

import (
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// HeldDispatcher is an actor.Dispatcher whose mailbox runs wait while it is
// held: a test fills an actor's mailbox in the order it wants (frames, then
// a Terminated notice, say), then releases it. Its zero value runs mailboxes
// at once, each on a new goroutine.
type HeldDispatcher struct {
	mu    sync.Mutex
	held  bool
	queue []func()
}

var _ actor.Dispatcher = (*HeldDispatcher)(nil)

// Schedule implements actor.Dispatcher.
func (d *HeldDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	if d.held {
		d.queue = append(d.queue, fn)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	go fn()
}

// Throughput implements actor.Dispatcher.
func (d *HeldDispatcher) Throughput() int { return 300 }

// Hold makes mailbox runs wait from now on.
func (d *HeldDispatcher) Hold() {
	d.mu.Lock()
	d.held = true
	d.mu.Unlock()
}

// Release runs the mailbox runs that waited, and later ones at once.
func (d *HeldDispatcher) Release() {
	d.mu.Lock()
	q := d.queue
	d.queue, d.held = nil, false
	d.mu.Unlock()
	for _, fn := range q {
		go fn()
	}
}

// CountingMailbox is an unbounded mailbox that counts the system messages
// posted to it by type (*actor.Started, *actor.Watch, *actor.Terminated ...),
// so that a test can wait for one to be queued. Use it through its
// Producer: one mailbox, one actor.
type CountingMailbox struct {
	actor.Mailbox
	mu     sync.Mutex
	system map[string]int
}

// NewCountingMailbox returns an unbounded mailbox that counts.
func NewCountingMailbox() *CountingMailbox {
	return &CountingMailbox{Mailbox: actor.Unbounded()(), system: map[string]int{}}
}

// Producer is the props option's mailbox producer; it returns m itself.
func (m *CountingMailbox) Producer() actor.MailboxProducer {
	return func() actor.Mailbox { return m }
}

// PostSystemMessage implements actor.Mailbox.
func (m *CountingMailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system[fmt.Sprintf("%T", msg)]++
	m.mu.Unlock()
	m.Mailbox.PostSystemMessage(msg)
}

// SystemPosted is how many system messages of a type (as %T prints it,
// "*actor.Terminated") were posted so far.
func (m *CountingMailbox) SystemPosted(typ string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.system[typ]
}
