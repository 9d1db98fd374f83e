package mcp

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// slotCounts is what session holds and has waiting of srv's run slots.
func slotCounts(srv *Server, session string) (held, waiting int) {
	srv.slots.mu.Lock()
	defer srv.slots.mu.Unlock()
	if q := srv.slots.sessions[session]; q != nil {
		return len(q.held), len(q.waiters)
	}
	return 0, 0
}

// TestRunSlotsFair: with MaxRuns 2, a session flooding the server with
// programs that loop until their timeout holds both slots while alone,
// but another session's program starts at the first slot that frees,
// before the flood's queued programs.
func TestRunSlotsFair(t *testing.T) {
	const flood = 6
	srv := newServerWith(t, ServerOptions{MaxRuns: 2, RunWait: time.Minute, Runtime: codemode.Options{Timeout: 2 * time.Second}})
	var grants []string // sessions in the order they got slots
	srv.slots.onGrant = func(session string) { grants = append(grants, session) }
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	f, good := httpClient(t, ts.URL), httpClient(t, ts.URL)

	var wg sync.WaitGroup
	results := make(chan map[string]any, flood)
	for range flood {
		wg.Go(func() {
			v, err := tryExec(f, `while (true) {}`)
			if err != nil {
				t.Error(err)
			}
			results <- v
		})
	}
	eventually(t, "the flood taking both slots and queueing the rest", func() bool {
		held, waiting := slotCounts(srv, f.ID())
		return held == 2 && waiting == flood-2
	})
	if v := execHTTP(t, good, `return 1`); v["value"] != 1.0 {
		t.Errorf("good session: got %v", v)
	}
	wg.Wait()
	close(results)
	srv.slots.mu.Lock()
	var got []string
	for _, s := range grants {
		got = append(got, map[string]string{f.ID(): "flood", good.ID(): "good"}[s])
	}
	srv.slots.mu.Unlock()
	// Two flood programs held the slots; the good one took the first
	// slot that freed, while the flood still had flood-2 queued.
	if len(got) != flood+1 || got[2] != "good" {
		t.Errorf("got slots granted in the order %v, want the good program third", got)
	}
	for v := range results {
		if e, _ := v["error"].(map[string]any); e["kind"] != "TimeoutExceeded" {
			t.Errorf("flood program: got %v, want TimeoutExceeded", v)
		}
	}
}

// TestRunSlotsBounds: a session with MaxQueuedRuns calls waiting gets
// one more refused at once, and a call that waits RunWait fails; both
// with an ExecutionFailure saying why, and the refusals logged at a
// bounded rate.
func TestRunSlotsBounds(t *testing.T) {
	started := make(chan string, 8)
	g := &gates{}
	logger, logs := newLogRecorder()
	srv := newServerWith(t, ServerOptions{Logger: logger, MaxRuns: 1, MaxQueuedRuns: 2, RunWait: 300 * time.Millisecond, Runtime: codemode.Options{
		Timeout: 60 * time.Second, Tools: codemode.Tools{"t": codemode.Tools{"block": blocker(started, g)}}}})
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	defer g.openAll()
	a, b := httpClient(t, ts.URL), httpClient(t, ts.URL)

	holding := make(chan map[string]any, 1)
	go func() {
		v, _ := tryExec(a, `return await tools.t.block({ who: "holder" })`)
		holding <- v
	}()
	<-started

	t.Run("wait bound", func(t *testing.T) {
		for range 2 {
			v := execHTTP(t, b, "return 1")
			if e, _ := v["error"].(map[string]any); e["kind"] != "ExecutionFailure" || !strings.Contains(errorMessage(v), "waited 300ms for a run slot") {
				t.Errorf("got %v, want an ExecutionFailure naming the 300ms wait", v)
			}
		}
		if n := strings.Count(logs(), "execute refused"); n != 1 {
			t.Errorf("got %d log lines for 2 refusals within 10s, want 1:\n%s", n, logs())
		}
		if line := grepLine(logs(), "execute refused"); !strings.Contains(line, "why=waited too long") {
			t.Errorf("got log line %q, want the reason", line)
		}
	})

	t.Run("queue bound", func(t *testing.T) {
		srv.slots.wait = 0 // queued calls wait as long as their request
		queued := make(chan map[string]any, 2)
		for range 2 {
			go func() {
				v, _ := tryExec(b, "return 2")
				queued <- v
			}()
		}
		eventually(t, "two calls queued", func() bool { _, w := slotCounts(srv, b.ID()); return w == 2 })
		v := execHTTP(t, b, "return 3")
		if e, _ := v["error"].(map[string]any); e["kind"] != "ExecutionFailure" || !strings.Contains(errorMessage(v), "already has 2 programs waiting") {
			t.Errorf("got %v, want an ExecutionFailure naming the 2 waiting", v)
		}
		g.open("holder")
		if v := <-holding; v["value"] != "released" {
			t.Errorf("holder: got %v", v)
		}
		for range 2 {
			if v := <-queued; v["value"] != 2.0 {
				t.Errorf("queued call: got %v, want it run once the slot freed", v)
			}
		}
	})
}

// TestRunSlotsUsageOrder: of two waiting sessions, the freed slot goes to
// the one that has used less slot time, whichever came first; a new
// session counts as having used a little.
func TestRunSlotsUsageOrder(t *testing.T) {
	r := newRunSlots(1, 0, 0)
	ctx := context.Background()
	hog, _, _ := r.acquire(ctx, "hog")
	hog()
	r.mu.Lock()
	r.sessions["hog"].usage = 60 // a minute of slot time: its programs run long
	r.mu.Unlock()
	holder, _, _ := r.acquire(ctx, "other")
	got := queueCalls(t, r, "hog", "light")
	holder()
	if first := <-got; first != "light" {
		t.Errorf("got %s first, want light", first)
	}
	<-got
	// Each goroutine releases after it reports: wait for the releases,
	// reading under the lock the releases take.
	eventually(t, "every slot released", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.running == 0 && r.active == 0
	})
}

// lightSession makes session known to be light: one run that ended at
// once.
func lightSession(t *testing.T, r *runSlots, session string) {
	t.Helper()
	rel, _, ref := r.acquire(context.Background(), session)
	if ref != nil {
		t.Fatalf("%s: %+v", session, ref)
	}
	rel()
}

// waiting reports whether session has a call waiting for a slot.
func (r *runSlots) waitingFor(session string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.sessions[session]
	return q != nil && len(q.waiters) > 0
}

// queueCalls makes one call of each session wait for a slot, in turn;
// each sends its session's name when granted, then releases.
func queueCalls(t *testing.T, r *runSlots, sessions ...string) <-chan string {
	t.Helper()
	got := make(chan string, len(sessions))
	for _, s := range sessions {
		go func() {
			rel, _, ref := r.acquire(context.Background(), s)
			if ref != nil {
				t.Error(ref)
				return
			}
			got <- s
			rel()
		}()
		eventually(t, s+" waiting", func() bool { return r.waitingFor(s) })
	}
	return got
}

// TestRunSlotsExtra: with every slot held, a session known to be light
// takes one of the extra slots at once; a new session, a heavy one and a
// second light call while the extra slot is held wait, and each gets a
// slot as one frees.
func TestRunSlotsExtra(t *testing.T) {
	r := newRunSlots(2, 0, 0) // max 2, extra 1
	ctx := context.Background()
	lightSession(t, r, "light")
	lightSession(t, r, "light2")
	lightSession(t, r, "heavy")
	r.mu.Lock()
	r.sessions["heavy"].usage, r.sessions["heavy"].at = 60, time.Now()
	r.mu.Unlock()
	loop1, _, _ := r.acquire(ctx, "loop1")
	loop2, _, _ := r.acquire(ctx, "loop2")

	rel, _, ref := r.acquire(ctx, "light")
	if ref != nil {
		t.Fatalf("light session refused: %+v", ref)
	}
	r.mu.Lock()
	if r.running != 3 {
		t.Errorf("running %d, want 3 (2 slots and the extra one)", r.running)
	}
	r.mu.Unlock()

	got := queueCalls(t, r, "new", "heavy", "light2")
	// Waiting still, past a recheck: the extra slot is taken.
	time.Sleep(2 * recheckEvery)
	for _, s := range []string{"new", "heavy", "light2"} {
		if !r.waitingFor(s) {
			t.Errorf("%s got a slot while every slot was held", s)
		}
	}
	rel() // the extra slot frees: light2 takes it, the others may not
	if s := <-got; s != "light2" {
		t.Errorf("the extra slot went to %s, want light2", s)
	}
	loop1()
	loop2()
	for range 2 {
		<-got
	}
	eventually(t, "every slot released", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.running == 0 && r.active == 0
	})
}

// TestRunSlotsTurningHeavy: a light session whose program holds its slot
// past heavyUsage is heavy from then on: its next call does not take an
// extra slot, though one is free and another light session takes it.
func TestRunSlotsTurningHeavy(t *testing.T) {
	r := newRunSlots(8, 0, 300*time.Millisecond) // share 4, extra 2
	ctx := context.Background()
	lightSession(t, r, "s")
	lightSession(t, r, "s2")
	for i := range 8 {
		hold, _, ref := r.acquire(ctx, fmt.Sprint("loop", i))
		if ref != nil {
			t.Fatal(ref)
		}
		defer hold()
	}
	long, _, ref := r.acquire(ctx, "s") // an extra slot
	if ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	defer long()
	r.mu.Lock()
	for w := range r.sessions["s"].held {
		w.start = w.start.Add(-2 * time.Second) // as if it ran two seconds
	}
	r.mu.Unlock()
	rel, waited, ref := r.acquire(ctx, "s")
	if ref == nil {
		rel()
		t.Fatalf("a session whose run has held its slot 2s got another after %v", waited)
	}
	if ref.reason != slotWaitBound {
		t.Errorf("refusal %+v, want the wait bound", ref)
	}
	rel, _, ref = r.acquire(ctx, "s2")
	if ref != nil {
		t.Fatalf("the other light session was refused the free extra slot: %+v", ref)
	}
	rel()
}

// TestRunSlotsRecheck: a call that may not take the free slot when it
// comes (its session is heavy, and heavy sessions hold all but the
// reserve) gets it once its usage has faded, with no run ending to
// prompt a look.
func TestRunSlotsRecheck(t *testing.T) {
	r := newRunSlots(4, 0, 0) // reserve 1: heavy sessions hold at most 3
	ctx := context.Background()
	for _, s := range []string{"h1", "h2", "h3", "h4"} {
		lightSession(t, r, s)
	}
	r.mu.Lock()
	for _, s := range []string{"h1", "h2", "h3", "h4"} {
		r.sessions[s].usage, r.sessions[s].at = 60, time.Now()
	}
	r.mu.Unlock()
	var rels []func()
	for _, s := range []string{"h1", "h2", "h3"} {
		rel, _, ref := r.acquire(ctx, s)
		if ref != nil {
			t.Fatal(ref)
		}
		rels = append(rels, rel)
	}
	defer func() {
		for _, rel := range rels {
			rel()
		}
	}()
	done := make(chan func())
	go func() {
		rel, _, _ := r.acquire(ctx, "h4")
		done <- rel
	}()
	eventually(t, "h4 waiting", func() bool { return r.waitingFor("h4") })
	time.Sleep(2 * recheckEvery)
	if !r.waitingFor("h4") {
		t.Fatal("a heavy session took the reserved slot")
	}
	r.mu.Lock()
	r.sessions["h4"].usage = 0 // as a minute's fading would
	r.mu.Unlock()
	select {
	case rel := <-done:
		rel()
	case <-time.After(20 * time.Second):
		t.Fatal("the faded session never got the free slot")
	}
}

// TestRunSlotsLoopBurst: over HTTP with the real engine, while new
// sessions' loops hold every slot, a session whose programs have ended
// quickly runs its next program at once (an extra slot) rather than
// after the loops' timeout.
func TestRunSlotsLoopBurst(t *testing.T) {
	srv := newServerWith(t, ServerOptions{MaxRuns: 2, RunWait: time.Minute, Runtime: codemode.Options{Timeout: time.Minute}})
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	good := httpClient(t, ts.URL)
	if v := execHTTP(t, good, `return 1`); v["value"] != 1.0 {
		t.Fatalf("first call: %v", v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var loopers []*mcpsdk.ClientSession
	for range 2 {
		cs := httpClient(t, ts.URL)
		loopers = append(loopers, cs)
		wg.Go(func() {
			_, _ = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": `while (true) {}`}})
		})
	}
	eventually(t, "the loops holding both slots", func() bool {
		a, _ := slotCounts(srv, loopers[0].ID())
		b, _ := slotCounts(srv, loopers[1].ID())
		return a == 1 && b == 1
	})
	for i := range 3 {
		if v := execHTTP(t, good, fmt.Sprintf(`return %d`, i)); v["value"] != float64(i) {
			t.Fatalf("call %d beside the loops: %v", i, v)
		}
	}
	// The loops ran all along: the calls did not wait for their slots.
	for _, cs := range loopers {
		if held, _ := slotCounts(srv, cs.ID()); held != 1 {
			t.Errorf("a loop's slot was freed (held %d): the test did not show the extra slot", held)
		}
	}
}
