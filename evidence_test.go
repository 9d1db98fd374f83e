package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	soakRuns      = flag.Int("soak", 0, "TestSoak: runs in the full soak (10000); 0 runs the short version")
	footprintRuns = flag.Int("footprint", 0, "TestFootprint: runs waiting at once (1000); 0 runs the short version")
	deadlineRuns  = flag.Int("deadline-samples", 0, "TestDeadlineAccuracy: samples per stall; 0 runs the short version")
)

// secrets are what tools put into their errors and panics; none may reach
// a Result.
var secrets = []string{
	"Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.s3cr3t-sig",
	"postgres://admin:hunter2@db.internal:5432/prod",
	"/home/alice/.aws/credentials",
	"AKIAIOSFODNN7EXAMPLE",
}

func TestSecretsNeverLeak(t *testing.T) {
	msg := "request failed: " + strings.Join(secrets, " ")
	rt := mustNew(t, Options{Tools: Tools{"svc": Tools{
		"fails": Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, errors.New(msg) }},
		"wraps": Tool{Run: func(context.Context, json.RawMessage) (any, error) {
			return nil, fmt.Errorf("lookup: %w", errors.New(msg))
		}},
		"panics":    Tool{Run: func(context.Context, json.RawMessage) (any, error) { panic(msg) }},
		"panicsErr": Tool{Run: func(context.Context, json.RawMessage) (any, error) { panic(errors.New(msg)) }},
		"badOutput": Tool{Run: func(context.Context, json.RawMessage) (any, error) {
			return map[string]any{"constructor": msg}, nil
		}},
	}}})
	for _, tool := range []string{"fails", "wraps", "panics", "panicsErr", "badOutput"} {
		for _, prog := range []string{
			`return await tools.svc.%s({})`,
			`tools.svc.%s({}); return 1`,
			`try { await tools.svc.%s({}) } catch (e) {
				console.log(e.message, String(e), e.stack, JSON.stringify(e), Object.getOwnPropertyNames(e), e)
				return { e, message: e.message, stack: e.stack, keys: Object.keys(e), all: Object.getOwnPropertyNames(e).map((k) => String(e[k])) }
			}`,
			`const r = await Promise.allSettled([tools.svc.%s({})]); console.log(r); return r`,
		} {
			res, err := rt.Execute(context.Background(), fmt.Sprintf(prog, tool))
			if err != nil {
				t.Fatal(err)
			}
			out := resultJSON(res)
			for _, s := range secrets {
				if strings.Contains(out, s) || strings.Contains(out, strings.Split(s, "@")[0]) {
					t.Errorf("%s / %.40s: result contains %q: %s", tool, prog, s, out)
				}
			}
		}
	}
}

// stalls are programs that never end by themselves; the deadline must
// stop each.
var stalls = []struct{ name, code string }{
	{"busy loop", `while (true) {}`},
	{"builtin loop", `const big = Array.from({ length: 20000 }, (_, i) => ({ i, s: "x".repeat(20) })); for (;;) JSON.stringify(big)`},
	{"regex bomb", `return /^((a+)+)\1?$/.test("a".repeat(40) + "!")`},
	{"huge allocation", `const parts = []; for (;;) parts.push(new Array(1e5).fill(parts.length))`},
	{"deep stringify", `let v = 0; for (let i = 0; i < 100000; i++) v = [v]; return JSON.stringify(v)`},
	{"tool ignoring ctx", `return await tools.slow.ignore({})`},
	{"timer flood", `for (let i = 0; i < 50000; i++) setTimeout(() => { for (let j = 0; j < 1e6; j++); }, 0); await new Promise(() => setTimeout(() => {}, 1e9))`},
}

// TestDeadlineAccuracy reports how far after the deadline each stall ends
// (p50/p99/max). It asserts only a loose bound; the numbers are evidence.
func TestDeadlineAccuracy(t *testing.T) {
	samples := *deadlineRuns
	if samples == 0 {
		samples = 3
	}
	ignore := Tool{Run: func(context.Context, json.RawMessage) (any, error) {
		time.Sleep(500 * time.Millisecond)
		return nil, nil
	}}
	const timeout = 100 * time.Millisecond
	rt := mustNew(t, Options{Tools: Tools{"slow": Tools{"ignore": ignore}}, Timeout: timeout, MaxMemoryBytes: 256 << 20})
	var all []time.Duration
	for _, s := range stalls {
		var over []time.Duration
		for i := 0; i < samples; i++ {
			start := time.Now()
			res := run(t, rt, s.code)
			d := time.Since(start) - timeout
			if res.OK || (res.Error.Kind != TimeoutExceeded && res.Error.Kind != MemoryLimitExceeded) {
				t.Fatalf("%s: %s", s.name, resultJSON(res))
			}
			if res.Error.Kind == TimeoutExceeded {
				over = append(over, d)
			}
		}
		all = append(all, over...)
		if len(over) > 0 {
			p50, p99, max := percentiles(over)
			t.Logf("%-18s n=%d  end-deadline p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms", s.name, len(over), ms(p50), ms(p99), ms(max))
		}
	}
	p50, p99, max := percentiles(all)
	t.Logf("%-18s n=%d  end-deadline p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms", "all", len(all), ms(p50), ms(p99), ms(max))
	if max > 2*time.Second {
		t.Errorf("a stall ended %v after its deadline", max)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentiles(ds []time.Duration) (p50, p99, max time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.5), at(0.99), s[len(s)-1]
}

// rssBytes reads the process's resident set (and its peak) on Linux.
func rssBytes() (cur, peak int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			cur = n << 10
		case "VmHWM:":
			peak = n << 10
		}
	}
	return cur, peak
}

// TestSoak runs a mix of good, hostile, failing and hanging programs at
// high concurrency: no panics, no goroutine leaks, and memory back near
// where it started.
func TestSoak(t *testing.T) {
	runs, conc := *soakRuns, 200
	if runs == 0 {
		runs, conc = 300, 50
		if testing.Short() {
			runs = 60
		}
	}
	var hangs atomic.Int32
	tools := Tools{"svc": Tools{
		"echo": Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }},
		"fail": Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, ToolError("no") }},
		"boom": Tool{Run: func(context.Context, json.RawMessage) (any, error) { panic("boom") }},
		"hang": Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
			hangs.Add(1)
			defer hangs.Add(-1)
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		"slow": Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case <-time.After(time.Duration(rand.IntN(20)) * time.Millisecond):
				return "ok", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}},
	}}
	rt := mustNew(t, Options{Tools: tools, Timeout: 250 * time.Millisecond, MaxMemoryBytes: 32 << 20, MaxOutputBytes: 1 << 16})
	programs := []struct {
		code string
		ok   bool
	}{
		{`return (await Promise.all([1, 2, 3].map((i) => tools.svc.echo({ i })))).length`, true},
		{`const r = await Promise.allSettled([tools.svc.slow({}), tools.svc.fail({}), tools.svc.boom({})]); return r.map((x) => x.status)`, true},
		{`return Array.from({ length: 2000 }, (_, i) => ({ i, k: i % 7 })).filter((r) => r.k === 3).length`, true},
		{`return await tools.svc.hang({})`, false},
		{`while (true) {}`, false},
		{`const a = []; for (;;) a.push("x".repeat(1 << 16) + a.length)`, false},
		{`return /^((a+)+)\1?$/.test("a".repeat(40) + "!")`, false},
		{`throw new Error("x")`, false},
		{`return Function("return 1")()`, false},
		{`tools.svc.fail({}); return 1`, false},
		{`await new Promise(() => {})`, false},
		{`return Promise.race([tools.svc.hang({}), tools.svc.echo({ a: 1 })])`, true},
	}
	// Warm up before taking the baselines.
	run(t, rt, `return 1`)
	runtime.GC()
	baseG := runtime.NumGoroutine()
	baseRSS, _ := rssBytes()
	start := time.Now()
	var wg sync.WaitGroup
	var bad, starved atomic.Int32
	next := make(chan int)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p := programs[i%len(programs)]
				res, err := rt.Execute(context.Background(), p.code)
				if err == nil && p.ok && !res.OK && res.Error.Kind == TimeoutExceeded {
					// Good programs share two cores with programs that
					// burn their whole budget: under this load some time
					// out. That is the limit working, not a failure.
					starved.Add(1)
					continue
				}
				if err != nil || res.OK != p.ok {
					if bad.Add(1) <= 5 {
						t.Errorf("run %d (%s): %s %v", i, p.code, resultJSON(res), err)
					}
				}
				checkResultShape(t, res)
			}
		}()
	}
	for i := 0; i < runs; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	_, peak := rssBytes()
	rt.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseG+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	debug.FreeOSMemory() // return freed heap to the OS before reading RSS
	endRSS, _ := rssBytes()
	t.Logf("%d runs at concurrency %d in %v: %.0f runs/s (%d good runs timed out under load); RSS %d MiB before, %d MiB peak, %d MiB after; goroutines %d before, %d after",
		runs, conc, elapsed.Round(time.Millisecond), float64(runs)/elapsed.Seconds(), starved.Load(), baseRSS>>20, peak>>20, endRSS>>20, baseG, runtime.NumGoroutine())
	if endRSS > baseRSS+128<<20 {
		t.Errorf("RSS did not come back: %d MiB before, %d MiB after", baseRSS>>20, endRSS>>20)
	}
	if g := runtime.NumGoroutine(); g > baseG+2 {
		t.Errorf("goroutines: %d before, %d after", baseG, g)
	}
	if hangs.Load() != 0 {
		t.Errorf("%d hanging tools still running", hangs.Load())
	}
}

// TestFootprint holds many runs waiting on a slow tool at once and reports
// resident memory per run.
func TestFootprint(t *testing.T) {
	n := *footprintRuns
	if n == 0 {
		n = 100
	}
	release := make(chan struct{})
	var waiting atomic.Int32
	wait := Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		waiting.Add(1)
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	rt := mustNew(t, Options{Tools: Tools{"svc": Tools{"wait": wait}}, Timeout: time.Minute})
	run(t, rt, `return 1`)
	runtime.GC()
	base, _ := rssBytes()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := rt.Execute(context.Background(), `const rows = Array.from({ length: 100 }, (_, i) => ({ i })); return [await tools.svc.wait({}), rows.length]`)
			if err != nil || !res.OK {
				t.Errorf("%s %v", resultJSON(res), err)
			}
		}()
	}
	for waiting.Load() < int32(n) {
		time.Sleep(10 * time.Millisecond)
	}
	held, _ := rssBytes()
	close(release)
	wg.Wait()
	per := float64(held-base) / float64(n)
	t.Logf("%d runs waiting at once: RSS %d MiB -> %d MiB, %.0f KiB per run, %.0f runs per GiB", n, base>>20, held>>20, per/1024, float64(1<<30)/per)
}
