package codemode

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Hostile programs: each must end with the right kind, the deadline cases
// promptly, and leave the process healthy. Timings are logged, not
// asserted tightly: the bound below only proves the run ended (the measured
// overruns are reported by BenchmarkDeadline).
func TestHostilePrograms(t *testing.T) {
	ignoring := Tool{Description: "ignores its context", Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		time.Sleep(2 * time.Second)
		return "late", nil
	}}
	const timeout = 300 * time.Millisecond
	rt, err := New(Options{
		Tools:          Tools{"slow": Tools{"ignore": ignoring}},
		Timeout:        timeout,
		MaxMemoryBytes: 32 << 20,
		MaxOutputBytes: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	// Cases that must end by themselves get a deadline they cannot reach
	// on a loaded machine.
	patient, err := New(Options{Timeout: 20 * time.Second, MaxMemoryBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	for _, tc := range []struct {
		name string
		code string
		kind Kind
		// deadline marks cases that must stop at the timeout.
		deadline bool
	}{
		{"constructor.constructor", `return ({}).constructor.constructor("return globalThis")()`, ExecutionFailure, false},
		{"Function", `return Function("return 1")()`, ExecutionFailure, false},
		{"async function constructor", `return (async () => {}).constructor("return 1")()`, ExecutionFailure, false},
		{"generator constructor", `return (function* () {}).constructor("yield 1")().next()`, ExecutionFailure, false},
		{"async generator constructor", `return (async function* () {}).constructor("yield 1")`, ExecutionFailure, false},
		{"eval", `return eval("1 + 1")`, ExecutionFailure, false},
		{"indirect eval", `return (0, globalThis["ev" + "al"])("1")`, ExecutionFailure, false},
		{"dynamic import", `const fs = await import("fs"); return fs`, ExecutionFailure, false},
		{"require", `return require("fs")`, ExecutionFailure, false},
		{"process", `return process.env`, ExecutionFailure, false},
		{"fetch", `return await fetch("http://example.com")`, ExecutionFailure, false},
		{"WebAssembly", `return WebAssembly.compile(new Uint8Array([0, 97, 115, 109]))`, ExecutionFailure, false},
		{"SharedArrayBuffer", `return new SharedArrayBuffer(8)`, ExecutionFailure, false},
		{"setTimeout string", `setTimeout("globalThis.x = 1", 0); return 1`, ExecutionFailure, false},
		{"busy loop", `while (true) {}`, TimeoutExceeded, true},
		{"builtin loop", `const big = Array.from({ length: 20000 }, (_, i) => ({ i, s: "x".repeat(20) }))
for (;;) JSON.stringify(big)`, TimeoutExceeded, true},
		{"regex bomb", `return /^((a+)+)\1?$/.test("a".repeat(40) + "!")`, TimeoutExceeded, true},
		{"sort bomb", `const a = Array.from({ length: 200000 }, (_, i) => String(i)); for (;;) a.slice().sort()`, TimeoutExceeded, true},
		{"huge string", `return "x".repeat(2 ** 29).length`, MemoryLimitExceeded, false},
		{"unbounded push", `const a = []; for (;;) a.push({ n: a.length })`, MemoryLimitExceeded, false},
		{"string doubling", `let s = "x"; for (;;) s += s`, MemoryLimitExceeded, false},
		{"deep recursion", `function f(n) { return f(n + 1) + 1 } return f(0)`, ExecutionFailure, false},
		// QuickJS's JSON.stringify is quadratic in depth and never polls:
		// one call runs for seconds, so only the loop fuel stops it.
		{"deep JSON", `let v = 0; for (let i = 0; i < 100000; i++) v = [v]; return JSON.stringify(v).length`, TimeoutExceeded, true},
		{"console flood", `for (;;) console.log("flood ".repeat(100))`, TimeoutExceeded, true},
		{"timer flood", `for (let i = 0; i < 100000; i++) setTimeout(() => { for (;;) {} }, 0); await new Promise(() => setTimeout(() => {}, 1e9))`, TimeoutExceeded, true},
		{"tool ignoring ctx", `return await tools.slow.ignore({})`, TimeoutExceeded, true},
		{"never settles", `await new Promise(() => {})`, ExecutionFailure, false},
		{"catch the interrupt", `for (;;) { try { while (true) {} } catch (e) {} }`, TimeoutExceeded, true},
		{"finally loop", `try { while (true) {} } finally { for (;;) {} }`, TimeoutExceeded, true},
		{"proxy trap at boundary", `return new Proxy({}, { ownKeys() { for (;;) {} } })`, TimeoutExceeded, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := patient
			if tc.deadline {
				r = rt
			}
			start := time.Now()
			res, err := r.Execute(context.Background(), tc.code)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if res.OK || res.Error.Kind != tc.kind {
				b, _ := json.Marshal(res)
				t.Fatalf("got %s, want kind %s", b, tc.kind)
			}
			if tc.deadline {
				over := elapsed - timeout
				t.Logf("stopped %v after the deadline", over.Round(time.Millisecond))
				if over > time.Second {
					t.Errorf("stopped %v after the deadline", over)
				}
			}
		})
	}
	// The process is healthy: an ordinary run still works.
	res, err := rt.Execute(context.Background(), `return [1, 2, 3].reduce((a, b) => a + b)`)
	if err != nil || !res.OK || string(res.Value) != "6" {
		t.Fatalf("after hostile runs: %+v %v", res, err)
	}
}

// A run that mutates globals and prototypes leaves the next run unaffected.
// Several rounds, so that later runs take instances made from the
// configuration's image and instances reset after a poisoning run; every
// clean run also gets a Math.random of its own.
func TestRunsAreIsolated(t *testing.T) {
	rt, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	randoms := map[string]bool{}
	for round := range 6 {
		res, err := rt.Execute(context.Background(), `
			Array.prototype.map = () => "poisoned"
			Object.prototype.polluted = true
			JSON.stringify = () => "{}"
			globalThis.leak = 42
			Math.random = () => 0
			globalThis.heap = "secret".repeat(1000)
			return 1`)
		if err != nil || !res.OK {
			t.Fatalf("round %d: poisoning run: %+v %v", round, res, err)
		}
		res, err = rt.Execute(context.Background(), `
			return [[1, 2].map((x) => x * 2), ({}).polluted ?? null, typeof leak, typeof heap, JSON.stringify({ a: 1 }), Math.random() !== 0, String(Math.random())]`)
		if err != nil || !res.OK {
			t.Fatalf("round %d: clean run: %+v %v", round, res, err)
		}
		var got []any
		if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 7 {
			t.Fatalf("round %d: %s", round, res.Value)
		}
		head, _ := json.Marshal(got[:6])
		if want := `[[2,4],null,"undefined","undefined","{\"a\":1}",true]`; string(head) != want {
			t.Errorf("round %d: second run saw %s, want %s", round, head, want)
		}
		r := got[6].(string)
		if randoms[r] {
			t.Errorf("round %d: Math.random repeated an earlier run's value %s", round, r)
		}
		randoms[r] = true
		time.Sleep(20 * time.Millisecond) // let the image be made in the background
	}
}

// Poisoned intrinsics inside a run do not break the runtime's own
// machinery for that run: the result boundary and tool calls still work.
func TestPoisonedIntrinsicsInRun(t *testing.T) {
	echo := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	rt, err := New(Options{Tools: Tools{"ns": Tools{"echo": echo}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, err := rt.Execute(context.Background(), `
		JSON.stringify = () => "not json"
		JSON.parse = () => ({ forged: true })
		Array.prototype.push = null
		Promise.prototype.then = function () { throw new Error("hijacked") }
		Object.defineProperty = () => { throw new Error("no") }
		const r = await tools.ns.echo({ a: [1, 2] })
		console.log("still logging")
		return { r }`)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || string(res.Value) != `{"r":{"a":[1,2]}}` || len(res.Logs) != 1 {
		b, _ := json.Marshal(res)
		t.Errorf("got %s", b)
	}
}

// TestPoisonedPrototypesInRun poisons what property descriptors, promise
// statics and uncurried methods could inherit or reach, then uses the
// tools tree: first reads of paths, successful and failing calls,
// enumeration.
func TestPoisonedPrototypesInRun(t *testing.T) {
	echo := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	fail := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, ToolErrorf("refused") }}
	rt, err := New(Options{Tools: Tools{"ns": Tools{"echo": echo, "fail": fail}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, err := rt.Execute(context.Background(), `
		Object.defineProperty(Object.prototype, "get", { value: () => 1, configurable: true })
		Object.defineProperty(Object.prototype, "set", { __proto__: null, value: () => {}, configurable: true })
		Object.prototype.value = "poisoned"
		Object.prototype.enumerable = false
		Promise.resolve = () => { throw new Error("resolve hijacked") }
		Promise.reject = () => { throw new Error("reject hijacked") }
		Map.prototype.get = Map.prototype.set = () => { throw new Error("map hijacked") }
		WeakMap.prototype.set = () => { throw new Error("weakmap hijacked") }
		Function.prototype.call = Function.prototype.apply = Function.prototype.bind = () => { throw new Error("call hijacked") }
		const r = await tools.ns.echo({ a: 1 })
		let failed
		try { await tools.ns.fail({}) } catch (e) { failed = [e.kind, e.tool, e.message] }
		return { r, failed, keys: Object.keys(tools.ns), same: tools.ns.echo === tools.ns.echo }`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"r":{"a":1},"failed":["ToolFailure","ns.fail","refused"],"keys":["echo","fail"],"same":true}`
	if !res.OK || string(res.Value) != want {
		b, _ := json.Marshal(res)
		t.Errorf("got %s\nwant value %s", b, want)
	}
}

func TestGlobalsSurface(t *testing.T) {
	res, err := Execute(context.Background(), Options{}, `
		return Object.getOwnPropertyNames(globalThis).filter((n) => [
			"eval", "Function", "SharedArrayBuffer", "Atomics", "WebAssembly", "InternalError",
			"console", "setTimeout", "queueMicrotask", "URL", "URLSearchParams", "atob", "btoa",
			"performance", "WeakRef", "FinalizationRegistry", "tools", "ToolError", "require", "process", "fetch",
		].includes(n)).sort()`)
	if err != nil || !res.OK {
		t.Fatalf("%+v %v", res, err)
	}
	t.Logf("globals: %s", res.Value)
	for _, banned := range []string{`"eval"`, `"SharedArrayBuffer"`, `"Atomics"`, `"WebAssembly"`, `"require"`, `"process"`, `"fetch"`} {
		if strings.Contains(string(res.Value), banned) {
			t.Errorf("global %s is exposed", banned)
		}
	}
}

func TestNoGoroutineLeaks(t *testing.T) {
	slow := Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
			return nil, nil
		}
	}}
	rt, err := New(Options{Tools: Tools{"ns": Tools{"slow": slow}}, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Warm up shared state (engine compile, caches) before counting.
	if _, err := rt.Execute(context.Background(), `return 1`); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	programs := []string{
		`return 1`,
		`while (true) {}`,
		`const big = Array.from({ length: 20000 }, (_, i) => ({ i })); for (;;) JSON.stringify(big)`,
		`return await tools.ns.slow({})`,
		`tools.ns.slow({}); tools.ns.slow({}); return 1`,
		`return await Promise.race([tools.ns.slow({}), new Promise((r) => setTimeout(r, 10))])`,
		`setInterval(() => {}, 1); await new Promise(() => {})`,
		`throw new Error("x")`,
	}
	for i := 0; i < 3; i++ {
		for _, p := range programs {
			if _, err := rt.Execute(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, _ = rt.Execute(ctx, `while (true) {}`)
		cancel()
	}
	rt.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		after := runtime.NumGoroutine()
		if after <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A tool that runs a program that calls the tool again nests runs without
// end; past MaxNesting levels a run fails instead of running, and every
// level returns.
func TestNestedExecuteIsBounded(t *testing.T) {
	var rt *Runtime
	var depth atomic.Int32
	tools := Tools{"self": Tools{"again": Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		depth.Add(1)
		res, err := rt.Execute(ctx, `return await tools.self.again({})`)
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, ToolError(res.Error.Message)
		}
		return res.Value, nil
	}}}}
	rt = mustNew(t, Options{Tools: tools})
	res, err := rt.Execute(context.Background(), `return await tools.self.again({})`)
	if err != nil || res.OK || !strings.Contains(res.Error.Message, "runs are nested 5 deep") {
		t.Fatalf("%v %s", err, resultJSON(res))
	}
	if depth.Load() != MaxNesting {
		t.Fatalf("the tool ran %d times, want %d", depth.Load(), MaxNesting)
	}
}
