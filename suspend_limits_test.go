package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode/internal/engine"
)

// heldHeap keeps n small objects (about 200 bytes of heap each) across a
// held call, made after the statement before, and returns a sum over
// them with the call's result.
func heldHeap(n int, before string) string {
	return fmt.Sprintf(`const big = []
for (let i = 0; i < %d; i++) big.push({ id: i, name: "item " + i, tags: ["a", "b"] })
%s
const o = await tools.orders.get({ id: 1 })
return big.reduce((s, x) => s + x.id, 0) + o.total`, n, before)
}

// heldHeapValue is what heldHeap(n, _) returns when the call answers for
// id 1.
func heldHeapValue(n int) string { return strconv.Itoa(n*(n-1)/2 + 10) }

// TestSuspendingIsPartOfTheRun: writing a run's state counts against its
// Timeout like the rest of the run. A run whose deadline passes before
// its state is written ends with TimeoutExceeded and no state, its
// pending call cancelled in the audit, as if it had timed out waiting;
// with time to spare the state resumes.
func TestSuspendingIsPartOfTheRun(t *testing.T) {
	ctx := context.Background()
	timedOut := func(t *testing.T, res Result, s *Suspended, err error, timeout time.Duration) {
		t.Helper()
		if err != nil || s != nil || !errors.Is(res.Err(), TimeoutExceeded) {
			t.Fatalf("got %v, state %v, %s; want TimeoutExceeded and no state", err, s != nil, clip(res))
		}
		if !strings.Contains(res.Error.Message, timeout.String()) {
			t.Errorf("message %q does not name the run's limit", res.Error.Message)
		}
		for _, c := range res.ToolCalls {
			if c.Name == "orders.get" && c.Outcome != OutcomeCancelled {
				t.Errorf("audit %+v, want the held call cancelled", res.ToolCalls)
			}
		}
	}

	t.Run("deadline passed when the run would suspend", func(t *testing.T) {
		// The policy is asked on the run's goroutine at admission: a slow
		// one brings the run to its suspension point after its deadline,
		// whatever the machine's speed.
		opts := suspendOptions(nil)
		opts.Timeout = 300 * time.Millisecond
		opts.Policy = func(context.Context, CallRequest) Decision {
			time.Sleep(opts.Timeout + 50*time.Millisecond)
			return Decision{Verdict: Ask, Reason: "slow to decide"}
		}
		rt, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		res, s, err := rt.ExecuteSuspendable(ctx, heldHeap(2000, ""))
		timedOut(t, res, s, err, opts.Timeout)
		if len(res.ToolCalls) != 1 {
			t.Errorf("audit %+v, want the held call", res.ToolCalls)
		}
	})

	t.Run("deadline passes while the state is written", func(t *testing.T) {
		// A tool that returns 5 ms before the deadline brings the run to
		// its held call then, with about 20 MB of heap to write: more
		// than 5 ms of work on any machine. (When the tool returns late,
		// the deadline passes before the call: the outcome is the same.)
		const n = 100_000
		opts := suspendOptions(nil)
		opts.Timeout = 3 * time.Second
		opts.MaxMemoryBytes = 128 << 20
		var until time.Time
		opts.Tools["clock"] = Tools{"wait": Tool{Run: func(context.Context, json.RawMessage) (any, error) {
			time.Sleep(time.Until(until))
			return nil, nil
		}}}
		opts.Policy = func(_ context.Context, c CallRequest) Decision {
			if c.Name == "clock.wait" {
				return Decision{Verdict: Allow}
			}
			return Decision{Verdict: Ask}
		}
		rt, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		// The run's deadline is set inside ExecuteSuspendable, so it is no
		// earlier than this.
		until = time.Now().Add(opts.Timeout - 5*time.Millisecond)
		res, s, err := rt.ExecuteSuspendable(ctx, heldHeap(n, "await tools.clock.wait({})"))
		timedOut(t, res, s, err, opts.Timeout)
		if len(res.ToolCalls) < 2 {
			t.Logf("the tool returned after the deadline: the run timed out before its held call")
		}

		// With time to spare, the same run suspends and resumes.
		opts.Timeout = time.Minute
		roomy, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer roomy.Close()
		_, s, err = roomy.ExecuteSuspendable(ctx, heldHeap(n, ""))
		if err != nil || s == nil {
			t.Fatalf("not suspended: %v", err)
		}
		res, next, err := roomy.Resume(ctx, s.State, roomy.Call(ctx, s.Pending[0]))
		if err != nil || next != nil || string(res.Value) != heldHeapValue(n) {
			t.Fatalf("resumed: %v %v %s, want %s", err, next != nil, clip(res), heldHeapValue(n))
		}
	})

	t.Run("sealing checks the deadline and the context", func(t *testing.T) {
		rt, err := New(suspendOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		h := &stateHeader{Engine: engine.SHA256, Tools: rt.treeSum(), RunID: "r", Limits: limits{MaxMemoryBytes: 1 << 20}}
		inner := make([]byte, 3<<20)
		if _, err := rt.sealState(ctx, time.Now().Add(-time.Millisecond), h, inner); !errors.Is(err, errPastDeadline) {
			t.Errorf("past the deadline: %v", err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := rt.sealState(cancelled, time.Time{}, h, inner); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled: %v", err)
		}
		state, err := rt.sealState(ctx, time.Now().Add(time.Minute), h, inner)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := rt.openState(state); err != nil {
			t.Fatalf("a state sealed in time does not open: %v", err)
		}
	})
}
