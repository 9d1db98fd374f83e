package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/sandbox"
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
		opts.Policy = func(context.Context, Call) Decision {
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
		opts.Policy = func(_ context.Context, c Call) Decision {
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
		res, next, err := roomy.Resume(ctx, s.State, roomy.RunPending(ctx, s.Pending[0]))
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
		h := &stateHeader{Engine: enginebin.SHA256, Tools: rt.treeSum(), RunID: "r", Limits: limits{MaxMemoryBytes: 1 << 20}}
		inner := sandbox.State{Header: json.RawMessage(`{}`), Snapshot: make([]byte, 3<<20)}
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

// TestMaxStateBytes: a run whose state would exceed the cap fails with
// MemoryLimitExceeded and says by how much; Resume and Inspect refuse a
// state over the cap before reading it.
func TestMaxStateBytes(t *testing.T) {
	ctx := context.Background()
	t.Run("default and validation", func(t *testing.T) {
		rt, err := New(Options{MaxMemoryBytes: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		rt.Close()
		if rt.opts.MaxStateBytes != 8<<20 {
			t.Errorf("default MaxStateBytes %d, want MaxMemoryBytes (%d)", rt.opts.MaxStateBytes, 8<<20)
		}
		if _, err := New(Options{MaxStateBytes: -1}); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("negative MaxStateBytes: %v", err)
		}
	})

	t.Run("a run over the cap does not suspend", func(t *testing.T) {
		opts := suspendOptions(nil)
		opts.MaxStateBytes = 256 << 10
		rt, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		// About 4 MiB of heap, a state of more than a megabyte.
		res, s, err := rt.ExecuteSuspendable(ctx, heldHeap(20_000, ""))
		if err != nil || s != nil || !errors.Is(res.Err(), MemoryLimitExceeded) {
			t.Fatalf("got %v, state %v, %s; want MemoryLimitExceeded and no state", err, s != nil, clip(res))
		}
		m := regexp.MustCompile(`about (\d+) bytes, over the limit of (\d+) bytes`).FindStringSubmatch(res.Error.Message)
		if m == nil || m[2] != strconv.Itoa(256<<10) {
			t.Fatalf("message %q does not give the size and the cap", res.Error.Message)
		}
		// The size is an estimate from the part written before it stopped.
		if about, _ := strconv.Atoi(m[1]); about < 512<<10 {
			t.Errorf("estimated %d bytes; the state takes more than a megabyte", about)
		}
		if len(res.Error.Suggestions) == 0 || !strings.Contains(res.Error.Suggestions[0], "before awaiting tool calls") {
			t.Errorf("suggestions %q", res.Error.Suggestions)
		}
		if len(res.ToolCalls) != 1 || res.ToolCalls[0].Outcome != OutcomeCancelled {
			t.Errorf("audit %+v, want the held call cancelled", res.ToolCalls)
		}
		// A run that keeps less suspends under the same cap.
		s = suspendOnce(t, rt, heldHeap(100, ""))
		if len(s.State) > 256<<10 {
			t.Fatalf("a state of %d bytes was returned over the cap", len(s.State))
		}
	})

	t.Run("resume refuses a state over the cap", func(t *testing.T) {
		opts := suspendOptions(nil)
		rt, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		s := suspendOnce(t, rt, heldHeap(2000, ""))
		result := rt.RunPending(ctx, s.Pending[0])
		opts.MaxStateBytes = int64(len(s.State) - 1)
		small, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer small.Close()
		if _, next, err := small.Resume(ctx, s.State, result); !errors.Is(err, ErrStateInvalid) || next != nil {
			t.Fatalf("Resume of %d bytes under a cap of %d: %v", len(s.State), opts.MaxStateBytes, err)
		}
		if _, err := small.Inspect(s.State); !errors.Is(err, ErrStateInvalid) {
			t.Fatalf("Inspect: %v", err)
		}
		opts.MaxStateBytes++
		exact, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer exact.Close()
		res, _, err := exact.Resume(ctx, s.State, result)
		if err != nil || string(res.Value) != heldHeapValue(2000) {
			t.Fatalf("Resume at the cap: %v %s", err, clip(res))
		}
	})

	t.Run("sealing checks the cap", func(t *testing.T) {
		opts := suspendOptions(nil)
		opts.MaxStateBytes = 1 << 20
		rt, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		// The sandbox's part fits; with the Runtime's header and MAC the
		// state would not.
		h := &stateHeader{RunID: "r", Limits: limits{MaxMemoryBytes: 1 << 20}}
		var size *stateSizeError
		_, err = rt.sealState(ctx, time.Time{}, h, sandbox.State{Header: json.RawMessage(`{}`), Snapshot: make([]byte, 1<<20-10)})
		if !errors.As(err, &size) || size.n <= 1<<20 {
			t.Fatalf("got %v, want a stateSizeError over %d bytes", err, 1<<20)
		}
		f := rt.sealFailure(ctx, &execution{}, err)
		if f == nil || !strings.Contains(f.Message, strconv.Itoa(size.n)) {
			t.Fatalf("failure %+v", f)
		}
	})
}
