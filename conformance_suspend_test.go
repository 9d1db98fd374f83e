package codemode

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	secretkey "github.com/codemode-go/codemode/internal/secret"
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
			// A case that races sleeps and timers (a 5 ms call against a
			// 40 ms one) can lose its race on a machine busy enough to
			// delay a goroutine by more than the margin; such a case is
			// run again, and fails only when it fails every time. A case
			// that does not depend on time gets one try.
			for try := 1; try < 3 && !untimed(c) && checkExpect(c.Expect, res) != ""; try++ {
				t.Logf("try %d lost a race (%s); again", try, checkExpect(c.Expect, res))
				res, steps = h.runSuspended(t, c)
			}
			if msg := checkExpect(c.Expect, res); msg != "" {
				t.Errorf("suspended: %s\ncode: %s\nresult: %s", msg, c.Code, clip(res))
			}
			direct, err := Execute(context.Background(), h.options(t, c), c.Code)
			if err != nil {
				t.Fatal(err)
			}
			for try := 1; try < 3 && !untimed(c) && sameResult(direct, res) != ""; try++ {
				if direct, err = Execute(context.Background(), h.options(t, c), c.Code); err != nil {
					t.Fatal(err)
				}
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
			r.ToolCalls[i].DurationMs, r.ToolCalls[i].StartMs = 0, 0
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
	if c.Limits == nil || c.Limits.TimeoutMs == nil {
		// The default 10 s is the program's; here every wait also writes
		// the run to bytes and restores it in a new Runtime, which for a
		// case with 150 sequential calls on a busy machine under -race
		// took longer than that.
		opts.Timeout = time.Minute
	}
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
			c := calls[p.Index]
			cmu.Unlock()
			if c.ctx == nil || c.ctx.Err() != nil { // no longer pending
				<-slots
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rt.RunPending(c.ctx, p)
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
			pending[p.Index] = true
			if !seen[p.Index] {
				seen[p.Index] = true
				cctx, cancel := context.WithCancel(ctx)
				calls[p.Index] = call{cctx, cancel}
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
				if pending[r.Index] {
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

// Environment of a child process that serves one step of a case (see
// TestConformanceSuspendedAcrossProcesses).
const (
	confChildEnv = "CODEMODE_CONF_CHILD" // the case id
	confStateEnv = "CODEMODE_CONF_STATE" // the state file, read and written
	confOutEnv   = "CODEMODE_CONF_OUT"   // the Result, written when the run ends
	confCacheEnv = "CODEMODE_CONF_CACHE" // the engine's compilation cache
)

// TestConformanceSuspendedAcrossProcesses serves the calls of every
// conformance case that does not depend on timing with each step in a
// process of its own: the first starts the run, each later one reads the
// state from a file, makes the pending calls and resumes. The Result must
// equal Execute's in this process.
func TestConformanceSuspendedAcrossProcesses(t *testing.T) {
	if id := os.Getenv(confChildEnv); id != "" {
		confChildStep(t, id)
		return
	}
	cache := t.TempDir()
	t.Setenv(secretkey.EnvConfigDir, t.TempDir()) // the steps' cache key
	h := newConfHost(t)
	n := 0
	for _, c := range loadConformance(t) {
		if !untimed(c) {
			continue
		}
		n++
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			state, out := filepath.Join(dir, "state"), filepath.Join(dir, "result.json")
			for step := 0; ; step++ {
				if step > 50 {
					t.Fatal("more than 50 steps")
				}
				cmd := exec.Command(os.Args[0], "-test.run", "^TestConformanceSuspendedAcrossProcesses$", "-test.count=1")
				cmd.Env = append(os.Environ(), confChildEnv+"="+c.ID, confStateEnv+"="+state, confOutEnv+"="+out, confCacheEnv+"="+cache)
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("step %d: %v\n%s", step, err, b)
				}
				if _, err := os.Stat(out); err == nil {
					break
				}
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var res Result
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			if msg := checkExpect(c.Expect, res); msg != "" {
				t.Errorf("across processes: %s\ncode: %s\nresult: %s", msg, c.Code, clip(res))
			}
			direct, err := Execute(context.Background(), h.options(t, c), c.Code)
			if err != nil {
				t.Fatal(err)
			}
			for try := 1; try < 3 && !untimed(c) && sameResult(direct, res) != ""; try++ {
				if direct, err = Execute(context.Background(), h.options(t, c), c.Code); err != nil {
					t.Fatal(err)
				}
			}
			if d := sameResult(direct, res); d != "" {
				t.Errorf("results differ in %s\ndirect: %s\nacross processes: %s", d, clip(direct), clip(res))
			}
		})
	}
	if n < 30 {
		t.Fatalf("only %d cases", n)
	}
}

// untimed reports whether a case uses tools and nothing whose outcome
// depends on timing (sleeping tools, probes, timers, limits), in a dozen
// calls or fewer (a process per step).
func untimed(c confCase) bool {
	if len(c.Tools) == 0 || c.Limits != nil || len(c.Expect.ToolCalls) > 12 || strings.Contains(c.Code, "setTimeout") || strings.Contains(c.Code, "setInterval") {
		return false
	}
	for _, tool := range c.Tools {
		b := string(tool.Behavior)
		if strings.Contains(b, `"sleep"`) || strings.Contains(b, `"probe"`) {
			return false
		}
	}
	return true
}

// confChildStep serves one step of case id in this process.
func confChildStep(t *testing.T, id string) {
	var c confCase
	for _, cc := range loadConformance(t) {
		if cc.ID == id {
			c = cc
		}
	}
	if c.ID == "" {
		t.Fatalf("no case %s", id)
	}
	ctx := context.Background()
	h := newConfHost(t)
	opts := h.options(t, c)
	opts.StateKey = testStateKey
	opts.CacheDir = os.Getenv(confCacheEnv)
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var res Result
	var s *Suspended
	stateFile := os.Getenv(confStateEnv)
	if state, err := os.ReadFile(stateFile); err == nil {
		in, err := rt.Inspect(state)
		if err != nil {
			t.Fatal(err)
		}
		var results []CallResult
		for _, p := range in.Pending {
			results = append(results, rt.RunPending(ctx, p))
		}
		res, s, err = rt.Resume(ctx, state, results...)
		if err != nil {
			t.Fatal(err)
		}
	} else {
		res, s, err = rt.ExecuteSuspendable(ctx, c.Code)
		if err != nil {
			t.Fatal(err)
		}
	}
	if s != nil {
		if err := os.WriteFile(stateFile, s.State, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(os.Getenv(confOutEnv), b, 0o600); err != nil {
		t.Fatal(err)
	}
}
