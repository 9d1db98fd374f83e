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
	rt := mustNew(t, Options{Tools: slowTools(&calls, nil), CellYieldBytes: 500, Timeout: 30 * time.Second})
	id, err := rt.Start(context.Background(), fiftyPages)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	waits := 0
	var last CellUpdate
	for {
		waits++
		u, err := rt.Wait(context.Background(), id, 10*time.Second)
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
	if _, err := rt.Wait(context.Background(), id, time.Millisecond); !errors.Is(err, ErrNoCell) {
		t.Fatalf("Wait after the Result was collected: %v", err)
	}
}

func TestCellWakeups(t *testing.T) {
	var calls atomic.Int64
	rt := mustNew(t, Options{Tools: slowTools(&calls, nil), CellYieldBytes: 1 << 20})
	id, _ := rt.Start(context.Background(), fiftyPages)
	c := rt.cell("", id)
	// Nothing reaches the threshold: one Wait sleeps until the end, woken
	// once, whatever the run prints meanwhile.
	u, err := rt.Wait(context.Background(), id, time.Minute)
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
	id, _ := rt.Start(context.Background(), fiftyPages)
	start := time.Now()
	u, err := rt.Wait(context.Background(), id, 50*time.Millisecond)
	if err != nil || u.Done || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("timeout: %v %+v after %v", err, u, time.Since(start))
	}
	if err := rt.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	u, err = rt.Wait(context.Background(), id, 10*time.Second)
	if err != nil || !u.Done || !errors.Is(u.Err, context.Canceled) || u.Result.OK || u.Result.Error != nil {
		t.Fatalf("after Cancel: %v %+v", err, u)
	}
	if n := calls.Load(); n >= 50 {
		t.Fatalf("the run went on after Cancel: %d calls", n)
	}
	if err := rt.Cancel(context.Background(), id); !errors.Is(err, ErrNoCell) {
		t.Fatalf("Cancel of a collected cell: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	id, _ = rt.Start(ctx, fiftyPages)
	cancel() // the caller's context ending does not end the cell
	time.Sleep(50 * time.Millisecond)
	waitCtx, stop := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer stop()
	if _, err := rt.Wait(waitCtx, id, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait under an ending context: %v", err)
	}
	_ = rt.Cancel(context.Background(), id)
}

func TestCellLimitsAndExpiry(t *testing.T) {
	var calls, cancelled atomic.Int64
	rt := mustNew(t, Options{Tools: slowTools(&calls, &cancelled), MaxCellsPerSession: 2, CellIdleTimeout: 150 * time.Millisecond})
	alice := WithSession(context.Background(), "alice")
	a1, err1 := rt.Start(alice, fiftyPages)
	_, err2 := rt.Start(alice, `return 1`)
	_, err3 := rt.Start(alice, `return 2`)
	if err1 != nil || err2 != nil || !errors.Is(err3, ErrTooManyCells) {
		t.Fatalf("cap: %v %v %v", err1, err2, err3)
	}
	if _, err := rt.Start(WithSession(context.Background(), "bob"), `return 3`); err != nil {
		t.Fatalf("another session: %v", err)
	}
	// Nobody waits for alice's cells: they expire, the slow one is
	// stopped, and the session can start cells again.
	time.Sleep(400 * time.Millisecond)
	if _, err := rt.Wait(alice, a1, time.Millisecond); !errors.Is(err, ErrNoCell) {
		t.Fatalf("expired cell: %v", err)
	}
	// The expired cell's run stopped: its calls no longer grow.
	n := calls.Load()
	time.Sleep(200 * time.Millisecond)
	if m := calls.Load(); m != n || m >= 50 {
		t.Fatalf("the expired cell's run goes on: %d calls, then %d", n, m)
	}
	if _, err := rt.Start(alice, `return 4`); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

func TestCellsStopWithClose(t *testing.T) {
	var calls atomic.Int64
	rt, err := New(Options{Tools: slowTools(&calls, nil)})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := rt.Start(context.Background(), fiftyPages)
	time.Sleep(50 * time.Millisecond)
	_ = rt.Close()
	u, err := rt.Wait(context.Background(), id, 10*time.Second)
	if err != nil || !u.Done || !errors.Is(u.Err, ErrStopped) {
		t.Fatalf("%v %+v", err, u)
	}
	if _, err := rt.Start(context.Background(), `return 1`); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

// TestCellsBelongToTheirSession: another session cannot collect, cancel
// or even see a cell, whatever it knows of its id; the owner's Wait is
// unaffected.
func TestCellsBelongToTheirSession(t *testing.T) {
	rt := mustNew(t, Options{})
	alice, bob := WithSession(context.Background(), "alice"), WithSession(context.Background(), "bob")
	id, err := rt.Start(alice, `console.log("secret"); await new Promise((r) => setTimeout(r, 100)); return "alice's"`)
	if err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{"bob": bob, "no session": context.Background(), "a prefix": WithSession(context.Background(), "alic")} {
		if u, err := rt.Wait(ctx, id, 500*time.Millisecond); !errors.Is(err, ErrNoCell) || u.Logs != nil || u.Result != nil {
			t.Fatalf("%s waited for alice's cell: %+v %v", name, u, err)
		}
		if err := rt.Cancel(ctx, id); !errors.Is(err, ErrNoCell) {
			t.Fatalf("%s cancelled alice's cell: %v", name, err)
		}
	}
	u, err := rt.Wait(alice, id, 10*time.Second)
	if err != nil || !u.Done || string(u.Result.Value) != `"alice's"` || len(u.Result.Logs) != 1 {
		t.Fatalf("alice's own wait: %+v %v", u, err)
	}
}
