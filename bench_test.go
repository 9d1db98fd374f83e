package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func benchRuntime(b *testing.B, opts Options) *Runtime {
	b.Helper()
	rt, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	// Compile the engine before timing.
	if _, err := rt.Execute(context.Background(), "return 1"); err != nil {
		b.Fatal(err)
	}
	return rt
}

func benchExecute(b *testing.B, rt *Runtime, code string) Result {
	res, err := rt.Execute(context.Background(), code)
	if err != nil {
		b.Fatal(err)
	}
	if !res.OK {
		b.Fatalf("run failed: %+v", res.Error)
	}
	return res
}

// BenchmarkReturn1 is the overhead of one run with the runtime built.
func BenchmarkReturn1(b *testing.B) {
	rt := benchRuntime(b, Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchExecute(b, rt, "return 1")
	}
}

// BenchmarkToolCall is the bridge cost of one sequential call of a tool
// that returns at once.
func BenchmarkToolCall(b *testing.B) {
	noop := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(`{"ok":true}`), nil }}
	rt := benchRuntime(b, Options{Tools: Tools{"ns": Tools{"noop": noop}}})
	const calls = 1000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchExecute(b, rt, `for (let i = 0; i < 1000; i++) await tools.ns.noop({ i }); return 1`)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}

// BenchmarkCallFloor sets a call's cost against what the guest does for
// any call, tool or not, in the same loop of 1,000 awaits: the call's
// JSON work done in JavaScript alone (its input stringified with a
// replacer like the prelude's, a result parsed, a promise awaited); two
// crossings to the host and back besides (a timer set and cleared); and
// the await alone. ns/iter is per iteration.
func BenchmarkCallFloor(b *testing.B) {
	noop := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(`{"ok":true}`), nil }}
	rt := benchRuntime(b, Options{Tools: Tools{"ns": Tools{"noop": noop}}})
	const replacer = `const r = (k, v) => { if (typeof v === "object" && v !== null && Object.getPrototypeOf(v) === Object.prototype) return v; return v; };`
	for _, c := range []struct{ name, code string }{
		{"tool", `for (let i = 0; i < 1000; i++) await tools.ns.noop({ i }); return 1`},
		{"json-await", replacer + `for (let i = 0; i < 1000; i++) await Promise.resolve(JSON.parse(JSON.stringify({ i }, r) && '{"ok":true}')); return 1`},
		{"json-host-await", replacer + `const f = () => {}; for (let i = 0; i < 1000; i++) { clearTimeout(setTimeout(f, JSON.stringify({ i }, r).length * 1000)); await Promise.resolve(JSON.parse('{"ok":true}')); } return 1`},
		{"await", `for (let i = 0; i < 1000; i++) await null; return 1`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchExecute(b, rt, c.code)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/iter")
		})
	}
}

// BenchmarkFirstCall splits a short run's cost: a run that only reads a
// tool off the tree, one that calls it once, twice, and two different
// tools, against one that returns at once; and runs that allocate small
// objects and no tool, for what the tree's first read costs the guest.
func BenchmarkFirstCall(b *testing.B) {
	noop := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(`{"ok":true}`), nil }}
	rt := benchRuntime(b, Options{Tools: Tools{"ns": Tools{"noop": noop, "other": noop, "third": noop}}})
	for _, c := range []struct{ name, code string }{
		{"return", `return 1`},
		{"read-ns", `const f = tools.ns; return 1`},
		{"read-tool", `const f = tools.ns.noop; return 1`},
		{"read-three-tools", `const f = tools.ns.noop, g = tools.ns.other, h = tools.ns.third; return 1`},
		{"call", `await tools.ns.noop({}); return 1`},
		{"call-twice", `await tools.ns.noop({}); await tools.ns.noop({}); return 1`},
		{"call-two-tools", `await tools.ns.noop({}); await tools.ns.other({}); return 1`},
		{"alloc-10", `const a = []; for (let i = 0; i < 10; i++) a.push({ i }); return 1`},
		{"alloc-100", `const a = []; for (let i = 0; i < 100; i++) a.push({ i }); return 1`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchExecute(b, rt, c.code)
			}
		})
	}
}

// BenchmarkScaling runs a program of three instant tool calls on one
// Runtime from 1 to 16 goroutines at once, reporting runs/s: past the
// processor count the throughput should level off, not fall.
func BenchmarkScaling(b *testing.B) {
	noop := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(`{"ok":true}`), nil }}
	rt := benchRuntime(b, Options{Tools: Tools{"ns": Tools{"noop": noop}}})
	const code = `const a = await tools.ns.noop({ i: 1 }); const b = await tools.ns.noop({ i: 2 }); await tools.ns.noop({ i: 3 }); return a.ok && b.ok`
	for _, g := range []int{1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range g {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						// Not benchExecute: b.Fatal belongs to the benchmark's goroutine.
						if res, err := rt.Execute(context.Background(), code); err != nil || !res.OK {
							b.Errorf("run: %v %+v", err, res.Error)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
		})
	}
}

// BenchmarkToolCallPolicy is BenchmarkToolCall with a policy judging
// every call: what rules and the canonical input a policy sees add.
func BenchmarkToolCallPolicy(b *testing.B) {
	noop := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(`{"ok":true}`), nil }}
	rt := benchRuntime(b, Options{Tools: Tools{"ns": Tools{"noop": noop}},
		Policy: Rules{Default: Allow, Tools: map[string]Verdict{"ns.*": Allow, "other.*": Deny}}.Policy()})
	const calls = 1000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchExecute(b, rt, `for (let i = 0; i < 1000; i++) await tools.ns.noop({ i, name: "order " + i, tags: ["a", "b"] }); return 1`)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}

// BenchmarkParallelCalls runs 1,000 calls of a 1 ms tool at the default
// cap of 8; ideal is 125 ms.
func BenchmarkParallelCalls(b *testing.B) {
	sleep := Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		time.Sleep(time.Millisecond)
		return 1, nil
	}}
	rt := benchRuntime(b, Options{Tools: Tools{"ns": Tools{"sleep": sleep}}})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchExecute(b, rt, `const r = await Promise.all(Array.from({ length: 1000 }, () => tools.ns.sleep({}))); return r.length`)
	}
	ideal := 1000 / DefaultMaxConcurrency * time.Millisecond
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(ideal), "x-ideal")
}

func BenchmarkFib25(b *testing.B) {
	rt := benchRuntime(b, Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchExecute(b, rt, `function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) } return fib(25)`)
	}
}

// BenchmarkLoop is a tight loop: the most fuel ticks per unit of work,
// so it shows what the ticks and their yields of the thread cost.
func BenchmarkLoop(b *testing.B) {
	rt := benchRuntime(b, Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchExecute(b, rt, `let s = 0; for (let i = 0; i < 1e6; i++) s += i; return s`)
	}
}

// BenchmarkRows10k filters, maps and sorts 10,000 rows.
func BenchmarkRows10k(b *testing.B) {
	rt := benchRuntime(b, Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchExecute(b, rt, `const rows = Array.from({ length: 10000 }, (_, i) => ({ id: i, region: ["eu", "us", "apac"][i % 3], amount: (i * 7919) % 1000 }))
			const out = rows.filter((r) => r.region !== "us").map((r) => ({ ...r, taxed: r.amount * 1.2 })).sort((a, b) => b.taxed - a.taxed || a.id - b.id)
			return out.slice(0, 3).map((r) => r.id)`)
	}
}
