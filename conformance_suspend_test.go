package codemode

import (
	"cmp"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestConformanceSuspended runs every tool-using conformance case with its
// calls served through suspension: each time the run waits, its state goes
// to bytes, a fresh Runtime resumes it, and the next result to arrive is
// delivered. The Result must meet the case's expectation and equal the
// one Execute gives.
func TestConformanceSuspended(t *testing.T) {
	h := newConfHost(t)
	var sizes []int
	var mu sync.Mutex
	t.Cleanup(func() {
		if len(sizes) == 0 {
			return
		}
		slices.Sort(sizes)
		q := func(p float64) int { return sizes[int(p*float64(len(sizes)-1))] }
		t.Logf("state sizes over %d suspensions: min %d, p50 %d, p90 %d, p99 %d, max %d bytes",
			len(sizes), sizes[0], q(0.5), q(0.9), q(0.99), sizes[len(sizes)-1])
	})
	n := 0
	for _, c := range loadConformance(t) {
		if len(c.Tools) == 0 {
			continue
		}
		n++
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			res, steps := h.runSuspended(t, c)
			if msg := checkExpect(c.Expect, res); msg != "" {
				t.Errorf("suspended: %s\ncode: %s\nresult: %s", msg, c.Code, clip(res))
			}
			direct, err := Execute(context.Background(), h.options(t, c), c.Code)
			if err != nil {
				t.Fatal(err)
			}
			if d := sameResult(direct, res); d != "" {
				t.Errorf("suspended and direct results differ: %s\ncode: %s\ndirect:    %s\nsuspended: %s", d, c.Code, clip(direct), clip(res))
			}
			mu.Lock()
			sizes = append(sizes, steps...)
			mu.Unlock()
		})
	}
	if n < 100 {
		t.Fatalf("only %d tool-using cases", n)
	}
}

// sameResult compares two Results but for durations (and, for timing
// cases, what a slow machine may reorder, which checkExpect covers).
func sameResult(a, b Result) string {
	strip := func(r Result) Result {
		r.ToolCalls = slices.Clone(r.ToolCalls)
		for i := range r.ToolCalls {
			r.ToolCalls[i].DurationMs = 0
		}
		return r
	}
	a, b = strip(a), strip(b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) == string(jb) {
		return ""
	}
	switch {
	case a.OK != b.OK:
		return "ok"
	case !jsonEqual(a.Value, b.Value):
		return "value"
	case !reflect.DeepEqual(a.Logs, b.Logs):
		return "logs"
	case !reflect.DeepEqual(a.Error, b.Error):
		return "error"
	}
	return "tool calls"
}

var testStateKey = []byte("0123456789abcdef0123456789abcdef")

// runSuspended serves a case's calls through suspension, as a host
// would: pending calls run in the order they were made, at most
// MaxConcurrency at once, and each result is delivered, as soon as it
// arrives, to a run resumed from bytes in a new Runtime. Timers and the
// deadline count while the run is away (TimeoutIncludesSuspended), so a
// call slower than a timer loses to it as it would in Execute. It returns
// the Result and the size of every state.
func (h *confHost) runSuspended(t *testing.T, c confCase) (Result, []int) {
	ctx := context.Background()
	opts := h.options(t, c)
	opts.StateKey = testStateKey
	opts.TimeoutIncludesSuspended = true
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, s, err := rt.ExecuteSuspendable(ctx, c.Code)
	if err != nil {
		t.Fatalf("ExecuteSuspendable: %v", err)
	}
	var sizes []int
	results := make(chan CallResult, 1024)
	queue := make(chan PendingCall, 1<<14)
	type call struct {
		ctx    context.Context
		cancel context.CancelFunc
	}
	calls := map[int]call{} // pending calls, started or queued
	var cmu sync.Mutex
	slots := make(chan struct{}, cmp.Or(opts.MaxConcurrency, DefaultMaxConcurrency))
	var wg sync.WaitGroup
	defer func() {
		close(queue)
		cmu.Lock()
		for _, c := range calls {
			c.cancel()
		}
		cmu.Unlock()
		wg.Wait()
	}()
	wg.Add(1)
	go func() { // starts calls in the order they were made as slots free up
		defer wg.Done()
		for p := range queue {
			slots <- struct{}{}
			cmu.Lock()
			c := calls[p.ID]
			cmu.Unlock()
			if c.ctx == nil || c.ctx.Err() != nil { // no longer pending
				<-slots
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rt.Call(c.ctx, p)
				<-slots
				results <- r
			}()
		}
	}()
	seen := map[int]bool{}
	for s != nil {
		sizes = append(sizes, len(s.State))
		pending := map[int]bool{}
		cmu.Lock()
		for _, p := range s.Pending {
			pending[p.ID] = true
			if !seen[p.ID] {
				seen[p.ID] = true
				cctx, cancel := context.WithCancel(ctx)
				calls[p.ID] = call{cctx, cancel}
				queue <- p
			}
		}
		for id, c := range calls {
			if !pending[id] { // answered, or lost a race: the run no longer waits for it
				c.cancel()
				delete(calls, id)
			}
		}
		cmu.Unlock()
		var wake, deadline <-chan time.Time
		if w := s.NextTimer; w > 0 {
			wake = time.After(w)
		}
		if !s.Deadline.IsZero() {
			deadline = time.After(time.Until(s.Deadline))
		}
		var deliver []CallResult
		for deliver == nil {
			select {
			case r := <-results:
				if pending[r.ID] {
					deliver = []CallResult{r}
				}
			case <-wake:
				deliver = []CallResult{}
			case <-deadline:
				deliver = []CallResult{}
			}
		}
		fresh, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		res, s, err = fresh.Resume(ctx, s.State, deliver...)
		fresh.Close()
		if err != nil {
			t.Fatalf("Resume: %v", err)
		}
	}
	return res, sizes
}
