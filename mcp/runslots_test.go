package mcp

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
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
	got := make(chan string, 2)
	for _, s := range []string{"hog", "light"} {
		go func() {
			rel, _, ref := r.acquire(ctx, s)
			if ref != nil {
				t.Error(ref)
				return
			}
			got <- s
			rel()
		}()
		eventually(t, s+" waiting", func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.sessions[s] != nil && len(r.sessions[s].waiters) == 1
		})
	}
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
