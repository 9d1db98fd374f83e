package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
)

// collect waits for a cell on n until it is done, and returns its lines
// in the order they were handed out, and its Result.
func collectCell(ctx context.Context, t *testing.T, n *Node, id string) ([]string, *codemode.Result) {
	t.Helper()
	var got []string
	for {
		u, err := n.WaitCell(ctx, id, 2*time.Second, nil)
		if err != nil {
			t.Fatalf("WaitCell: %v (lines so far %q)", err, got)
		}
		got = append(got, u.Logs...)
		if u.Done {
			return got, u.Result
		}
	}
}

// A cell started on one front is followed from another, in the session
// that started it: every line once and in order, then the result; after
// that, and from another session, there is no such cell.
func TestCellAcrossFronts(t *testing.T) {
	n := openNode(t, Config{CellYieldBytes: 16})
	other := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}})
	startWorker(t, n, shopTools(&effects{}, nil))
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mine := codemode.WithSession(ctx, "alice")
	id, err := n.StartCell(mine, rt, `
		for (let i = 0; i < 20; i++) {
			console.log("line " + i);
			if (i % 5 == 4) await tools.shop.charge({ order: "o" + i });
		}
		return "finished"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.WaitCell(codemode.WithSession(ctx, "mallory"), id, time.Second, nil); !errors.Is(err, codemode.ErrNoCell) {
		t.Fatalf("another session's WaitCell: %v", err)
	}
	if err := other.CancelCell(codemode.WithSession(ctx, "mallory"), id); !errors.Is(err, codemode.ErrNoCell) {
		t.Fatalf("another session's CancelCell: %v", err)
	}
	lines, res := collectCell(mine, t, other, id)
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint("line ", i))
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("lines %q", lines)
	}
	if !res.OK || string(res.Value) != `"finished"` || len(res.ToolCalls) != 4 || len(res.Logs) != 20 {
		t.Fatalf("result %+v", res)
	}
	if _, err := n.WaitCell(mine, id, time.Second, nil); !errors.Is(err, codemode.ErrNoCell) {
		t.Fatalf("WaitCell after the result was collected: %v", err)
	}
	if _, err := n.WaitCell(mine, "../../x", time.Second, nil); !errors.Is(err, codemode.ErrNoCell) {
		t.Fatalf("WaitCell of a malformed id: %v", err)
	}
}

// Two fronts waiting for one cell at once never hand out the same line,
// and between them hand out every line, each in order.
func TestConcurrentCellWaits(t *testing.T) {
	n := openNode(t, Config{CellYieldBytes: 1})
	other := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}, CellYieldBytes: 1})
	startWorker(t, n, shopTools(&effects{}, nil))
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := n.StartCell(ctx, rt, `
		for (let i = 0; i < 200; i++) {
			console.log(String(i));
			if (i % 50 == 49) await tools.shop.charge({ order: "o" + i });
		}
		return 1`)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	done := 0
	var wg sync.WaitGroup
	for _, front := range []*Node{n, other, n, other} {
		wg.Go(func() {
			last := -1
			for ctx.Err() == nil {
				u, err := front.WaitCell(ctx, id, 500*time.Millisecond, nil)
				if errors.Is(err, codemode.ErrNoCell) {
					return // another took the end
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, l := range u.Logs {
					seen[l]++
					var i int
					fmt.Sscan(l, &i)
					if i <= last {
						t.Errorf("line %d after %d", i, last)
					}
					last = i
				}
				if u.Done {
					done++
				}
				mu.Unlock()
				if u.Done {
					return
				}
			}
		})
	}
	wg.Wait()
	if done != 1 || len(seen) != 200 {
		t.Fatalf("%d waits saw the end; %d distinct lines", done, len(seen))
	}
	for l, c := range seen {
		if c != 1 {
			t.Errorf("line %s handed out %d times", l, c)
		}
	}
}

// A worker that takes a cell over replays its program from the last
// checkpoint (here, its start): the lines printed before the first worker
// stopped are not repeated.
func TestCellTakeoverDoesNotRepeatLines(t *testing.T) {
	n := openNode(t, Config{AckWait: time.Second})
	stalled := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}, AckWait: time.Second, Name: "stalled"})
	entered := make(chan struct{}, 1)
	look := func(block bool) codemode.Tools {
		return codemode.Tools{"t": codemode.Tools{"look": codemode.Tool{
			Annotations: &codemode.Annotations{ReadOnly: true},
			Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
				if block {
					entered <- struct{}{}
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return "seen", nil
			}}}}
	}
	startWorker(t, stalled, look(true))
	rt := front(t, look(false))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := n.StartCell(ctx, rt, `
		console.log("one"); console.log("two");
		const r = await tools.t.look({});
		console.log("three");
		return r`)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first worker never ran the cell")
	}
	time.Sleep(200 * time.Millisecond) // its lines stored
	stalled.nc.Close()
	startWorker(t, n, look(false))
	lines, res := collectCell(ctx, t, n, id)
	if !slices.Equal(lines, []string{"one", "two", "three"}) {
		t.Fatalf("lines %q", lines)
	}
	if !res.OK || string(res.Value) != `"seen"` {
		t.Fatalf("result %+v", res)
	}
	if rec, _, err := n.record(ctx, id); err != nil || rec.Takeovers != 1 {
		t.Fatalf("record %+v %v", rec, err)
	}
}

// CancelCell stops a cell wherever it is: running on a worker, queued
// with no worker, or parked for approval.
func TestCancelCell(t *testing.T) {
	n := openNode(t, Config{})
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Queued: no worker yet.
	queued, err := n.StartCell(ctx, rt, `console.log("ran"); return 1`)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.CancelCell(ctx, queued); err != nil {
		t.Fatal(err)
	}
	var fx effects
	startAskingWorker(t, n, &fx)
	lines, res := collectCell(ctx, t, n, queued)
	if res.OK || len(lines) != 0 {
		t.Fatalf("a cell cancelled in the queue ran: %q %+v", lines, res)
	}

	// Running.
	running, err := n.StartCell(ctx, rt, `console.log("start"); while (true) {}`)
	if err != nil {
		t.Fatal(err)
	}
	u, err := n.WaitCell(ctx, running, 10*time.Second, nil)
	if err != nil || !slices.Equal(u.Logs, []string{"start"}) {
		t.Fatalf("%+v %v", u, err)
	}
	if err := n.CancelCell(ctx, running); err != nil {
		t.Fatal(err)
	}
	if _, res := collectCell(ctx, t, n, running); res.OK {
		t.Fatalf("a cancelled cell succeeded: %+v", res)
	}

	// Parked: it asks, nobody answers, it is cancelled.
	asking, err := n.StartCell(ctx, rt, chargeProgram)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, _, err := n.record(ctx, asking)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status == parked {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := n.CancelCell(ctx, asking); err != nil {
		t.Fatal(err)
	}
	_, res = collectCell(ctx, t, n, asking)
	if res.OK || res.Error == nil || !strings.Contains(res.Error.Message, "cancelled while it waited") || fx.total() != 0 {
		t.Fatalf("a cancelled parked cell: %+v (charges %d)", res, fx.total())
	}
}

// A parked cell's questions are put to whoever waits for it.
func TestWaitCellAnswersQuestions(t *testing.T) {
	n := openNode(t, Config{})
	var fx effects
	startAskingWorker(t, n, &fx)
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := n.StartCell(ctx, rt, `console.log("asking");`+chargeProgram)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	var lines []string
	for {
		u, err := n.WaitCell(ctx, id, 5*time.Second, func(_ context.Context, c codemode.Call, q string) codemode.Decision {
			asked = append(asked, c.Name+": "+q)
			return codemode.Decision{Verdict: codemode.Allow}
		})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, u.Logs...)
		if u.Done {
			if !u.Result.OK || string(u.Result.Value) != "true" || fx.total() != 1 {
				t.Fatalf("result %+v (charges %d)", u.Result, fx.total())
			}
			break
		}
	}
	if !slices.Equal(asked, []string{"shop.charge: Charge this order?"}) || !slices.Equal(lines, []string{"asking"}) {
		t.Fatalf("asked %q, lines %q", asked, lines)
	}
}

// A question nobody answers is denied at its deadline, by a message the
// servers schedule, and the run goes on with the denial.
func TestUnansweredQuestionsExpire(t *testing.T) {
	n := openNode(t, Config{AnswerWithin: 2 * time.Second})
	var fx effects
	startAskingWorker(t, n, &fx)
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := n.Submit(ctx, rt, chargeProgram)
	if err != nil {
		t.Fatal(err)
	}
	_, asked, err := n.Wait(ctx, id)
	if err != nil || asked == nil {
		t.Fatalf("asked %+v %v", asked, err)
	}
	var res codemode.Result
	for {
		r, again, err := n.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if again == nil {
			res = r
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !res.OK || !strings.Contains(string(res.Value), "no one answered within 2s") || fx.total() != 0 {
		t.Fatalf("result %s %+v (charges %d)", res.Value, res.Error, fx.total())
	}
	// An answer after the deadline is refused.
	err = n.Answer(ctx, id, asked.Step, map[int]codemode.Decision{asked.Calls[0].Index: {Verdict: codemode.Allow}})
	if !errors.Is(err, ErrAnswered) {
		t.Fatalf("a late answer: %v", err)
	}
	// The record says the deadline answered, and the run is no longer
	// listed as asking.
	ri, err := n.Run(ctx, id)
	if err != nil || len(ri.Answers) != 1 || ri.Answers[0].By != "deadline" || ri.Answers[0].Allow {
		t.Fatalf("the record: %+v %v", ri.Answers, err)
	}
	if qs, err := n.Questions(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("questions after the deadline: %+v %v", qs, err)
	}
}

// Parked runs are listed (Questions) until answered, with their program
// and progress; RunInfo follows the run to its end; WatchRuns tells of
// each change.
func TestQuestionsAndRunInfo(t *testing.T) {
	n := openNode(t, Config{})
	var fx effects
	startAskingWorker(t, n, &fx)
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events := make(chan RunEvent, 1000)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() { _ = n.WatchRuns(wctx, func(e RunEvent) { events <- e }) }()
	id, err := n.Submit(ctx, rt, chargeProgram)
	if err != nil {
		t.Fatal(err)
	}
	_, asked, err := n.Wait(ctx, id)
	if err != nil || asked == nil {
		t.Fatal(asked, err)
	}
	qs, err := n.Questions(ctx)
	if err != nil || len(qs) != 1 || qs[0].ID != id || qs[0].Status != StatusParked || qs[0].Code != chargeProgram ||
		len(qs[0].Questions) != 1 || qs[0].Created.IsZero() {
		t.Fatalf("questions: %+v %v", qs, err)
	}
	// A stale marker (a run that is not parked) is not listed.
	other, _ := n.Submit(ctx, rt, "return 1")
	if _, _, err := n.Wait(ctx, other); err != nil {
		t.Fatal(err)
	}
	n.asking(ctx, other, 1)
	if qs, _ := n.Questions(ctx); len(qs) != 1 {
		t.Fatalf("a stale marker is listed: %+v", qs)
	}
	if err := n.Answer(ctx, id, asked.Step, map[int]codemode.Decision{asked.Calls[0].Index: {Verdict: codemode.Allow, By: "Ada"}}); err != nil {
		t.Fatal(err)
	}
	if _, again, err := n.Wait(ctx, id); err != nil || again != nil {
		t.Fatal(again, err)
	}
	ri, err := n.Run(ctx, id)
	if err != nil || ri.Status != StatusDone || ri.Result == nil || len(ri.Answers) != 1 || ri.Answers[0].By != "Ada" || !ri.Answers[0].Allow ||
		ri.Answers[0].Name != "shop.charge" || ri.Progress != nil {
		t.Fatalf("the finished run: %+v %v", ri, err)
	}
	if qs, _ := n.Questions(ctx); len(qs) != 0 {
		t.Fatalf("still asking after the answer: %+v", qs)
	}
	// The watch saw the run asking, answered and changed.
	seen := map[RunEventKind]bool{}
	for deadline := time.After(30 * time.Second); !seen[RunAsking] || !seen[RunAnswered] || !seen[RunChanged]; {
		select {
		case e := <-events:
			if e.ID == id {
				seen[e.Kind] = true
			}
		case <-deadline:
			t.Fatalf("the watch saw %v", seen)
		}
	}
	if _, err := n.Run(ctx, "not-an-id!"); !errors.Is(err, ErrUnknownRun) {
		t.Fatalf("a bad id: %v", err)
	}
}
