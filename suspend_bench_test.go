package codemode

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"testing"
)

// suspendBench is a Runtime whose tool answers at once, with a key.
func suspendBench(b *testing.B) *Runtime {
	get := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	return benchRuntime(b, Options{Tools: Tools{"x": Tools{"get": get}}, StateKey: testStateKey})
}

// BenchmarkSuspendResume is the round trip of a suspended run: Resume
// delivers a result to the run in a state, which runs to its next call
// and suspends again (a new state). Every op resumes the same state.
// keep is how much the program holds across the step (an array of
// objects: 8,000 of them take 1 MiB of engine heap, measured).
func BenchmarkSuspendResume(b *testing.B) {
	for _, c := range []struct {
		name string
		keep int
	}{{"small", 0}, {"heap-1MiB", 8_000}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			rt := suspendBench(b)
			code := `const keep = Array.from({ length: ` + strconv.Itoa(c.keep) + ` }, (_, i) => ({ i, s: "item " + i }))
for (let i = 0; ; i++) { const r = await tools.x.get({ i }); if (r.i < 0) return keep.length }`
			_, s, err := rt.ExecuteSuspendable(ctx, code)
			if err != nil || s == nil {
				b.Fatal("not suspended", err)
			}
			p := s.Pending[0]
			result := CallResult{ID: p.ID, Output: p.Input}
			size := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, next, err := rt.Resume(ctx, s.State, result)
				if err != nil || next == nil {
					b.Fatal("not suspended again", err)
				}
				size = len(next.State)
			}
			b.ReportMetric(float64(len(s.State)), "state-bytes")
			b.ReportMetric(float64(size), "next-state-bytes")
		})
	}
}

// BenchmarkParked holds b.N suspended runs of a small program in memory:
// what parking a run costs is its state's bytes.
func BenchmarkParked(b *testing.B) {
	ctx := context.Background()
	rt := suspendBench(b)
	const code = `const order = await tools.x.get({ id: "o-1", total: 4599 })
const customer = await tools.x.get({ id: order.id, name: "Ada" })
return { order, customer }`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	states := make([][]byte, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, s, err := rt.ExecuteSuspendable(ctx, code)
		if err != nil || s == nil {
			b.Fatal("not suspended", err)
		}
		states = append(states, s.State)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	total := 0
	for _, s := range states {
		total += len(s)
	}
	b.ReportMetric(float64(total)/float64(b.N), "state-bytes")
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(b.N), "heap-bytes/run")
	runtime.KeepAlive(states)
}
