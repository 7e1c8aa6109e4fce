package clock

import (
	"sync"
	"testing"
	"time"
)

func TestFakeRunsDueTimersInOrder(t *testing.T) {
	c := NewFake(time.Unix(1000, 0))
	var mu sync.Mutex
	var got []int
	done := make(chan struct{}, 3)
	record := func(i int) func() {
		return func() {
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			done <- struct{}{}
		}
	}
	c.AfterFunc(3*time.Second, record(3))
	c.AfterFunc(time.Second, record(1))
	stopped := c.AfterFunc(2*time.Second, record(2))
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once")
	}
	if c.Pending() != 2 {
		t.Fatalf("pending %d", c.Pending())
	}
	c.Advance(1500 * time.Millisecond)
	<-done
	if c.Pending() != 1 {
		t.Fatalf("pending %d after the first came due", c.Pending())
	}
	c.Advance(2 * time.Second)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("ran %v, want [1 3]", got)
	}
	if want := time.Unix(1003, 500e6); !c.Now().Equal(want) {
		t.Fatalf("now %v, want %v", c.Now(), want)
	}
}

func TestWaitPending(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	go c.AfterFunc(time.Minute, func() {})
	if !c.WaitPending(1, 5*time.Second) {
		t.Fatal("the timer armed on another goroutine was not seen")
	}
	if c.WaitPending(2, 10*time.Millisecond) {
		t.Fatal("a second timer was reported")
	}
}
