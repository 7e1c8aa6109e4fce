package inspect

import (
	"fmt"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// A dead letter looked up while its actor is being forgotten is counted
// against the actor's kind, never as "other": remove forgets the record and
// writes its tombstone in one step. Lookups spin against each removal.
func TestKindOfDeadDuringRemove(t *testing.T) {
	in := New(Options{})
	ws := in.kind(KindWS)
	const rounds = 20000
	others := 0
	for i := range rounds {
		pid := actor.NewPID("nonhost", fmt.Sprint("ws-", i))
		r := &record{in: in, kind: ws, pid: pid, id: pid.Id}
		in.add(r)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.remove(r)
		}()
		for range 20 {
			if in.kindOfDead(pid) != KindWS {
				others++
			}
		}
		wg.Wait()
		if k := in.kindOfDead(pid); k != KindWS {
			t.Fatalf("after remove: %s", k)
		}
	}
	if others > 0 {
		t.Fatalf("%d of %d lookups during a removal answered other", others, rounds*20)
	}
}
