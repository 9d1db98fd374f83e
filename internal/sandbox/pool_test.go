package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond for up to five seconds.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// TestPoolPreparesAfterSecondRun checks a configuration's first run
// prepares nothing, its second starts refills, and every later run's end
// tops the pool up again.
func TestPoolPreparesAfterSecondRun(t *testing.T) {
	s, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const mem = 24 << 20 // a configuration of its own
	req := Request{Program: `(async () => 1)()`, MemoryBytes: mem}
	key := poolKey{mem, bindingSpec(nil)}
	ready := func() int {
		s.poolMu.Lock()
		defer s.poolMu.Unlock()
		if p := s.pools[key]; p != nil {
			return len(p.ready)
		}
		return -1
	}
	run := func() {
		t.Helper()
		res, err := s.Run(context.Background(), req)
		if err != nil || res.Failure != nil || string(res.Value) != "1" {
			t.Fatalf("%+v %v", res, err)
		}
	}
	run()
	time.Sleep(20 * time.Millisecond)
	if n := ready(); n != 0 {
		t.Fatalf("%d instances prepared after one run", n)
	}
	run()
	if !waitFor(func() bool { return ready() == poolDepth }) {
		t.Fatalf("pool holds %d after the second run, want %d", ready(), poolDepth)
	}
	for range 5 {
		run()
	}
	if !waitFor(func() bool { return ready() == poolDepth }) {
		t.Fatalf("pool holds %d after more runs, want %d", ready(), poolDepth)
	}
}

// TestPoolsStopCleanly runs many configurations at once, so that pools
// are evicted while refilling, then closes the sandbox while refills may
// still be under way: Close must return, and no goroutine may remain.
func TestPoolsStopCleanly(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 * maxPools {
				ns := Namespace{Name: fmt.Sprintf("ns%d_%d", w, i%(maxPools+3)), Admit: func(Call) (Work, error) { return nil, nil }}
				for range 2 {
					res, err := s.Run(context.Background(), Request{Program: `(async () => 1)()`, Bindings: []Namespace{ns}})
					if err != nil || res.Failure != nil {
						t.Errorf("%+v %v", res, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if !waitFor(func() bool { return runtime.NumGoroutine() <= before }) {
		t.Fatalf("%d goroutines after Close, %d before", runtime.NumGoroutine(), before)
	}
}
