package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func mustCells(t *testing.T, opts CellOptions) *Cells {
	t.Helper()
	cs, err := NewCells(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cs.Close)
	return cs
}

func slowTools(calls *atomic.Int64, cancelled *atomic.Int64) Tools {
	return Tools{"pages": Tools{"get": Tool{Run: func(ctx context.Context, in json.RawMessage) (any, error) {
		calls.Add(1)
		select {
		case <-time.After(20 * time.Millisecond):
			return map[string]any{"page": json.RawMessage(in), "items": 3}, nil
		case <-ctx.Done():
			if cancelled != nil {
				cancelled.Add(1)
			}
			return nil, ctx.Err()
		}
	}}}}
}

const fiftyPages = `let items = 0
for (let i = 1; i <= 50; i++) {
  const p = await tools.pages.get({ i })
  items += p.items
  console.log("page " + String(i).padStart(2, "0") + " done, " + items + " items so far" + ".".repeat(60))
}
return items`

// TestCellPagesThroughSlowCalls: a cell paging through 50 slow calls
// yields its logs in parts, then its Result; waits wake only when there is
// something to return.
func TestCellPagesThroughSlowCalls(t *testing.T) {
	var calls atomic.Int64
	rt := mustNew(t, Options{Tools: slowTools(&calls, nil), Timeout: 30 * time.Second})
	cells := mustCells(t, CellOptions{YieldBytes: 500})
	id, err := cells.Start(context.Background(), rt, fiftyPages)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	waits := 0
	var last CellUpdate
	for {
		waits++
		u, err := cells.Wait(context.Background(), id, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if waits == 1 && (u.Done || len(u.Logs) == 0 || len(u.Logs) >= 50) {
			t.Fatalf("the first Wait returned %d lines, done %v: want part of the output", len(u.Logs), u.Done)
		}
		lines = append(lines, u.Logs...)
		if u.Done {
			last = u
			break
		}
	}
	if len(lines) != 50 || !strings.HasPrefix(lines[0], "page 01") || !strings.HasPrefix(lines[49], "page 50") {
		t.Fatalf("%d lines: %q ... ", len(lines), lines[:min(3, len(lines))])
	}
	if last.Result == nil || !last.Result.OK || string(last.Result.Value) != "150" || last.Err != nil || len(last.Result.ToolCalls) != 50 {
		t.Fatalf("result %+v %v", last.Result, last.Err)
	}
	// 50 lines of about 90 bytes, 500 bytes a yield: about ten waits, each
	// woken once. A polling Wait would wake far more often.
	if waits < 5 || waits > 15 {
		t.Fatalf("%d waits for 50 lines at 500 bytes a yield", waits)
	}
	if _, err := cells.Wait(context.Background(), id, time.Millisecond); !errors.Is(err, ErrNoCell) {
		t.Fatalf("Wait after the Result was collected: %v", err)
	}
}

func TestCellWakeups(t *testing.T) {
	var calls atomic.Int64
	rt := mustNew(t, Options{Tools: slowTools(&calls, nil)})
	cells := mustCells(t, CellOptions{YieldBytes: 1 << 20})
	id, _ := cells.Start(context.Background(), rt, fiftyPages)
	c := cells.cell("", id)
	// Nothing reaches the threshold: one Wait sleeps until the end, woken
	// once, whatever the run prints meanwhile.
	u, err := cells.Wait(context.Background(), id, time.Minute)
	if err != nil || !u.Done || len(u.Logs) != 50 {
		t.Fatalf("%v %+v", err, u)
	}
	if n := c.wakeups.Load(); n != 1 {
		t.Fatalf("the Wait woke %d times for one event", n)
	}
}

func TestCellTimeoutAndCancel(t *testing.T) {
	var calls, cancelled atomic.Int64
	rt := mustNew(t, Options{Tools: slowTools(&calls, &cancelled)})
	cells := mustCells(t, CellOptions{})
	id, _ := cells.Start(context.Background(), rt, fiftyPages)
	start := time.Now()
	u, err := cells.Wait(context.Background(), id, 50*time.Millisecond)
	if err != nil || u.Done || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("timeout: %v %+v after %v", err, u, time.Since(start))
	}
	if err := cells.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	u, err = cells.Wait(context.Background(), id, 10*time.Second)
	if err != nil || !u.Done || !errors.Is(u.Err, context.Canceled) || u.Result.OK || u.Result.Error != nil {
		t.Fatalf("after Cancel: %v %+v", err, u)
	}
	if n := calls.Load(); n >= 50 {
		t.Fatalf("the run went on after Cancel: %d calls", n)
	}
	if err := cells.Cancel(context.Background(), id); !errors.Is(err, ErrNoCell) {
		t.Fatalf("Cancel of a collected cell: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	id, _ = cells.Start(ctx, rt, fiftyPages)
	cancel() // the caller's context ending does not end the cell
	time.Sleep(50 * time.Millisecond)
	waitCtx, stop := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer stop()
	if _, err := cells.Wait(waitCtx, id, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait under an ending context: %v", err)
	}
	_ = cells.Cancel(context.Background(), id)
}

func TestCellLimitsAndExpiry(t *testing.T) {
	var calls, cancelled atomic.Int64
	rt := mustNew(t, Options{Tools: slowTools(&calls, &cancelled)})
	cells := mustCells(t, CellOptions{MaxPerSession: 2, IdleTimeout: 150 * time.Millisecond})
	alice := WithSession(context.Background(), "alice")
	a1, err1 := cells.Start(alice, rt, fiftyPages)
	_, err2 := cells.Start(alice, rt, `return 1`)
	_, err3 := cells.Start(alice, rt, `return 2`)
	if err1 != nil || err2 != nil || !errors.Is(err3, ErrTooManyCells) {
		t.Fatalf("cap: %v %v %v", err1, err2, err3)
	}
	if _, err := cells.Start(WithSession(context.Background(), "bob"), rt, `return 3`); err != nil {
		t.Fatalf("another session: %v", err)
	}
	// Nobody waits for alice's cells: they expire, the slow one is
	// stopped, and the session can start cells again.
	time.Sleep(400 * time.Millisecond)
	if _, err := cells.Wait(alice, a1, time.Millisecond); !errors.Is(err, ErrNoCell) {
		t.Fatalf("expired cell: %v", err)
	}
	// The expired cell's run stopped: its calls no longer grow.
	n := calls.Load()
	time.Sleep(200 * time.Millisecond)
	if m := calls.Load(); m != n || m >= 50 {
		t.Fatalf("the expired cell's run goes on: %d calls, then %d", n, m)
	}
	if _, err := cells.Start(alice, rt, `return 4`); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

func TestCellsStopWithClose(t *testing.T) {
	var calls atomic.Int64
	rt, err := New(Options{Tools: slowTools(&calls, nil)})
	if err != nil {
		t.Fatal(err)
	}
	cells := mustCells(t, CellOptions{})
	id, _ := cells.Start(context.Background(), rt, fiftyPages)
	time.Sleep(50 * time.Millisecond)
	_ = rt.Close()
	u, err := cells.Wait(context.Background(), id, 10*time.Second)
	if err != nil || !u.Done || !errors.Is(u.Err, ErrStopped) {
		t.Fatalf("%v %+v", err, u)
	}
	if _, err := cells.Start(context.Background(), rt, `return 1`); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

// TestCellsBelongToTheirSession: another session cannot collect, cancel
// or even see a cell, whatever it knows of its id; the owner's Wait is
// unaffected.
func TestCellsBelongToTheirSession(t *testing.T) {
	rt := mustNew(t, Options{})
	cells := mustCells(t, CellOptions{})
	alice, bob := WithSession(context.Background(), "alice"), WithSession(context.Background(), "bob")
	id, err := cells.Start(alice, rt, `console.log("secret"); await new Promise((r) => setTimeout(r, 100)); return "alice's"`)
	if err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{"bob": bob, "no session": context.Background(), "a prefix": WithSession(context.Background(), "alic")} {
		if u, err := cells.Wait(ctx, id, 500*time.Millisecond); !errors.Is(err, ErrNoCell) || u.Logs != nil || u.Result != nil {
			t.Fatalf("%s waited for alice's cell: %+v %v", name, u, err)
		}
		if err := cells.Cancel(ctx, id); !errors.Is(err, ErrNoCell) {
			t.Fatalf("%s cancelled alice's cell: %v", name, err)
		}
	}
	u, err := cells.Wait(alice, id, 10*time.Second)
	if err != nil || !u.Done || string(u.Result.Value) != `"alice's"` || len(u.Result.Logs) != 1 {
		t.Fatalf("alice's own wait: %+v %v", u, err)
	}
}

// TestCellsAcrossRuntimes: one Cells keeps cells whatever Runtime each
// runs on, so a host that replaces its Runtime (new tools) keeps
// collecting the cells the old one started; Close cancels the rest.
func TestCellsAcrossRuntimes(t *testing.T) {
	cells := mustCells(t, CellOptions{})
	old := mustNew(t, Options{})
	id, err := cells.Start(context.Background(), old, `await new Promise((r) => setTimeout(r, 100)); return "from the old runtime"`)
	if err != nil {
		t.Fatal(err)
	}
	fresh := mustNew(t, Options{})
	id2, _ := cells.Start(context.Background(), fresh, `await new Promise((r) => setTimeout(r, 60000))`)
	go func() { _ = old.Shutdown(context.Background()) }() // runs in flight finish
	u, err := cells.Wait(context.Background(), id, 10*time.Second)
	if err != nil || !u.Done || string(u.Result.Value) != `"from the old runtime"` {
		t.Fatalf("%+v %v", u, err)
	}
	cells.Close()
	u, err = cells.Wait(context.Background(), id2, 10*time.Second)
	if err != nil || !u.Done || !errors.Is(u.Err, context.Canceled) {
		t.Fatalf("after Close: %+v %v", u, err)
	}
	if _, err := cells.Start(context.Background(), fresh, `return 1`); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

// TestLogListener: a suspendable run's lines reach the listener as they
// are written, and a resumed run's new lines only.
func TestLogListener(t *testing.T) {
	echo := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	rt := mustNew(t, Options{Tools: Tools{"t": Tools{"echo": echo}}, StateKey: testStateKey})
	var lines []string
	ctx := WithLogListener(context.Background(), func(l string) { lines = append(lines, l) })
	_, s, err := rt.ExecuteSuspendable(ctx, `console.log("before"); await tools.t.echo({}); console.log("after"); return 1`)
	if err != nil || s == nil || strings.Join(lines, ",") != "before" {
		t.Fatalf("%v %q", err, lines)
	}
	res, _, err := rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
	if err != nil || strings.Join(lines, ",") != "before,after" || len(res.Logs) != 2 {
		t.Fatalf("%v %q %s", err, lines, clip(res))
	}
}
