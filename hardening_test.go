package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The host-side steps around the engine are bounded like the engine: each
// table below gives hostile programs of one class with the kind, the
// deadline and the size each must keep. Wall-clock bounds are generous (a
// loaded 2-core machine); they prove a run ended, not how fast.

// TestHostileCompile: compiling is bounded, whatever the program's nesting
// or size, and runs under the run's deadline and context.
func TestHostileCompile(t *testing.T) {
	const timeout = 2 * time.Second
	rt, err := New(Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	deep := func(open, mid, close string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
	}
	for _, tc := range []struct {
		name, code string
		kind       Kind
		message    string
	}{
		// ~200 KB of prefix operators crashed the process in the
		// TypeScript step; 20,000 took 2.6 s there.
		{"typescript prefix operators", "let x: number = 1; return " + strings.Repeat("!", 200_000) + "x", ParseError, "nests more than 256"},
		{"typescript prefix operators, quadratic range", "let x: number = 1; return " + strings.Repeat("!", 20_000) + "x", ParseError, "nests more than 256"},
		{"javascript prefix operators", "let x = 1; return " + strings.Repeat("!", 200_000) + "x", ParseError, "nests more than 256"},
		{"typescript brackets", "let x: number = 1; return " + deep("[", "x", "]", 200_000), ParseError, "nests more than 256"},
		{"javascript parens", "return " + deep("(", "1", ")", 200_000), ParseError, "nests more than 256"},
		{"nested functions", deep("function f() {", "", "}", 5_000) + "return 1", ParseError, "64 blocks"},
		{"nested arrows", "const f = " + strings.Repeat("() => ", 5_000) + "1; return 1", ParseError, "64 blocks"},
		{"too large", "return '" + strings.Repeat("a", 1<<20) + "'", ParseError, "1 MiB"},
		// An else-if chain separated by semicolons nests in the parsers
		// but is not counted by the pre-scan (it is cheap in esbuild); the
		// engine's parser runs out of stack and says so.
		{"engine parser depth", "let x = 0; " + strings.Repeat("if (x) x; else ", 20_000) + "x = 1; return x", ParseError, "nested too deeply"},
		// Plain JavaScript over esbuild's limit still runs; with a syntax
		// error it gets the engine's message.
		{"large javascript syntax error", "const a = '" + strings.Repeat("a", 200_000) + "'\nreturn a.length +* 2", ParseError, ""},
		{"large typescript", "const a: string = '" + strings.Repeat("a", 200_000) + "'\nreturn a.length", ParseError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, err := rt.Execute(context.Background(), tc.code)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if res.OK || res.Error.Kind != tc.kind || !strings.Contains(res.Error.Message, tc.message) {
				t.Fatalf("got %s, want %s containing %q", brief(res), tc.kind, tc.message)
			}
			if elapsed > timeout+time.Second {
				t.Errorf("took %v, past the %v timeout", elapsed, timeout)
			}
			t.Logf("%v: %s", elapsed.Round(time.Millisecond), brief(res))
		})
	}
	res, err := rt.Execute(context.Background(), "const a = '"+strings.Repeat("a", 200_000)+"'\nreturn a.length")
	if err != nil || !res.OK || string(res.Value) != "200000" {
		t.Errorf("a 200 KB JavaScript program: got %s, %v", brief(res), err)
	}
	res, _ = rt.Execute(context.Background(), "const a: string = '"+strings.Repeat("a", 200_000)+"'\nreturn a.length")
	if res.OK || !strings.Contains(strings.Join(res.Error.Suggestions, " "), "TypeScript syntax is accepted only in programs up to") {
		t.Errorf("a 200 KB TypeScript program: got %s, want the size suggestion", brief(res))
	}
}

// TestCompileUnderDeadline: the largest, slowest program the pre-scan
// accepts still ends at the run's deadline, and at the caller's
// cancellation, while esbuild works on it.
func TestCompileUnderDeadline(t *testing.T) {
	// Functions nested 60 deep, repeated to esbuild's 128 KiB limit: the
	// costliest shape for its parser that the pre-scan lets through.
	one := "{" + strings.Repeat("function f(a: number) {", 60) + strings.Repeat("}", 60) + "}\n"
	code := strings.Repeat(one, (128<<10)/len(one)) + "return 1"
	rt, err := New(Options{Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	start := time.Now()
	res, err := rt.Execute(context.Background(), code)
	elapsed := time.Since(start)
	if err != nil || res.OK || res.Error.Kind != TimeoutExceeded {
		t.Fatalf("got %s, %v; want TimeoutExceeded", brief(res), err)
	}
	t.Logf("timed out after %v", elapsed)
	if elapsed > time.Second {
		t.Errorf("ended %v after a 20ms timeout", elapsed)
	}

	// (The engine needs more than the default 64 MiB to compile it.)
	patient, err := New(Options{MaxMemoryBytes: 512 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	res, err = patient.Execute(ctx, code)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %s, %v; want the context's error", brief(res), err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("ended %v after the caller's 20ms deadline", elapsed)
	}
	// Given time, the same program compiles and runs.
	res, err = patient.Execute(context.Background(), code)
	if err != nil || !res.OK || string(res.Value) != "1" {
		t.Errorf("with time: got %s, %v", brief(res), err)
	}
}

// TestProgramRunsOnce: only a failure to compile sends a program to the
// TypeScript path; a program never runs twice, and one that closes its
// wrapper is refused before anything runs.
func TestProgramRunsOnce(t *testing.T) {
	var calls atomic.Int64
	count := Tool{Description: "counts", Run: func(context.Context, json.RawMessage) (any, error) {
		calls.Add(1)
		return 1, nil
	}}
	rt, err := New(Options{Tools: Tools{"t": Tools{"count": count}}, MaxToolCalls: 3, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, tc := range []struct {
		name, code string
		kind       Kind
		calls      int64
	}{
		// Breaking out of the wrapper and throwing a SyntaxError at run
		// time made the runtime take the program for TypeScript and run
		// it again: the tools ran 6 times while the audit listed 3.
		{"wrapper break", "})(); for (let i = 0; i < 3; i++) tools.t.count({}); throw new SyntaxError('x'); (async () => {", ParseError, 0},
		{"runtime SyntaxError", "for (let i = 0; i < 3; i++) await tools.t.count({}); JSON.parse('{')", ExecutionFailure, 3},
		{"thrown SyntaxError", "for (let i = 0; i < 3; i++) await tools.t.count({}); throw new SyntaxError('mine')", ExecutionFailure, 3},
		{"typescript runtime SyntaxError", "const n: number = 3; for (let i = 0; i < n; i++) await tools.t.count({}); JSON.parse('{')", ExecutionFailure, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls.Store(0)
			res, err := rt.Execute(context.Background(), tc.code)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.Error.Kind != tc.kind {
				t.Fatalf("got %s, want %s", brief(res), tc.kind)
			}
			if got := calls.Load(); got != tc.calls || int64(len(res.ToolCalls)) != tc.calls {
				t.Errorf("the tool ran %d times and the audit lists %d; want %d", got, len(res.ToolCalls), tc.calls)
			}
		})
	}
}

// brief renders a Result for a failure message, cut to a readable size.
func brief(res Result) string {
	b, _ := json.Marshal(res)
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

// TestHostileDiagnosis: what happens after a run (suggestions, reading the
// thrown value) is bounded and inside the deadline, and a program cannot
// pass its own errors off as the host's diagnostics.
func TestHostileDiagnosis(t *testing.T) {
	tools := Tools{}
	for i := 0; i < 200; i++ {
		tools[fmt.Sprintf("ns%d", i)] = Tools{"lookupCustomerOrders": Tool{Description: "x", Run: func(context.Context, json.RawMessage) (any, error) { return 1, nil }}}
	}
	const timeout = time.Second
	rt, err := New(Options{Tools: tools, Timeout: timeout, MaxOutputBytes: 20_000, MaxMemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, tc := range []struct {
		name, code string
		kind       Kind
	}{
		// An edit distance of the whole name against every tool took 23 s.
		{"long unknown tool", `await tools["x".repeat(300000)]({})`, UnknownTool},
		{"long unknown nested tool", `await tools.ns1["lookupCustomerOrders" + "x".repeat(300000)]({})`, UnknownTool},
		// A forged kind with a 1,000,000-character member took 67 s.
		{"forged kind and member", `const e = new Error("x"); e.kind = "UnknownTool"; e.tool = "y".repeat(1000000); throw e`, ExecutionFailure},
		{"forged kind on a ToolError", `const e = new ToolError("x"); e.kind = "UnknownTool"; e.tool = "y".repeat(1000000); throw e`, ExecutionFailure},
		{"forged timeout", `const e = new Error("slow"); e.kind = "TimeoutExceeded"; throw e`, ExecutionFailure},
		{"forged memory", `const e = new ToolError("big"); e.kind = "MemoryLimitExceeded"; throw e`, ExecutionFailure},
		// A real call failure keeps the kind it was made with.
		{"relabelled call failure", `try { await tools.nope({}) } catch (e) { e.kind = "TimeoutExceeded"; e.tool = "z".repeat(1000000); throw e }`, UnknownTool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, err := rt.Execute(context.Background(), tc.code)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.Error.Kind != tc.kind {
				t.Fatalf("got %s, want %s", brief(res), tc.kind)
			}
			if b, _ := json.Marshal(res); len(b) > 25_000 {
				t.Errorf("the Result is %d bytes with MaxOutputBytes 20,000", len(b))
			}
			if elapsed > timeout+time.Second {
				t.Errorf("took %v with a %v timeout", elapsed, timeout)
			}
			t.Logf("%v", elapsed.Round(time.Millisecond))
		})
	}
}

// TestOutputBudgetCoversFailures: MaxOutputBytes bounds a failed run's
// Result too: error messages, names, thrown strings, tool paths.
func TestOutputBudgetCoversFailures(t *testing.T) {
	rt, err := New(Options{MaxOutputBytes: 20_000, MaxMemoryBytes: 512 << 20, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for name, code := range map[string]string{
		"error message":     `throw new Error("x".repeat(2e7))`,
		"error name":        `const e = new Error("m"); e.name = "N".repeat(2e7); throw e`,
		"thrown string":     `throw "s".repeat(2e7)`,
		"thrown object":     `throw { big: "o".repeat(2e7) }`,
		"unknown tool path": `await tools["p".repeat(2e7)]({})`,
		"rejected promise":  `await Promise.reject(new TypeError("r".repeat(2e7)))`,
		"tool error caught and rethrown with a long message": `try { await tools.nope({}) } catch (e) { e.message = "q".repeat(2e7); throw e }`,
	} {
		t.Run(name, func(t *testing.T) {
			res, err := rt.Execute(context.Background(), code)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			if res.OK || len(b) > 21_000 {
				t.Errorf("got %d bytes, want a failure of at most about 20,000: %s", len(b), brief(res))
			}
			if strings.Contains(res.Error.Message, "[truncated") != res.Truncated {
				t.Errorf("a cut message must set Truncated: %s", brief(res))
			}
		})
	}
}

// TestQueuedWorkBounded: calls a program starts and never awaits cannot
// grow the host without bound, and the deadline holds while it tries.
func TestQueuedWorkBounded(t *testing.T) {
	slow := Tool{Description: "slow", Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return nil, ctx.Err()
	}}
	const timeout = 5 * time.Second
	for _, tc := range []struct {
		name, code string
		memory     int64
		// heap bounds the Go heap's growth during the run.
		heap uint64
	}{
		// ~120,000 queued calls and 800 MB before.
		{"call loop", `for (;;) tools.x.slow({})`, 0, 300 << 20},
		// Pending inputs are bounded by the run's memory limit: with 4 MiB,
		// a fifth 1 MB input is refused while the first four are under way.
		// (A 20 MB input passed to a slow tool in a loop grew the heap past
		// 1.2 GB.)
		{"large inputs", `const big = "x".repeat(1e6); let refused = 0
			for (let i = 0; i < 8; i++) tools.x.slow({ big }).catch((e) => { if (e.kind === "ToolCallLimitExceeded") refused++ })
			await new Promise((r) => setTimeout(r, 50)); throw new Error("refused " + refused)`, 4 << 20, 100 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := New(Options{Tools: Tools{"x": Tools{"slow": slow}}, Timeout: timeout, MaxMemoryBytes: tc.memory})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			var peak atomic.Uint64
			stop := make(chan struct{})
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			go func() {
				var m runtime.MemStats
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					runtime.ReadMemStats(&m)
					if m.HeapAlloc > peak.Load() {
						peak.Store(m.HeapAlloc)
					}
				}
			}()
			start := time.Now()
			res, err := rt.Execute(context.Background(), tc.code)
			elapsed := time.Since(start)
			close(stop)
			if err != nil {
				t.Fatal(err)
			}
			growth := uint64(0)
			if p := peak.Load(); p > before.HeapAlloc {
				growth = p - before.HeapAlloc
			}
			t.Logf("%v, heap +%d MiB: %s", elapsed.Round(time.Millisecond), growth>>20, brief(res))
			if growth > tc.heap {
				t.Errorf("the heap grew %d MiB, want at most %d", growth>>20, tc.heap>>20)
			}
			// Generous: ending 10,000 waiting calls takes a while under
			// -race on a loaded machine (without it the run ends within
			// tens of milliseconds of its deadline; the closing numbers are
			// measured apart from the tests).
			if elapsed > timeout+3*time.Second {
				t.Errorf("took %v with a %v timeout", elapsed, timeout)
			}
			if tc.memory != 0 && (res.OK || res.Error.Message != "Error: refused 4") {
				t.Errorf("got %s, want 4 calls refused for their pending input", brief(res))
			}
		})
	}
}

// TestPreludeUnreachable: stack-trace hooks hand a program no function of
// the prelude's or the host's, wherever its stack passes through them.
func TestPreludeUnreachable(t *testing.T) {
	echo := Tool{Description: "echo", Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	rt, err := New(Options{Tools: Tools{"t": Tools{"echo": echo}}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, err := rt.Execute(context.Background(), `
		const found = []
		let frames = 0
		const look = () => {
			Error.prepareStackTrace = (e, sites) => {
				for (const s of sites) { frames++; if (s.getFunction() !== undefined) found.push(s.getFunctionName() || "?") }
				return ""
			}
			void new Error().stack
			Error.captureStackTrace({})
		}
		const spy = { get a() { look(); return 1 }, toJSON() { look(); return { b: 1 } } }
		console.log(spy)                       // inside the prelude's formatter
		String(new Date())                     // a prelude-wrapped builtin
		URL.prototype; look()                  // after the lazy URL load
		await tools.t.echo({ get x() { look(); return 1 } })
		Promise.race([tools.t.echo({}), { then(r) { look(); r(1) } }])
		try { await tools.t.echo(spy) } catch {}
		JSON.stringify(spy)
		Error.prepareStackTrace = undefined
		return { found, frames, value: spy }`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Found  []string `json:"found"`
		Frames int      `json:"frames"`
	}
	if !res.OK || json.Unmarshal(res.Value, &got) != nil || len(got.Found) != 0 || got.Frames == 0 {
		t.Errorf("got %s, want no frame whose function is reachable", brief(res))
	}
	// The Error class's own hook still works for programs.
	res, _ = rt.Execute(context.Background(), `Error.prepareStackTrace = (e, s) => "custom " + s.length; return new Error("x").stack.startsWith("custom")`)
	if !res.OK || string(res.Value) != "true" {
		t.Errorf("prepareStackTrace: got %s", brief(res))
	}
}

// TestClockStartsWithTheRun: performance.now() counts from the run's
// start, not from when its instance (or its image) booted.
func TestClockStartsWithTheRun(t *testing.T) {
	rt, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for i := 0; i < 3; i++ { // the second run on a configuration prepares spares
		if _, err := rt.Execute(context.Background(), `return 1`); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the spare instance ages
	res, err := rt.Execute(context.Background(), `return [performance.now(), performance.timeOrigin]`)
	if err != nil {
		t.Fatal(err)
	}
	var now []float64
	if !res.OK || json.Unmarshal(res.Value, &now) != nil || len(now) != 2 {
		t.Fatalf("got %s", brief(res))
	}
	if now[0] < 0 || now[0] > 250 {
		t.Errorf("performance.now() at the program's start = %v ms, want the time since the run began", now[0])
	}
}
