package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
)

// nodesUntil lists the nodes until ok holds of the list.
func nodesUntil(ctx context.Context, t *testing.T, n *Node, ok func([]NodeStatus) bool) []NodeStatus {
	t.Helper()
	for {
		list, err := n.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok(list) {
			return list
		}
		select {
		case <-ctx.Done():
			t.Fatalf("nodes: %+v", list)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Nodes lists fronts and workers with their slots; a drained worker takes
// no more jobs, finishes the run it holds, and leaves the list.
func TestNodesAndDrain(t *testing.T) {
	fr := openNode(t, Config{Front: true, Name: "front"})
	b := openNode(t, Config{URL: fr.URL(), Options: []nats.Option{nats.Token(fr.Token())}, Name: "b"})
	var fx effects
	block := make(chan struct{})
	wb, err := NewWorker(b, codemode.Options{Tools: shopTools(&fx, block), StateKey: testKey, CacheDir: engineCache, Timeout: 30 * time.Second}, WorkerOptions{MaxRuns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	ran := make(chan error, 1)
	go func() { ran <- wb.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list := nodesUntil(ctx, t, fr, func(l []NodeStatus) bool { return len(l) == 2 && len(l[0].Workers) == 1 })
	if list[0].Name != "b" || list[0].Workers[0].Slots != 2 || list[0].Front || list[1].Name != "front" || !list[1].Front || len(list[1].Workers) != 0 {
		t.Fatalf("nodes %+v", list)
	}
	rt := front(t, shopTools(nil, nil))
	id, err := fr.Submit(ctx, rt, `return (await tools.shop.charge({ order: "held" })).charged`)
	if err != nil {
		t.Fatal(err)
	}
	nodesUntil(ctx, t, fr, func(l []NodeStatus) bool { return len(l) == 2 && len(l[0].Workers) == 1 && l[0].Workers[0].Busy == 1 })
	if _, err := fr.Drain(ctx, "nobody"); !errors.Is(err, ErrNoWorker) {
		t.Fatalf("drain of no one: %v", err)
	}
	busy, err := fr.Drain(ctx, "b")
	if err != nil || busy != 1 {
		t.Fatalf("drain: %d %v", busy, err)
	}
	nodesUntil(ctx, t, fr, func(l []NodeStatus) bool { return len(l) == 2 && len(l[0].Workers) == 1 && l[0].Workers[0].Draining })
	// A job submitted now waits for a worker that is not draining.
	later, err := fr.Submit(ctx, rt, `return 2`)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ran:
		t.Fatalf("Run returned while it held a run: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(block)
	if res, _, err := fr.Wait(ctx, id); err != nil || !res.OK {
		t.Fatalf("the drained worker's run: %+v %v", res, err)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if rec, _, err := fr.record(ctx, later); err != nil || rec.Status != queued {
		t.Fatalf("a drained worker took a job: %+v %v", rec, err)
	}
	nodesUntil(ctx, t, fr, func(l []NodeStatus) bool { return len(l) == 1 && l[0].Name == "front" })
	startWorker(t, fr, shopTools(&fx, nil))
	if res, _, err := fr.Wait(ctx, later); err != nil || string(res.Value) != "2" {
		t.Fatalf("the later run: %+v %v", res, err)
	}
}
