package sandbox

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGoWorkRunsEveryJobOnce hands jobs over from several goroutines at
// once, some back to back (waiting workers take them) and some in bursts
// (new goroutines start), and checks each job ran exactly once.
func TestGoWorkRunsEveryJobOnce(t *testing.T) {
	const senders, perSender = 8, 2000
	var ran [senders * perSender]atomic.Int32
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{}, perSender)
			for i := range perSender {
				n := s*perSender + i
				goWork(func() {
					ran[n].Add(1)
					done <- struct{}{}
				})
				if i%2 == 0 {
					<-done // back to back: the next job finds a waiting worker
				}
			}
			for range perSender - (perSender+1)/2 {
				<-done
			}
		}()
	}
	wg.Wait()
	for n := range ran {
		if c := ran[n].Load(); c != 1 {
			t.Fatalf("job %d ran %d times", n, c)
		}
	}
}

// TestIdleWorkersExit checks waiting workers go away by themselves.
func TestIdleWorkersExit(t *testing.T) {
	before := runtime.NumGoroutine()
	done := make(chan struct{})
	for range 1000 {
		goWork(func() { done <- struct{}{} })
		<-done
	}
	settled := func() bool {
		for i := range spinners {
			if spinners[i].state.Load() != spinFree {
				return false
			}
		}
		return runtime.NumGoroutine() <= before
	}
	deadline := time.Now().Add(5 * time.Second)
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !settled() {
		for i := range spinners {
			t.Logf("place %d: state %d", i, spinners[i].state.Load())
		}
		t.Fatalf("%d goroutines after the jobs, %d before", runtime.NumGoroutine(), before)
	}
}
