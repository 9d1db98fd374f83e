package mcp

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLoadFairness is a load generator, not a test: with CODEMODE_LOAD=1
// it runs 8 sessions calling execute with `while (true) {}` and 8 calling
// `return 1`, each one call after another, against one server with the
// defaults of codemode mcp (MaxRuns twice GOMAXPROCS, the untrusted
// limits: 30 s per run) for CODEMODE_LOAD_SECONDS (30), then the 8
// well-behaved sessions alone, and prints the latency of the
// well-behaved sessions' calls: p50 and p95 over the whole window, and
// over the part after the first run timeout (once the loops have used
// slot time). Skipped otherwise.
//
//	CODEMODE_LOAD=1 go test -run TestLoadFairness -v ./mcp/
func TestLoadFairness(t *testing.T) {
	if os.Getenv("CODEMODE_LOAD") != "1" {
		t.Skip("a load generator: set CODEMODE_LOAD=1 to run it")
	}
	window := 30 * time.Second
	if s, err := strconv.Atoi(os.Getenv("CODEMODE_LOAD_SECONDS")); err == nil && s > 0 {
		window = time.Duration(s) * time.Second
	}
	for _, loopers := range []int{8, 0} {
		loadRound(t, loopers, 8, window)
	}
}

// callStat is one well-behaved call: when it started (since the round
// began), how long it took, and whether it ran.
type callStat struct {
	at, took time.Duration
	ran      bool
}

func loadRound(t *testing.T, loopers, good int, window time.Duration) {
	rt := codemode.Options{}.WithUntrustedLimits()
	if s, err := strconv.Atoi(os.Getenv("CODEMODE_LOAD_TIMEOUT")); err == nil && s > 0 {
		rt.Timeout = time.Duration(s) * time.Second
	}
	srv, err := NewServer(ServerOptions{MaxRuns: 2 * runtime.GOMAXPROCS(0), Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CODEMODE_LOAD_TRACE") != "" {
		t0 := time.Now()
		srv.slots.onGrant = func(session string) {
			q := srv.slots.sessions[session]
			fmt.Printf("TRACE %6.2fs grant %s usage=%.2f ran=%v held=%d running=%d\n", time.Since(t0).Seconds(), session[:6], q.usage, q.ran, len(q.held), srv.slots.running)
		}
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.HTTPHandler())
	defer ts.Close()
	connect := func() *mcpsdk.ClientSession {
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "load", Version: "1"}, nil).
			Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// Every session connects first, then all start at once, the loopers'
	// and the others' calls arriving in no particular order.
	var loopSessions, goodSessions []*mcpsdk.ClientSession
	for i := range max(loopers, good) {
		if i < loopers {
			loopSessions = append(loopSessions, connect())
		}
		if i < good {
			goodSessions = append(goodSessions, connect())
		}
	}
	for _, cs := range append(slices.Clone(loopSessions), goodSessions...) {
		defer cs.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	begin := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stats []callStat
	loops, loopErrs := 0, 0
	loop := func(cs *mcpsdk.ClientSession) {
		for ctx.Err() == nil {
			res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": `while (true) {}`}})
			mu.Lock()
			loops++
			if err != nil || (res.IsError && strings.Contains(fmt.Sprint(res.StructuredContent), "did not run")) {
				loopErrs++
			}
			mu.Unlock()
		}
	}
	behave := func(cs *mcpsdk.ClientSession) {
		for ctx.Err() == nil {
			start := time.Now()
			v, err := tryExec(cs, "return 1")
			s := callStat{at: start.Sub(begin), took: time.Since(start), ran: err == nil && v["value"] == 1.0}
			mu.Lock()
			stats = append(stats, s)
			mu.Unlock()
		}
	}
	// Started in turn, a looper then a well-behaved one.
	for i := range max(loopers, good) {
		if i < loopers {
			wg.Go(func() { loop(loopSessions[i]) })
		}
		if i < good {
			wg.Go(func() { behave(goodSessions[i]) })
		}
	}
	wg.Wait()
	report := func(label string, keep func(callStat) bool) {
		var took []time.Duration
		failed := 0
		for _, s := range stats {
			if !keep(s) {
				continue
			}
			if !s.ran {
				failed++
				continue
			}
			took = append(took, s.took)
		}
		slices.Sort(took)
		pct := func(p float64) time.Duration {
			if len(took) == 0 {
				return 0
			}
			return took[min(len(took)-1, int(p*float64(len(took))))].Round(time.Millisecond)
		}
		line := fmt.Sprintf("%d loopers + %d well-behaved, MaxRuns %d, %v, %s: %d calls ran, %d failed; p50 %v, p95 %v",
			loopers, good, 2*runtime.GOMAXPROCS(0), window, label, len(took), failed, pct(0.5), pct(0.95))
		t.Log(line)
		fmt.Println("LOAD", line)
	}
	report("whole window", func(callStat) bool { return true })
	if window > rt.Timeout {
		report("after the first run timeout", func(s callStat) bool { return s.at >= rt.Timeout })
	}
	if loopers > 0 {
		fmt.Printf("LOAD looping calls answered: %d (%d refused a slot)\n", loops, loopErrs)
	}
}
