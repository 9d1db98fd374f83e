package codemode

import (
	"context"
	"testing"
	"time"
)

func TestFIFOGrantsInTicketOrder(t *testing.T) {
	f := newFIFO(2)
	tickets := make([]*ticket, 6)
	for i := range tickets {
		tickets[i] = f.enqueue()
	}
	granted := func() []int {
		var out []int
		for i, tk := range tickets {
			select {
			case <-tk.ready:
				out = append(out, i)
			default:
			}
		}
		return out
	}
	if g := granted(); len(g) != 2 || g[0] != 0 || g[1] != 1 {
		t.Fatalf("granted %v, want [0 1]", g)
	}
	// Ticket 2 gives up while waiting; the next release skips it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tickets[2].wait(ctx); err == nil {
		t.Fatal("cancelled wait succeeded")
	}
	f.release()
	if g := granted(); len(g) != 3 || g[2] != 3 {
		t.Fatalf("after one release: granted %v, want [0 1 3]", g)
	}
	f.release()
	f.release()
	if g := granted(); len(g) != 5 || g[3] != 4 || g[4] != 5 {
		t.Fatalf("after three releases: granted %v, want [0 1 3 4 5]", g)
	}
	// A waiter that was granted as it gave up passes its slot on.
	g := newFIFO(1)
	a, b := g.enqueue(), g.enqueue()
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	g.release() // grants b
	_ = a
	<-ctx2.Done()
	if err := b.wait(ctx2); err != nil {
		t.Fatalf("granted ticket: %v", err)
	}
	g.release()
	if g.free != 1 {
		t.Errorf("free slots %d, want 1", g.free)
	}
}
