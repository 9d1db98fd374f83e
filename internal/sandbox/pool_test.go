package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode/internal/quickjs"
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

// TestImageAfterSecondRun checks a configuration's first run captures
// nothing, its second makes the image in the background, and later runs
// take instances from it, reused once their run is over.
func TestImageAfterSecondRun(t *testing.T) {
	s, err := New(context.Background(), testOptions(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const mem = 24 << 20 // a configuration of its own
	req := Request{Program: `(async () => 1)()`, MemoryBytes: mem}
	key := poolKey{mem, bindingSpec(nil)}
	image := func() *quickjs.Image {
		s.poolMu.Lock()
		p := s.pools[key]
		s.poolMu.Unlock()
		if p == nil {
			return nil
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.img
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
	if image() != nil {
		t.Fatal("an image was made after one run")
	}
	run()
	if !waitFor(func() bool { return image() != nil }) {
		t.Fatal("no image after the second run")
	}
	for range 5 {
		run()
	}
	if !waitFor(func() bool { return image().Spares() > 0 }) {
		t.Fatal("finished instances are not kept for reuse")
	}
	// A run that grows its memory is not reused; one instance is made
	// ahead in its place.
	res, err := s.Run(context.Background(), Request{Program: `(async () => "x".repeat(4 << 20).length)()`, MemoryBytes: mem})
	if err != nil || res.Failure != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if !waitFor(func() bool { return image().Spares() > 0 }) {
		t.Fatal("no instance made ahead after a run that grew its memory")
	}
}

// TestPoolsStopCleanly runs many configurations at once, so that pools
// are evicted while images are being made, then closes the sandbox while that may
// still be under way: Close must return, and no goroutine may remain.
func TestPoolsStopCleanly(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := New(context.Background(), testOptions(Options{}))
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

// BenchmarkReturn1 runs `return 1` back to back on instances from an image
// and, side by side, booting one per run (the design before images).
func BenchmarkReturn1(b *testing.B) {
	for _, mode := range []struct {
		name string
		boot bool
	}{{"image", false}, {"boot", true}} {
		b.Run(mode.name, func(b *testing.B) {
			s, err := New(context.Background(), testOptions(Options{BootEveryRun: mode.boot}))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			req := Request{Program: `(async () => 1)()`}
			for b.Loop() {
				res, err := s.Run(context.Background(), req)
				if err != nil || res.Failure != nil {
					b.Fatalf("%+v %v", res, err)
				}
			}
		})
	}
}
