package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestNoHookAfterExecute: whatever ends a run, every hook it causes runs
// before Execute returns; a call the run abandons ends as cancelled, never
// ok, even when its tool ignores its context and returns later.
func TestNoHookAfterExecute(t *testing.T) {
	ignoring := Tool{Description: "ignores its context", Run: func(context.Context, json.RawMessage) (any, error) {
		time.Sleep(300 * time.Millisecond)
		return "late", nil
	}}
	quick := Tool{Description: "answers", Run: func(context.Context, json.RawMessage) (any, error) { return 1, nil }}
	var returned atomic.Bool
	var mu sync.Mutex
	var late []string
	var outcomes []Outcome // of t.slow, or of t.quick where no slow call is made
	hook := func(what string) {
		if returned.Load() {
			mu.Lock()
			late = append(late, what)
			mu.Unlock()
		}
	}
	rt := mustNew(t, Options{
		Tools:           Tools{"t": Tools{"slow": ignoring, "quick": quick}},
		Timeout:         100 * time.Millisecond,
		MaxMemoryBytes:  16 << 20,
		OnToolCallStart: func(_ context.Context, s Call) { hook("start " + s.Name) },
		OnToolCallEnd: func(_ context.Context, e CallEnd) {
			hook("end " + e.Name + " " + string(e.Outcome))
			mu.Lock()
			if e.Name == "t.slow" || e.Index == 0 {
				outcomes = append(outcomes, e.Outcome)
			}
			mu.Unlock()
		},
	})
	for _, tc := range []struct {
		name, code string
		cancel     bool // the caller cancels after 50ms
		want       Outcome
	}{
		{"value", `tools.t.slow({}); return 1`, false, OutcomeCancelled}, // the unawaited call outlives the timeout
		{"throw", `tools.t.slow({}); throw new Error("x")`, false, OutcomeCancelled},
		{"timeout", `await tools.t.slow({})`, false, OutcomeCancelled},
		{"memory", `tools.t.slow({}); const a = []; for (;;) a.push(new Array(1000).fill(1))`, false, OutcomeCancelled},
		{"cancel", `await tools.t.slow({})`, true, OutcomeCancelled},
		{"race loser", `return await Promise.race([tools.t.slow({}), tools.t.quick({})])`, false, OutcomeCancelled},
		{"unawaited finished", `tools.t.quick({}); return 1`, false, OutcomeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			returned.Store(false)
			mu.Lock()
			late, outcomes = nil, nil
			mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			res, err := rt.Execute(ctx, tc.code)
			returned.Store(true)
			if tc.cancel != (err != nil) {
				t.Errorf("Execute error %v", err)
			}
			time.Sleep(400 * time.Millisecond) // the ignoring tool returns meanwhile
			mu.Lock()
			defer mu.Unlock()
			if len(late) > 0 {
				t.Errorf("hooks after Execute returned: %v", late)
			}
			found := false
			for _, o := range outcomes {
				found = found || o == tc.want
				if o == OutcomeOK && tc.want != OutcomeOK {
					t.Errorf("an abandoned call reported ok: %v", outcomes)
				}
			}
			if !found && len(outcomes) == 0 && len(res.ToolCalls) > 0 && res.ToolCalls[0].Outcome == tc.want {
				// On a loaded machine the run can end before the call
				// starts: no hook runs, and the audit says so.
				found = true
			}
			if !found {
				t.Errorf("outcomes %v, want one %s (result %s)", outcomes, tc.want, resultJSON(res))
			}
			for _, c := range res.ToolCalls {
				if c.Outcome == "" {
					t.Errorf("an audit entry without an outcome: %s", resultJSON(res))
				}
			}
		})
	}
}

// TestCloseStopsRuns: Close ends a run that would never end by itself,
// and the run's Execute says so.
func TestCloseStopsRuns(t *testing.T) {
	rt := mustNew(t, Options{})
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		res, err := rt.Execute(context.Background(), `while (true) {}`)
		if res.Error != nil {
			err = errors.New("a stopped run carries a diagnostic")
		}
		done <- err
	}()
	<-started
	time.Sleep(100 * time.Millisecond)
	closed := make(chan struct{})
	go func() { _ = rt.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a run looped")
	}
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Errorf("the stopped run's Execute returned %v, want ErrStopped", err)
	}
	if _, err := rt.Execute(context.Background(), `return 1`); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// TestShutdownDrains: Shutdown lets a run finish, then stops what is left
// when its context ends.
func TestShutdownDrains(t *testing.T) {
	rt := mustNew(t, Options{})
	done := make(chan Result, 1)
	go func() {
		res, _ := rt.Execute(context.Background(), `await new Promise((r) => setTimeout(r, 200)); return "finished"`)
		done <- res
	}()
	time.Sleep(50 * time.Millisecond)
	if err := rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := <-done; string(res.Value) != `"finished"` {
		t.Errorf("the drained run: %s", resultJSON(res))
	}
	rt2 := mustNew(t, Options{})
	go func() { _, _ = rt2.Execute(context.Background(), `while (true) {}`) }()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := rt2.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown past its context: %v", err)
	}
}

// TestInterruptionIsNotAFailure: a run its caller ends returns the
// context's error and a partial Result without a diagnostic.
func TestInterruptionIsNotAFailure(t *testing.T) {
	rt := mustNew(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := rt.Execute(ctx, `console.log("before"); while (true) {}`)
	if !errors.Is(err, context.DeadlineExceeded) || res.OK || res.Error != nil || len(res.Logs) != 1 {
		t.Errorf("got %s, %v; want no diagnostic, the log so far and the context's error", resultJSON(res), err)
	}
}
