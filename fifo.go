package codemode

import (
	"context"
	"sync"
)

// fifo is a counting semaphore that grants slots in the order tickets
// were taken. Tickets are taken when a call is admitted (on the run's
// goroutine, in call order), so calls start in the order the program made
// them even though each waits on its own goroutine.
type fifo struct {
	mu    sync.Mutex
	free  int
	queue []*ticket
}

type ticket struct {
	ready   chan struct{}
	granted bool // under fifo.mu
	gone    bool // the waiter gave up; under fifo.mu
	f       *fifo
}

func newFIFO(n int) *fifo { return &fifo{free: n} }

// granted is the ready channel of every ticket granted at once, so the
// common case allocates no channel.
var granted = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// enqueue takes a ticket, granting it at once when a slot is free and
// nobody is ahead.
func (f *fifo) enqueue() *ticket {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.free > 0 && len(f.queue) == 0 {
		f.free--
		return &ticket{ready: granted, granted: true, f: f}
	}
	t := &ticket{ready: make(chan struct{}), f: f}
	f.queue = append(f.queue, t)
	return t
}

// wait blocks until the ticket holds a slot or ctx ends. On error the
// ticket holds nothing.
func (t *ticket) wait(ctx context.Context) error {
	select {
	case <-t.ready:
		return nil
	default:
	}
	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
	}
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.granted {
		// Granted while giving up: pass the slot on.
		f.releaseLocked()
	} else {
		t.gone = true
	}
	return ctx.Err()
}

// release returns a slot, handing it to the first live waiter.
func (f *fifo) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked()
}

func (f *fifo) releaseLocked() {
	for len(f.queue) > 0 {
		t := f.queue[0]
		f.queue = f.queue[1:]
		if t.gone {
			continue
		}
		t.granted = true
		close(t.ready)
		return
	}
	f.free++
}
